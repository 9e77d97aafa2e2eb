"""The scheduler's view of a cluster: resource vectors, nodes, pods, pod groups, queues."""
