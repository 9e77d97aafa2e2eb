"""proportion: hierarchical fair share, queue order and queue capacity checks."""
