"""The job queue: a tree mirroring the queue hierarchy, with a heap of jobs at every leaf queue.

`pop` walks from the top: at each level the child queue whose best job ranks
first under the queue order wins (queue order is dynamic, so it is evaluated
at every pop); at the leaf the job order decides.
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
    only once every other job has been (it still gets its attempt, and its own why-pending message)."""

    def __init__(
        self,
        ssn: Session,
        jobs: Iterable[PodGroupInfo],
        depth: int | None = None,
        defer_for_pop: Callable[[], Skip] | None = None,
    ) -> None:
        self.ssn = ssn
        self.depth = None if depth is None or depth == -1 else max(depth, 0)
        self.defer_for_pop = defer_for_pop
        self.deferred: list[PodGroupInfo] = []
        self.heaps: dict[str, list[tuple[tuple[Any, ...], int, PodGroupInfo]]] = {}
        self._seq = itertools.count()
        self.roots = sorted(q.name for q in ssn.queues.values() if not q.parent)
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

    def _best(self, names: Iterable[str], skip: Skip | None) -> tuple[str, PodGroupInfo] | None:
        best: tuple[tuple[Any, ...], str, PodGroupInfo] | None = None
        for name in names:
            queue = self.ssn.queues[name]
            if queue.is_leaf:
                heap = self.heaps.get(name)
                while heap and skip is not None and skip(heap[0][2]):
                    self.deferred.append(heapq.heappop(heap)[2])
                found = (name, heap[0][2]) if heap else None
            else:
                found = self._best(queue.children, skip)
            if found is None:
                continue
            key = self.ssn.queue_key(queue, found[1])
            if best is None or key < best[0]:
                best = (key, found[0], found[1])
        return None if best is None else (best[1], best[2])

    def pop(self) -> PodGroupInfo | None:
        found = self._best(self.roots, self.defer_for_pop() if self.defer_for_pop else None)
        if found is None:
            return self.deferred.pop(0) if self.deferred else None
        return heapq.heappop(self.heaps[found[0]])[2]
