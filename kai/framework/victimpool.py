"""The victim pool of one scheduling cycle, shared by consolidation, reclaim and preempt, and the picker
that hands out victim chunks for one preemptor (kai/actions/NOTES.md).

The pool is built once per cycle, the first time an evicting action asks for it: the jobs that pass
the candidate rule, grouped by leaf queue, each group kept sorted in job order (victim order is its
reverse: lowest priority, then jobs above their minimum, then newest first). It listens to the
session's allocate / deallocate events; before the next preemptor's picker is made, the jobs whose pods
changed are re-ranked, dropped or added, so that every picker sees the cycle as it now is without the
pool being rebuilt or sorted again. Per node it keeps an upper bound of the GPUs candidates hold.

A picker walks the pool without copying it: one cursor per leaf queue, and a small heap per leaf of
jobs that came back re-ranked after giving up an elastic pod. It chooses the leaf down the queue tree
by the victim queue order (a session hook), each queue judged with the pods already picked from its
subtree removed (the hook keeps running sums of those lists, which only grow between solver steps).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kai.framework.session import Descending, Session, VictimQueueOrder
from kai.model import ACTIVE, GPU, PodGroupInfo, PodInfo, PodStatus, QueueInfo

# The rule that makes a job a candidate victim at all (preemptible, with allocated pods, ...).
Candidate = Callable[[Session, PodGroupInfo], bool]


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
    groups: list[tuple[str, ...]] = field(default_factory=list)  # GPU groups each task held
    gpus: list[float] = field(default_factory=list)  # GPUs each task counts as (task_gpus)


def tasks_to_evict(ssn: Session, job: PodGroupInfo, gone: set[int]) -> tuple[list[PodInfo], bool]:
    """One elastic extra from the last leaf (in leaf order) above its minMember, else the whole gang;
    and whether it is an extra. Pods whose id is in `gone` are treated as already evicted."""
    leaves = job.leaves if len(job.leaves) == 1 else sorted(job.leaves, key=ssn.subgroup_key, reverse=True)
    actives = [[p for p in sub.pods if p.status in ACTIVE and id(p) not in gone] for sub in leaves]
    for sub, active in zip(leaves, actives, strict=True):
        if len(active) > sub.min_member:
            return [max(active, key=ssn.task_key)], True
    return [p for active in actives for p in active], False


def _without(job: PodGroupInfo, gone: set[int]) -> PodGroupInfo:
    """A copy of the job as it is once the pods whose id is in `gone` have left (for its job order)."""
    keys = {p.key for p in job.pods if id(p) in gone}
    copy = job.clone()
    for pod in copy.pods:
        if pod.key in keys:
            pod.status = PodStatus.RELEASING
    return copy


_NOTHING: set[int] = set()


def victim_pool(ssn: Session, candidate: Candidate, *, new_action: bool = False) -> VictimPool:
    """The session's victim pool for this candidate rule: built on first use, brought up to date after
    (`new_action`: an evicting action starts, and the candidate rule is applied afresh)."""
    pools: dict[Candidate, VictimPool] = ssn.kept("victim pools", dict)
    pool = pools.get(candidate)
    if pool is None:
        pool = pools[candidate] = VictimPool(ssn, candidate)
    else:
        pool.refresh(strict=new_action)
    return pool


class VictimPool:
    """Candidate victim jobs of one cycle, per leaf queue in job order (victim order reversed)."""

    def __init__(self, ssn: Session, candidate: Candidate) -> None:
        self.ssn = ssn
        self.candidate = candidate
        self.extras_first = ssn.config.params.evict_elastic_extras_first
        self.jobs: dict[str, list[PodGroupInfo]] = {}  # per leaf queue, ascending job order
        self.keys: dict[str, list[tuple[Any, ...]]] = {}  # the sort keys of `jobs`, same positions
        self.key_of: dict[str, tuple[Any, ...]] = {}  # by job key, for every job in the pool
        self.held: dict[str, list[tuple[int, float]]] = {}  # by job key: (node row, GPUs) of its active pods
        self.orders = ssn.hooks.victim_queue_order
        self.chunks: dict[int, _First] = {}  # by id of the job: what it gives up first, nothing claimed yet
        self.dirty: set[str] = set()  # jobs whose pods changed since the last refresh
        self.kept: set[str] = set()  # jobs in the pool that no longer pass the rule (see `refresh`)
        keyed = [(self.sort_key(job, _NOTHING), job) for job in ssn.jobs.values() if candidate(ssn, job)]
        keyed.sort(key=lambda kj: kj[0])
        evictable = [0.0] * len(ssn.nodes)  # summed as floats, in the order `_hold` adds them
        for key, job in keyed:
            self.jobs.setdefault(job.queue, []).append(job)
            self.keys.setdefault(job.queue, []).append(key)
            self.key_of[job.key] = key
            self._hold(job, evictable)
        self.evictable_gpu = np.array(evictable, dtype=float)  # upper bound of GPUs candidates hold, per node
        ssn.hooks.on_allocate.append(self._changed)
        ssn.hooks.on_deallocate.append(self._changed)

    def _changed(self, task: PodInfo) -> None:
        self.dirty.add(task.job_key)

    def sort_key(self, job: PodGroupInfo, gone: set[int]) -> tuple[Any, ...]:
        """The job's place in job order (victims are taken from the end) once the pods in `gone` left."""
        key = self.ssn.job_key(_without(job, gone) if gone else job)
        if not self.extras_first:
            return key
        # Opt-in: jobs that still have pods above their minMember give those up before any gang breaks.
        extras = any(
            sum(1 for p in sub.pods if p.status in ACTIVE and id(p) not in gone) > sub.min_member for sub in job.leaves
        )
        return (1 if extras else 0, key)

    def _hold(self, job: PodGroupInfo, evictable: Any = None) -> None:
        """Note the (node row, GPUs) of the job's active pods and add them to the per-node bound
        (`evictable`: the list the pool is being built in, else the pool's array)."""
        ssn, held = self.ssn, []
        index = ssn.nodes.index
        if evictable is None:
            evictable = self.evictable_gpu
        for pod in job.pods:
            if pod.status in ACTIVE:
                row = index.get(pod.node)
                if row is not None:
                    gpu = pod.gpu
                    gpus = pod.requests.get(GPU) if not (gpu.is_shared or gpu.mig) else task_gpus(ssn, pod)
                    evictable[row] += gpus
                    held.append((row, gpus))
        self.held[job.key] = held

    def refresh(self, *, strict: bool) -> None:
        """Re-rank, drop or add the jobs whose pods changed (called between preemptors only). Within an
        action a job stays a candidate while it has active pods, as KAI has it: a victim placed again on
        another node (pipelined there) by an earlier preemptor's solution may be a victim again. When an
        action starts (`strict`), every job must pass the candidate rule again."""
        dirty = self.dirty
        if strict and self.kept:
            dirty |= self.kept
            self.kept = set()
        if not dirty:
            return
        ssn = self.ssn
        for key in dirty:
            job = ssn.jobs.get(key)
            old = self.key_of.pop(key, None)
            if old is not None:
                queue = self.held_queue(key, job)
                keys, jobs = self.keys[queue], self.jobs[queue]
                i = bisect.bisect_left(keys, old)
                if i >= len(jobs) or jobs[i].key != key:
                    i = next(j for j, other in enumerate(jobs) if other.key == key)
                del keys[i], jobs[i]
                for row, gpus in self.held.pop(key):
                    self.evictable_gpu[row] -= gpus
                if job is not None:
                    self.chunks.pop(id(job), None)
                self.kept.discard(key)
            if job is None:
                continue
            if self.candidate(ssn, job):
                pass
            elif not strict and old is not None and job.count(ACTIVE) > 0:
                self.kept.add(key)
            else:
                continue
            new = self.sort_key(job, _NOTHING)
            keys = self.keys.setdefault(job.queue, [])
            i = bisect.bisect_left(keys, new)
            keys.insert(i, new)
            self.jobs.setdefault(job.queue, []).insert(i, job)
            self.key_of[key] = new
            self._hold(job)
        self.dirty = set()

    def held_queue(self, key: str, job: PodGroupInfo | None) -> str:
        if job is not None:
            return job.queue
        return next(q for q, jobs in self.jobs.items() if any(j.key == key for j in jobs))

    def first_chunk(self, job: PodGroupInfo) -> _First:
        """What the job gives up first when none of its pods is claimed yet (cached until it changes)."""
        found = self.chunks.get(id(job))
        if found is None:
            tasks, extra = tasks_to_evict(self.ssn, job, _NOTHING)
            index = self.ssn.nodes.index
            rows = [index.get(t.node, -1) for t in tasks]
            gpus = [task_gpus(self.ssn, t) for t in tasks]
            chunk = Chunk(job, tasks, rows, [t.gpu_groups for t in tasks], gpus)  # handed out as it is
            per, sums = vectors(self.orders, tasks)
            # One hook, one pod, three numbers: the picker adds the pod's vector to the running sums inline.
            single = len(per) == 1 and len(per[0]) == 1 and len(per[0][0]) == 3
            top = (job.queue, tasks, extra, job, False, per, sums)  # what the picker's _top returns for it
            found = self.chunks[id(job)] = (tasks, extra, rows, per, sums, gpus, chunk, top, single)
        return found

    def picker(
        self,
        action: str,
        preemptor: PodGroupInfo,
        queues: Callable[[str], bool],
        jobs: Callable[[PodGroupInfo], bool] | None,
        max_jobs: int | None = None,
    ) -> VictimPicker:
        leaves = [q for q, js in self.jobs.items() if js and queues(q)]
        return VictimPicker(self, action, preemptor, leaves, jobs, max_jobs)


