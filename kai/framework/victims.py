"""The victim solver shared by consolidation, reclaim and preempt (kai/actions/NOTES.md).

For one pending job it looks for a small set of running pods whose eviction lets the job's gang
start. Everything is simulated inside one Statement: victims are evicted, the job is placed (on the
resources they release, i.e. pipelined), victims are placed again elsewhere when they can be, and
the action's validators (session hooks) judge the result. The job grows one task at a time (KAI's
"partial jobs"); victims found for the first k tasks are kept while looking for task k+1 ("recorded
victims": every chunk with a pod not back where it was), and for every k the victim queue is walked
from its first victim again, the recorded ones left out. The first k that finds no solution ends the
search.

Victims come from a `VictimPicker` (kai/framework/victimpool.py) in victim order (least deserving
queue first, then lowest priority / newest job first; elastic extras before any gang is broken).
Each pop adds a *chunk*: one elastic extra pod, or a whole gang. A newly popped chunk is tried node
by node: for each node it touches, only the chunks that sit on that node are evicted, so that pods
scattered over the cluster are not all killed to free one node. A gang victim is always evicted whole.

Cheap filters run before any simulation: the nodes the job may use at all (predicates), and a GPU
count check over idle + releasing + freed GPUs, so that hopeless jobs cost little. Scheduling
signatures skip a job that looks like one that already failed in this action.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kai.framework.causes import note_action_failure
from kai.framework.jobqueue import FixedJobs, JobQueue, SimulationQueue
from kai.framework.placement import (
    filter_nodes,
    find_node,
    place_tasks,
    tasks_to_allocate,
)
from kai.framework.session import EPS, NodeSubset, Session
from kai.framework.statement import Statement
from kai.framework.status import Code, Status
from kai.framework.victimpool import Candidate, Chunk, VictimPicker, task_gpus, tasks_to_evict, victim_pool
from kai.model import ACTIVE, ALLOCATED, PodGroupInfo, PodInfo, PodStatus, SubGroupInfo

__all__ = ["Chunk", "Scenario", "Signatures", "run_evicting_action", "stand_in", "task_gpus", "tasks_to_evict"]


def _gang_whole(job: PodGroupInfo) -> bool:
    """Whether every leaf of the job runs none of its pods or at least its minMember."""
    return all(not 0 < sub.active() < sub.min_member for sub in job.leaves)


@dataclass(slots=True)
class Scenario:
    """What a validator judges: the preemptor's placed tasks and the victims evicted for them."""

    action: str
    preemptor: PodGroupInfo
    tasks: list[PodInfo]  # preemptor tasks placed in this scenario
    batch: list[PodInfo]  # the whole batch the job needs this attempt
    chunks: list[Chunk]
    replaced: set[str] = field(default_factory=set)  # keys of victim pods placed again (anywhere)
    returned: set[str] = field(default_factory=set)  # keys of victim pods back where they were (not moved)

    def victims(self) -> list[PodInfo]:
        return [t for c in self.chunks for t in c.tasks]

    def lost(self) -> list[PodInfo]:
        """Victim pods that end the scenario without a place (really evicted)."""
        return [t for t in self.victims() if t.key not in self.replaced]

    def moved(self) -> list[PodInfo]:
        """Victim pods evicted in the end: lost, or placed again on another node."""
        return [t for t in self.victims() if t.key not in self.returned]


# -- victim simulation --------------------------------------------------------------------------------


_STAND_INS = itertools.count()  # a fresh name for every stand-in: plugins cache per job name


def stand_in(job: PodGroupInfo, tasks: list[PodInfo], suffix: str) -> PodGroupInfo:
    """A job made of `tasks` only, all pending, each leaf's minMember the number of its tasks: how a
    victim job (its evicted pods) or a partial preemptor (its first k tasks) enters the queue and job
    order of an eviction simulation. Its name differs from the job's so that no cache mixes the two."""
    copy = PodGroupInfo(
        job.namespace,
        f"{job.name}{suffix}",
        job.uid,
        job.queue,
        job.creation,
        job.priority,
        job.priority_class_name,
        job.preemptible,
        len(tasks),
        {},
        job.topology,
        job.last_start,
    )
    for task in tasks:
        sub = copy.subgroups.get(task.subgroup)
        if sub is None:
            sub = copy.subgroups[task.subgroup] = SubGroupInfo(task.subgroup, 0)
        pod = task.clone()
        pod.status = PodStatus.PENDING
        sub.pods.append(pod)
        sub.min_member += 1
    return copy


def _short_of_minimum(rep: PodGroupInfo, job: PodGroupInfo) -> None:
    """Give a victim's stand-in (its evicted pods) each leaf's minMember less what the job still runs
    there: its next batch is then what KAI's simulation allocates for it, and what its queue is ranked by."""
    for name, sub in rep.subgroups.items():
        own = job.subgroups.get(name)
        if own is not None:
            sub.min_member = max(0, own.min_member - own.active())


