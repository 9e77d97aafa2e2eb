"""The Kubernetes-facing vocabulary: CRD models, label and annotation keys, quantities, validation errors."""
