"""Scheduling actions: allocate, consolidate, reclaim, preempt, stale-gang eviction.

Importing this package registers every action it holds.
"""

from kai.actions import allocate, consolidation, preempt, reclaim, stalegang

__all__ = ["allocate", "consolidation", "preempt", "reclaim", "stalegang"]
