"""What a live test (or a benchmark) gets from a running control plane: admin clients and node helpers.

The pytest fixture ``live_cluster`` (tests/live/conftest.py) yields one of these; a
benchmark can build one around its own :class:`~kai.devcluster.controlplane.ControlPlane`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from kai.devcluster.controlplane import ControlPlane
from kai.devcluster.nodes import GpuNodeSpec, create_gpu_nodes, delete_fake_nodes


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
        """Poll ``check`` until it returns something truthy; AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.1)
