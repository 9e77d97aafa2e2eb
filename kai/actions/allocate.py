"""allocate: place pending jobs, queue by queue in fair order, gangs whole or not at all."""

from __future__ import annotations

from kai.framework.action import register_action
from kai.framework.jobqueue import JobQueue
from kai.framework.placement import leaf_short_of_allocations, place_tasks, tasks_to_allocate
from kai.framework.session import Session
from kai.framework.statement import Statement
from kai.model import ALLOCATED, PodGroupInfo, PodStatus


def _candidates(ssn: Session) -> list[PodGroupInfo]:
    return [job for job in ssn.jobs.values() if job.has_pending() and job.is_ready()]


@register_action("allocate")
def allocate(ssn: Session) -> None:
    queue = JobQueue(ssn, _candidates(ssn), ssn.config.queue_depth_per_action.get("allocate"))
    while (job := queue.pop()) is not None:
        tasks = tasks_to_allocate(ssn, job)
        if not tasks:
            continue
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
        ssn.fit_errors.pop(job.key, None)
        if not had_allocated and any(t.status is PodStatus.ALLOCATED for t in tasks):
            ssn.decisions.last_start[job.key] = ssn.now
        if job.has_pending():
            queue.push(job)
