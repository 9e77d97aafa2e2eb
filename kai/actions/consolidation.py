"""consolidation: move preemptible running pods to other nodes so that a pending job fits, only when
every moved pod is placed again in the same cycle.

Bounded by `maxNumberConsolidationPreemptees` victim jobs per pending job (-1: no restriction; 0 turns
the action off, and so does any other negative value, with which KAI finds no consolidation).
"""

from __future__ import annotations

from kai.actions.reclaim import pending_jobs, running_preemptible
from kai.framework.action import register_action
from kai.framework.config import UNLIMITED_PREEMPTEES
from kai.framework.session import Session
from kai.framework.victims import run_evicting_action
from kai.model import PodGroupInfo, PodInfo


def _message(task: PodInfo, preemptor: PodGroupInfo) -> str:
    return (
        f"Pod {task.key} was moved to another node (resource consolidation) to make room for workload {preemptor.key}."
    )


def _spread(ssn: Session) -> bool:
    args = ssn.config.plugin_arguments("nodeplacement") or {}
    return "spread" in (args.get("gpu", "binpack"), args.get("cpu", "binpack"))


@register_action("consolidation")
def consolidation(ssn: Session) -> None:
    limit = ssn.config.params.max_consolidation_preemptees
    if (limit <= 0 and limit != UNLIMITED_PREEMPTEES) or _spread(ssn):
        return
    preemptors = [job for job in pending_jobs(ssn) if job.preemptible]
    if not preemptors:
        return
    run_evicting_action(
        ssn,
        "consolidation",
        preemptors,
        running_preemptible,
        queues=lambda job: lambda name: True,
        jobs=lambda job: None,  # every job of the queues
        message=_message,
        require_replaced=True,
        max_victim_jobs=None if limit == UNLIMITED_PREEMPTEES else limit,
        signature_scope=lambda job: "",
    )
