"""What a cycle decided, as plain values that an adapter (simulator or live cluster) applies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai.model import ClaimAllocation


@dataclass(frozen=True, slots=True)
class Binding:
    pod: str  # namespace/name
    node: str
    gpu_groups: tuple[str, ...] = ()
    # DRA: the devices of each of the pod's resource claims (the BindRequest's resourceClaimAllocations).
    claims: tuple[ClaimAllocation, ...] = ()


_SET_POD, _SET_NODE = Binding.pod.__set__, Binding.node.__set__  # type: ignore[attr-defined]
_SET_GROUPS, _SET_CLAIMS = Binding.gpu_groups.__set__, Binding.claims.__set__  # type: ignore[attr-defined]


def new_binding(pod: str, node: str, gpu_groups: tuple[str, ...]) -> Binding:
    """Binding(pod, node, gpu_groups), made without the frozen class's checked attribute writes (the
    statement makes one per bound pod): the same value, at a third of the cost. Every field is set here:
    keep it in step with the class (tests/framework/test_decisions.py compares the two)."""
    binding = object.__new__(Binding)
    _SET_POD(binding, pod)
    _SET_NODE(binding, node)
    _SET_GROUPS(binding, gpu_groups)
    _SET_CLAIMS(binding, ())
    return binding


@dataclass(frozen=True, slots=True)
class Pipelining:
    pod: str
    node: str


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: str
    node: str
    action: str
    by: str  # the pod group the eviction makes room for ("" for stale-gang eviction)
    message: str = ""


@dataclass(slots=True)
class JobOutcome:
    """How a pod group ended the cycle, for status and explanations."""

    queue: str
    status: str
    message: str = ""
    reason: str = ""
    causes: list[Any] = field(default_factory=list)  # kai.framework.causes.Cause, ranked (first: the main one)


@dataclass(slots=True)
class QueueReport:
    fair_share: dict[str, float]  # KAI queue units: gpu devices, cpu millicores, memory MB
    allocated: dict[str, float]
    deserved: dict[str, float]
    requested: dict[str, float]


@dataclass(slots=True)
class Decisions:
    bindings: list[Binding] = field(default_factory=list)
    pipelined: list[Pipelining] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    jobs: dict[str, JobOutcome] = field(default_factory=dict)
    queues: dict[str, QueueReport] = field(default_factory=dict)
    # PodGroup annotations to write: key -> epoch seconds, or None to clear.
    last_start: dict[str, float] = field(default_factory=dict)
    stale_since: dict[str, float | None] = field(default_factory=dict)
    # What the actions did, for KAI's counters: (counter, action) -> n. Counters: "acted_on" (jobs an
    # action tried), "scheduled" (jobs it placed), "simulated" / "filtered" (victim scenarios tried /
    # skipped before a trial), "preemption_attempts" (jobs the preempt action tried).
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def count(self, counter: str, action: str, n: int = 1) -> None:
        key = (counter, action)
        self.counts[key] = self.counts.get(key, 0) + n

    @staticmethod
    def _bound(binding: Binding) -> dict[str, Any]:
        entry: dict[str, Any] = {"pod": binding.pod, "node": binding.node, "gpuGroups": sorted(binding.gpu_groups)}
        if binding.claims:  # what kai adds: the devices of the pod's DRA resource claims
            entry["resourceClaims"] = [
                {"name": c.name, "claim": c.claim, "devices": [d.key for d in c.devices]}
                for c in sorted(binding.claims, key=lambda c: c.name)
            ]
        return entry

    def evicted_once(self) -> list[Eviction]:
        """Each evicted pod once, as its first eviction of the cycle (a pod moved by one action may be
        evicted again from its new place by another)."""
        first: dict[str, Eviction] = {}
        for eviction in self.evictions:
            first.setdefault(eviction.pod, eviction)
        return list(first.values())

    def placements(self) -> dict[str, list[dict[str, Any]]]:
        """Bound, pipelined and evicted pods as the contract prints them, sorted for byte-identical output.
        A pod evicted twice in one cycle is listed once, as its first eviction, as KAI lists it."""
        return {
            "bound": sorted((self._bound(b) for b in self.bindings), key=lambda e: e["pod"]),
            "pipelined": sorted(({"pod": p.pod, "node": p.node} for p in self.pipelined), key=lambda e: e["pod"]),
            "evicted": sorted(
                ({"pod": e.pod, "node": e.node, "action": e.action, "by": e.by} for e in self.evicted_once()),
                key=lambda e: (e["pod"], e["action"]),
            ),
        }
