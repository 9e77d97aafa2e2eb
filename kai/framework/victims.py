"""The victim solver shared by consolidation, reclaim and preempt (kai/actions/NOTES.md).

For one pending job it looks for a small set of running pods whose eviction lets the job's gang
start. Everything is simulated inside one Statement: victims are evicted, the job is placed (on the
resources they release, i.e. pipelined), victims are placed again elsewhere when they can be, and
the action's validators (session hooks) judge the result. The job grows one task at a time; victims
found for the first k tasks are kept while looking for task k+1 ("recorded victims").

Victims come from a `VictimPicker` in victim order (least deserving queue first, then lowest
priority / newest job first; elastic extras before any gang is broken). Each pop adds a *chunk*: one
elastic extra pod, or a whole gang. A newly popped chunk is tried node by node: for each node it
touches, only the chunks that sit on that node are evicted, so that pods scattered over the cluster
are not all killed to free one node. A gang victim is always evicted whole.

Cheap filters run before any simulation: the nodes the job may use at all (predicates), and a GPU
count check over idle + releasing + freed GPUs, so that hopeless jobs cost little. Scheduling
signatures skip a job that looks like one that already failed in this action.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kai.framework.jobqueue import JobQueue
from kai.framework.placement import (
    filter_nodes,
    find_node,
    leaf_short_of_allocations,
    place_tasks,
    tasks_to_allocate,
)
from kai.framework.session import EPS, Session
from kai.framework.statement import Statement
from kai.framework.status import Code, Status
from kai.model import ACTIVE, ALLOCATED, GPU, PodGroupInfo, PodInfo, PodStatus


def task_gpus(ssn: Session, pod: PodInfo) -> float:
    """GPUs the pod counts as (fractions and MIG slices included)."""
    if pod.gpu.is_shared or pod.gpu.mig:
        return pod.gpu.quota_gpus(ssn.min_gpu_memory_mib)
    return pod.requests.get(GPU)


@dataclass(slots=True)
class Chunk:
    """Pods of one victim job that are evicted together: one elastic extra, or the whole gang."""

    job: PodGroupInfo
    tasks: list[PodInfo]
    rows: list[int]  # node row of each task (-1: not on a known node)


@dataclass(slots=True)
class Scenario:
    """What a validator judges: the preemptor's placed tasks and the victims evicted for them."""

    action: str
    preemptor: PodGroupInfo
    tasks: list[PodInfo]  # preemptor tasks placed in this scenario
    batch: list[PodInfo]  # the whole batch the job needs this attempt
    chunks: list[Chunk]
    replaced: set[str] = field(default_factory=set)  # keys of victim pods placed again elsewhere

    def victims(self) -> list[PodInfo]:
        return [t for c in self.chunks for t in c.tasks]

    def lost(self) -> list[PodInfo]:
        """Victim pods that end the scenario without a place (really evicted)."""
        return [t for t in self.victims() if t.key not in self.replaced]


# -- victim order -------------------------------------------------------------------------------------


