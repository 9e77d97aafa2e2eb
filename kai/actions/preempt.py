"""preempt: within one queue, a pending job evicts preemptible jobs of strictly lower priority
(see docs/differences.md for where kai differs). Min-runtime protection and queue checks are hooks."""

from __future__ import annotations

from kai.actions.reclaim import pending_jobs, running_preemptible
from kai.framework.action import register_action
from kai.framework.session import Session
from kai.framework.victims import run_evicting_action
from kai.model import PodGroupInfo, PodInfo


def _message(task: PodInfo, preemptor: PodGroupInfo) -> str:
    return f"Pod {task.key} was preempted by higher priority workload {preemptor.key} (priority {preemptor.priority})."


@register_action("preempt")
def preempt(ssn: Session) -> None:
    preemptors = pending_jobs(ssn)
    if not preemptors:
        return
    run_evicting_action(
        ssn,
        "preempt",
        preemptors,
        running_preemptible,
        queues=lambda job: lambda name: name == job.queue,
        jobs=lambda job: lambda victim: victim.queue == job.queue and victim.priority < job.priority,
        message=_message,
    )
