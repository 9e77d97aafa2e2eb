"""Pod groups (jobs): the gang unit, with leaf sub-groups that each carry a minMember."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kai.model.pod import ACTIVE, ALIVE, ALLOCATED, PodInfo, PodStatus

DEFAULT_SUBGROUP = "default"
_READY = ALIVE - {PodStatus.GATED}  # living pods that are not gated
_PENDING = PodStatus.PENDING


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
    # Pods per status, counted on first use and then kept up to date in O(1) by whoever changes a pod's
    # status (the Statement, `kai simulate`'s apply step) through `moved`. Counted again when pods are
    # added to or removed from `pods`.
    _counts: dict[PodStatus, int] | None = field(default=None, repr=False, compare=False)
    _counted: int = field(default=-1, repr=False, compare=False)
    _version: int = field(default=0, repr=False, compare=False)  # changes whenever a pod's status does

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def counts(self) -> dict[PodStatus, int]:
        """Pods per status (do not change the dict)."""
        counts = self._counts
        if counts is None or self._counted != len(self.pods):
            counts = {}
            for pod in self.pods:
                status = pod.status
                counts[status] = counts.get(status, 0) + 1
                pod.owner = self
            self._counts, self._counted = counts, len(self.pods)
        return counts

    def moved(self, old: PodStatus, new: PodStatus) -> None:
        """One of this sub-group's pods changed status from `old` to `new`."""
        if old is new:
            return
        self._version += 1
        counts = self._counts
        if counts is not None:
            counts[old] -= 1
            counts[new] = counts.get(new, 0) + 1

    def recount(self) -> None:
        """Forget the counts (after statuses were changed without `moved`)."""
        self._counts = None
        self._version += 1

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever a pod's status changes (through `moved` / `recount`) or pods come or go."""
        return self._version, len(self.pods)

    def count(self, statuses: frozenset[PodStatus]) -> int:
        total = 0
        for status, n in self.counts().items():
            if status in statuses:
                total += n
        return total

    def active(self) -> int:
        return self.count(ACTIVE)

    def pending_count(self) -> int:
        return self.counts().get(PodStatus.PENDING, 0)

    def pending(self) -> list[PodInfo]:
        count = self.counts().get(PodStatus.PENDING, 0)
        if not count:
            return []
        if count == len(self.pods):  # a gang that waits whole: every pod, in order
            return list(self.pods)
        pending = PodStatus.PENDING
        return [p for p in self.pods if p.status is pending]


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
    # The leaf sub-groups (see `leaves`): worked out on first use, or given by whoever makes the job with
    # its sub-groups complete (the snapshot builder, `clone`); never changes after.
    _leaves: list[SubGroupInfo] | None = field(default=None, repr=False, compare=False)
    # Derived answers about the pods' statuses (why-pending outcome, staleness), each with the `version`
    # it was computed at; for the core's caches, never copied by `clone`.
    memo: dict[str, tuple[object, object]] = field(default_factory=dict, repr=False, compare=False)

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
        """Every pod of the job's leaves (do not change the collection)."""
        leaves = self.leaves
        if len(leaves) == 1:
            return leaves[0].pods
        return [p for sub in leaves for p in sub.pods]

    @property
    def version(self) -> object:
        """Changes whenever one of the job's pods changes status (see SubGroupInfo.version)."""
        leaves = self.leaves
        if len(leaves) == 1:
            return leaves[0].version
        return tuple(sub.version for sub in leaves)

    def status_counts(self) -> dict[PodStatus, int]:
        """Pods per status over every leaf (do not change the dict)."""
        leaves = self.leaves
        if len(leaves) == 1:
            return leaves[0].counts()
        total: dict[PodStatus, int] = {}
        for sub in leaves:
            for status, n in sub.counts().items():
                total[status] = total.get(status, 0) + n
        return total

    def count(self, statuses: frozenset[PodStatus]) -> int:
        return sum(sub.count(statuses) for sub in self.leaves)

    def pending_count(self) -> int:
        return sum(sub.pending_count() for sub in self.leaves)

    def has_pending(self) -> bool:
        leaves = self.leaves
        if len(leaves) == 1:
            return leaves[0].counts().get(PodStatus.PENDING, 0) > 0
        return any(sub.pending_count() for sub in leaves)

    def is_ready(self) -> bool:
        """Every leaf has enough living, ungated pods to reach its minMember."""
        leaves = self.leaves
        if len(leaves) == 1:
            sub = leaves[0]
            # pending pods are living and ungated: as many as minMember answer at once (the common gang)
            return sub.counts().get(_PENDING, 0) >= sub.min_member or sub.count(_READY) >= sub.min_member
        return all(sub.count(_READY) >= sub.min_member for sub in leaves)

    def below_min(self) -> bool:
        return any(sub.active() < sub.min_member for sub in self.leaves)

    def elastic_rank(self) -> int:
        """0: some leaf below minMember; 1: exactly at minMember; 2: above it (elastic extras)."""
        leaves = self.leaves
        if len(leaves) == 1:  # every job queue keys every job it holds with this: the common job read once
            sub = leaves[0]
            active, minimum = sub.active(), sub.min_member
            return 0 if active < minimum else 1 if active == minimum else 2
        if self.below_min():
            return 0
        return 1 if all(sub.active() == sub.min_member for sub in self.leaves) else 2

    def phase(self) -> str:
        """Running once every leaf has its minimum placed; Succeeded/Failed when all pods finished."""
        counts = self.status_counts()
        total = sum(counts.values())
        succeeded = counts.get(PodStatus.SUCCEEDED, 0)
        if total and succeeded + counts.get(PodStatus.FAILED, 0) == total:
            return "Succeeded" if succeeded else "Failed"
        if not self.below_min() and sum(n for s, n in counts.items() if s in ALLOCATED) > 0:
            return "Running"
        if not sum(n for s, n in counts.items() if s in ACTIVE) and counts.get(PodStatus.RELEASING, 0):
            return "Releasing"
        if total and counts.get(PodStatus.GATED, 0) == total - succeeded:
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
        if len(copy.subgroups) == 1:  # its leaves at once, as `leaves` would find them
            (only,) = copy.subgroups.values()
            copy._leaves = [] if only.children else [only]
        return copy
