"""Resource amounts: the per-pod request vector and the fixed column layout used for node arrays.

Units inside the core: cpu in millicores, memory in bytes, GPUs as devices (a
float, so fractions add up), `pods` as a count, every other extended resource
(`nvidia.com/mig-1g.10gb`, `ephemeral-storage`, ...) in its base unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
PODS = "pods"
CORE_RESOURCES = (CPU, MEMORY, GPU, PODS)

# The three resources queues are accounted in (quota, fair share, limits).
QUEUE_RESOURCES = (GPU, CPU, MEMORY)


@dataclass(slots=True)
class Resources:
    """A sparse map of resource name to amount, with the arithmetic a scheduler needs."""

    amounts: dict[str, float] = field(default_factory=dict)

    def get(self, name: str) -> float:
        return self.amounts.get(name, 0.0)

    @property
    def cpu(self) -> float:
        return self.amounts.get(CPU, 0.0)

    @property
    def memory(self) -> float:
        return self.amounts.get(MEMORY, 0.0)

    @property
    def gpu(self) -> float:
        return self.amounts.get(GPU, 0.0)

    def copy(self) -> Resources:
        return Resources(dict(self.amounts))

    def add(self, other: Resources, times: float = 1.0) -> Resources:
        """Add `other` (times a factor) in place and return self."""
        for name, amount in other.amounts.items():
            self.amounts[name] = self.amounts.get(name, 0.0) + amount * times
        return self

    def names(self) -> Iterable[str]:
        return self.amounts.keys()

    def is_zero(self) -> bool:
        return not any(self.amounts.values())

    @staticmethod
    def of(mapping: Mapping[str, float]) -> Resources:
        return Resources({k: float(v) for k, v in mapping.items() if v})


@dataclass(frozen=True, slots=True)
class ResourceSpace:
    """The column layout of node arrays for one session: core resources first, then extended ones sorted."""

    names: tuple[str, ...]

    @staticmethod
    def build(extra: Iterable[str]) -> ResourceSpace:
        rest = sorted(set(extra) - set(CORE_RESOURCES))
        return ResourceSpace((*CORE_RESOURCES, *rest))

    def index(self, name: str) -> int:
        return self.names.index(name)

    def vector(self, resources: Resources) -> np.ndarray:
        vec = np.zeros(len(self.names))
        for name, amount in resources.amounts.items():
            vec[self.names.index(name)] = amount
        return vec
