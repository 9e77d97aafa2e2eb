"""`kai explain`: why a pod group waits, or why it was evicted, as ranked causes (docs/explain.md)."""
