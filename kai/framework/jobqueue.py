"""The job queue: a tree mirroring the queue hierarchy, with a heap of jobs at every leaf queue.

`pop` walks from the top: at each level the child queue that ranks first under the queue order
wins (the order is evaluated at every pop, on the queues' allocation at that moment); at the leaf the
job order decides. A child is compared with its siblings through the job that stands for it: a leaf
queue's first job; for a parent queue, as in KAI, whatever stands for the child it was last popped
from, while that child still has jobs - its children are ordered again only at the next pop from it.
So after a department's team ran a job, the department is ranked by that team's next job, even if
another of its teams would now rank first inside it.
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
    subtree is popped. Actions that evict change other queues' allocation and leave it off."""

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
        self.depth = None if depth is None or depth == -1 else max(depth, 0)
        self.defer_for_pop = defer_for_pop
        self.deferred: list[PodGroupInfo] = []
        self.last: dict[str, str] = {}  # parent queue -> the child the last job popped under it came from
        self.heaps: dict[str, list[tuple[tuple[Any, ...], int, PodGroupInfo]]] = {}
        self._seq = itertools.count()
        queues = ssn.queues
        if ssn.config.params.full_hierarchy_fairness:
            self.roots = sorted(n for n, q in queues.items() if not q.parent)
        else:  # fairness among second-level queues only: they are compared as siblings (top-level leaves vanish)
            self.roots = sorted(n for n, q in queues.items() if q.parent in queues and not queues[q.parent].parent)
        for job in jobs:
            self.push(job)

    def push(self, job: PodGroupInfo) -> None:
        queue = self.ssn.queues.get(job.queue)
        if queue is None or not queue.is_leaf:
            return
        heap = self.heaps.setdefault(job.queue, [])
        heapq.heappush(heap, (self.ssn.job_key(job), next(self._seq), job))
        if self.depth is not None and len(heap) > self.depth:
            heap.remove(max(heap))
            heapq.heapify(heap)

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
        keys = self.keys
        for name in names:
            job = self._rep(name, skip)
            if job is None:
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
        if self.keys is not None:
            for queue in self.ssn.queue_path(job.queue):
                self.keys.pop(queue.name, None)
        return job


class FixedJobs:
    """Jobs that take their place in the queue order of many short-lived queues without ever being handed
    out (an eviction simulation's other pending jobs: while one heads its queue, it is what the queue is
    ranked by). Their job order within each leaf queue is sorted once here; a `SimulationQueue` merges it
    with the few jobs pushed into it. Their job order must not change while this lives (no pod of theirs
    changes status). Ties of the job order keep the order they are given in."""

    def __init__(self, ssn: Session, jobs: Iterable[PodGroupInfo]) -> None:
        queues = ssn.queues
        leaves: dict[str, list[tuple[tuple[Any, ...], int, PodGroupInfo]]] = {}
        for seq, job in enumerate(jobs):
            queue = queues.get(job.queue)
            if queue is not None and queue.is_leaf:
                leaves.setdefault(job.queue, []).append((ssn.job_key(job), seq, job))
        for entries in leaves.values():
            entries.sort(key=lambda e: (e[0], e[1]))
        self.leaves = leaves

    def __bool__(self) -> bool:
        return bool(self.leaves)


