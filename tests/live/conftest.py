"""Fixtures for tests against the real control plane (etcd + kube-apiserver + KWOK).

Every test in this folder is marked ``live``. The session-scoped ``live_cluster``
fixture starts the control plane once and stops it at the end of the session, also
when tests fail. When the binaries are missing (``make controlplane`` could not build
them), the tests that need the cluster are skipped with the build error as reason, or
fail with it when ``CI`` is set: CI must never turn a broken build into a green run.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from kai.devcluster import build
from kai.devcluster.controlplane import ControlPlane
from kai.devcluster.nodes import GpuNodeSpec, create_gpu_nodes, delete_fake_nodes

LIVE_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if LIVE_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.live)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@dataclass
class LiveCluster:
    """What a live test gets: admin clients on a running control plane and a fake-GPU-node helper."""

    control_plane: ControlPlane
    api: k8s.ApiClient
    core: k8s.CoreV1Api = field(init=False)
    custom: k8s.CustomObjectsApi = field(init=False)
    _node_counter: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.core = k8s.CoreV1Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    def create_gpu_nodes(
        self,
        count: int,
        *,
        gpus: int = 8,
        gpu_memory_mib: int = 81920,
        gpu_product: str = "NVIDIA-A100-SXM4-80GB",
        cpu: str = "64",
        memory: str = "512Gi",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        name_prefix: str | None = None,
        timeout: float = 60.0,
    ) -> list[str]:
        """Create ``count`` fake GPU nodes and wait until they are Ready; return their names."""
        self._node_counter += 1
        prefix = name_prefix or f"gpu-{self._node_counter}"
        spec = GpuNodeSpec(
            gpus=gpus, gpu_memory_mib=gpu_memory_mib, gpu_product=gpu_product, cpu=cpu, memory=memory,
            labels=dict(labels or {}), taints=tuple(taints),
        )
        return create_gpu_nodes(self.api, count, spec, name_prefix=prefix, timeout=timeout)

    def delete_nodes(self, names: list[str] | None = None) -> int:
        """Delete the given fake nodes (all fake nodes when None)."""
        return delete_fake_nodes(self.api, names)

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Poll ``check`` until it returns something truthy; fail the test after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.1)


@pytest.fixture(scope="session")
def live_cluster() -> Iterator[LiveCluster]:
    """A running etcd + kube-apiserver + KWOK with kai's CRDs, for the whole session."""
    missing = build.missing_binaries()
    if missing:
        error = (build.recorded_build_error() or "").strip()
        reason = (
            f"control-plane binaries missing ({', '.join(missing)}); "
            + (f"last build failed: {error}" if error else "run `make controlplane` to build them")
        )
        if _in_ci():
            pytest.fail(f"CI requires the live control plane: {reason}", pytrace=False)
        pytest.skip(reason)
    cp = ControlPlane()
    cp.start(timeout=120)
    try:
        yield LiveCluster(control_plane=cp, api=cp.api_client())
    finally:
        cp.stop()


@pytest.fixture
def namespace(live_cluster: LiveCluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    live_cluster.core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        live_cluster.core.delete_namespace(name)
