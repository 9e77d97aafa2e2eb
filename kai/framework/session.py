"""The session: the working state of one cycle and the hooks plugins register on it.

Node state lives in arrays over nodes (rows sorted by node name, columns the
session's ResourceSpace) so that filtering and scoring are vectorised. Actions
change state only through a Statement; plugins see changes through the
allocate / deallocate event handlers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kai.framework.config import SchedulerConfig
from kai.framework.decisions import Decisions
from kai.framework.status import SUCCESS, Status
from kai.model import (
    GPU,
    HOLDS_NODE,
    ClusterSnapshot,
    NodeInfo,
    PodGroupInfo,
    PodInfo,
    PodStatus,
    QueueInfo,
    ResourceSpace,
    SubGroupInfo,
)

EPS = 1e-9


class NodeState:
    """Per-node arrays: what each node has, what is idle, and what is being released."""

    def __init__(self, nodes: list[NodeInfo], space: ResourceSpace) -> None:
        self.infos = nodes
        self.names = [n.name for n in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.space = space
        count, width = len(nodes), len(space.names)
        self.allocatable = np.zeros((count, width))
        for i, node in enumerate(nodes):
            for name, amount in node.allocatable.amounts.items():
                self.allocatable[i, space.index(name)] = amount
        self.idle = self.allocatable.copy()
        self.releasing = np.zeros((count, width))
        self.usable = np.array([n.usable for n in nodes], dtype=bool)
        self.gpu_col = space.index(GPU)
        self.has_gpu = self.allocatable[:, self.gpu_col] > 0 if count else np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return len(self.names)


@dataclass(slots=True)
class PlacementContext:
    """What scorers get for one task: the candidate nodes and what was computed about them already."""

    task: PodInfo
    vector: np.ndarray
    columns: np.ndarray  # requested resource columns
    candidates: np.ndarray  # node indices that may host the task (idle or releasing resources)
    fits_idle: np.ndarray  # per candidate: fits without waiting for releases


class QueueAccounting(Protocol):
    """Fair-share queries a plugin (proportion) answers for actions and reports."""

    def fair_share(self, queue: str) -> dict[str, float]: ...

    def report(self) -> dict[str, Any]: ...


NodeFilter = Callable[[PodInfo], "np.ndarray | None"]
NodeScorer = Callable[[PlacementContext], "np.ndarray | float"]


@dataclass(slots=True)
class NamedFilter:
    name: str
    reason: str  # "N node(s) <reason>"
    fn: NodeFilter


@dataclass(slots=True)
class Hooks:
    job_order: list[Callable[[PodGroupInfo], Any]] = field(default_factory=list)
    task_order: list[Callable[[PodInfo], Any]] = field(default_factory=list)
    subgroup_order: list[Callable[[SubGroupInfo], Any]] = field(default_factory=list)
    queue_order: list[Callable[[QueueInfo, PodGroupInfo], Any]] = field(default_factory=list)
    pre_predicates: list[Callable[[PodInfo], Status]] = field(default_factory=list)
    node_filters: list[NamedFilter] = field(default_factory=list)
    node_scorers: list[NodeScorer] = field(default_factory=list)
    job_capacity: list[Callable[[PodGroupInfo, list[PodInfo]], Status]] = field(default_factory=list)
    on_allocate: list[Callable[[PodInfo], None]] = field(default_factory=list)
    on_deallocate: list[Callable[[PodInfo], None]] = field(default_factory=list)
    on_close: list[Callable[[Session], None]] = field(default_factory=list)


class Session:
    def __init__(self, snapshot: ClusterSnapshot, config: SchedulerConfig) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = snapshot.now
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.jobs: dict[str, PodGroupInfo] = {k: pg.clone() for k, pg in snapshot.podgroups.items()}
        extra: set[str] = set()
        for node in snapshot.nodes:
            extra.update(node.allocatable.names())
        for job in self.jobs.values():
            for pod in job.pods:
                extra.update(pod.requests.names())
        self.space = ResourceSpace.build(extra)
        self.nodes = NodeState(snapshot.nodes, self.space)
        self.hooks = Hooks()
        self.accounting: QueueAccounting | None = None
        self.decisions = Decisions()
        self.fit_errors: dict[str, Status] = {}
        self._vectors: dict[int, np.ndarray] = {}
        self.min_gpu_memory_mib = min((n.gpu_memory_mib for n in snapshot.nodes if n.gpu_memory_mib), default=0)
        for pod in snapshot.foreign_pods:
            self._hold(pod)
        for job in self.jobs.values():
            for pod in job.pods:
                self._hold(pod)

    def _hold(self, pod: PodInfo) -> None:
        """Account a pod that already sits on a node in the snapshot."""
        if pod.status not in HOLDS_NODE or pod.node not in self.nodes.index:
            return
        row = self.nodes.index[pod.node]
        vec = self.vector(pod)
        self.nodes.idle[row] -= vec
        if pod.status is PodStatus.RELEASING:
            self.nodes.releasing[row] += vec

    # -- plugin-facing helpers --------------------------------------------------------------------
    def vector(self, pod: PodInfo) -> np.ndarray:
        """The pod's node-resource request in this session's columns (cached)."""
        key = id(pod.requests)
        vec = self._vectors.get(key)
        if vec is None:
            vec = self.space.vector(pod.requests)
            self._vectors[key] = vec
        return vec

    def queue_path(self, queue: str) -> list[QueueInfo]:
        """The queue and its ancestors, leaf first."""
        path = []
        current = self.queues.get(queue)
        while current is not None:
            path.append(current)
            current = self.queues.get(current.parent) if current.parent else None
        return path

    # -- ordering -----------------------------------------------------------------------------
    def job_key(self, job: PodGroupInfo) -> tuple[Any, ...]:
        return (*(fn(job) for fn in self.hooks.job_order), job.creation, job.uid)

    def task_key(self, task: PodInfo) -> tuple[Any, ...]:
        return (*(fn(task) for fn in self.hooks.task_order), task.creation, task.uid)

    def subgroup_key(self, sub: SubGroupInfo) -> tuple[Any, ...]:
        return (*(fn(sub) for fn in self.hooks.subgroup_order), sub.name)

    def queue_key(self, queue: QueueInfo, job: PodGroupInfo) -> tuple[Any, ...]:
        return (*(fn(queue, job) for fn in self.hooks.queue_order), queue.creation, queue.name)

    # -- checks -----------------------------------------------------------------------------------
    def check_job_capacity(self, job: PodGroupInfo, tasks: list[PodInfo]) -> Status:
        for fn in self.hooks.job_capacity:
            status = fn(job, tasks)
            if not status.ok:
                return status
        return SUCCESS

    def pre_predicate(self, task: PodInfo) -> Status:
        for fn in self.hooks.pre_predicates:
            status = fn(task)
            if not status.ok:
                return status
        return SUCCESS

    # -- events -------------------------------------------------------------------------------
    def fire_allocate(self, task: PodInfo) -> None:
        for fn in self.hooks.on_allocate:
            fn(task)

    def fire_deallocate(self, task: PodInfo) -> None:
        for fn in self.hooks.on_deallocate:
            fn(task)

    def record_fit_error(self, job: PodGroupInfo, status: Status) -> None:
        self.fit_errors[job.key] = status
