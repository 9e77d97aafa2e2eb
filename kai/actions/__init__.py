"""Scheduling actions: allocate, consolidate, reclaim, preempt, stale-gang eviction.

Importing this package registers every action it holds.
"""

from kai.actions import allocate

__all__ = ["allocate"]
