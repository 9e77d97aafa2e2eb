"""Pod groups (jobs): the gang unit, with leaf sub-groups that each carry a minMember."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kai.model.pod import ACTIVE, ALIVE, ALLOCATED, PodInfo, PodStatus

DEFAULT_SUBGROUP = "default"


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    topology: str = ""
    required_level: str = ""
    preferred_level: str = ""


@dataclass(slots=True)
class SubGroupInfo:
    """A node of the sub-group tree. Leaves hold pods and a minMember; inner nodes only group leaves."""

    name: str
    min_member: int = 1
    parent: str = ""
    topology: TopologyConstraint | None = None
    children: list[str] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def count(self, statuses: frozenset[PodStatus]) -> int:
        return sum(1 for p in self.pods if p.status in statuses)

    def active(self) -> int:
        return self.count(ACTIVE)

    def pending(self) -> list[PodInfo]:
        return [p for p in self.pods if p.status is PodStatus.PENDING]


@dataclass(slots=True)
class PodGroupInfo:
    namespace: str
    name: str
    uid: str
    queue: str
    creation: float
    priority: int = 50
    priority_class_name: str = ""
    preemptible: bool = True
    min_member: int = 1
    subgroups: dict[str, SubGroupInfo] = field(default_factory=dict)
    topology: TopologyConstraint | None = None
    last_start: float | None = None
    stale_since: float | None = None
    implicit: bool = False  # made for a pod that names no PodGroup
    _leaves: list[SubGroupInfo] | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def leaves(self) -> list[SubGroupInfo]:
        if self._leaves is None:
            self._leaves = [s for s in self.subgroups.values() if s.is_leaf]
        return self._leaves

    @property
    def pods(self) -> Iterable[PodInfo]:
        for sub in self.leaves:
            yield from sub.pods

    def count(self, statuses: frozenset[PodStatus]) -> int:
        return sum(sub.count(statuses) for sub in self.leaves)

    def has_pending(self) -> bool:
        return any(p.status is PodStatus.PENDING for p in self.pods)

    def is_ready(self) -> bool:
        """Every leaf has enough living, ungated pods to reach its minMember."""
        for sub in self.leaves:
            alive = sum(1 for p in sub.pods if p.status in ALIVE and p.status is not PodStatus.GATED)
            if alive < sub.min_member:
                return False
        return True

    def below_min(self) -> bool:
        return any(sub.active() < sub.min_member for sub in self.leaves)

    def elastic_rank(self) -> int:
        """0: some leaf below minMember; 1: exactly at minMember; 2: above it (elastic extras)."""
        if self.below_min():
            return 0
        return 1 if all(sub.active() == sub.min_member for sub in self.leaves) else 2

    def phase(self) -> str:
        """Running once every leaf has its minimum placed; Succeeded/Failed when all pods finished."""
        pods = list(self.pods)
        if pods and all(p.status in (PodStatus.SUCCEEDED, PodStatus.FAILED) for p in pods):
            return "Succeeded" if any(p.status is PodStatus.SUCCEEDED for p in pods) else "Failed"
        if not self.below_min() and self.count(ALLOCATED) > 0:
            return "Running"
        if self.count(ACTIVE) == 0 and any(p.status is PodStatus.RELEASING for p in pods):
            return "Releasing"
        if pods and all(p.status is PodStatus.GATED for p in pods if p.status is not PodStatus.SUCCEEDED):
            return "Gated"
        return "Pending"

    def clone(self) -> PodGroupInfo:
        """A copy whose pods can change status without touching the original."""
        copy = PodGroupInfo(
            self.namespace,
            self.name,
            self.uid,
            self.queue,
            self.creation,
            self.priority,
            self.priority_class_name,
            self.preemptible,
            self.min_member,
            {},
            self.topology,
            self.last_start,
            self.stale_since,
            self.implicit,
        )
        for name, sub in self.subgroups.items():
            copy.subgroups[name] = SubGroupInfo(
                sub.name,
                sub.min_member,
                sub.parent,
                sub.topology,
                list(sub.children),
                [p.clone() for p in sub.pods],
            )
        return copy
