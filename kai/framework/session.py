"""The session: the working state of one cycle and the hooks plugins register on it.

Node state lives in arrays over nodes (rows sorted by node name, columns the
session's ResourceSpace) so that filtering and scoring are vectorised. Actions
change state only through a Statement; plugins see changes through the
allocate / deallocate event handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, is_, methodcaller
from typing import Any, Protocol, TypeVar

import numpy as np

from kai.framework.config import SchedulerConfig
from kai.framework.decisions import Decisions
from kai.framework.gpushare import GpuCandidate, SharedGpus
from kai.framework.podtable import CODE, Interned, PodColumns, PodTable, read_pods, status_mask, used_numbers
from kai.framework.status import SUCCESS, Status
from kai.model import (
    ACTIVE,
    GPU,
    HOLDS_NODE,
    ClusterSnapshot,
    NodeInfo,
    PodGroupInfo,
    PodInfo,
    PodStatus,
    QueueInfo,
    Resources,
    ResourceSpace,
    SubGroupInfo,
)
from kai.model.node import label_values

EPS = 1e-9
_HOLDS = status_mask(HOLDS_NODE)
_NAME = attrgetter("name")
_ALLOCATABLE = attrgetter("allocatable")
_AMOUNTS = attrgetter("amounts")
_USABLE = attrgetter("usable")
_LABELS = attrgetter("labels")
_GPU_MEMORY = attrgetter("gpu_memory_mib")
T = TypeVar("T")
_PENDING_CODE = CODE[PodStatus.PENDING]
_RELEASING_CODE = CODE[PodStatus.RELEASING]


def _order_key(fns: list[Callable[[Any], Any]]) -> Callable[[Any], tuple[Any, ...]]:
    """x -> (*(fn(x) for fn in fns), x.creation, x.uid), the calls written out for up to three functions
    (a third of the cost of the generator; the same tuples)."""
    if not fns:
        return lambda x: (x.creation, x.uid)
    if len(fns) == 1:
        (a,) = fns
        return lambda x: (a(x), x.creation, x.uid)
    if len(fns) == 2:
        a, b = fns
        return lambda x: (a(x), b(x), x.creation, x.uid)
    if len(fns) == 3:
        a, b, c = fns
        return lambda x: (a(x), b(x), c(x), x.creation, x.uid)
    every = tuple(fns)
    return lambda x: (*(fn(x) for fn in every), x.creation, x.uid)


def _queue_order_key(
    fns: list[Callable[[QueueInfo, PodGroupInfo], Any]],
) -> Callable[[QueueInfo, PodGroupInfo], tuple[Any, ...]]:
    """(queue, job) -> (*(fn(queue, job) for fn in fns), queue.creation, queue.name), likewise."""
    if len(fns) == 1:
        (a,) = fns
        return lambda queue, job: (a(queue, job), queue.creation, queue.name)
    every = tuple(fns)
    return lambda queue, job: (*(fn(queue, job) for fn in every), queue.creation, queue.name)


def _add_rows(into: np.ndarray, rows: np.ndarray, amounts: np.ndarray) -> None:
    """`np.add.at(into, rows, amounts)` for an `into` of zeros, a column at a time with bincount (which adds
    in the same order, so the sums are the same to the bit, and is many times faster)."""
    for col in np.flatnonzero(amounts.any(axis=0)).tolist():
        into[:, col] += np.bincount(rows, weights=amounts[:, col], minlength=len(into))


def _subtract_rows(into: np.ndarray, rows: np.ndarray, amounts: np.ndarray) -> None:
    """`np.subtract.at(into, rows, amounts)`: the same to the bit. Where every number is a whole number
    and every sum stays below 2**52, each subtraction is exact, so subtracting the per-row sums (bincount)
    gives what one subtraction at a time gives; otherwise one at a time."""
    limit = 2.0**52
    whole = (
        np.array_equal(amounts, np.rint(amounts))
        and np.array_equal(into, np.rint(into))
        and float(np.abs(amounts).sum(axis=0).max(initial=0.0)) + float(np.abs(into).max(initial=0.0)) < limit
    )
    if not whole:
        np.subtract.at(into, rows, amounts)
        return
    for col in np.flatnonzero(amounts.any(axis=0)).tolist():
        into[:, col] -= np.bincount(rows, weights=amounts[:, col], minlength=len(into))


def _same_objects(a: list[Any], b: list[Any]) -> bool:
    return a is b or (len(a) == len(b) and all(map(is_, a, b)))


def _allocatables(nodes: list[NodeInfo]) -> tuple[np.ndarray, list[Resources]]:
    """The nodes' allocatable Resources objects, each distinct one once, and each node's number among them."""
    distinct = Interned()
    numbers = distinct.numbers(list(map(_ALLOCATABLE, nodes)))
    return numbers, distinct.items


def _named(nodes: list[NodeInfo]) -> tuple[list[str], dict[str, int]]:
    """The nodes' names, and each name's row (the last row of a name given twice)."""
    names = list(map(_NAME, nodes))
    return names, dict(zip(names, range(len(names)), strict=True))


class NodeState:
    """Per-node arrays: what each node has, what is idle, and what is being released.

    The arrays are column-major (Fortran order): each resource's column over the nodes is contiguous,
    so that filtering and scoring one request touch only the columns it asks for, without copies.
    `idle_cols[c]` / `releasing_cols[c]` are those column views (valid while the arrays are updated in
    place, which is the only way the session changes them).

    `facts`: what `facts()` of an earlier session's NodeState on the same node objects and resource
    columns returned: the fixed arrays are copied from it instead of read from the nodes again."""

    def __init__(
        self,
        nodes: list[NodeInfo],
        space: ResourceSpace,
        facts: NodeFacts | None = None,
        named: tuple[list[str], dict[str, int]] | None = None,
        allocatables: tuple[np.ndarray, list[Resources]] | None = None,
    ) -> None:
        self.infos = nodes
        self.space = space
        count, width = len(nodes), len(space.names)
        if facts is not None:
            self.names, self.index = facts.names, facts.index
            self.allocatable = facts.allocatable.copy(order="F")
            self.usable = facts.usable.copy()
        else:
            self.names, self.index = named if named is not None else _named(nodes)
            # Nodes written alike share one Resources object (the snapshot builder's): each distinct one
            # is read once, a column at a time in C, and its row copied to its nodes.
            numbers, distinct = allocatables if allocatables is not None else _allocatables(nodes)
            amounts = list(map(_AMOUNTS, distinct))
            rows = np.zeros((len(amounts), width))
            for col, name in enumerate(space.names):
                rows[:, col] = np.fromiter(map(methodcaller("get", name, 0.0), amounts), dtype=float, count=len(rows))
            self.allocatable = np.asfortranarray(rows[numbers])
            self.usable = np.fromiter(map(_USABLE, nodes), dtype=bool, count=count)
        self.idle = self.allocatable.copy(order="F")
        self.releasing = np.zeros((count, width), order="F")
        self.gpu_col = space.index(GPU)
        self.has_gpu = self.allocatable[:, self.gpu_col] > 0 if count else np.zeros(0, dtype=bool)
        # False while nothing on any node is being released (find_node then skips the releasing columns).
        # Whoever adds to `releasing` sets it (Statement, SharedGpus, the session's loading).
        self.maybe_releasing = False
        # Every row whose idle or releasing resources changed, in order (whoever changes a row appends it:
        # the Statement, for itself and for SharedGpus): the placement cache updates what it keeps from it.
        self.changed: list[int] = []
        self.idle_cols = [self.idle[:, c] for c in range(width)]
        self.releasing_cols = [self.releasing[:, c] for c in range(width)]
        self._labels: list[dict[str, str]] | None = None
        self._label_values: dict[str, list[str | None] | None] = {}

    def __len__(self) -> int:
        return len(self.names)

    def label_values(self, key: str) -> list[str | None] | None:
        """Each node's value of the label `key`, None where it has none; None when no node has it (see
        kai.model.node.label_values). Worked out once per key."""
        if key not in self._label_values:
            if self._labels is None:
                self._labels = list(map(_LABELS, self.infos))
            self._label_values[key] = label_values(self._labels, key)
        return self._label_values[key]

    def facts(self) -> NodeFacts:
        """The fixed arrays as read (copies: nothing the session does to its arrays reaches them)."""
        return NodeFacts(self.space, self.names, self.index, self.allocatable.copy(order="F"), self.usable.copy())


@dataclass(slots=True, frozen=True)
class NodeFacts:
    """What a NodeState read from its nodes that never changes (see NodeState.facts)."""

    space: ResourceSpace
    names: list[str]
    index: dict[str, int]
    allocatable: np.ndarray
    usable: np.ndarray


@dataclass(slots=True)
class Opened:
    """What a session read from its snapshot that a later session on the same cluster may start from
    (`Session(..., previous=...)`): the pod table, the node arrays as the session opened them, and the
    per-node facts of shared GPUs. Read-only once the session is open."""

    table: PodTable
    nodes: NodeFacts
    node_names: frozenset[str]  # resource names the nodes' allocatable name
    gpu_nodes: tuple[np.ndarray, np.ndarray]  # SharedGpus' per-node GPU memory and MIG flags
    min_gpu_memory_mib: int


@dataclass(slots=True)
class PlacementContext:
    """What scorers get for one task: the candidate nodes and what was computed about them already.

    Both arrays run over every node row (no per-task copies of the node arrays); a scorer returns a
    float (the same for every node) or an array over every node row, whose values at rows that are not
    candidates are ignored."""

    task: PodInfo
    vector: np.ndarray
    columns: np.ndarray  # requested resource columns
    candidates: np.ndarray  # bool per node row: may host the task (on idle or releasing resources)
    fits_idle: np.ndarray  # bool per node row: fits without waiting for releases


@dataclass(slots=True)
class NodeSubset:
    """One candidate node set for a (sub-)group set: the nodes it may use, and optional per-node score
    bonuses (added to every task's node score inside this set, e.g. topology's preferred-level ranks)."""

    mask: np.ndarray  # bool over node rows
    scores: np.ndarray | None = None  # float over node rows, or None
    name: str = ""  # what the set is, for messages (a topology domain ID)


@dataclass(slots=True)
class SubsetRequest:
    """A SubsetNodes question: which node sets may the tasks of this (sub-)group set try, in order?"""

    job: PodGroupInfo
    group: SubGroupInfo | None  # None: the job's implicit root
    tasks: list[PodInfo]  # the tasks of this set's subtree placed in this attempt
    allowed: NodeSubset | None  # the set chosen for the parent (None: every node)


# A SubsetNodes hook answers None (no opinion: keep the parent's set), a list of candidate sets (tried in
# order, first that works wins), or a failed Status (the set cannot be placed; the status says why).
SubsetNodes = Callable[[SubsetRequest], "list[NodeSubset] | Status | None"]


class QueueAccounting(Protocol):
    """Fair-share queries a plugin (proportion) answers for actions and reports."""

    def fair_share(self, queue: str) -> dict[str, float]: ...

    def report(self) -> dict[str, Any]: ...

    def describe_queue(self, queue: str) -> str: ...

    def queue_figures(self, queue: str, job: PodGroupInfo | None = None) -> Any: ...  # causes.QueueFigures | None


# A PlacementPossible hook: (job, tasks, free) -> False when the tasks certainly cannot be placed with at
# most `free` available (a necessary condition of the hook's own placement rules; True when unsure).
PlacementPossible = Callable[[PodGroupInfo, list[PodInfo], np.ndarray], bool]

NodeFilter = Callable[[PodInfo], "np.ndarray | None"]
NodeScorer = Callable[[PlacementContext], "np.ndarray | float"]


@dataclass(slots=True)
class NamedFilter:
    name: str
    reason: str  # "N node(s) <reason>"
    fn: NodeFilter
    # True: the answer depends only on the task (and nodes' fixed properties), never on where other pods
    # are, and a mask it returns is never changed afterwards (the placement cache keys on it).
    static: bool = False


NodeFit = Callable[[PodInfo], "tuple[np.ndarray, np.ndarray] | None"]


@dataclass(slots=True)
class NamedFit:
    """Resources a plugin tracks itself (DRA devices): `fn(task)` gives, per node, whether the task fits
    now and whether it fits once what is being released is gone (None: no opinion). Unlike a node
    filter, evictions change the answer, so victim search does not treat it as a predicate."""

    name: str
    reason: str  # "N node(s) <reason>"
    fn: NodeFit


class Descending:
    """Inverts the order of a key, so that a min-heap or an ascending sort puts the largest first
    (victim order: the last job in job order, the newest queue name)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: Descending) -> bool:
        return self.key > other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descending) and self.key == other.key

    __hash__ = None  # type: ignore[assignment]


