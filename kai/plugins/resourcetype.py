"""resourcetype: +10 for CPU-only tasks on CPU-only nodes, keeping CPU work off GPU nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kai.framework.plugin import register_plugin
from kai.framework.rowscore import RowScorer, Scored
from kai.framework.session import PlacementContext, Session

SCORE = 10.0


@dataclass
class ResourceTypePlugin:
    name: str = "resourcetype"
    cpu_only: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def on_session_open(self, ssn: Session) -> None:
        self.cpu_only = (~ssn.nodes.has_gpu) * SCORE
        ssn.hooks.node_scorers.append(_Scorer(self))

    def score(self, ctx: PlacementContext) -> np.ndarray | float:
        if ctx.task.needs_gpu:
            return 0.0
        return self.cpu_only


class _Scorer(RowScorer):
    """Fixed per node for a kind of task: nothing to update when rows change."""

    fixed = True

    def __init__(self, plugin: ResourceTypePlugin) -> None:
        self.plugin = plugin

    def __call__(self, ctx: PlacementContext) -> np.ndarray | float:
        return self.plugin.score(ctx)

    def signature(self, task: object) -> bool:
        return bool(task.needs_gpu)  # type: ignore[attr-defined]

    def start(self, ctx: PlacementContext) -> Scored:
        return Scored(self.plugin.score(ctx))  # never changed: the update leaves it as it is

    def update(self, ctx: PlacementContext, kept: Scored, rows: list[int]) -> bool:
        return True


register_plugin("resourcetype")(lambda args: ResourceTypePlugin())