class _Reverse:
    """Inverts a sort key, so that a min-heap pops the *last* job in job order first."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key

    def __lt__(self, other: _Reverse) -> bool:
        return self.key > other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and self.key == other.key

    __hash__ = None  # type: ignore[assignment]


def tasks_to_evict(ssn: Session, job: PodGroupInfo, gone: set[int]) -> tuple[list[PodInfo], bool]:
    """One elastic extra from the last leaf (in leaf order) above its minMember, else the whole gang;
    and whether it is an extra. Pods whose id is in `gone` are treated as already evicted."""
    leaves = job.leaves if len(job.leaves) == 1 else sorted(job.leaves, key=ssn.subgroup_key, reverse=True)
    actives = [[p for p in sub.pods if p.status in ACTIVE and id(p) not in gone] for sub in leaves]
    for sub, active in zip(leaves, actives, strict=True):
        if len(active) > sub.min_member:
            return [max(active, key=ssn.task_key)], True
    return [p for active in actives for p in active], False


_Entry = tuple[int, int, int, PodGroupInfo]  # (gang next?, rank in victim order, sequence, job)


class VictimPool:
    """Candidate victim jobs of one action run, grouped by leaf queue, each group a heap in victim order."""

    def __init__(self, ssn: Session, jobs: Iterable[PodGroupInfo]) -> None:
        self.ssn = ssn
        self.seq = itertools.count()
        self.heaps: dict[str, list[_Entry]] = {}
        self.evictable_gpu = np.zeros(len(ssn.nodes))  # upper bound of GPUs victims hold, per node
        # Victim order within a queue is the reverse job order: rank once, compare integers after.
        ordered = sorted(jobs, key=lambda j: _Reverse(ssn.job_key(j)))
        for rank, job in enumerate(ordered):
            heap = self.heaps.setdefault(job.queue, [])
            extras = any(sub.active() > sub.min_member for sub in job.leaves)
            heap.append((0 if extras else 1, rank, next(self.seq), job))
            for pod in job.pods:
                if pod.status in ACTIVE:
                    row = ssn.nodes.index.get(pod.node)
                    if row is not None:
                        self.evictable_gpu[row] += ssn.vector(pod)[ssn.nodes.gpu_col]
        for heap in self.heaps.values():
            heapq.heapify(heap)

    def picker(
        self,
        action: str,
        preemptor: PodGroupInfo,
        queues: Callable[[str], bool],
        jobs: Callable[[PodGroupInfo], bool],
        max_jobs: int | None = None,
    ) -> VictimPicker:
        for heap in self.heaps.values():
            # Jobs evicted for earlier preemptors sit on top (victim order is stable): drop them for good.
            while heap and heap[0][3].count(ACTIVE) == 0:
                heapq.heappop(heap)
        heaps = {q: list(h) for q, h in self.heaps.items() if h and queues(q)}
        return VictimPicker(self, action, preemptor, heaps, jobs, max_jobs)


class VictimPicker:
    """Hands out victim chunks for one preemptor: queue by victim queue order, job by reverse job order."""

    def __init__(
        self,
        pool: VictimPool,
        action: str,
        preemptor: PodGroupInfo,
        heaps: dict[str, list[_Entry]],
        jobs: Callable[[PodGroupInfo], bool],
        max_jobs: int | None,
    ) -> None:
        self.pool = pool
        self.ssn = pool.ssn
        self.action = action
        self.preemptor = preemptor
        self.heaps = heaps
        self.jobs = jobs
        self.max_jobs = max_jobs
        self.claimed: set[int] = set()  # ids of pods handed out as victims
        self.allowed: dict[int, bool] = {}  # by id of the job
        # Queues that may give up victims to this preemptor at all (decided once).
        self.live = [q for q in heaps if pool.ssn.victim_queue_allowed(action, preemptor, q)]
        self.queue_keys: dict[str, tuple[Any, ...]] = {}  # valid until the session state changes
        self.picked: dict[str, list[PodInfo]] = {q: [] for q in self.live}  # per queue: pods handed out

    def state_changed(self) -> None:
        """Evictions became part of the statement: forget cached keys; picked pods now evicted are
        already out of their queue's allocation."""
        self.queue_keys.clear()
        self.picked = {q: [t for t in pods if t.status in ACTIVE] for q, pods in self.picked.items()}

    def next_chunk(self) -> Chunk | None:
        ssn = self.ssn
        heaps, keys = self.heaps, self.queue_keys
        while True:
            best_key: tuple[Any, ...] | None = None
            best_name = ""
            for name in self.live:
                if not heaps[name]:
                    continue
                key = keys.get(name)
                if key is None:
                    key = keys[name] = ssn.victim_queue_key(ssn.queues[name], self.picked[name])
                if best_key is None or key < best_key:
                    best_key, best_name = key, name
            if best_key is None:
                return None
            heap = heaps[best_name]
            _, rkey, _, job = heapq.heappop(heap)
            allowed = self.allowed.get(id(job))
            if allowed is None:
                if self.max_jobs is not None and len(self.allowed) >= self.max_jobs:
                    return None
                allowed = job is not self.preemptor and self.jobs(job)
                allowed = allowed and ssn.victim_allowed(self.action, self.preemptor, job)
                self.allowed[id(job)] = allowed
            if not allowed:
                continue
            tasks, extra = tasks_to_evict(ssn, job, self.claimed)
            if not tasks:
                continue
            self.claimed.update(id(t) for t in tasks)
            self.picked[best_name].extend(tasks)
            keys.pop(best_name, None)
            if extra:
                # An elastic extra went: the job comes back, before any gang is broken if it still
                # has extras, else as a gang.
                _, more = tasks_to_evict(ssn, job, self.claimed)
                heapq.heappush(heap, (0 if more else 1, rkey, next(self.pool.seq), job))
            rows = [ssn.nodes.index.get(t.node, -1) for t in tasks]
            return Chunk(job, tasks, rows)


