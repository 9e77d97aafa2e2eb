"""resourcetype: +10 for CPU-only tasks on CPU-only nodes, keeping CPU work off GPU nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kai.framework.plugin import register_plugin
from kai.framework.session import PlacementContext, Session

SCORE = 10.0


@dataclass
class ResourceTypePlugin:
    name: str = "resourcetype"
    cpu_only: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def on_session_open(self, ssn: Session) -> None:
        self.cpu_only = (~ssn.nodes.has_gpu) * SCORE
        ssn.hooks.node_scorers.append(self.score)

    def score(self, ctx: PlacementContext) -> np.ndarray | float:
        if ctx.task.needs_gpu:
            return 0.0
        return self.cpu_only


register_plugin("resourcetype")(lambda args: ResourceTypePlugin())
