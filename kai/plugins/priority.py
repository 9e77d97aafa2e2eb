"""priority: jobs with a higher PriorityClass value are tried first."""

from __future__ import annotations

from dataclasses import dataclass

from kai.framework.plugin import register_plugin
from kai.framework.session import Session


@dataclass
class PriorityPlugin:
    name: str = "priority"

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.job_order.append(lambda job: -job.priority)


register_plugin("priority")(lambda args: PriorityPlugin())