# -- scheduling signatures ----------------------------------------------------------------------------


def signature(job: PodGroupInfo) -> tuple[Any, ...]:
    """What decides where a job may go, apart from how much it asks for (resource requests excluded)."""
    pods = frozenset(
        (p.node_selector, p.required_affinity, p.tolerations, p.priority_class_name)
        for p in job.pods
        if p.status in (PodStatus.PENDING, PodStatus.GATED)
    )
    leaves = tuple(sorted((s.name, s.topology) for s in job.leaves))
    return (job.topology, leaves, job.priority, pods)


def _size(job: PodGroupInfo) -> tuple[int, tuple[float, ...]]:
    pending = [p for p in job.pods if p.status is PodStatus.PENDING]
    smallest = min((tuple(sorted(p.requests.amounts.items())) for p in pending), default=())
    return len(pending), tuple(v for _, v in smallest)  # type: ignore[misc]


class Signatures:
    """The smallest failed job per (scope, signature); a later look-alike is skipped unless easier."""

    def __init__(self) -> None:
        self.failed: dict[tuple[str, tuple[Any, ...]], tuple[int, tuple[float, ...]]] = {}

    def skip(self, scope: str, job: PodGroupInfo) -> bool:
        seen = self.failed.get((scope, signature(job)))
        if seen is None:
            return False
        count, smallest = _size(job)
        return not (count < seen[0] or smallest < seen[1])

    def record(self, scope: str, job: PodGroupInfo) -> None:
        key = (scope, signature(job))
        size = _size(job)
        seen = self.failed.get(key)
        if seen is None or size < seen:
            self.failed[key] = size


# -- the solver ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    ok: bool
    reason: str = ""  # why the last rejected scenario was rejected (for messages)
    budget: str = ""  # set when the disruption budget stopped an eviction


def _gpu_feasible(free: np.ndarray, needs: list[float]) -> bool:
    """A necessary condition: whole-GPU tasks fit the free GPUs per node (sound for equal requests)."""
    needs = [g for g in needs if g > EPS]
    if not needs:
        return True
    if free.size == 0:
        return False
    if float(free.max()) < max(needs) - EPS or float(free.sum()) < sum(needs) - EPS:
        return False
    smallest = min(needs)
    return float(np.floor(free / smallest + EPS).sum()) >= len(needs)


