"""Building a ClusterSnapshot from Kubernetes objects (YAML files or a live cache)."""
