"""A throw-away real control plane (etcd, kube-apiserver, KWOK) for tests, benchmarks and trying kai."""