class Solver:
    def __init__(
        self,
        ssn: Session,
        action: str,
        job: PodGroupInfo,
        picker: VictimPicker,
        *,
        replace_victims: bool,
        require_replaced: bool,
        message: Callable[[PodInfo, PodGroupInfo], str],
    ) -> None:
        self.ssn = ssn
        self.action = action
        self.job = job
        self.picker = picker
        self.replace_victims = replace_victims
        self.require_replaced = require_replaced
        self.message = message
        self.stmt = Statement(ssn)
        self.reason = ""
        self.budget = ""
        self.gpu_col = ssn.nodes.gpu_col
        self._base: tuple[float, np.ndarray, np.ndarray, float] | None = None  # GPU check cache
        self.policy_rejected = False  # the last trial failed a validator (not placement)

    # -- cheap filters ----------------------------------------------------------------------------
    def _free_gpus(self, chunks: list[Chunk]) -> np.ndarray:
        nodes = self.ssn.nodes
        free = nodes.idle[:, self.gpu_col] + nodes.releasing[:, self.gpu_col]
        if chunks:
            free = free.copy()
            for chunk in chunks:
                for task, row in zip(chunk.tasks, chunk.rows, strict=True):
                    if row >= 0 and task.status in ACTIVE:
                        free[row] += self.ssn.vector(task)[self.gpu_col]
        return free[self.mask]

    def _feasible_with(self, chunks: list[Chunk], k: int) -> bool:
        """The GPU check for the first k tasks with `chunks` evicted. Equal requests (the common gang)
        take an O(changed nodes) path over cached per-node counts; others the vectorised check."""
        needs = self.needs[:k]
        g = needs[0] if needs else 0.0
        if g <= EPS or any(abs(x - g) > EPS for x in needs):
            return _gpu_feasible(self._free_gpus(chunks), needs)
        if self._base is None or self._base[0] != g:
            nodes = self.ssn.nodes
            free = nodes.idle[:, self.gpu_col] + nodes.releasing[:, self.gpu_col]
            fits = np.where(self.mask, np.floor(free / g + EPS), 0.0)
            self._base = (g, free, fits, float(fits.sum()))
        _, free, fits, total = self._base
        extra: dict[int, float] = {}
        for chunk in chunks:
            for task, row in zip(chunk.tasks, chunk.rows, strict=True):
                if row >= 0 and self.mask[row] and task.status in ACTIVE:
                    extra[row] = extra.get(row, 0.0) + float(self.ssn.vector(task)[self.gpu_col])
        for row, more in extra.items():
            total += float(np.floor((free[row] + more) / g + EPS)) - fits[row]
        return total >= len(needs) - EPS

    def _hopeless(self, tasks: list[PodInfo]) -> bool:
        nodes = self.ssn.nodes
        free = nodes.idle[:, self.gpu_col] + nodes.releasing[:, self.gpu_col] + self.picker.pool.evictable_gpu
        return not _gpu_feasible(free[self.mask], self.needs)

    # -- budget -------------------------------------------------------------------------------------
    def _check_budget(self, chunks: list[Chunk]) -> str:
        params = self.ssn.config.params
        ratio, per_queue = params.max_evicted_gpu_ratio, params.max_evicted_gpus_per_queue
        if ratio < 0 and per_queue < 0:
            return ""
        evicted = 0.0
        by_queue: dict[str, float] = {}
        for chunk in chunks:
            gpus = sum(task_gpus(self.ssn, t) for t in chunk.tasks)
            evicted += gpus
            by_queue[chunk.job.queue] = by_queue.get(chunk.job.queue, 0.0) + gpus
        if ratio >= 0 and evicted > ratio * self.requested + EPS:
            return (
                f"the disruption budget stopped it: making room would evict {evicted:g} GPUs for "
                f"{self.requested:g} requested, more than the ratio of {ratio:g} "
                f"(schedulerParams.maxEvictedToRequestedGpuRatio)"
            )
        if per_queue >= 0:
            for queue, gpus in sorted(by_queue.items()):
                already = self.ssn.evicted_gpus.get(queue, 0.0)
                if gpus > 0 and already + gpus > per_queue + EPS:
                    return (
                        f"the disruption budget stopped it: queue {queue} would lose {already + gpus:g} GPUs "
                        f"this cycle, more than {per_queue:g} (schedulerParams.maxEvictedGpusPerQueuePerCycle)"
                    )
        return ""

    # -- simulation ---------------------------------------------------------------------------------
    def _evict(self, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            for task in chunk.tasks:
                if task.status in ACTIVE:
                    self.stmt.evict(task, self.action, self.job.key, self.message(task, self.job))

    def _replace(self, chunks: list[Chunk]) -> set[str]:
        """Place evicted victims again (pipelined), job by job; a gang only if all of it fits."""
        replaced: set[str] = set()
        if not self.replace_victims:
            return replaced
        ssn, stmt = self.ssn, self.stmt
        for chunk in sorted(chunks, key=lambda c: ssn.job_key(c.job)):
            cp = stmt.checkpoint()
            if ssn.hooks.subset_nodes:
                # Node-set constraints (topology): the victim's gang through the framework's placement.
                moved = sorted((t for t in chunk.tasks if t.status is PodStatus.RELEASING), key=ssn.task_key)
                if not moved or place_tasks(ssn, stmt, chunk.job, moved, pipeline_only=True).ok:
                    replaced.update(t.key for t in chunk.tasks)
                else:
                    stmt.rollback(cp)
                continue
            done = True
            for task in sorted(chunk.tasks, key=ssn.task_key):
                if task.status is not PodStatus.RELEASING:
                    continue
                placement = find_node(ssn, task)
                if placement is None or not ssn.pre_predicate(task).ok:
                    done = False
                    break
                stmt.pipeline(task, ssn.nodes.names[placement.row])
            if done:
                replaced.update(t.key for t in chunk.tasks)
            else:
                stmt.rollback(cp)
        return replaced

    def _place(self, tasks: list[PodInfo], start: int, stop: int) -> int:
        """Place tasks[start:stop] one by one; returns how many of all tasks are placed."""
        ssn, stmt = self.ssn, self.stmt
        if ssn.hooks.subset_nodes:
            # Node-set constraints (topology): the first k tasks as one batch, the extras one at a time,
            # each through the framework's placement (its SubsetNodes hooks choose the domain).
            batches = [tasks[start:stop]] if start == 0 else [[t] for t in tasks[start:stop]]
            done = start
            for batch in batches:
                cp = stmt.checkpoint()
                if not place_tasks(ssn, stmt, self.job, batch).ok:
                    stmt.rollback(cp)
                    return done
                done += len(batch)
            return done
        for i in range(start, stop):
            task = tasks[i]
            if not ssn.pre_predicate(task).ok:
                return i
            placement = find_node(ssn, task)
            if placement is None:
                return i
            node = ssn.nodes.names[placement.row]
            if placement.pipelined:
                stmt.pipeline(task, node)
            else:
                stmt.allocate(task, node)
        return stop

    def _valid(self, chunks: list[Chunk], tasks: list[PodInfo], replaced: set[str]) -> bool:
        scenario = Scenario(self.action, self.job, tasks, self.tasks, chunks, replaced)
        if self.require_replaced and scenario.lost():
            self.reason = "not every moved pod could be placed again"
            return False
        budget = self._check_budget(chunks)
        if budget:
            self.budget = budget
            return False
        status = self.ssn.validate_scenario(self.action, scenario)
        if not status.ok:
            self.reason = status.message
            self.policy_rejected = True
            return False
        return True

    def _trial(self, recorded: list[Chunk], new: list[Chunk], k: int) -> int:
        """Evict `new`, place the job's first k tasks (and as many more as fit), place victims again,
        validate. Returns the number of tasks solved (0: rejected, state rolled back)."""
        stmt, tasks = self.stmt, self.tasks
        self.policy_rejected = False
        self.ssn.decisions.count("simulated", self.action)
        cp = stmt.checkpoint()
        self._evict(new)
        chunks = recorded + new
        if self._place(tasks, 0, k) < k:
            stmt.rollback(cp)
            return 0
        cp_k = stmt.checkpoint()
        placed = self._place(tasks, k, len(tasks))
        if self._valid(chunks, tasks[:placed], self._replace(chunks)):
            self.solved_cp = cp
            return placed
        if placed > k:
            stmt.rollback(cp_k)
            if self._valid(chunks, tasks[:k], self._replace(chunks)):
                self.solved_cp = cp
                return k
        stmt.rollback(cp)
        return 0

    def _prune(self, recorded: list[Chunk], group: list[Chunk], k: int, step: int) -> tuple[list[Chunk], int]:
        """The group worked: drop the chunks popped earlier on this node that turn out not to be needed
        (a later, larger victim may free enough alone). Leaves the state of the kept group's trial."""
        self.stmt.rollback(self.solved_cp)
        best = list(group)
        for chunk in group[:-1]:
            candidate = [c for c in best if c is not chunk]
            if self._feasible_with(candidate, k) and self._trial(recorded, candidate, k):
                best = candidate
                self.stmt.rollback(self.solved_cp)
        final = self._trial(recorded, best, k)
        if final:
            return best, final
        return group, self._trial(recorded, group, k)

    def solve(self) -> Outcome:
        ssn, job = self.ssn, self.job
        self.tasks = tasks = tasks_to_allocate(ssn, job)
        if not tasks:
            return Outcome(False)
        self.requested = sum(task_gpus(ssn, t) for t in tasks)
        for task in tasks:
            status = ssn.pre_predicate(task)
            if status.code is Code.UNRESOLVABLE:  # no eviction can help (e.g. larger than any node)
                return Outcome(False, status.message)
        mask = np.ones(len(ssn.nodes), dtype=bool)
        needs_gpu = all(t.needs_gpu for t in tasks)
        for t in {t.placement_signature: t for t in tasks}.values():
            mask &= filter_nodes(ssn, t)
        if not mask.any():
            return Outcome(False, "no node passes the job's predicates")
        self.mask = mask
        self.needs = [float(ssn.vector(t)[self.gpu_col]) for t in tasks]
        if needs_gpu and self._hopeless(tasks):
            return Outcome(False, "not enough GPUs even with every candidate victim evicted")
        n = len(tasks)
        recorded: list[Chunk] = []
        potential: dict[int, list[Chunk]] = {}  # node row -> popped chunks with pods there
        solved = 0
        if _gpu_feasible(self._free_gpus([]), self.needs[:1]):
            solved = self._trial(recorded, [], 1)
        while solved < n:
            if solved:
                self.stmt.rollback(self.solved_cp)
                self._evict(recorded)
            k = solved + 1
            step = 0
            while step == 0:
                chunk = self.picker.next_chunk()
                if chunk is None:
                    self.stmt.discard()
                    return Outcome(False, self.reason, self.budget)
                over = self._check_budget([*recorded, chunk])
                if over:
                    self.budget = over  # this chunk can never be part of an acceptable scenario
                    ssn.decisions.count("filtered", self.action)
                    continue
                rows = sorted(set(chunk.rows))
                for row in rows:
                    potential.setdefault(row, []).append(chunk)
                for row in rows:
                    # Only the chunks on this node (each evicted whole, wherever its pods are).
                    group = potential[row]
                    if not self._feasible_with(group, k):
                        ssn.decisions.count("filtered", self.action)
                        continue
                    step = self._trial(recorded, group, k)
                    if not step and self.policy_rejected:
                        # Fairness and min-runtime validators only get stricter with more victims: a chunk
                        # they refuse even alone can never be part of an acceptable scenario. Drop it, or it
                        # poisons every larger group on its nodes (a big gang popped before small jobs).
                        if len(group) > 1 and self._feasible_with([chunk], k):
                            step = self._trial(recorded, [chunk], k)
                            group = [chunk] if step else group
                        if not step and self.policy_rejected:
                            for r in rows:
                                potential[r] = [c for c in potential[r] if c is not chunk]
                            break
                    if step and len(group) > 1:
                        group, step = self._prune(recorded, group, k, step)
                    if step:
                        self.picker.state_changed()
                        self._base = None
                        recorded += group
                        taken = {id(c) for c in group}
                        for r in {r for c in group for r in c.rows}:
                            potential[r] = [c for c in potential.get(r, []) if id(c) not in taken]
                        break
            solved = step
        self._finish(recorded)
        return Outcome(True)

    def _finish(self, recorded: list[Chunk]) -> None:
        ssn, job, stmt = self.ssn, self.job, self.stmt
        if leaf_short_of_allocations(job) is not None:
            stmt.convert_to_pipelined(job.key)
        pods: dict[str, int] = {}
        for chunk in recorded:
            gpus = sum(task_gpus(ssn, t) for t in chunk.tasks)
            ssn.evicted_gpus[chunk.job.queue] = ssn.evicted_gpus.get(chunk.job.queue, 0.0) + gpus
            pods[chunk.job.key] = pods.get(chunk.job.key, 0) + len(chunk.tasks)
        for key, count in pods.items():
            note = victim_note(ssn, self.action, job, ssn.jobs[key], count)
            ssn.fit_errors[key] = Status(Code.UNSCHEDULABLE, "Evicted", note)
        stmt.commit()


def queue_details(ssn: Session, queue: str) -> str:
    """`queue q (quota ..., fair share ..., allocated ...)`, as the accounting plugin describes it."""
    if ssn.accounting is None:
        return f"queue {queue}"
    return ssn.accounting.describe_queue(queue)


def victim_note(ssn: Session, action: str, preemptor: PodGroupInfo, victim: PodGroupInfo, pods: int) -> str:
    """The victim pod group's message: who took its place, and where both queues stand."""
    what = "moved" if action == "consolidation" else "evicted"
    where = " to other nodes" if action == "consolidation" else ""
    text = (
        f"{action} {what} {pods} pod(s){where} to make room for {preemptor.key} of "
        f"{queue_details(ssn, preemptor.queue)}"
    )
    if victim.queue != preemptor.queue:
        text += f"; this job's {queue_details(ssn, victim.queue)}"
    return text + "."


# -- the action driver --------------------------------------------------------------------------------


def run_evicting_action(
    ssn: Session,
    action: str,
    preemptors: list[PodGroupInfo],
    victims: list[PodGroupInfo],
    *,
    queues: Callable[[PodGroupInfo], Callable[[str], bool]],
    jobs: Callable[[PodGroupInfo], Callable[[PodGroupInfo], bool]],
    message: Callable[[PodInfo, PodGroupInfo], str],
    replace_victims: bool = True,
    require_replaced: bool = False,
    max_victim_jobs: int | None = None,
    signature_scope: Callable[[PodGroupInfo], str] = lambda job: job.queue,
) -> None:
    """Pop pending jobs in fair order and try to make room for each by evicting victims."""
    if not preemptors or not victims:
        return
    queue = JobQueue(ssn, preemptors, ssn.config.queue_depth_per_action.get(action))
    pool = VictimPool(ssn, victims)
    signatures = Signatures() if ssn.config.params.use_scheduling_signatures else None
    while (job := queue.pop()) is not None:
        tasks = tasks_to_allocate(ssn, job)
        if not tasks:
            continue
        ssn.decisions.count("acted_on", action)
        if action == "preempt":
            ssn.decisions.count("preemption_attempts", action)
        if not ssn.check_preemptor(action, job, tasks).ok:
            continue
        scope = signature_scope(job)
        if signatures is not None and signatures.skip(scope, job):
            continue
        picker = pool.picker(action, job, queues(job), jobs(job), max_victim_jobs)
        had_allocated = job.count(ALLOCATED) > 0
        solver = Solver(
            ssn,
            action,
            job,
            picker,
            replace_victims=replace_victims,
            require_replaced=require_replaced,
            message=message,
        )
        outcome = solver.solve()
        if outcome.ok:
            ssn.decisions.count("scheduled", action)
            ssn.fit_errors.pop(job.key, None)
            if not had_allocated and any(t.status is PodStatus.ALLOCATED for t in job.pods):
                ssn.decisions.last_start[job.key] = ssn.now
            if job.has_pending():
                queue.push(job)
            continue
        if signatures is not None and not outcome.budget:
            signatures.record(scope, job)
        if outcome.budget:
            previous = ssn.fit_errors.get(job.key)
            text = f"{action} could not make room for this job: {outcome.budget}."
            if previous is not None and previous.message and "disruption budget" not in previous.message:
                text = f"{previous.message} {text}"
            ssn.record_fit_error(job, Status(Code.UNSCHEDULABLE, "DisruptionBudget", text))
