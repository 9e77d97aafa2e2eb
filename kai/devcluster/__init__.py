"""A throw-away real control plane (etcd, kube-apiserver, KWOK) for tests, benchmarks and trying kai.

* :mod:`kai.devcluster.build` builds the pinned binaries from the Go module proxy into
  ``~/.cache/kai/controlplane/<name>-<version>/`` (``python -m kai.devcluster.build``);
* :mod:`kai.devcluster.controlplane` starts and stops them, with kai's CRDs installed;
* :mod:`kai.devcluster.nodes` creates fake GPU nodes that KWOK keeps Ready;
* :mod:`kai.devcluster.kwok_stages` says how KWOK plays node and pod lifecycles;
* :mod:`kai.devcluster.live` is what the ``live_cluster`` pytest fixture yields;
* :mod:`kai.devcluster.cli` is ``kai dev-cluster up|down|status``.

This package is an adapter: it does I/O and the scheduling core never imports it.
"""