def _too_big_for(ssn: Session) -> Callable[[PodGroupInfo], bool]:
    """Whether a job's next batch asks for more than the usable nodes have idle or being released now."""
    nodes = ssn.nodes
    free = (nodes.idle + nodes.releasing)[nodes.usable].sum(axis=0)

    def too_big(job: PodGroupInfo) -> bool:
        need = sum((ssn.vector(t) for t in tasks_to_allocate(ssn, job)), np.zeros(len(free)))
        return bool((need > free + EPS).any())

    return too_big


# -- scheduling signatures ----------------------------------------------------------------------------


def signature(job: PodGroupInfo) -> tuple[Any, ...]:
    """What decides where a job may go, apart from how much it asks for (resource requests excluded)."""
    pods = frozenset(
        (p.placement_signature, p.priority_class_name)  # selector, affinities, tolerations, host ports, claims
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


class _Potential:
    """The popped chunks not yet recorded, per node row they have pods on, and, per row whose chunks all
    sit on that row alone, the GPUs they would free there (summed chunk by chunk in pop order, as the
    GPU check sums them), so that a pop's check costs O(1) instead of a walk over the row's chunks."""

    __slots__ = ("chunks", "freed", "mask", "seq", "spread")

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = mask
        self.chunks: dict[int, list[Chunk]] = {}  # node row -> popped chunks with pods there
        self.freed: dict[int, float] = {}  # row -> GPUs its (single-row) chunks' active pods free there
        self.spread: set[int] = set()  # rows with a chunk whose pods are on more than one row
        self.seq: dict[int, int] = {}  # id of every popped chunk -> its place in pop order

    def around(self, rows: list[int]) -> list[Chunk] | None:
        """The chunks on any of these rows, once each, in pop order: every row's chunks (a row's group)
        are among them, in the same order (None: some were popped before pops were numbered)."""
        found: dict[int, Chunk] = {}
        chunks = self.chunks
        for row in rows:
            for chunk in chunks[row]:
                found[id(chunk)] = chunk
        if len(found) == 1:
            return list(found.values())
        seq = self.seq
        if any(key not in seq for key in found):
            return None
        return sorted(found.values(), key=lambda c: seq[id(c)])

    def add(self, chunk: Chunk, rows: list[int]) -> None:
        chunks = self.chunks
        for row in rows:
            chunks.setdefault(row, []).append(chunk)
        if len(rows) > 1:
            self.spread.update(rows)
            return
        row = rows[0]
        if row >= 0 and self.mask.item(row):
            freed = self.freed
            for task, gpus in zip(chunk.tasks, chunk.gpus, strict=True):
                if task.status in ACTIVE:
                    freed[row] = freed.get(row, 0.0) + gpus

    def keep(self, rows: Iterable[int], keep: Callable[[Chunk], bool]) -> None:
        """Keep only the chunks `keep` holds true for on these rows (their sums taken again)."""
        chunks, freed, spread, mask = self.chunks, self.freed, self.spread, self.mask
        for row in rows:
            left = chunks[row] = [c for c in chunks.get(row, []) if keep(c)]
            freed.pop(row, None)
            spread.discard(row)
            if any(len(set(c.rows)) > 1 for c in left):
                spread.add(row)
            elif row >= 0 and mask.item(row):
                for chunk in left:
                    for task, gpus in zip(chunk.tasks, chunk.gpus, strict=True):
                        if task.status in ACTIVE:
                            freed[row] = freed.get(row, 0.0) + gpus


_UNSET = "\x00unset"  # a reason or budget message a trial did not set (no real message is this)


@dataclass(slots=True)
class _Tried:
    """A walk's failed trial: its chunks (kept alive, so that their ids stay theirs), and what it left in
    the solver's reason, budget message (`_UNSET`: left as it was) and validator verdict."""

    chunks: tuple[Chunk, ...]
    reason: str
    budget: str
    policy_rejected: bool


class Solver:
    # Whether a simulation stops as soon as the job's first k tasks no longer have room anywhere (see
    # `_simulate`); a switch only so that tests can compare the shortcut with the full simulation.
    stop_when_job_cannot_fit = True
    # Whether a walk answers a trial of chunks it already tried from that trial's answer (see
    # `_trial_once`); a switch only so that tests can compare the shortcut with every trial simulated.
    reuse_tried = True
    # Whether a simulation skips the PlacementPossible check after a victim placed only on nodes that had
    # no room for one of the job's tasks (see `_took_room`); a switch only for tests.
    skip_idle_watch = True
    # Whether a chunk on several rows is first GPU-checked with the chunks of all its rows evicted, which
    # fails when every row's own check would (see `solve`); a switch only for tests.
    check_around = True

    def __init__(
        self,
        ssn: Session,
        action: str,
        job: PodGroupInfo,
        picker: VictimPicker,
        *,
        require_replaced: bool,
        message: Callable[[PodInfo, PodGroupInfo], str],
    ) -> None:
        self.ssn = ssn
        self.action = action
        self.job = job
        self.picker = picker
        self.require_replaced = require_replaced
        self.message = message
        self.stmt = Statement(ssn)
        self.reason = ""
        self.budget = ""
        self.gpu_col = ssn.nodes.gpu_col
        # GPU check cache: (GPUs per task, free per node, whole tasks per node, their total).
        self._base: tuple[float, np.ndarray, np.ndarray, float] | None = None
        self.equal_upto = 0  # the first `equal_upto` tasks ask for the same number of GPUs
        params = ssn.config.params
        self.budget_on = params.max_evicted_gpu_ratio >= 0 or params.max_evicted_gpus_per_queue >= 0
        self.policy_rejected = False  # the last trial failed a validator (not placement)
        self.filtered = 0  # pops the GPU check filtered, not yet counted in the session's decisions
        self._others: FixedJobs | None = None
        self.feasible: np.ndarray | None = None  # KAI's feasible nodes of the solve (None: every node)
        self.within: NodeSubset | None = None  # the current trial's: those and its victims' nodes

    # -- cheap filters ----------------------------------------------------------------------------
    def _free_gpus(self, chunks: list[Chunk]) -> np.ndarray:
        free = self._base_free()
        if chunks:
            free = free.copy()
            for chunk in chunks:
                for task, row, gpus in zip(chunk.tasks, chunk.rows, chunk.gpus, strict=True):
                    if row >= 0 and task.status in ACTIVE:
                        free[row] += gpus
        return free[self.mask]

    def _feasible_with(self, chunks: list[Chunk], k: int) -> bool:
        """The GPU check for the first k tasks with `chunks` evicted. Equal requests (the common gang)
        take an O(changed nodes) path over cached per-node counts; others the vectorised check."""
        g = self.needs[0] if k else 0.0
        if g <= EPS or k > self.equal_upto:
            return _gpu_feasible(self._free_gpus(chunks), self.needs[:k])
        if self._base is None or self._base[0] != g:
            self._gpu_base(g)
        _, free, fits, total = self._base  # type: ignore[misc]
        mask = self.mask
        if len(chunks) == 1 and len(chunks[0].tasks) == 1:  # the common pop: one pod on one node
            chunk = chunks[0]
            row = chunk.rows[0]
            if row >= 0 and mask.item(row) and chunk.tasks[0].status in ACTIVE:
                total += math.floor((free.item(row) + chunk.gpus[0]) / g + EPS) - fits.item(row)
            return total >= k - EPS
        extra: dict[int, float] = {}
        for chunk in chunks:
            for task, row, gpus in zip(chunk.tasks, chunk.rows, chunk.gpus, strict=True):
                if row >= 0 and mask.item(row) and task.status in ACTIVE:
                    extra[row] = extra.get(row, 0.0) + gpus
        for row, more in extra.items():
            total += math.floor((free.item(row) + more) / g + EPS) - fits.item(row)
        return total >= k - EPS

    def _gpu_base(self, g: float) -> tuple[float, np.ndarray, np.ndarray, float]:
        """Cache the free GPUs per node, how many tasks of `g` GPUs fit on each, and their total."""
        free = self._base_free()
        fits = np.where(self.mask, np.floor(free / g + EPS), 0.0)
        self._base = base = (g, free, fits, float(fits.sum()))
        return base

    def _flush_filtered(self) -> None:
        """Count the pops the GPU check filtered (counted in bulk: one counter update per trial)."""
        if self.filtered:
            self.ssn.decisions.count("filtered", self.action, self.filtered)
            self.filtered = 0

    def _base_free(self) -> np.ndarray:
        """Per node, GPUs idle or releasing, the unused and releasing portions of shared GPUs included."""
        nodes = self.ssn.nodes
        free = nodes.idle[:, self.gpu_col] + nodes.releasing[:, self.gpu_col]
        groups = self.ssn.gpus.groups
        if groups:
            free = free.copy()
            for row, node_groups in groups.items():
                for group in node_groups.values():
                    if not group.fully_releasing:
                        free[row] += max(0.0, 1.0 - group.used + group.releasing)
        return free

    def _hopeless(self, tasks: list[PodInfo]) -> bool:
        free = self._base_free() + self.picker.pool.evictable_gpu
        return not _gpu_feasible(free[self.mask], self.needs)

    # -- budget -------------------------------------------------------------------------------------
    def _check_budget(self, chunks: list[Chunk], returned: set[str]) -> str:
        params = self.ssn.config.params
        ratio, per_queue = params.max_evicted_gpu_ratio, params.max_evicted_gpus_per_queue
        if ratio < 0 and per_queue < 0:
            return ""
        evicted = 0.0
        by_queue: dict[str, float] = {}
        for chunk in chunks:
            gpus = sum(task_gpus(self.ssn, t) for t in chunk.tasks if t.key not in returned)
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
                    self.stmt.evict(task, self.action, self.job.key)  # the message is written on commit

    def _place_victim(self, job: PodGroupInfo, tasks: list[PodInfo]) -> bool:
        """Place evicted pods of a victim job again (pipelined), all of them or none."""
        ssn, stmt = self.ssn, self.stmt
        moved = sorted((t for t in tasks if t.status is PodStatus.RELEASING), key=ssn.task_key)
        if not moved:
            return True
        cp = stmt.checkpoint()
        if ssn.hooks.subset_nodes:
            # Node-set constraints (topology): the victim's gang through the framework's placement, on
            # the trial's feasible nodes (as KAI's simulation).
            if place_tasks(ssn, stmt, job, moved, pipeline_only=True, within=self.within).ok:
                return True
            stmt.rollback(cp)
            return False
        for task in moved:
            placement = find_node(ssn, task)
            if placement is None or not ssn.pre_predicate(task).ok:
                stmt.rollback(cp)
                return False
            stmt.pipeline(task, ssn.nodes.names[placement.row])
        return True

    def _place(self, tasks: list[PodInfo], start: int, stop: int) -> int:
        """Place tasks[start:stop] one by one, pipelined (a preemptor never binds in the action that
        made room for it); returns how many of all tasks are placed."""
        ssn, stmt = self.ssn, self.stmt
        if ssn.hooks.subset_nodes:
            # Node-set constraints (topology): the first k tasks as one batch, the extras one at a time,
            # each through the framework's placement (its SubsetNodes hooks choose the domain).
            batches = [tasks[start:stop]] if start == 0 else [[t] for t in tasks[start:stop]]
            done = start
            for batch in batches:
                cp = stmt.checkpoint()
                if not place_tasks(ssn, stmt, self.job, batch, pipeline_only=True, within=self.within).ok:
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
            stmt.pipeline(task, ssn.nodes.names[placement.row])
        return stop

    def _simulate(self, chunks: list[Chunk], k: int) -> tuple[set[str], set[str]] | None:
        """With `chunks` evicted, allocate the job's first k tasks and the victim jobs again, in the
        session's queue and job order (pipeline-only), each after its own queue's capacity check. A
        victim that finds no place stays evicted; if the job finds none, the scenario fails (None).
        Ordering by the session's queues is what keeps reclaim and allocate from undoing each other:
        when a victim's queue would win the freed resources back, it takes them here, and the job does
        not fit. Returns the keys of victim pods placed again, and of those back where they were."""
        ssn = self.ssn
        by_job: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            by_job.setdefault(chunk.job.key, []).append(chunk)
        units: dict[int, str] = {}
        me = stand_in(self.job, self.tasks[:k], f"\x00sim{next(_STAND_INS)}")
        units[id(me)] = ""
        reps = [me]
        for key, group in by_job.items():
            moved = [t for c in group for t in c.tasks if t.status is PodStatus.RELEASING]
            if not moved:
                continue
            rep = stand_in(group[0].job, moved, f"\x00sim{next(_STAND_INS)}")
            _short_of_minimum(rep, group[0].job)
            units[id(rep)] = key
            reps.append(rep)
        # Every other pending job of the session takes its place in the order too, as in KAI: it is
        # never placed here, but while it heads its queue it is what that queue is ranked by (a queue
        # whose first pending job is large ranks behind a victim's queue, which then wins the room back).
        # (The preemptor and the victims' own jobs are left out: their stand-ins take their place.)
        others = self._pending_others()
        defer = None
        if ssn.config.params.defer_oversized_jobs:
            # The opt-in `deferOversizedJobs`: a job that cannot start on what is free does not stand for
            # its queue here either (as in allocate, which sets it aside).
            too_big = _too_big_for(ssn)
            defer = lambda: too_big  # noqa: E731
        order = SimulationQueue(ssn, others, reps, leave_out={self.job.key, *by_job}, defer_for_pop=defer)
        replaced: set[str] = set()
        # Until the job's turn, victims placed again only take room (a rolled-back placement leaves it as
        # it was): once the PlacementPossible hooks see no room for the job's first k tasks, its own turn
        # would fail, and the simulation fails now rather than after placing the victims still ahead of it.
        watch = self.stop_when_job_cannot_fit and bool(ssn.hooks.placement_possible)
        floor = self._task_floor(k) if watch and self.skip_idle_watch else None
        while (rep := order.pop()) is not None:
            key = units[id(rep)]
            if not key:
                if not ssn.check_job_capacity(self.job, self.tasks[:k]).ok or self._place(self.tasks, 0, k) < k:
                    return None
                watch = False
                continue
            # As KAI allocates a victim job in its simulation: its next batch only (what brings each leaf
            # back to minMember, or one more pod), all of it or none; the rest of its evicted pods stay so.
            victim = by_job[key][0].job
            wanted = {t.key for t in tasks_to_allocate(ssn, rep)}
            batch = [t for c in by_job[key] for t in c.tasks if t.key in wanted and t.status is PodStatus.RELEASING]
            if not batch or not ssn.check_job_capacity(victim, batch).ok:
                continue
            cp = self.stmt.checkpoint()
            if not self._place_victim(victim, batch):
                continue
            if not _gang_whole(victim):
                # An extra placed again while the rest of its gang stays evicted would run the gang
                # below its minMember: the job's victims stay evicted together.
                self.stmt.rollback(cp)
                continue
            replaced.update(t.key for t in batch)
            took = watch and (floor is None or self._took_room(cp, floor))
            if took and not ssn.placement_possible(self.job, self.tasks[:k]):
                return None
        returned: set[str] = set()
        nodes = ssn.nodes
        for chunk in chunks:
            for task, row, groups in zip(chunk.tasks, chunk.rows, chunk.groups, strict=True):
                home = row >= 0 and nodes.index.get(task.node) == row and task.gpu_groups == groups
                if home and task.key in replaced:
                    returned.add(task.key)
        return replaced, returned

    def _task_floor(self, k: int) -> np.ndarray | None:
        """The request of the job's first k tasks when they all ask for the same (None otherwise), with the
        columns it asks for nothing in set to 0."""
        vectors = [self.ssn.vector(t) for t in self.tasks[:k]]
        first = vectors[0]
        if any(v is not first and not np.array_equal(v, first) for v in vectors):
            return None
        return np.where(first > EPS, first, 0.0)

    def _took_room(self, cp: int, floor: np.ndarray) -> bool:
        """Whether the pods the statement placed since `cp` went onto a node that had room for one of the
        job's tasks (all asking for `floor`) before them. When none did, no node's count of tasks it can
        hold changed, and the PlacementPossible answer is the one the simulation had before (for the
        topology hook, which counts whole tasks per node when the tasks ask for the same). Skipping the
        check is safe in any case: a simulation that goes on after its job lost its room fails at the
        job's own turn."""
        ssn = self.ssn
        nodes = ssn.nodes
        ops = self.stmt.ops
        before: dict[int, np.ndarray] = {}
        for i in range(cp, len(ops)):
            op = ops[i]
            row = op.row
            vec = ssn.vector(op.task)
            got = before.get(row)
            before[row] = (nodes.idle[row] + nodes.releasing[row] + vec) if got is None else got + vec
        asked = floor > 0
        need = floor[asked] * (1 - 1e-9) - 1e-6  # a node held a task unless it lacked one by a clear margin
        return any((free[asked] >= need).all() for free in before.values())

    def _feasible_nodes(self, recorded: list[Chunk], new: list[Chunk]) -> NodeSubset | None:
        """The nodes a trial's simulation may place the job and its victims on, as KAI's: the solve's
        feasible nodes and those of the trial's victims. Only with SubsetNodes hooks (topology), where
        the set decides the lowest domain the search starts from; otherwise every node (for jobs that
        all need GPUs the other nodes have no room for them anyway)."""
        if not self.ssn.hooks.subset_nodes or self.feasible is None:
            return None
        mask = self.feasible.copy()
        for chunk in (*recorded, *new):
            for row in chunk.rows:
                if row >= 0:
                    mask[row] = True
        return NodeSubset(mask, None, "feasible nodes")

    def _pending_others(self) -> FixedJobs:
        """The session's jobs with a pending pod, per leaf queue in job order (brought up to date once per
        solve: victims' pods become releasing, never pending, while it runs, and no other job's pod changes
        status). Read from the jobs that had pending pods when the session opened (every job with one now
        is among them, in the same order). The preemptor is among them: each simulation leaves it out."""
        if self._others is None:
            ssn = self.ssn
            others = ssn.state.get("pending jobs")  # kept for the session's later solves
            if others is None:
                others = ssn.state["pending jobs"] = FixedJobs(ssn, ssn.jobs_with_pending(), PodGroupInfo.has_pending)
            else:
                others.update()
            self._others = others
        return self._others

    def _valid(self, chunks: list[Chunk], tasks: list[PodInfo], replaced: set[str], returned: set[str]) -> bool:
        scenario = Scenario(self.action, self.job, tasks, self.tasks, chunks, replaced, returned)
        if self.require_replaced and scenario.lost():
            self.reason = "not every moved pod could be placed again"
            return False
        budget = self._check_budget(chunks, returned)
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
        """Evict `new`, allocate the job's first k tasks and the victims again (session order), then as
        many more of the job's tasks as fit (all of them: simulated again together); validate. Returns
        the number of tasks solved (0: rejected, state rolled back); `self.returned` names the victims
        back where they were."""
        stmt, tasks = self.stmt, self.tasks
        self.policy_rejected = False
        if not self.ssn.placement_possible(self.job, tasks[:k], (t for c in new for t in c.tasks)):
            self.ssn.decisions.count("filtered", self.action)  # the simulation could not place the job
            return 0
        self.ssn.decisions.count("simulated", self.action)
        self.within = self._feasible_nodes(recorded, new)
        cp = stmt.checkpoint()
        self._evict(new)
        cp_evicted = stmt.checkpoint()
        chunks = recorded + new
        outcome = self._simulate(chunks, k)
        if outcome is None:
            stmt.rollback(cp)
            return 0
        replaced, returned = outcome
        cp_k = stmt.checkpoint()
        n = len(tasks)
        placed = self._place(tasks, k, n) if k < n else k
        if placed == n > k:
            # The scenario that completes the job is, as in KAI, the simulation of all of its tasks with
            # the victims again in queue order (the job's later tasks then come before the victims that
            # rank after it, which may land elsewhere than beside the greedy extras).
            stmt.rollback(cp_evicted)
            whole = self._simulate(chunks, n)
            if whole is not None and self._valid(chunks, tasks, *whole):
                self.solved_cp, self.solved_chunks, (self.replaced, self.returned) = cp, chunks, whole
                return n
            stmt.rollback(cp_evicted)
            outcome = self._simulate(chunks, k)  # the first k tasks only, as before
            if outcome is None:
                stmt.rollback(cp)
                return 0
            replaced, returned = outcome
            placed = k
        if self._valid(chunks, tasks[:placed], replaced, returned):
            self.solved_cp, self.solved_chunks, self.replaced, self.returned = cp, chunks, replaced, returned
            return placed
        if placed > k:
            stmt.rollback(cp_k)
            if self._valid(chunks, tasks[:k], replaced, returned):
                self.solved_cp, self.solved_chunks, self.replaced, self.returned = cp, chunks, replaced, returned
                return k
        stmt.rollback(cp)
        return 0

    def _trial_once(self, tried: dict[tuple[int, ...], _Tried], recorded: list[Chunk], new: list[Chunk], k: int) -> int:
        """`_trial`, unless this walk already tried the same chunks: a walk's trials all start from the
        same state (the recorded victims evicted, the rest rolled back) with the same k, and a trial is a
        function of that state, its chunks and k, so a repeat fails as the first did (a success ends the
        walk), with the same reason, budget message and validator verdict left behind. A gang spread over
        several nodes is offered once for each of its nodes, often alone there: the same trial again."""
        if not self.reuse_tried:
            return self._trial(recorded, new, k)
        key = tuple(map(id, new))
        seen = tried.get(key)
        if seen is not None:
            self.ssn.decisions.count("filtered", self.action)  # answered without a simulation
            self.policy_rejected = seen.policy_rejected
            if seen.reason is not _UNSET:
                self.reason = seen.reason
            if seen.budget is not _UNSET:
                self.budget = seen.budget
            return 0
        reason, budget = self.reason, self.budget
        self.reason = self.budget = _UNSET
        step = self._trial(recorded, new, k)
        if not step:
            tried[key] = _Tried(tuple(new), self.reason, self.budget, self.policy_rejected)
        if self.reason is _UNSET:
            self.reason = reason
        if self.budget is _UNSET:
            self.budget = budget
        return step

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
        # Nodes some task may use (each task is checked on its own when it is placed).
        mask = np.zeros(len(ssn.nodes), dtype=bool)
        needs_gpu = all(t.needs_gpu for t in tasks)
        for t in {t.placement_signature: t for t in tasks}.values():
            fits = filter_nodes(ssn, t)
            if not fits.any():
                return Outcome(False, "no node passes the job's predicates")
            mask |= fits
        self.mask = mask
        usable = mask.tolist()  # the same, as Python booleans (read at every pop)
        # KAI's feasible nodes: with every task needing GPUs, the nodes with idle or releasing GPUs now
        # (each trial adds its victims' nodes); otherwise every node (None).
        # (Only the topology plugin's SubsetNodes hooks read it.)
        if needs_gpu and ssn.hooks.subset_nodes:
            nodes = ssn.nodes
            self.feasible = nodes.idle[:, self.gpu_col] + nodes.releasing[:, self.gpu_col] > EPS
        self.needs = [float(ssn.vector(t)[self.gpu_col]) for t in tasks]
        first = self.needs[0]
        self.equal_upto = next((i for i, x in enumerate(self.needs) if abs(x - first) > EPS), len(self.needs))
        if needs_gpu and self._hopeless(tasks):
            return Outcome(False, "not enough GPUs even with every candidate victim evicted")
        keep_share = ssn.config.params.reclaim_keeps_victim_share
        n = len(tasks)
        recorded: list[Chunk] = []
        self.returned: set[str] = set()
        self.replaced: set[str] = set()
        self.solved_chunks: list[Chunk] = []
        solved = 0  # a scenario without victims is never accepted for the first task
        around = [0, 0]  # GPU checks of a chunk's rows together that filtered it / that did not
        while solved < n:
            k = solved + 1
            step = 0
            if solved:
                self.stmt.rollback(self.solved_cp)
                self._evict(recorded)
                if recorded:  # the victims found so far may be enough (a scenario needs a victim)
                    step = self._trial(recorded, [], k)
                if not step:
                    # As KAI, a fresh victim queue for every partial job: the walk starts again from the
                    # first victim, the recorded ones left out (their jobs come back for their other pods),
                    # and the chunks popped for earlier tasks are candidates again.
                    self.picker = self.picker.restart(recorded)
            # Popped chunks not yet recorded, per node (rebuilt from this walk's pops only).
            potential = _Potential(mask)
            tried: dict[tuple[int, ...], _Tried] = {}  # this walk's failed trials, by their chunks
            pot_chunks, pot_freed, pot_seq = potential.chunks, potential.freed, potential.seq
            track = False  # whether pops are numbered in `pot_seq` yet
            # Equal whole-GPU requests (the common gang): a pop's GPU check reads the row's running sum.
            g = self.needs[0]
            fast = g > EPS and k <= self.equal_upto
            next_chunk, spread = self.picker.next_chunk, potential.spread
            if fast:  # _gpu_base's total, free GPUs and whole tasks per node, as Python numbers
                base = self._base
                if base is None:
                    base = self._gpu_base(g)
                fits_total, free_at, fits_at = base[3], base[1].tolist(), base[2].tolist()
            need, budget_on, floor = k - EPS, self.budget_on, math.floor
            while step == 0:
                chunk = next_chunk()
                if chunk is None:
                    # KAI stops at the first partial job it cannot solve (the job is not solved).
                    self._flush_filtered()
                    self.stmt.discard()
                    return Outcome(False, self.reason, self.budget)
                if budget_on:
                    over = self._check_budget([*recorded, chunk], set())
                    if over:
                        self.budget = over  # this chunk can never be part of an acceptable scenario
                        self.filtered += 1
                        continue
                if track:
                    pot_seq[id(chunk)] = len(pot_seq)
                rows = chunk.rows
                checked = False  # the one row's GPU check passed already
                if len(rows) == 1 and len(chunk.tasks) == 1:  # the common pop: one pod on one node
                    row = rows[0]
                    on_row = pot_chunks.get(row)
                    if on_row is None:
                        pot_chunks[row] = [chunk]
                    else:
                        on_row.append(chunk)
                    more = None
                    if row >= 0 and usable[row] and chunk.tasks[0].status in ACTIVE:
                        more = pot_freed[row] = pot_freed.get(row, 0.0) + chunk.gpus[0]
                    if fast and row >= 0 and row not in spread:
                        # The GPU check of the loop below, at once (most pops end here).
                        if more is None:
                            more = pot_freed.get(row)
                        total = fits_total
                        if more is not None:
                            total = total + (floor((free_at[row] + more) / g + EPS) - fits_at[row])
                        if not total >= need:
                            self.filtered += 1
                            continue
                        checked = True
                else:
                    rows = rows if len(rows) == 1 else sorted(set(rows))
                    potential.add(chunk, rows)
                    if len(rows) > 1 and not track:
                        # Pop order is kept from the first chunk on several rows on (`around` needs it).
                        track = True
                        pot_seq[id(chunk)] = len(pot_seq)
                    if len(rows) > 1 and self.check_around and around[0] >= around[1]:
                        # Each of these rows' groups is part of the chunks on all of them (in the same order):
                        # with those evicted the job does not pass the GPU check, so with none of the groups.
                        # (Asked while it saves at least as often as it does not: a passed check is spent.)
                        together = potential.around(rows)
                        if together is not None and not self._feasible_with(together, k):
                            around[0] += 1
                            self.filtered += len(rows)
                            continue
                        around[1] += 1
                for row in rows:
                    if checked:
                        group = pot_chunks[row]
                    elif fast and row >= 0 and row not in spread:
                        total = fits_total
                        more = pot_freed.get(row)
                        if more is not None:
                            total = total + (floor((free_at[row] + more) / g + EPS) - fits_at[row])
                        if not total >= need:
                            self.filtered += 1
                            continue
                        group = pot_chunks[row]
                    else:
                        # Only the chunks on this node (each evicted whole, wherever its pods are).
                        group = pot_chunks[row]
                        if not self._feasible_with(group, k):
                            self.filtered += 1
                            continue
                    self._flush_filtered()
                    step = self._trial_once(tried, recorded, group, k)
                    if not step and keep_share and self.policy_rejected:
                        # Opt-in rule: with the victim's share kept, a chunk refused even alone can never
                        # be part of an acceptable scenario. Drop it, or it poisons every larger group on
                        # its nodes (a big gang popped before small jobs).
                        if len(group) > 1 and self._feasible_with([chunk], k):
                            step = self._trial_once(tried, recorded, [chunk], k)
                            group = [chunk] if step else group
                        if not step and self.policy_rejected:
                            potential.keep(rows, lambda c, chunk=chunk: c is not chunk)  # type: ignore[misc]
                            break
                    if step:
                        break
            self._base = None
            solved = step
            recorded = self._still_victims(self.solved_chunks)
        self._flush_filtered()
        self._finish(self.solved_chunks)
        return Outcome(True)

    def _still_victims(self, chunks: list[Chunk]) -> list[Chunk]:
        """The victims the next task's scenarios start from, as KAI records them: every chunk with a pod
        that does not end the scenario back where it was (evicted for good, or placed again on another
        node), whatever `allowConsolidatingReclaim` says (it only changes what the reclaim validator
        counts). A chunk placed back whole was never evicted: the next task's fresh walk offers it again
        in its turn."""
        returned = self.returned
        return [chunk for chunk in chunks if any(t.key not in returned for t in chunk.tasks)]

    def _finish(self, recorded: list[Chunk]) -> None:
        ssn, job, stmt = self.ssn, self.job, self.stmt
        returned = self.returned
        # Victims placed back on the node (and GPUs) they held were never really moved.
        for chunk in recorded:
            for task in chunk.tasks:
                if task.key in returned:
                    stmt.unevict(task)
        pods: dict[str, int] = {}
        for chunk in recorded:
            gone = [t for t in chunk.tasks if t.key not in returned]
            if not gone:
                continue
            gpus = sum(task_gpus(ssn, t) for t in gone)
            ssn.evicted_gpus[chunk.job.queue] = ssn.evicted_gpus.get(chunk.job.queue, 0.0) + gpus
            pods[chunk.job.key] = pods.get(chunk.job.key, 0) + len(gone)
        for key, count in pods.items():
            note = victim_note(ssn, self.action, job, ssn.jobs[key], count)
            ssn.fit_errors[key] = Status(Code.UNSCHEDULABLE, "Evicted", note)
        for op in stmt.ops:
            if op.kind == "evict" and not op.message:
                op.message = self.message(op.task, job)
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
    candidate: Candidate,
    *,
    queues: Callable[[PodGroupInfo], Callable[[str], bool]],
    jobs: Callable[[PodGroupInfo], Callable[[PodGroupInfo], bool] | None],
    message: Callable[[PodInfo, PodGroupInfo], str],
    require_replaced: bool = False,
    max_victim_jobs: int | None = None,
    signature_scope: Callable[[PodGroupInfo], str] = lambda job: job.queue,
) -> None:
    """Pop pending jobs in fair order and try to make room for each by evicting victims: jobs that pass
    the `candidate` rule, from the cycle's victim pool (shared by every action with the same rule), in
    the queues `queues(preemptor)` lets through, and of those the jobs `jobs(preemptor)` does (None:
    every job of those queues)."""
    if not preemptors:
        return
    pool = victim_pool(ssn, candidate, new_action=True)
    if not pool.key_of:
        return
    queue = JobQueue(ssn, preemptors, ssn.config.queue_depth_per_action.get(action))
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
        picker = victim_pool(ssn, candidate).picker(action, job, queues(job), jobs(job), max_victim_jobs)
        had_allocated = job.count(ALLOCATED) > 0
        solver = Solver(
            ssn,
            action,
            job,
            picker,
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
        note_action_failure(ssn, action, job, outcome.budget or outcome.reason)
        if outcome.budget:
            previous = ssn.fit_errors.get(job.key)
            text = f"{action} could not make room for this job: {outcome.budget}."
            if previous is not None and previous.message and "disruption budget" not in previous.message:
                text = f"{previous.message} {text}"
            ssn.record_fit_error(job, Status(Code.UNSCHEDULABLE, "DisruptionBudget", text))
