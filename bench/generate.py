"""Synthetic clusters for the benchmarks: Kubernetes objects (the snapshot contract's kinds) from a
size spec. Deterministic for a given seed."""

from __future__ import annotations

import random
from typing import Any


def _queue(name: str, parent: str, gpu_quota: float) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {"quota": gpu_quota, "overQuotaWeight": 1, "limit": -1},
            "cpu": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
            "memory": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _pod(name: str, queue: str, group: str, gpus: int, cpu: str, node: str = "") -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{name}",
            "labels": {"kai.scheduler/queue": queue},
            "annotations": {"pod-group-name": group},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [
                {
                    "name": "main",
                    "resources": {
                        "requests": {"cpu": cpu, "memory": "8Gi"},
                        "limits": {"nvidia.com/gpu": str(gpus)} if gpus else {},
                    },
                }
            ],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def _group(name: str, queue: str, min_member: int, created: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T{created // 3600 % 24:02d}:{created // 60 % 60:02d}:{created % 60:02d}Z",
        },
        "spec": {"minMember": min_member, "queue": queue, "priorityClassName": "train" if created % 3 else "build"},
    }


def cluster(spec: dict[str, Any], seed: int = 1) -> list[dict[str, Any]]:
    if spec.get("scenario") in ("reclaim", "preempt"):
        return eviction_cluster(spec, seed)
    if spec.get("scenario") == "topology":
        return topology_cluster(spec, seed)
    rng = random.Random(seed)
    gpus = int(spec["gpus_per_node"])
    fraction_share = float(spec.get("fraction_share", 0.0))
    objects: list[dict[str, Any]] = []
    for i in range(int(spec["nodes"])):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{i:05d}",
                    "labels": {
                        "nvidia.com/gpu.memory": "81920",
                        "nvidia.com/gpu.product": "H100",
                        "zone": f"zone-{i % 4}",
                    },
                },
                "status": {
                    "allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
                },
            }
        )
    leaves: list[str] = []
    total_gpus = int(spec["nodes"]) * gpus
    departments, teams = int(spec["departments"]), int(spec["teams_per_department"])
    for d in range(departments):
        objects.append(_queue(f"dept-{d}", "", total_gpus / departments / 2))
        for t in range(teams):
            leaf = f"dept-{d}-team-{t}"
            leaves.append(leaf)
            objects.append(_queue(leaf, f"dept-{d}", total_gpus / departments / teams / 2))
    # Running pods: one GPU each on a random node with room, plus a CPU-only pod beside each.
    free = [gpus] * int(spec["nodes"])
    for i in range(int(spec["running_pods"])):
        node = rng.randrange(len(free))
        while free[node] == 0:
            node = rng.randrange(len(free))
        free[node] -= 1
        queue = rng.choice(leaves)
        objects.append(_group(f"run-{i}", queue, 1, i))
        objects.append(_pod(f"run-{i}", queue, f"run-{i}", 1, "4", f"node-{node:05d}"))
        objects.append(_group(f"cpu-{i}", queue, 1, i))
        objects.append(_pod(f"cpu-{i}", queue, f"cpu-{i}", 0, "2", f"node-{node:05d}"))
    # Pending gangs: sizes from a heavy tail (most small, a few up to max_gang), 1 GPU per pod.
    left, g = int(spec["pending_pods"]), 0
    while left > 0:
        size = min(left, max(1, min(int(spec["max_gang"]), int(rng.paretovariate(1.2)))))
        queue = rng.choice(leaves)
        objects.append(_group(f"gang-{g}", queue, size, 50_000 + g))
        for p in range(size):
            objects.append(_pod(f"gang-{g}-{p}", queue, f"gang-{g}", 1, "8"))
            if fraction_share and rng.random() < fraction_share:  # a shared-GPU pod instead of a whole GPU
                del objects[-1]["spec"]["containers"][0]["resources"]["limits"]
                objects[-1]["metadata"]["annotations"]["gpu-fraction"] = rng.choice(("0.25", "0.5"))
        left -= size
        g += 1
    return objects


