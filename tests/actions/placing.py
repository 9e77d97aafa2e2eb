"""Scenario pieces shared by the placement tests (the placement cache and its sticky answer): a node's
used GPUs, a gang of equal pods, and where a job's pods were bound."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.scenario import bound, pod, podgroup

SPREAD = {"gpu": "spread", "cpu": "spread"}


def used(name: str, node_name: str, gpus: int, deleting: bool = False) -> list[dict[str, Any]]:
    """A running one-pod job of queue q holding `gpus` GPUs on `node_name`."""
    return [podgroup(name, "q"), pod(name, group=name, gpus=gpus, node=node_name, deleting=deleting)]


def gang(name: str, size: int, gpus: int, created: str, cpu: str | None = None) -> list[dict[str, Any]]:
    """A pending gang of queue q: `size` pods of `gpus` GPUs each, all of them needed."""
    objects = [podgroup(name, "q", size, created=created)]
    objects += [pod(f"{name}-{i}", group=name, gpus=gpus, cpu=cpu, created=created) for i in range(size)]
    return objects


def nodes_of(result: dict[str, Any], job: str) -> Counter[str]:
    """How many of `job`'s pods were bound to each node."""
    return Counter(n for p, n in bound(result).items() if p.startswith(f"ns/{job}-"))
