"""kai: a Kubernetes-native scheduler for AI workloads, API-compatible with NVIDIA KAI Scheduler."""

__version__ = "0.1.0"