def eviction_cluster(spec: dict[str, Any], seed: int = 1) -> list[dict[str, Any]]:
    """A full cluster where half the waiting jobs can only start by evicting others.

    `scenario: reclaim`: "rich" teams fill every node but a few with preemptible jobs (1, 2 and 4-GPU
    pods, placed node by node as a bin-packing scheduler would have placed them); "poor" teams that
    run nothing submit `victim_jobs` gangs, which must reclaim. `scenario: preempt`: every team runs
    at its fair share, and `victim_jobs` high-priority (build) jobs in the same teams must preempt
    low-priority (train) ones. In both, `free_jobs` small jobs fit the nodes left empty.
    """
    rng = random.Random(seed)
    gpus = int(spec["gpus_per_node"])
    nodes = int(spec["nodes"])
    free_nodes = int(spec["free_nodes"])
    objects: list[dict[str, Any]] = []
    for i in range(nodes):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}", "labels": {"nvidia.com/gpu.product": "H100"}},
                "status": {
                    "allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
                },
            }
        )
    departments, teams = int(spec["departments"]), int(spec["teams_per_department"])
    total = nodes * gpus
    leaves = []
    for d in range(departments):
        objects.append(_queue(f"dept-{d}", "", total / departments / 2))
        for t in range(teams):
            leaves.append(f"dept-{d}-team-{t}")
            objects.append(_queue(leaves[-1], f"dept-{d}", total / departments / teams / 2))
    reclaim = spec["scenario"] == "reclaim"
    poor = leaves[-int(spec.get("poor_teams", 2)) :] if reclaim else []
    rich = [q for q in leaves if q not in poor]
    created = 0
    # Creation order follows the nodes (as bin-packing placed them), or is shuffled (`scatter: true`) so
    # that victims in victim order sit on nodes all over the cluster: the solver's worst case.
    stamps = list(range((nodes - free_nodes) * gpus))
    if spec.get("scatter"):
        rng.shuffle(stamps)
    for n in range(nodes - free_nodes):
        left = gpus
        while left:
            size = min(left, rng.choice((1, 2, 2, 4)))
            queue = rich[n % len(rich)] if not reclaim else rng.choice(rich)
            name = f"run-{created}"
            objects.append(_group(name, queue, 1, stamps[created] % 40_000))
            objects[-1]["spec"]["priorityClassName"] = "train"
            objects.append(_pod(name, queue, name, size, "2", f"node-{n:05d}"))
            left -= size
            created += 1
    for j in range(int(spec["free_jobs"])):
        # Older than the gangs below and of the same teams and priority, so allocate places them first.
        queue = rng.choice(poor) if reclaim else rng.choice(rich)
        name = f"small-{j}"
        objects.append(_group(name, queue, 1, 45_000 + j))
        objects[-1]["spec"]["priorityClassName"] = "train" if reclaim else "build"
        objects.append(_pod(name, queue, name, 1, "2"))
    for j in range(int(spec["victim_jobs"])):
        queue = rng.choice(poor) if reclaim else rng.choice(rich)
        pods, per_pod = rng.choice(((1, 1), (1, 2), (1, 4), (2, 4), (1, 8), (2, 8)))
        name = f"need-{j}"
        objects.append(_group(name, queue, pods, 50_000 + j))
        objects[-1]["spec"]["priorityClassName"] = "train" if reclaim else "build"
        for p in range(pods):
            objects.append(_pod(f"{name}-{p}", queue, name, per_pod, "4"))
    return objects


def topology_cluster(spec: dict[str, Any], seed: int = 1) -> list[dict[str, Any]]:
    """Topology-aware scheduling (issue 8): nodes in `blocks` x `racks_per_block` racks (labels
    `topo/block`, `topo/rack`, a Topology `dc` over them), `running_pods` 1-GPU pods spread at random,
    and `pending_gangs` gangs that all carry a constraint: required rack (when the gang fits a rack),
    required block with a preferred rack, or only a preferred block; `subgroup_share` of them are two
    sub-groups (prefill / decode), each required to sit in one rack, inside one block for the job."""
    rng = random.Random(seed)
    gpus = int(spec["gpus_per_node"])
    nodes, blocks, racks = int(spec["nodes"]), int(spec["blocks"]), int(spec["racks_per_block"])
    per_rack = nodes // (blocks * racks)
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "topo/block"}, {"nodeLabel": "topo/rack"}]},
        }
    ]
    for i in range(nodes):
        rack = i // per_rack
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{i:05d}",
                    "labels": {"topo/block": f"b{rack // racks}", "topo/rack": f"r{rack % racks}"},
                },
                "status": {
                    "allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
                },
            }
        )
    leaves = [f"team-{t}" for t in range(int(spec.get("teams", 4)))]
    objects += [_queue(q, "", nodes * gpus / len(leaves)) for q in leaves]
    free = [gpus] * nodes
    for i in range(int(spec["running_pods"])):
        node = rng.randrange(nodes)
        while free[node] == 0:
            node = rng.randrange(nodes)
        free[node] -= 1
        queue = rng.choice(leaves)
        objects.append(_group(f"run-{i}", queue, 1, i))
        objects.append(_pod(f"run-{i}", queue, f"run-{i}", 1, "4", f"node-{node:05d}"))
    rack_gpus = per_rack * gpus
    for g in range(int(spec["pending_gangs"])):
        queue = rng.choice(leaves)
        size = rng.choice((2, 4, 4, 8, 8, int(spec["max_gang"])))
        per_pod = rng.choice((1, 2, 4, 8))
        name = f"gang-{g}"
        group = _group(name, queue, size, 50_000 + g)
        kind = rng.random()
        if rng.random() < float(spec.get("subgroup_share", 0.0)):
            half = max(1, size // 2)
            rack = {"topology": "dc", "requiredTopologyLevel": "topo/rack"}
            group["spec"]["subGroups"] = [
                {"name": "prefill", "minMember": half, "topologyConstraint": rack},
                {"name": "decode", "minMember": half, "topologyConstraint": rack},
            ]
            group["spec"]["topologyConstraint"] = {"topology": "dc", "requiredTopologyLevel": "topo/block"}
            objects.append(group)
            for leaf in ("prefill", "decode"):
                for p in range(half):
                    objects.append(_pod(f"{name}-{leaf}-{p}", queue, name, per_pod, "8"))
                    objects[-1]["metadata"]["labels"]["kai.scheduler/subgroup-name"] = leaf
            continue
        if kind < 0.5 and size * per_pod <= rack_gpus:
            constraint = {"requiredTopologyLevel": "topo/rack"}
        elif kind < 0.75:
            constraint = {"requiredTopologyLevel": "topo/block", "preferredTopologyLevel": "topo/rack"}
        else:
            constraint = {"preferredTopologyLevel": "topo/block"}
        group["spec"]["topologyConstraint"] = {"topology": "dc", **constraint}
        objects.append(group)
        for p in range(size):
            objects.append(_pod(f"{name}-{p}", queue, name, per_pod, "8"))
    return objects
