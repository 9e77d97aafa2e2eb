"""Workload kind -> PodGroup rules and their controller."""