@dataclass(slots=True, frozen=True)
class VictimQueueOrder:
    """Which queue gives up a victim first (kai.framework.victimpool). `vector(pod)` is what a pod counts
    as (a tuple of floats); `key(queue, removed, next)` ranks the queue (smaller first) given the running
    sum of those vectors over the pods already picked from its subtree for the current preemptor, and the
    sum over the pods it would give up next. `for_queue(queue)`, when given, is `key` for that queue alone,
    as a function of (removed, next): the picker asks for it once per queue and calls it at every pop. Its
    keys of two queues must never tie (the picker then compares keys alone, not keys and queue names)."""

    vector: Callable[[PodInfo], tuple[float, ...]]
    key: Callable[[QueueInfo, list[float], tuple[float, ...]], Any]
    for_queue: Callable[[QueueInfo], Callable[[list[float], tuple[float, ...]], Any]] | None = None


@dataclass(slots=True)
class Hooks:
    job_order: list[Callable[[PodGroupInfo], Any]] = field(default_factory=list)
    task_order: list[Callable[[PodInfo], Any]] = field(default_factory=list)
    subgroup_order: list[Callable[[SubGroupInfo], Any]] = field(default_factory=list)
    queue_order: list[Callable[[QueueInfo, PodGroupInfo], Any]] = field(default_factory=list)
    pre_predicates: list[Callable[[PodInfo], Status]] = field(default_factory=list)
    node_filters: list[NamedFilter] = field(default_factory=list)
    node_fits: list[NamedFit] = field(default_factory=list)
    node_scorers: list[NodeScorer] = field(default_factory=list)
    job_capacity: list[Callable[[PodGroupInfo, list[PodInfo]], Status]] = field(default_factory=list)
    on_allocate: list[Callable[[PodInfo], None]] = field(default_factory=list)
    on_deallocate: list[Callable[[PodInfo], None]] = field(default_factory=list)
    on_close: list[Callable[[Session], None]] = field(default_factory=list)
    # gpu_order: which GPU of a node a shared-GPU pod takes first (smaller key first): gpupack / gpuspread.
    gpu_order: list[Callable[[GpuCandidate], Any]] = field(default_factory=list)
    # Evicting actions (consolidation, reclaim, preempt). Each gets the action's name first.
    # preemptor_checks: may this pending job evict at all (e.g. CanReclaimResources)?
    preemptor_checks: list[Callable[[str, PodGroupInfo, list[PodInfo]], Status]] = field(default_factory=list)
    # victim_queue_filters: may this leaf queue give up victims to that preemptor at all (fairness)?
    victim_queue_filters: list[Callable[[str, PodGroupInfo, str], bool]] = field(default_factory=list)
    # victim_filters: may this running job be a victim of that preemptor (min-runtime)?
    victim_filters: list[Callable[[str, PodGroupInfo, PodGroupInfo], bool]] = field(default_factory=list)
    # scenario_validators: is this simulated set of evictions + placements acceptable (kai.framework.victims)?
    scenario_validators: list[Callable[[str, Any], Status]] = field(default_factory=list)
    # victim_queue_order: which queue gives up a victim first (see VictimQueueOrder).
    victim_queue_order: list[VictimQueueOrder] = field(default_factory=list)
    # subset_nodes: split the node set of a (sub-)group set into ordered candidate sets (topology).
    subset_nodes: list[SubsetNodes] = field(default_factory=list)
    # placement_possible: may these tasks of the job be placed at all with at most `free` (idle +
    # releasing, per node row and resource column)? False only when no placement can succeed (e.g. no
    # topology domain has room): an eviction trial that cannot succeed is then skipped, not simulated.
    placement_possible: list[PlacementPossible] = field(default_factory=list)