# A job that came back after giving up an elastic pod: (its new key reversed, sequence, job).
_Comeback = tuple[Descending, int, PodGroupInfo]
# Per VictimQueueOrder hook: each pod's vector, and their sum.
_Vectors = tuple[list[list[tuple[float, ...]]], list[tuple[float, ...]]]
# What a queue's subtree gives up next: (leaf, tasks, extra, job, from the comeback heap, pod vectors, sums).
_Found = tuple[str, list[PodInfo], bool, PodGroupInfo, bool, list[list[tuple[float, ...]]], list[tuple[float, ...]]]
# What a job gives up first: (tasks, extra, node rows, per-hook pod vectors, per-hook sums, GPUs per task,
# the chunk, the picker's _Found for it at its place in the leaf, whether it is one pod of one 3-number hook).
_First = tuple[
    list[PodInfo],
    bool,
    list[int],
    list[list[tuple[float, ...]]],
    list[tuple[float, ...]],
    list[float],
    Chunk,
    _Found,
    bool,
]


def vectors(orders: list[VictimQueueOrder], pods: list[PodInfo]) -> _Vectors:
    """Each pod's vector for every victim queue order hook, and their sums (added pod by pod)."""
    per: list[list[tuple[float, ...]]] = []
    sums: list[tuple[float, ...]] = []
    for order in orders:
        vecs = [order.vector(p) for p in pods]
        total = [0.0] * len(vecs[0]) if vecs else []
        for vec in vecs:
            for j, x in enumerate(vec):
                total[j] += x
        per.append(vecs)
        sums.append(tuple(total))
    return per, sums


