"""Fake GPU nodes for the KWOK-driven control plane.

A fake node is a plain Node object that KWOK owns (it carries the KWOK node
annotation): ``nvidia.com/gpu`` in capacity and allocatable, and the GPU operator's
labels (``nvidia.com/gpu.count``, ``nvidia.com/gpu.memory`` in MiB,
``nvidia.com/gpu.product``). KWOK then marks it Ready and keeps it so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kai.api import keys
from kai.devcluster.kwok_stages import NODE_ANNOTATION, NODE_ANNOTATION_VALUE

FAKE_NODE_LABEL = "kai.scheduler/fake-node"
"""Label set on every node made here, so that they can be listed and removed together."""


@dataclass(frozen=True)
class GpuNodeSpec:
    """What one fake GPU node looks like."""

    gpus: int = 8
    gpu_memory_mib: int = 81920
    gpu_product: str = "NVIDIA-A100-SXM4-80GB"
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    """Taints as dicts with ``key``, optional ``value`` and ``effect`` (e.g. ``NoSchedule``)."""


def gpu_node_manifest(name: str, spec: GpuNodeSpec) -> dict[str, Any]:
    """The Node object (as a dict) for one fake GPU node."""
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods), "ephemeral-storage": "1Ti"}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        FAKE_NODE_LABEL: "true",
    }
    if spec.gpus > 0:
        resources[keys.GPU_RESOURCE] = str(spec.gpus)
        labels.update({
            "nvidia.com/gpu.present": "true",
            keys.GPU_COUNT_NODE_LABEL: str(spec.gpus),
            keys.GPU_MEMORY_NODE_LABEL: str(spec.gpu_memory_mib),
            keys.GPU_PRODUCT_NODE_LABEL: spec.gpu_product,
        })
    labels.update(spec.labels)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {NODE_ANNOTATION: NODE_ANNOTATION_VALUE, "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(t) for t in spec.taints]} if spec.taints else {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def create_gpu_nodes(
    api: k8s.ApiClient,
    count: int,
    spec: GpuNodeSpec | None = None,
    *,
    name_prefix: str = "gpu-node",
    start_index: int = 0,
    wait_ready: bool = True,
    timeout: float = 60.0,
) -> list[str]:
    """Create ``count`` fake GPU nodes named ``<prefix>-<i>``; return their names once Ready."""
    spec = spec or GpuNodeSpec()
    core = k8s.CoreV1Api(api)
    names = [f"{name_prefix}-{i}" for i in range(start_index, start_index + count)]

    def create(name: str) -> None:
        core.create_node(gpu_node_manifest(name, spec))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, names))
    if wait_ready:
        wait_nodes_ready(api, names, timeout=timeout)
    return names


def _is_ready(node: Any) -> bool:
    for cond in (node.status.conditions or []) if node.status else []:
        if cond.type == "Ready":
            return cond.status == "True"
    return False


def wait_nodes_ready(api: k8s.ApiClient, names: Iterable[str], timeout: float = 60.0) -> None:
    """Wait until every named node reports Ready=True; raise TimeoutError naming the laggards."""
    core = k8s.CoreV1Api(api)
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending:
        nodes = core.list_node(label_selector=FAKE_NODE_LABEL).items
        pending -= {n.metadata.name for n in nodes if _is_ready(n)}
        if not pending:
            return
        if time.monotonic() > deadline:
            sample = ", ".join(sorted(pending)[:5])
            raise TimeoutError(f"{len(pending)} node(s) not Ready after {timeout:.0f}s (e.g. {sample})")
        time.sleep(0.2)


def delete_fake_nodes(api: k8s.ApiClient, names: Iterable[str] | None = None) -> int:
    """Delete the given fake nodes, or all of them; return how many were deleted."""
    core = k8s.CoreV1Api(api)
    if names is None:
        names = [n.metadata.name for n in core.list_node(label_selector=FAKE_NODE_LABEL).items]
    deleted = 0
    for name in names:
        try:
            core.delete_node(name)
            deleted += 1
        except ApiException as exc:
            if exc.status != 404:
                raise
    return deleted
