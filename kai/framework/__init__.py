"""Session, statement, plugin registry and hooks, scheduler configuration."""