class SimulationQueue(JobQueue):
    """The queue and job order over a few pushed jobs and `fixed` jobs (all of them but those whose key is
    in `leave_out`): `pop` hands out only the pushed jobs, in exactly the order a `JobQueue` over the pushed
    jobs followed by the fixed ones would pop them (the fixed jobs popped on the way are dropped).

    Cheaper than that JobQueue because nothing but this queue changes during one `pop` (the caller acts
    on the session between pops only): every queue's place in the queue order is kept, within a pop, while
    the job standing for it is the same; a fixed job leaves its sorted list by moving an index; and a
    top-level queue with no pushed job left is not compared at all (what is popped from it changes neither
    another top-level queue's key nor, as the top level keeps no "last popped" child, how they compare).
    `defer_for_pop` is asked once per pop for a predicate that must not change while it lasts."""

    def __init__(
        self,
        ssn: Session,
        fixed: FixedJobs,
        jobs: Iterable[PodGroupInfo],
        leave_out: Container[str] = frozenset(),
        defer_for_pop: Callable[[], Skip] | None = None,
    ) -> None:
        self.fixed = fixed.leaves
        self.leave_out = leave_out
        self.next: dict[str, int] = {}  # leaf queue -> index of its next fixed job
        self.pending: dict[int, str] = {}  # id of a pushed job not yet handed out nor deferred -> its top queue
        self.left: dict[str, int] = {}  # top-level queue -> its pushed jobs in `pending`
        super().__init__(ssn, (), defer_for_pop=defer_for_pop, stable_keys=True)
        self._top: dict[str, str | None] = {}
        for job in jobs:
            self.push(job)

    def _top_of(self, queue: str) -> str | None:
        """The top-level queue (one of `roots`) that `queue` lies under, None if it lies under none."""
        if queue not in self._top:
            roots = set(self.roots)
            self._top[queue] = next((q.name for q in self.ssn.queue_path(queue) if q.name in roots), None)
        return self._top[queue]

    def push(self, job: PodGroupInfo) -> None:
        queue = self.ssn.queues.get(job.queue)
        if queue is None or not queue.is_leaf:
            return
        heapq.heappush(self.heaps.setdefault(job.queue, []), (self.ssn.job_key(job), next(self._seq), job))
        top = self._top_of(job.queue)
        if top is not None:
            self.pending[id(job)] = top
            self.left[top] = self.left.get(top, 0) + 1

    def _settle(self, job: PodGroupInfo) -> None:
        """A pushed job is handed out or deferred: its top-level queue has one pending job less."""
        top = self.pending.pop(id(job), None)
        if top is not None:
            self.left[top] -= 1

    def _rep(self, name: str, skip: Skip | None) -> PodGroupInfo | None:
        if not self.ssn.queues[name].is_leaf:
            return super()._rep(name, skip)
        return self._head(name, skip)

    def _head(self, name: str, skip: Skip | None) -> PodGroupInfo | None:
        """The leaf's first job of the merged order (a pushed job first on equal keys: it came first)."""
        heap = self.heaps.get(name)
        fixed = self.fixed.get(name)
        i = self.next.get(name, 0)
        leave_out = self.leave_out
        while True:
            if fixed is not None:
                while i < len(fixed) and fixed[i][2].key in leave_out:
                    i += 1
            entry = fixed[i] if fixed is not None and i < len(fixed) else None
            if heap and (entry is None or heap[0][0] <= entry[0]):
                job = heap[0][2]
                if skip is not None and skip(job):
                    self.deferred.append(heapq.heappop(heap)[2])
                    self._settle(job)
                    continue
            elif entry is not None:
                job = entry[2]
                if skip is not None and skip(job):
                    i += 1  # a fixed job deferred is never handed out
                    continue
            else:
                job = None
            self.next[name] = i
            return job

    def _take(self, name: str, job: PodGroupInfo) -> None:
        heap = self.heaps.get(name)
        if heap and heap[0][2] is job:
            heapq.heappop(heap)
        else:
            self.next[name] = self.next.get(name, 0) + 1

    def pop(self) -> PodGroupInfo | None:
        skip = self.defer_for_pop() if self.defer_for_pop else None
        assert self.keys is not None
        self.keys.clear()  # the caller may have changed any queue's allocation since the last pop
        left = self.left
        while roots := [r for r in self.roots if left.get(r)]:
            names: Iterable[str] = roots
            parent: str | None = None
            while (found := self._choose(names, skip)) is not None:
                name, job = found
                if parent is not None:
                    self.last[parent] = name
                queue = self.ssn.queues[name]
                if queue.is_leaf:
                    self._take(name, job)
                    if id(job) in self.pending:
                        self._settle(job)
                        return job
                    break
                names, parent = queue.children, name
            else:
                break  # only deferred jobs are left
        return self.deferred.pop(0) if self.deferred else None
