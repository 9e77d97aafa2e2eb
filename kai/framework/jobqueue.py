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
from collections.abc import Callable, Iterable
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
