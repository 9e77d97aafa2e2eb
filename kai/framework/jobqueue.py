"""The job queue: a tree mirroring the queue hierarchy, with a heap of jobs at every leaf queue.

`pop` walks from the top: at each level the child queue that ranks first under the queue order
wins (the order is evaluated at every pop, on the queues' allocation at that moment); at the leaf the
job order decides. A child is compared with its siblings through the job that stands for it: a leaf
queue's first job; for a parent queue, as in KAI, whatever stands for the child it was last popped
from, while that child still has jobs - its children are ordered again only at the next pop from it.
So after a department's team ran a job, the department is ranked by that team's next job, even if
another of its teams would now rank first inside it.

An eviction simulation orders a few stand-in jobs among every other pending job of the session, which
only rank their queues (`SimulationQueue` over `FixedJobs`: the same order, at the cost of the few).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Container, Iterable
from typing import Any

from kai.framework.session import Session
from kai.model import PodGroupInfo

Skip = Callable[[PodGroupInfo], bool]


class JobQueue:
    """`depth` (`queueDepthPerAction` of the action) caps every leaf queue's heap: once a push makes it
    longer, its lowest-ordered job leaves (KAI drops an element near the bottom of its heap; which one
    depends on the order jobs arrived, which is not fixed there). None or -1: no cap. 0 (and a negative
    value other than -1, which crashes KAI's action on the first job) keeps no job: the action tries none.

    `defer_for_pop`, when given, is asked once per pop for a predicate: a job it holds true for leaves
    its heap before the queues are compared, so that it does not stand for its queue, and is handed out
    only once every other job has been (it still gets its attempt, and its own why-pending message).

    `stable_keys` (allocate): between two pops only the popped job and its queues' allocation change,
    so a queue's place in the queue order (for the job standing for it) is kept until a job of its
    subtree is popped. Actions that evict change other queues' allocation and leave it off. With stable
    keys and nothing deferred, the job standing for a queue and its key are kept too, until a push or a pop
    under the queue (the queues of that job's path) changes what is below it: a pop then compares the
    queues of the path it changed anew, and the others as they were (what comparing them all would find)."""

    reuse_reps = True  # whether a queue's standing job may be kept (see above; SimulationQueue ranks its own way)

    def __init__(
        self,
        ssn: Session,
        jobs: Iterable[PodGroupInfo],
        depth: int | None = None,
        defer_for_pop: Callable[[], Skip] | None = None,
        stable_keys: bool = False,
    ) -> None:
        self.ssn = ssn
        self.keys: dict[str, tuple[PodGroupInfo, tuple[Any, ...]]] | None = {} if stable_keys else None
        # queue -> (the job standing for it, its key; None, None: no job below it), while nothing changed below
        self.reps: dict[str, tuple[PodGroupInfo | None, tuple[Any, ...] | None]] | None = (
            {} if stable_keys and defer_for_pop is None and self.reuse_reps else None
        )
        self.depth = None if depth is None or depth == -1 else max(depth, 0)
        self.defer_for_pop = defer_for_pop
        self.deferred: list[PodGroupInfo] = []
        self.last: dict[str, str] = {}  # parent queue -> the child the last job popped under it came from
        self.heaps: dict[str, list[tuple[tuple[Any, ...], int, PodGroupInfo]]] = {}
        self._seq = itertools.count()
        self._paths: dict[str, list[str]] = {}  # leaf queue -> its path's names (see _path)
        queues = ssn.queues
        if ssn.config.params.full_hierarchy_fairness:
            self.roots = sorted(n for n, q in queues.items() if not q.parent)
        else:  # fairness among second-level queues only: they are compared as siblings (top-level leaves vanish)
            self.roots = sorted(n for n, q in queues.items() if q.parent in queues and not queues[q.parent].parent)
        if self.depth is None and type(self).push is JobQueue.push:
            self._push_all(jobs)
        else:
            for job in jobs:
                self.push(job)

    def _push_all(self, jobs: Iterable[PodGroupInfo]) -> None:
        """`push` of every job, into empty heaps with no cap: the heaps made in one go. (Entries are
        unique by their position number, so every pop hands out what pushing them one by one would.)"""
        queues, heaps, seq = self.ssn.queues, self.heaps, self._seq
        key = self.ssn.job_order_key()
        for job in jobs:
            queue = queues.get(job.queue)
            if queue is not None and queue.is_leaf:
                heaps.setdefault(job.queue, []).append((key(job), next(seq), job))
        for heap in heaps.values():
            heapq.heapify(heap)

    def _push_leaf(self, job: PodGroupInfo) -> list[tuple[tuple[Any, ...], int, PodGroupInfo]] | None:
        """Put `job` on its leaf queue's heap and return the heap (None: its queue is no leaf of the session)."""
        queue = self.ssn.queues.get(job.queue)
        if queue is None or not queue.is_leaf:
            return None
        heap = self.heaps.setdefault(job.queue, [])
        heapq.heappush(heap, (self.ssn.job_key(job), next(self._seq), job))
        return heap

    def push(self, job: PodGroupInfo) -> None:
        heap = self._push_leaf(job)
        if heap is not None and self.depth is not None and len(heap) > self.depth:
            heap.remove(max(heap))
            heapq.heapify(heap)
        if self.reps and heap is not None:  # what stands for the job's queues may change
            for name in self._path(job.queue):
                self.reps.pop(name, None)

    def __bool__(self) -> bool:
        return bool(self.deferred) or any(self.heaps.values())

    def _rep(self, name: str, skip: Skip | None) -> PodGroupInfo | None:
        """The job that stands for queue `name` when its parent compares it with its siblings: a leaf's
        first job; for a parent queue, the job standing for the child it was last popped from, while that
        child has one (a queue's children are ordered again only when a job is popped from it), else
        for its best child."""
        queue = self.ssn.queues[name]
        if queue.is_leaf:
            heap = self.heaps.get(name)
            while heap and skip is not None and skip(heap[0][2]):
                self.deferred.append(heapq.heappop(heap)[2])
            return heap[0][2] if heap else None
        last = self.last.get(name)
        children: Iterable[str] = queue.children
        if last is not None:
            job = self._rep(last, skip)
            if job is not None:
                return job
            # the last child has no job: the others decide (asking it again would double the work at every
            # level, exponential in the depth of the queue tree)
            children = [c for c in queue.children if c != last]
        found = self._choose(children, skip)
        return None if found is None else found[1]

    def _choose(self, names: Iterable[str], skip: Skip | None) -> tuple[str, PodGroupInfo] | None:
        """The child queue that ranks first under the queue order, with the job standing for it."""
        best: tuple[tuple[Any, ...], str, PodGroupInfo] | None = None
        keys, reps = self.keys, self.reps
        for name in names:
            if reps is not None:
                found = reps.get(name)
                if found is not None:
                    job, key = found
                    if job is not None and (best is None or key < best[0]):  # type: ignore[operator]
                        best = (key, name, job)  # type: ignore[assignment]
                    continue
            job = self._rep(name, skip)
            if job is None:
                if reps is not None:
                    reps[name] = (None, None)
                continue
            if keys is None:
                key = self.ssn.queue_key(self.ssn.queues[name], job)
            else:
                kept = keys.get(name)
                if kept is not None and kept[0] is job:
                    key = kept[1]
                else:
                    key = self.ssn.queue_key(self.ssn.queues[name], job)
                    keys[name] = (job, key)
                if reps is not None:
                    reps[name] = (job, key)
            if best is None or key < best[0]:
                best = (key, name, job)
        return None if best is None else (best[1], best[2])

    def pop(self) -> PodGroupInfo | None:
        skip = self.defer_for_pop() if self.defer_for_pop else None
        names: Iterable[str] = self.roots
        parent: str | None = None
        while (found := self._choose(names, skip)) is not None:
            name = found[0]
            if parent is not None:
                self.last[parent] = name
            queue = self.ssn.queues[name]
            if queue.is_leaf:
                return self._popped(heapq.heappop(self.heaps[name])[2])
            names, parent = queue.children, name
        return self._popped(self.deferred.pop(0)) if self.deferred else None

    def _popped(self, job: PodGroupInfo) -> PodGroupInfo:
        """The job leaves to be acted on: the keys of its queues no longer hold."""
        keys = self.keys
        if keys is not None:
            reps = self.reps
            for name in self._path(job.queue):
                keys.pop(name, None)
                if reps is not None:
                    reps.pop(name, None)
        return job

    def _path(self, queue: str) -> list[str]:
        """The names of `ssn.queue_path(queue)` (kept: the session's queues do not change while it lasts)."""
        path = self._paths.get(queue)
        if path is None:
            path = self._paths[queue] = [q.name for q in self.ssn.queue_path(queue)]
        return path


Entry = tuple[tuple[Any, ...], int, PodGroupInfo, str]  # job order key, position given, job, job key


class FixedJobs:
    """Jobs that take their place in the queue order of many short-lived queues without ever being handed
    out (an eviction simulation's other pending jobs: while one heads its queue, it is what the queue is
    ranked by): those of `jobs` that `member` holds true for, per leaf queue in job order (ties in the order
    given), for a `SimulationQueue` to merge with the few jobs pushed into it.

    `update` says that pods may have changed status since: a leaf queue's jobs are looked at again when it
    is next asked for, and sorted again only if one of them changed (`member` and the job order read the
    job alone - priority, its pods' statuses - so they hold while the job's `version` does). Between two
    updates the jobs must not change."""

    def __init__(self, ssn: Session, jobs: list[PodGroupInfo], member: Callable[[PodGroupInfo], bool]) -> None:
        self.ssn = ssn
        self.jobs = jobs
        self.member = member
        unseen = object()
        # per job of `jobs`: its version when last looked at, and then its entry if a member
        self._known: list[tuple[object, Entry | None]] = [(unseen, None)] * len(jobs)
        self._members: dict[str, list[int]] = {}  # leaf queue -> positions in `jobs` of its jobs
        self._leaves: dict[str, tuple[int, list[Entry]]] = {}  # leaf queue -> (generation, its members sorted)
        self._generation = 0
        queues = ssn.queues
        for seq, job in enumerate(jobs):
            queue = queues.get(job.queue)
            if queue is not None and queue.is_leaf:
                self._members.setdefault(job.queue, []).append(seq)

    def update(self) -> None:
        self._generation += 1

    def leaf(self, name: str) -> list[Entry]:
        """The member jobs of leaf queue `name` in job order (do not change the list)."""
        kept = self._leaves.get(name)
        generation = self._generation
        if kept is not None and kept[0] == generation:
            return kept[1]
        members = self._members.get(name)
        if members is None:
            return []
        known, jobs = self._known, self.jobs
        changed = kept is None
        for seq in members:
            job = jobs[seq]
            version = job.version
            if known[seq][0] != version:
                entry = (self.ssn.job_key(job), seq, job, job.key) if self.member(job) else None
                if entry != known[seq][1]:
                    changed = True
                known[seq] = (version, entry)
        if changed:
            entries = [e for seq in members if (e := known[seq][1]) is not None]
            entries.sort(key=lambda e: (e[0], e[1]))
        else:
            assert kept is not None
            entries = kept[1]
        self._leaves[name] = (generation, entries)
        return entries


class SimulationQueue(JobQueue):
    """The queue and job order over a few pushed jobs and `fixed` jobs (all of them but those whose key is
    in `leave_out`): `pop` hands out only the pushed jobs, in exactly the order a `JobQueue` over the pushed
    jobs followed by the fixed ones would pop them (the fixed jobs popped on the way are dropped).
    `defer_for_pop` is asked once per pop for a predicate (that must not change while it lasts) over the
    fixed jobs only: one it holds true for does not stand for its queue.

    Nothing but this queue changes during one `pop`, and between two pops only the allocation of the queues
    of the job handed out (the caller places it). So it does less than that JobQueue:
    - a queue's place in the queue order is kept while the job standing for it is the same (across pops,
      unless it is one of those queues); a fixed job leaves its sorted list by moving an index;
    - a queue with a pushed job left below it is "live". The job standing for a queue matters only if the
      queue is compared with a live sibling, or if it stands for its parent and the parent's job matters
      (at the top level, which keeps no "last popped" child, nothing stands for a parent). Where the
      parent's job does not matter, its dead children are not compared at all: what one pops changes
      nothing but the parent's "last popped" child, and a dead queue never comes back to life. A leaf whose
      job does not matter hands out its pushed jobs in their job order, whatever else waits there."""

    reuse_reps = False  # its queues' standing jobs follow its own rules (live queues, fixed jobs)

    def __init__(
        self,
        ssn: Session,
        fixed: FixedJobs,
        jobs: Iterable[PodGroupInfo],
        leave_out: Container[str] = frozenset(),
        defer_for_pop: Callable[[], Skip] | None = None,
    ) -> None:
        self.fixed_jobs = fixed
        self.fixed: dict[str, list[Entry]] = {}  # leaf queue -> its fixed jobs, as asked for
        self.leave_out = leave_out
        self.next: dict[str, int] = {}  # leaf queue -> index of its next fixed job
        self.pending: dict[int, list[str]] = {}  # id of a pushed job not handed out yet -> its queue path
        self.live: dict[str, int] = {}  # queue -> pushed jobs in `pending` below it (or in it)
        self.handed: PodGroupInfo | None = None  # the job the last pop handed out
        super().__init__(ssn, (), defer_for_pop=defer_for_pop, stable_keys=True)
        self._roots = set(self.roots)
        for job in jobs:
            self.push(job)

    def push(self, job: PodGroupInfo) -> None:
        if self._push_leaf(job) is None:
            return
        path = [q.name for q in self.ssn.queue_path(job.queue)]
        if not self._roots.intersection(path):
            return  # under no top-level queue the order compares: never popped
        self.pending[id(job)] = path
        live = self.live
        for name in path:
            live[name] = live.get(name, 0) + 1

    def _head(self, name: str, skip: Skip | None) -> PodGroupInfo | None:
        """The leaf's first job of the merged order (a pushed job first on equal keys: it came first)."""
        heap = self.heaps.get(name)
        fixed = self.fixed.get(name)
        if fixed is None:
            fixed = self.fixed[name] = self.fixed_jobs.leaf(name)
        if not fixed:
            return heap[0][2] if heap else None
        i = self.next.get(name, 0)
        leave_out = self.leave_out
        while True:
            while i < len(fixed) and fixed[i][3] in leave_out:
                i += 1
            if i == len(fixed):
                job = heap[0][2] if heap else None
                break
            entry = fixed[i]
            if heap and heap[0][0] <= entry[0]:
                job = heap[0][2]
                break
            if skip is not None and skip(entry[2]):
                i += 1  # a fixed job the predicate holds true for does not stand for its queue
                continue
            job = entry[2]
            break
        self.next[name] = i
        return job

    def _rep(self, name: str, skip: Skip | None) -> PodGroupInfo | None:
        if not self.ssn.queues[name].is_leaf:
            return super()._rep(name, skip)
        return self._head(name, skip)

    def pop(self) -> PodGroupInfo | None:
        skip = self.defer_for_pop() if self.defer_for_pop else None
        keys, handed, live, queues = self.keys, self.handed, self.live, self.ssn.queues
        assert keys is not None
        if handed is not None:  # the caller may have placed it: its queues' keys no longer hold
            for name in self.pending.pop(id(handed), ()):
                keys.pop(name, None)
                live[name] -= 1
            self.handed = None
        while names := [r for r in self.roots if live.get(r)]:
            matters = len(names) > 1  # whether the job standing for the queue chosen here matters
            parent: str | None = None
            while True:
                if len(names) == 1:
                    name, job = names[0], None
                else:
                    found = self._choose(names, skip)
                    if found is None:
                        return None
                    name, job = found
                if parent is not None:
                    self.last[parent] = name
                queue = queues[name]
                if queue.is_leaf:
                    if not matters:  # its pushed jobs in their order, whatever else waits there
                        self.handed = heapq.heappop(self.heaps[name])[2]
                        return self.handed
                    if job is None:
                        job = self._head(name, skip)
                    heap = self.heaps.get(name)
                    if heap and heap[0][2] is job:
                        heapq.heappop(heap)
                        self.handed = job
                        return job
                    if job is None:
                        return None
                    self.next[name] = self.next.get(name, 0) + 1  # a fixed job: dropped, and on
                    break
                if matters:
                    names = queue.children
                else:
                    names = [c for c in queue.children if live.get(c)]
                    matters = len(names) > 1
                parent = name
        return None
