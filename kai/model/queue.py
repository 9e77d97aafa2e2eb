"""Queues: the tree of teams and departments with per-resource quota, over-quota weight and limit."""

from __future__ import annotations

from dataclasses import dataclass, field

from kai.model.resources import QUEUE_RESOURCES

UNLIMITED = -1.0


@dataclass(frozen=True, slots=True)
class QueueResource:
    """One resource of a queue, in core units (memory in bytes). -1 means unlimited."""

    quota: float = 0.0
    over_quota_weight: float = 1.0
    limit: float = UNLIMITED


@dataclass(slots=True)
class QueueInfo:
    name: str
    parent: str = ""
    priority: int = 100
    resources: dict[str, QueueResource] = field(default_factory=lambda: {r: QueueResource() for r in QUEUE_RESOURCES})
    creation: float = 0.0
    display_name: str = ""
    children: list[str] = field(default_factory=list)
    preempt_min_runtime: float | None = None
    reclaim_min_runtime: float | None = None

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def resource(self, name: str) -> QueueResource:
        return self.resources[name]
