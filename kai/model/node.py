"""Nodes as the scheduler sees them: allocatable resources, labels, taints and usability."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from operator import contains, methodcaller

from kai.model.pod import Taint
from kai.model.resources import GPU, Resources


@dataclass(slots=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True  # Ready is True (or absent) and no pressure condition is True
    gpu_memory_mib: int = 0  # per device, from nvidia.com/gpu.memory
    gpu_product: str = ""
    dra_gpus: int = 0  # devices of its ResourceSlices whose driver is a GPU driver (fair share counts them)

    @property
    def gpus(self) -> float:
        return self.allocatable.get(GPU)

    @property
    def usable(self) -> bool:
        return self.ready and not self.unschedulable


def label_values(labels: list[dict[str, str]], key: str) -> list[str | None] | None:
    """Each node's value of the label `key` (None where it has none), given the nodes' labels; None
    when no node has the label at all (the common answer for most labels asked about, found by one
    pass in C that only tests the key)."""
    if not any(map(contains, labels, repeat(key))):
        return None
    return list(map(methodcaller("get", key), labels))