class Session:
    """The working state of one cycle. `previous` (the `opened` of an earlier session on the same node
    objects) lets the session copy what it read then instead of reading it again; `changed`: keys of pod
    groups whose pods the caller changed in place since (a pod group that is a new object is read anew
    anyway). The session is the same either way."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        config: SchedulerConfig,
        previous: Opened | None = None,
        changed: Collection[str] = (),
    ) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = snapshot.now
        self.queues: dict[str, QueueInfo] = snapshot.queues
        # The session works on the snapshot's own pod groups (no copies): the Statement records each pod's
        # state before it first changes it (`touch`), and `restore` puts every touched pod back once the
        # cycle's decisions are taken, so that the snapshot is what it was.
        self.jobs: dict[str, PodGroupInfo] = dict(snapshot.podgroups)
        nodes = snapshot.nodes
        if previous is not None and not _same_objects(previous.table.nodes, nodes):
            previous = None  # other nodes: nothing read then still holds
        named = allocatables = None
        if previous is not None:
            index, node_names = previous.nodes.index, previous.node_names
        else:
            named = _named(nodes)
            index = named[1]
            allocatables = _allocatables(nodes)
            node_names = frozenset(chain.from_iterable(map(_AMOUNTS, allocatables[1])))
        table = PodTable.build(self.jobs, nodes, index, previous.table if previous is not None else None, changed)
        self.table = table
        self.pods: list[PodInfo] = table.pods  # every pod of `jobs`, job by job (for plugins that scan them all)
        columns = table.columns
        pending = columns.status == _PENDING_CODE
        waiting = np.flatnonzero(np.bincount(table.job_of[pending], minlength=len(table.jobs)))
        rows = waiting.tolist()
        self._with_pending: list[PodGroupInfo] = [table.jobs[i] for i in rows]  # see jobs_with_pending
        self._pending_rows = rows
        self._pending_position: dict[str, int] | None = None
        self._touched: dict[int, tuple[PodInfo, PodStatus, str, tuple[str, ...]]] = {}
        requests = table.requests.items
        extra = set(node_names)
        for number in used_numbers(columns.req, len(requests)).tolist():
            extra.update(requests[number].names())
        self.space = ResourceSpace.build(extra)
        facts = previous.nodes if previous is not None and previous.nodes.space == self.space else None
        self.nodes = NodeState(nodes, self.space, facts, named, allocatables)
        self.hooks = Hooks()
        self.accounting: QueueAccounting | None = None
        self.decisions = Decisions()
        self.fit_errors: dict[str, Status] = {}
        self.noted_causes: dict[str, list[Any]] = {}  # job key -> causes.Cause noted by actions and plugins
        self.evicted_gpus: dict[str, float] = {}  # per victim leaf queue, this cycle (disruption budget)
        # What framework modules keep for this session only (kube-scheduler's CycleState): see `kept`.
        self.state: dict[str, Any] = {}
        self._vectors: dict[int, np.ndarray] = {}
        self._needs: dict[int, tuple[np.ndarray, np.ndarray, tuple[tuple[int, float], ...]]] = {}
        # The order key functions (see job_order_key), with the hooks they were made for.
        self._job_key: tuple[list[Any], Callable[[PodGroupInfo], tuple[Any, ...]]] = ([None], _order_key([]))
        self._task_key: tuple[list[Any], Callable[[PodInfo], tuple[Any, ...]]] = ([None], _order_key([]))
        self._queue_key: tuple[list[Any], Callable[[QueueInfo, PodGroupInfo], tuple[Any, ...]]] = (
            [None],
            _queue_order_key([]),
        )
        if previous is not None:
            self.min_gpu_memory_mib = previous.min_gpu_memory_mib
        else:
            memory = np.fromiter(map(_GPU_MEMORY, nodes), dtype=np.int64, count=len(nodes))
            self.min_gpu_memory_mib = int(memory[memory != 0].min()) if memory.any() else 0
        self.gpus = SharedGpus(
            snapshot,
            self.nodes.index,
            self.nodes.idle,
            self.nodes.releasing,
            self.nodes.gpu_col,
            self.nodes,
            previous.gpu_nodes if previous is not None else None,
            node_names,
        )
        self.opened = Opened(
            table, self.nodes.facts(), node_names, self.gpus.node_arrays(), self.min_gpu_memory_mib
        )
        # Another scheduler's pods are load too, shared GPUs included; then the session's own pods.
        foreign = read_pods(list(snapshot.foreign_pods), index, table.requests, table.gpus)
        self._hold_all(foreign, columns)

    def any_pod(self, attribute: str) -> bool:
        """Whether some pod of the session has a truthy `attribute` (e.g. `host_ports`; see PodTable.pod_flag)."""
        return bool(self.table.pod_flag(attribute).any())

    def kept(self, key: str, make: Callable[[], T]) -> T:
        """The state a framework module keeps under `key` for this session (victim pools, the placement
        cache, the log of moved pods, …): made by `make` on first ask, gone with the session."""
        found = self.state.get(key)
        if found is None:
            found = self.state[key] = make()
        return found

    def jobs_with_pending(self) -> list[PodGroupInfo]:
        """The jobs that had pending pods when the session opened, in job order (found as it opened).
        Within a session a pod becomes pending again only when a placement of this session is undone, so
        every job with a pending pod at any time of the session is among them: actions that look for
        pending jobs scan these (and check `has_pending` themselves) instead of every job."""
        return self._with_pending

    def job_position(self, key: str) -> int | None:
        """The job's position in the session's pod table (None: not one of its jobs). The jobs that had
        pending pods as the session opened, whose pods the actions move most, are looked up in a map of
        those alone; the whole table's map is made only for another job."""
        found = self._pending_position
        if found is None:
            keys = self.table.keys
            found = self._pending_position = {keys[i]: i for i in self._pending_rows}
        at = found.get(key)
        return at if at is not None else self.table.position.get(key)

    def touch(self, pod: PodInfo) -> None:
        """Remember the pod's state before the session first changes it."""
        if id(pod) not in self._touched:
            self._touched[id(pod)] = (pod, pod.status, pod.node, pod.gpu_groups)

    def restore(self) -> None:
        """Put every pod the session changed back as the snapshot had it (status counters included)."""
        for pod, status, node, groups in self._touched.values():
            old = pod.status
            pod.status, pod.node, pod.gpu_groups = status, node, groups
            if pod.owner is not None:
                pod.owner.moved(old, status)
        self._touched.clear()

    def _hold_all(self, *parts: PodColumns) -> None:
        """Account the pods that already sit on a node in the snapshot (`parts` in order): their requests
        leave the node's idle resources (in pod order, with one vectorised update), releasing pods'
        become releasing, and fractional pods join their shared GPUs."""
        table = self.table
        gpus = table.gpus.items
        shared_gpu = np.fromiter((g.is_shared for g in gpus), dtype=bool, count=len(gpus))
        requests = table.requests.items
        rows, numbers, releasing, shared = [], [], [], []
        for part in parts:
            holds = _HOLDS[part.status]
            shared.extend(part.pods[i] for i in np.flatnonzero(holds & shared_gpu[part.gpu]).tolist())
            placed = holds & (part.row >= 0)
            rows.append(part.row[placed])
            numbers.append(part.req[placed])
            releasing.append(part.status[placed] == _RELEASING_CODE)
        at = np.concatenate(rows)
        if len(at):
            slots = np.concatenate(numbers)
            used = used_numbers(slots, len(requests))
            table_rows = np.zeros((len(requests), len(self.space.names)))
            for number in used.tolist():
                table_rows[number] = self._vector_of(requests[number])
            amounts = table_rows[slots]
            _subtract_rows(self.nodes.idle, at, amounts)
            freeing = np.concatenate(releasing)
            if freeing.any():
                _add_rows(self.nodes.releasing, at[freeing], amounts[freeing])
                self.nodes.maybe_releasing = True
        for pod in shared:
            self.touch(pod)  # holding names the pod's GPU groups: the snapshot's pod gets them back
            self.gpus.hold(pod)
        self.gpus.finish_loading()

    # -- plugin-facing helpers --------------------------------------------------------------------
    def vector(self, pod: PodInfo) -> np.ndarray:
        """The pod's node-resource request in this session's columns (cached)."""
        vec = self._vectors.get(id(pod.requests))
        return vec if vec is not None else self._vector_of(pod.requests)

    def _vector_of(self, requests: Resources) -> np.ndarray:
        vec = self._vectors.get(id(requests))
        if vec is None:
            vec = self._vectors[id(requests)] = self.space.vector(requests)
        return vec

    def request_columns(self, vec: np.ndarray) -> tuple[np.ndarray, tuple[tuple[int, float], ...]]:
        """The columns a request vector asks for, and (column, amount less EPS) for each (cached per vector)."""
        found = self._needs.get(id(vec))
        if found is None or found[0] is not vec:
            columns = np.flatnonzero(vec > 0)
            need = tuple((int(c), float(vec[c] - EPS)) for c in columns)
            found = self._needs[id(vec)] = (vec, columns, need)
        return found[1], found[2]

    def queue_path(self, queue: str) -> list[QueueInfo]:
        """The queue and its ancestors, leaf first."""
        path = []
        current = self.queues.get(queue)
        while current is not None:
            path.append(current)
            current = self.queues.get(current.parent) if current.parent else None
        return path

    # -- ordering -----------------------------------------------------------------------------
    # Each order's key function is made once for the hooks it calls (and again when they change).
    def job_key(self, job: PodGroupInfo) -> tuple[Any, ...]:
        return self.job_order_key()(job)

    def job_order_key(self) -> Callable[[PodGroupInfo], tuple[Any, ...]]:
        """The function `job_key` calls: the job order hooks' keys, then the job's creation and uid."""
        hooks, kept = self.hooks.job_order, self._job_key
        if kept[0] != hooks:
            kept = self._job_key = (list(hooks), _order_key(hooks))
        return kept[1]

    def gpu_key(self, candidate: GpuCandidate) -> tuple[Any, ...]:
        return tuple(fn(candidate) for fn in self.hooks.gpu_order)

    def task_key(self, task: PodInfo) -> tuple[Any, ...]:
        return self.task_order_key()(task)

    def task_order_key(self) -> Callable[[PodInfo], tuple[Any, ...]]:
        """The function `task_key` calls (to sort many tasks with): the task order hooks' keys, then the
        task's creation and uid."""
        hooks, kept = self.hooks.task_order, self._task_key
        if kept[0] != hooks:
            kept = self._task_key = (list(hooks), _order_key(hooks))
        return kept[1]

    def subgroup_key(self, sub: SubGroupInfo) -> tuple[Any, ...]:
        return (*(fn(sub) for fn in self.hooks.subgroup_order), sub.name)

    def queue_key(self, queue: QueueInfo, job: PodGroupInfo) -> tuple[Any, ...]:
        hooks, kept = self.hooks.queue_order, self._queue_key
        if kept[0] != hooks:
            kept = self._queue_key = (list(hooks), _queue_order_key(hooks))
        return kept[1](queue, job)

    # -- checks -----------------------------------------------------------------------------------
    def check_job_capacity(self, job: PodGroupInfo, tasks: list[PodInfo]) -> Status:
        for fn in self.hooks.job_capacity:
            status = fn(job, tasks)
            if not status.ok:
                return status
        return SUCCESS

    def check_preemptor(self, action: str, job: PodGroupInfo, tasks: list[PodInfo]) -> Status:
        for fn in self.hooks.preemptor_checks:
            status = fn(action, job, tasks)
            if not status.ok:
                return status
        return SUCCESS

    def victim_queue_allowed(self, action: str, preemptor: PodGroupInfo, queue: str) -> bool:
        return all(fn(action, preemptor, queue) for fn in self.hooks.victim_queue_filters)

    def victim_allowed(self, action: str, preemptor: PodGroupInfo, victim: PodGroupInfo) -> bool:
        return all(fn(action, preemptor, victim) for fn in self.hooks.victim_filters)

    def validate_scenario(self, action: str, scenario: Any) -> Status:
        for fn in self.hooks.scenario_validators:
            status = fn(action, scenario)
            if not status.ok:
                return status
        return SUCCESS

    def victim_queue_key(
        self, queue: QueueInfo, removed: list[list[float]], next_sums: list[tuple[float, ...]]
    ) -> tuple[Any, ...]:
        """The queue's place in victim order: one key per VictimQueueOrder hook (`removed` and `next_sums`
        hold that hook's sums, in hook order), then the queue's name."""
        orders = self.hooks.victim_queue_order
        return (*(o.key(queue, removed[i], next_sums[i]) for i, o in enumerate(orders)), queue.name)

    def subset_nodes(self, request: SubsetRequest) -> list[NodeSubset] | Status | None:
        """Chain the SubsetNodes hooks: each splits every candidate the previous ones returned."""
        result: list[NodeSubset] | None = None
        for fn in self.hooks.subset_nodes:
            if result is None:
                out = fn(request)
                if isinstance(out, Status):
                    return out
                result = out
                continue
            split: list[NodeSubset] = []
            last: Status | None = None
            for candidate in result:
                out = fn(SubsetRequest(request.job, request.group, request.tasks, candidate))
                if isinstance(out, Status):
                    last = out
                else:
                    split.extend(out if out is not None else [candidate])
            if not split and last is not None:
                return last
            result = split
        return result

    def placement_possible(self, job: PodGroupInfo, tasks: list[PodInfo], freed: Iterable[PodInfo] = ()) -> bool:
        """False when a PlacementPossible hook is sure that `tasks` of `job` cannot be placed, even once
        the `freed` pods (e.g. victims about to be evicted) have released their resources. Any placement
        after those evictions has at most that much free, so a False answer means it would fail."""
        hooks = self.hooks.placement_possible
        if not hooks:
            return True
        nodes = self.nodes
        free = nodes.idle + nodes.releasing
        for pod in freed:
            row = nodes.index.get(pod.node) if pod.status in ACTIVE else None
            if row is not None:
                free[row] += self.vector(pod)
        free += np.abs(free) * 1e-12 + EPS  # slack: a different order of float sums never tightens the check
        return all(fn(job, tasks, free) for fn in hooks)

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

    def note_cause(self, job: PodGroupInfo, cause: Any) -> None:
        """A reason the job may still wait at the end of the cycle (kai.framework.causes.Cause), e.g. why
        an evicting action could not make room; `kai explain` ranks them with the fit error."""
        self.noted_causes.setdefault(job.key, []).append(cause)
