"""nominatednode: +1,000,000 for the node named in the pod's `status.nominatedNodeName` (KAI's
magnitude, above every other score but a large pod-affinity preference)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.framework.plugin import register_plugin
from kai.framework.rowscore import RowScorer, Scored
from kai.framework.session import PlacementContext, Session

SCORE = 1_000_000.0


@dataclass
class NominatedNodePlugin:
    name: str = "nominatednode"

    def on_session_open(self, ssn: Session) -> None:
        if not ssn.any_pod("nominated_node"):
            return
        ssn.hooks.node_scorers.append(_Scorer(ssn.nodes.index))


class _Scorer(RowScorer):
    """Fixed per node for a task's nominated node: nothing to update when rows change."""

    fixed = True

    def __init__(self, index: dict[str, int]) -> None:
        self.index = index

    def __call__(self, ctx: PlacementContext) -> np.ndarray | float:
        row = self.index.get(ctx.task.nominated_node, -1) if ctx.task.nominated_node else -1
        if row < 0:
            return 0.0
        bonus = np.zeros(len(ctx.candidates))
        bonus[row] = SCORE
        return bonus

    def signature(self, task: object) -> str:
        return task.nominated_node  # type: ignore[attr-defined,no-any-return]

    def start(self, ctx: PlacementContext) -> Scored:
        return Scored(self(ctx))

    def update(self, ctx: PlacementContext, kept: Scored, rows: list[int]) -> bool:
        return True


register_plugin("nominatednode")(lambda args: NominatedNodePlugin())