def _add(removed: list[list[float]], per: list[list[tuple[float, ...]]]) -> None:
    """Add pod vectors (per hook) to a queue's running sums, pod by pod."""
    for sums, vecs in zip(removed, per, strict=True):
        for vec in vecs:
            if not sums:
                sums.extend(vec)
            elif len(vec) == 3:
                sums[0] += vec[0]
                sums[1] += vec[1]
                sums[2] += vec[2]
            else:
                for j, x in enumerate(vec):
                    sums[j] += x


class VictimPicker:
    """Hands out victim chunks for one preemptor: down the queue tree by the victim queue order (the
    reverse of the allocation queue order, each queue judged with the victims already picked from its
    subtree removed), then by reverse job order within the leaf.

    Every queue of the tree holds what its subtree gives up next (`cand`) and, once compared with a
    sibling, its key; a pop changes only the popped leaf's path, which is brought up to date leaf first
    (the siblings' keys stay as they were). Keys read the session's queue allocations, which the solver
    changes between pops, so every update waits for the next pop.

    With one victim queue order hook (the default configuration) the update after a pop is inlined, and
    a leaf's next job is read straight from the pool's cache when nothing about it is special (not
    recorded, not claimed, no comeback waiting); `shortcuts = False` takes the plain path instead (a
    switch only so that tests can compare the two)."""

    shortcuts = True

    def __init__(
        self,
        pool: VictimPool,
        action: str,
        preemptor: PodGroupInfo,
        leaves: list[str],
        jobs: Callable[[PodGroupInfo], bool] | None,
        max_jobs: int | None,
    ) -> None:
        ssn = pool.ssn
        self.pool = pool
        self.ssn = ssn
        self.action = action
        self.preemptor = preemptor
        self.jobs = jobs
        self.max_jobs = max_jobs
        self.seq = itertools.count()
        self.claimed: set[int] = set()  # ids of pods handed out as victims
        self.claimed_jobs: set[int] = set()  # ids of their jobs
        self.allowed: dict[int, bool] = {}  # by id of the job
        # Leaf queues that may give up victims to this preemptor at all (decided once), and the queue
        # tree above them ("" is the root).
        live = [q for q in leaves if ssn.victim_queue_allowed(action, preemptor, q)]
        self.pos: dict[str, int] = {leaf: len(pool.jobs[leaf]) for leaf in live}  # cursor: jobs[:pos] left
        self.back: dict[str, list[_Comeback]] = {leaf: [] for leaf in live}
        # Per leaf: the pool's job and key lists (the pool changes them only between pickers), its heap.
        self.lists = {leaf: (pool.jobs[leaf], pool.keys[leaf], self.back[leaf]) for leaf in live}
        self.children: dict[str, list[str]] = {}
        self.paths: dict[str, list[str]] = {}  # per leaf: the leaf and its ancestors, leaf first
        self.ups: dict[str, list[str]] = {}  # per leaf: its ancestors, then the root ""
        for leaf in live:
            path = [q.name for q in ssn.queue_path(leaf)]
            self.paths[leaf] = path
            self.ups[leaf] = [*path[1:], ""]
            parent = ""
            for name in reversed(path):
                kids = self.children.setdefault(parent, [])
                if name not in kids:
                    kids.append(name)
                parent = name
        self.handed: set[int] = set()  # ids of the jobs handed out (kept only when max_jobs counts them)
        self.orders = pool.orders
        self.key_fn = self.orders[0].key if len(self.orders) == 1 and self.shortcuts else None
        queues = [q for path in self.paths.values() for q in path]
        self.queue_info = {q: ssn.queues[q] for q in queues}
        # One order hook: per queue, its key as a function of (removed, next), asked for once.
        self.keyers = self._keyers() if self.key_fn is not None else {}
        # Per queue subtree and order hook: the running sum of the picked pods' vectors.
        self.removed: dict[str, list[list[float]]] = {q: [[] for _ in self.orders] for q in queues}
        self.removed_one = {q: sums[0] for q, sums in self.removed.items()} if len(self.orders) == 1 else {}
        self.path_sums = self._path_sums()
        self.firsts = pool.chunks  # the pool's cache of first chunks (the same dict for the pool's life)
        # Per leaf: each queue of its path with its parent (the root "" last), for the update after a pop.
        self.up_pairs = {leaf: list(zip(self.paths[leaf], up, strict=True)) for leaf, up in self.ups.items()}
        # One order hook: per parent queue, its children that still have something to give and their keys,
        # in key order, the parent's choice first (keys computed, as _choose computes them, only while two
        # or more are left to compare; a child alone has None).
        self.kid_keys: dict[str, tuple[list[Any], list[str]]] = {}
        self.steps: dict[str, list[tuple[Any, ...]]] = {}  # see _rebuild
        self.cand: dict[str, _Found | None] = {}  # per queue ("" the root): what its subtree gives next
        self.queue_keys: dict[str, tuple[Any, ...]] = {}  # per queue, while its `cand` and sums hold
        self.stale = True  # everything must be chosen again before the next pop
        self.changed: str | None = None  # or only the path of this leaf
        self.recorded_jobs: set[int] = set()  # ids of jobs with recorded victims, their place not yet reached

    def _keyers(self) -> dict[str, Callable[[list[float], tuple[float, ...]], Any]]:
        """Per queue, its key as a function of (removed, next). Two queues' keys never tie: the hook's
        `for_queue` keys promise it, others are made (key, queue name), the order `_choose` compares."""
        (order,) = self.orders
        if order.for_queue is not None:
            return {q: order.for_queue(info) for q, info in self.queue_info.items()}

        def named(info: QueueInfo, key: Callable[[QueueInfo, list[float], tuple[float, ...]], Any]) -> Any:
            return lambda removed, next_sum: (key(info, removed, next_sum), info.name)

        return {q: named(info, order.key) for q, info in self.queue_info.items()}

    def _path_sums(self) -> dict[str, list[list[float]]]:
        """With one order hook: per leaf, the running sums of the queues of its path (leaf first)."""
        removed_one = self.removed_one
        return {leaf: [removed_one[q] for q in path] for leaf, path in self.paths.items()} if removed_one else {}

    def restart(self, recorded: Iterable[Chunk]) -> VictimPicker:
        """A fresh walk of the pool for the same preemptor, from the first victim again (KAI builds the
        victim queue anew for every partial job): a new cursor per leaf, nothing picked yet. The pods of
        `recorded` (the victims kept from the tasks solved so far) are never handed out again: when the
        walk reaches a job that holds some, the job comes back ranked as it is without them, for its
        other pods (as KAI pushes back such a job with its pods that are not recorded)."""
        fresh = VictimPicker.__new__(VictimPicker)
        fresh.pool, fresh.ssn, fresh.action, fresh.preemptor = self.pool, self.ssn, self.action, self.preemptor
        fresh.jobs, fresh.max_jobs, fresh.seq = self.jobs, self.max_jobs, itertools.count()
        fresh.allowed = self.allowed  # the same preemptor: the same answers
        pool = self.pool
        fresh.pos = {leaf: len(pool.jobs[leaf]) for leaf in self.pos}
        fresh.back = {leaf: [] for leaf in self.pos}
        fresh.lists = {leaf: (pool.jobs[leaf], pool.keys[leaf], fresh.back[leaf]) for leaf in self.pos}
        fresh.children, fresh.paths, fresh.ups = self.children, self.paths, self.ups  # never changed
        fresh.handed, fresh.orders, fresh.key_fn = set(), self.orders, self.key_fn
        fresh.removed = {q: [[] for _ in self.orders] for q in self.removed}
        fresh.removed_one = {q: sums[0] for q, sums in fresh.removed.items()} if len(self.orders) == 1 else {}
        fresh.path_sums = fresh._path_sums()
        fresh.firsts = self.firsts
        fresh.queue_info, fresh.up_pairs, fresh.kid_keys = self.queue_info, self.up_pairs, {}
        fresh.keyers, fresh.steps = self.keyers, {}
        fresh.cand, fresh.queue_keys = {}, {}
        fresh.stale, fresh.changed = True, None
        fresh.claimed, fresh.claimed_jobs, fresh.recorded_jobs = set(), set(), set()
        for chunk in recorded:
            fresh.claimed.update(id(t) for t in chunk.tasks)
            fresh.claimed_jobs.add(id(chunk.job))
            fresh.recorded_jobs.add(id(chunk.job))
        return fresh

    def _rebuild(self) -> None:
        """Every queue's next victim, leaves first (children before their parents)."""
        cand = self.cand
        cand.clear()
        self.queue_keys.clear()
        for leaf in self.paths:
            cand[leaf] = self._top(leaf)
        key_fn, keyers = self.key_fn, self.keyers
        for name in reversed(self._post_order("")):
            if name not in self.children:
                continue
            if key_fn is None:
                self._choose(name)
                continue
            kids = [child for child in self.children[name] if cand[child] is not None]
            if len(kids) > 1:
                ranked = []
                for child in kids:
                    found = cand[child]
                    assert found is not None
                    ranked.append((keyers[child](self.removed_one[child], found[6][0]), child))
                ranked.sort()
                kids = [child for _, child in ranked]
                self.kid_keys[name] = ([key for key, _ in ranked], kids)
            else:
                self.kid_keys[name] = ([None] * len(kids), kids)
            cand[name] = cand[kids[0]] if kids else None
        if key_fn is not None:
            # Per leaf, each step up its path: (child, parent, the child's key function and running sums,
            # the parent's children's keys and names), read at every pop until the next rebuild.
            kid_keys, removed = self.kid_keys, self.removed_one
            self.steps = {
                leaf: [(child, name, keyers[child], removed[child], *kid_keys[name]) for child, name in pairs]
                for leaf, pairs in self.up_pairs.items()
            }

    def _post_order(self, name: str) -> list[str]:
        """The queue and its subtree, parents before children."""
        out = [name]
        for child in self.children.get(name, ()):
            out += self._post_order(child)
        return out

    def _choose(self, name: str) -> None:
        """The child whose subtree gives up the next victim: the smallest key among those with one (keys
        are computed only when there is something to compare, first child first). The plain path: with
        one order hook the parent's heap answers instead (see `next_chunk`)."""
        cand, keys = self.cand, self.queue_keys
        best: str | None = None
        best_key: tuple[Any, ...] | None = None
        for child in self.children[name]:
            found = cand[child]
            if found is None:
                continue
            if best is None:
                best = child
                continue
            if best_key is None:
                best_key = keys.get(best) or self._key(best)
            key = keys.get(child) or self._key(child)
            if key < best_key:
                best, best_key = child, key
        cand[name] = None if best is None else cand[best]
        keys.pop(name, None)

    def _key(self, name: str) -> tuple[Any, ...]:
        key = self.queue_keys.get(name)
        if key is None:
            found = self.cand[name]
            assert found is not None
            key = self.ssn.victim_queue_key(self.ssn.queues[name], self.removed[name], found[6])
            self.queue_keys[name] = key
        return key

    def _allowed(self, job: PodGroupInfo) -> bool:
        """Whether the job may be a victim of this preemptor at all (asked once per job, then kept)."""
        ssn = self.ssn
        allowed = job is not self.preemptor and (self.jobs is None or self.jobs(job))
        filters = ssn.hooks.victim_filters
        if allowed and len(filters) == 1:
            allowed = filters[0](self.action, self.preemptor, job)
        elif allowed:
            allowed = ssn.victim_allowed(self.action, self.preemptor, job)
        self.allowed[id(job)] = allowed
        return allowed

    def _top(self, leaf: str) -> _Found | None:
        """What the leaf queue's first job in victim order would give up next; jobs that may not be
        victims of this preemptor, or have nothing left to give, are passed over for good."""
        pool = self.pool
        jobs, keys, back = self.lists[leaf]
        allowed_of, claimed_jobs, chunks = self.allowed, self.claimed_jobs, pool.chunks
        while True:
            pos = self.pos[leaf]
            from_back = (pos == 0 or back[0][0].key > keys[pos - 1]) if back else False
            if from_back:
                job = back[0][2]
            elif pos:
                job = jobs[pos - 1]
            else:
                return None
            allowed = allowed_of.get(id(job))
            if allowed is None:
                allowed = self._allowed(job)
            if allowed and not from_back and id(job) in self.recorded_jobs:
                # A job with recorded victims, reached at its place in victim order: it comes back ranked
                # as it is without them, for what else it can give up.
                self.recorded_jobs.discard(id(job))
                self.pos[leaf] = pos - 1
                if tasks_to_evict(self.ssn, job, self.claimed)[0]:
                    heapq.heappush(back, (Descending(pool.sort_key(job, self.claimed)), next(self.seq), job))
                continue
            if allowed:
                if id(job) in claimed_jobs:
                    tasks, extra = tasks_to_evict(self.ssn, job, self.claimed)
                    per, sums = vectors(self.orders, tasks)
                else:
                    first = chunks.get(id(job)) or pool.first_chunk(job)
                    if first[0] and not from_back:
                        return first[7]
                    tasks, extra, _, per, sums, _, _, _, _ = first
                if tasks:
                    return leaf, tasks, extra, job, from_back, per, sums
            if from_back:
                heapq.heappop(back)
            else:
                self.pos[leaf] = pos - 1

    def next_chunk(self) -> Chunk | None:
        cand = self.cand
        if self.stale:
            self._rebuild()
            self.stale, self.changed = False, None
        elif self.changed is not None:
            # Only the last popped leaf's path changed: its next victim, then each ancestor's choice.
            leaf, self.changed = self.changed, None
            keys = self.queue_keys
            # _top, inlined for the common case: the leaf's next job in pool order, allowed, untouched.
            pos = self.pos[leaf]
            jobs, _, back = self.lists[leaf]
            found: _Found | None = None
            if pos and not back and self.shortcuts:
                job = jobs[pos - 1]
                job_id = id(job)
                allowed = self.allowed.get(job_id)
                if allowed is None:
                    allowed = self._allowed(job)
                if allowed and job_id not in self.claimed_jobs and job_id not in self.recorded_jobs:
                    first = self.firsts.get(job_id) or self.pool.first_chunk(job)
                    if first[0]:
                        found = first[7]
            cand[leaf] = found if found is not None else self._top(leaf)
            if self.key_fn is None:
                keys.pop(leaf, None)
                for name in self.ups[leaf]:
                    self._choose(name)
            else:
                # One order hook: each queue up the path gets its new key (or leaves its parent's children,
                # with nothing left), and the parent the smallest key among its children (as _choose). The
                # popped path's queue is its parent's first child (its choice) and the other children's keys
                # stay: it keeps its place when its new key is still below the second's, else it is ranked
                # again among the others.
                for child, name, keyer, sums, keys, kids in self.steps[leaf]:
                    found = cand[child]
                    if found is None:
                        del keys[0], kids[0]
                        cand[name] = cand[kids[0]] if kids else None
                    elif len(kids) > 1:
                        key = keyer(sums, found[6][0])
                        if key < keys[1]:
                            keys[0] = key
                            cand[name] = found
                        else:
                            del keys[0], kids[0]
                            i = bisect.bisect(keys, key)
                            keys.insert(i, key)
                            kids.insert(i, child)
                            cand[name] = cand[kids[0]]
                    else:  # alone: nothing to compare
                        cand[name] = found
        found = cand.get("")
        if found is None:
            return None
        leaf, tasks, extra, job, from_back, per, _ = found
        job_id = id(job)
        if self.max_jobs is not None and job_id not in self.handed:
            if len(self.handed) >= self.max_jobs:
                return None
            self.handed.add(job_id)
        if from_back:
            heapq.heappop(self.back[leaf])
        else:
            self.pos[leaf] -= 1
        claimed_jobs = self.claimed_jobs
        if job_id in claimed_jobs:
            index = self.ssn.nodes.index
            rows = [index.get(t.node, -1) for t in tasks]
            gpus = [task_gpus(self.ssn, t) for t in tasks]
            chunk = Chunk(job, list(tasks), rows, [t.gpu_groups for t in tasks], gpus)
            single = len(per) == 1 and len(per[0]) == 1 and len(per[0][0]) == 3  # one hook, one pod, 3 numbers
        else:
            # The job's first chunk, as the pool cached it (its pods have not moved since: any change to
            # them drops the cache entry before the next picker is made).
            first = self.firsts[job_id]  # _top looked it up
            chunk, single = first[6], first[8]
            claimed_jobs.add(job_id)
        queue_keys = self.queue_keys
        if single:
            self.claimed.add(id(tasks[0]))
            g, c, m = per[0][0]
            for sums in self.path_sums[leaf]:
                if sums:
                    sums[0] += g
                    sums[1] += c
                    sums[2] += m
                else:
                    sums.extend((g, c, m))
            if self.key_fn is None:
                for name in self.paths[leaf]:
                    queue_keys.pop(name, None)
        else:
            claimed = self.claimed
            for t in tasks:
                claimed.add(id(t))
            removed = self.removed
            for name in self.paths[leaf]:
                _add(removed[name], per)
                queue_keys.pop(name, None)
        if extra:
            # An elastic extra went: the rest of the job comes back, ranked as it now is.
            key = self.pool.sort_key(job, self.claimed)
            heapq.heappush(self.back[leaf], (Descending(key), next(self.seq), job))
        self.changed = leaf
        return chunk
