"""elastic: jobs below their minMember first, then jobs exactly at it, then jobs growing beyond it."""

from __future__ import annotations

from dataclasses import dataclass

from kai.framework.plugin import register_plugin
from kai.framework.session import Session
from kai.model import PodGroupInfo, PodStatus

_RUNNING, _ALLOCATED, _PIPELINED = PodStatus.RUNNING, PodStatus.ALLOCATED, PodStatus.PIPELINED  # ACTIVE


def elastic_rank(job: PodGroupInfo) -> int:
    """`job.elastic_rank()`, read for a job of one sub-group straight from its status counters (every job
    queue keys every job it holds with it)."""
    leaves = job.leaves
    if len(leaves) != 1:
        return job.elastic_rank()
    sub = leaves[0]
    counts = sub.counts()
    active = counts.get(_RUNNING, 0) + counts.get(_ALLOCATED, 0) + counts.get(_PIPELINED, 0)
    minimum = sub.min_member
    return 0 if active < minimum else 1 if active == minimum else 2


@dataclass
class ElasticPlugin:
    name: str = "elastic"

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.job_order.append(elastic_rank)


register_plugin("elastic")(lambda args: ElasticPlugin())
