"""elastic: jobs below their minMember first, then jobs exactly at it, then jobs growing beyond it."""

from __future__ import annotations

from dataclasses import dataclass

from kai.framework.plugin import register_plugin
from kai.framework.session import Session
from kai.model import PodGroupInfo


@dataclass
class ElasticPlugin:
    name: str = "elastic"

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.job_order.append(PodGroupInfo.elastic_rank)  # (the method itself: no wrapper call per key)


register_plugin("elastic")(lambda args: ElasticPlugin())
