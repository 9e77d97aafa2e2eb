"""reclaim: a queue below its fair share takes back resources from queues above theirs, by evicting
preemptible jobs of other queues (see docs/differences.md for where kai differs).

Who may reclaim, which queues may lose pods and which scenarios are fair are session hooks
(proportion, minruntime); this action only picks preemptors and victims and runs the solver.
"""

from __future__ import annotations

from kai.framework.action import register_action
from kai.framework.session import Session
from kai.framework.statement import moved_pods
from kai.framework.victims import queue_details, run_evicting_action
from kai.model import ACTIVE, PodGroupInfo, PodInfo, PodStatus

_PLACED_NOW = frozenset({PodStatus.ALLOCATED, PodStatus.PIPELINED})


def pending_jobs(ssn: Session) -> list[PodGroupInfo]:
    """The jobs with pending pods that are ready (a new list: the caller may change it). A function of the
    pods' statuses alone, which only a statement changes, logging each move: the list found is kept
    while the log holds as many moves, so that consolidation, reclaim and preempt one after another
    look at every job that had pending pods once, not three times."""
    moves = len(moved_pods(ssn))
    kept: tuple[int, list[PodGroupInfo]] | None = ssn.state.get("ready pending jobs")
    if kept is None or kept[0] != moves:
        kept = ssn.state["ready pending jobs"] = (moves, list(filter(_ready_pending, ssn.jobs_with_pending())))
    return list(kept[1])


def _ready_pending(job: PodGroupInfo) -> bool:
    """job.has_pending() and job.is_ready(), with a job of one sub-group without pending pods (most, once
    allocate ran) answered from its counts at once."""
    leaves = job.leaves
    if len(leaves) == 1 and not leaves[0].counts().get(PodStatus.PENDING):
        return False
    return job.has_pending() and job.is_ready()


def running_preemptible(ssn: Session, job: PodGroupInfo) -> bool:
    """The candidate victim rule of every evicting action: a preemptible job with active pods (running,
    or placed earlier in this cycle: allocated, or pipelined, e.g. moved by consolidation; as KAI's
    active-allocated statuses have it). With the opt-in
    `spareJobsPlacedThisCycle`, jobs with a pod placed earlier in this cycle are spared (evicting what
    was just placed only undoes the cycle's own work). The cycle's victim pool applies it as pods move."""
    if not job.preemptible:
        return False
    statuses = {p.status for p in job.pods}
    if ssn.config.params.spare_jobs_placed_this_cycle:
        return PodStatus.RUNNING in statuses and not statuses & _PLACED_NOW
    return bool(statuses & ACTIVE)


def _message(ssn: Session):  # type: ignore[no-untyped-def]
    def message(task: PodInfo, preemptor: PodGroupInfo) -> str:
        return (
            f"Pod {task.key} was reclaimed by workload {preemptor.key}: "
            f"{queue_details(ssn, preemptor.queue)} takes back resources from this pod's "
            f"{queue_details(ssn, ssn.jobs[task.job_key].queue) if task.job_key in ssn.jobs else 'queue'}."
        )

    return message


@register_action("reclaim")
def reclaim(ssn: Session) -> None:
    preemptors = pending_jobs(ssn)
    if not preemptors:
        return
    run_evicting_action(
        ssn,
        "reclaim",
        preemptors,
        running_preemptible,
        queues=lambda job: lambda name: name != job.queue,
        # Every job of the queues left (none is the preemptor's queue): no job rule to ask at every victim.
        jobs=lambda job: None,
        message=_message(ssn),
    )
