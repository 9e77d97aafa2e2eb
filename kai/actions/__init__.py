"""Scheduling actions: allocate, consolidate, reclaim, preempt, stale-gang eviction."""
