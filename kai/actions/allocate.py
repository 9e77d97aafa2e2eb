"""allocate: place pending jobs, queue by queue in fair order, gangs whole or not at all."""

from __future__ import annotations

import numpy as np

from kai.framework.action import register_action
from kai.framework.jobqueue import JobQueue
from kai.framework.placement import leaf_short_of_allocations, place_tasks, tasks_to_allocate
from kai.framework.placementcache import placement_cache
from kai.framework.session import EPS, Session
from kai.framework.statement import Statement
from kai.model import ALLOCATED, PodGroupInfo, PodInfo, PodStatus


def _candidates(ssn: Session) -> list[PodGroupInfo]:
    """Jobs with a pending pod that are ready (as `has_pending() and is_ready()`, with the common case of
    one leaf read straight from its status counters), among the jobs that had pending pods at open."""
    found = []
    pending = PodStatus.PENDING
    for job in ssn.jobs_with_pending():
        leaves = job.leaves
        if len(leaves) == 1:
            if not leaves[0].counts().get(pending, 0):
                continue
        elif not job.has_pending():
            continue
        if job.is_ready():
            found.append(job)
    return found


class FreeResources:
    """What the cluster has free for this allocate (idle or being released, on usable nodes), kept up to date
    as jobs are placed. With `deferOversizedJobs` (kai's own rule, off by default: KAI lets every job stand
    for its queue) a job whose next batch asks for more cannot start in this action: the job queue
    defers it, so that it does not stand for its queue in the queue order. (Otherwise a big gang
    first in line puts its queue behind others, whose jobs take the resources a reclaim just freed for the
    queue's smaller jobs, and reclaim and allocate can loop.)"""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        nodes = ssn.nodes
        self.free = (nodes.idle + nodes.releasing)[nodes.usable].sum(axis=0)  # zeros when there are no nodes
        self.needs: dict[tuple[str, int], np.ndarray] = {}

    def placed(self, tasks: list[PodInfo]) -> None:
        for task in tasks:
            self.free -= self.ssn.vector(task)

    def too_big(self, job: PodGroupInfo) -> bool:
        key = (job.key, job.pending_count())
        need = self.needs.get(key)
        if need is None:
            batch = tasks_to_allocate(self.ssn, job)
            need = self.needs[key] = sum((self.ssn.vector(t) for t in batch), np.zeros(len(self.free)))
        return bool((need > self.free + EPS).any())


@register_action("allocate")
def allocate(ssn: Session) -> None:
    with placement_cache(ssn):
        _allocate(ssn)


def _allocate(ssn: Session) -> None:
    free = FreeResources(ssn) if ssn.config.params.defer_oversized_jobs else None
    queue = JobQueue(
        ssn,
        _candidates(ssn),
        ssn.config.queue_depth_per_action.get("allocate"),
        defer_for_pop=None if free is None else (lambda: free.too_big),
        stable_keys=True,
    )
    while (job := queue.pop()) is not None:
        tasks = tasks_to_allocate(ssn, job)
        if not tasks:
            continue
        ssn.decisions.count("acted_on", "allocate")
        status = ssn.check_job_capacity(job, tasks)
        if not status.ok:
            ssn.record_fit_error(job, status)
            continue
        had_allocated = job.count(ALLOCATED) > 0
        stmt = Statement(ssn)
        status = place_tasks(ssn, stmt, job, tasks)
        if not status.ok:
            stmt.discard()
            ssn.record_fit_error(job, status)
            continue
        if leaf_short_of_allocations(job) is not None:
            stmt.convert_to_pipelined(job.key)
        stmt.commit()
        ssn.decisions.count("scheduled", "allocate")
        if free is not None:
            free.placed(tasks)
        ssn.fit_errors.pop(job.key, None)
        if not had_allocated and any(t.status is PodStatus.ALLOCATED for t in tasks):
            ssn.decisions.last_start[job.key] = ssn.now
        if job.has_pending():
            queue.push(job)
