"""nodeavailability: +100 for nodes where the task fits idle resources now, not only after releases."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.framework.plugin import register_plugin
from kai.framework.rowscore import RowScorer, Scored
from kai.framework.session import PlacementContext, Session

SCORE = 100.0


@dataclass
class NodeAvailabilityPlugin:
    name: str = "nodeavailability"

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.node_scorers.append(_Scorer())

    @staticmethod
    def score(ctx: PlacementContext) -> np.ndarray:
        return ctx.fits_idle * SCORE


class _Scorer(RowScorer):
    """The score at a row depends on that row only."""

    def __call__(self, ctx: PlacementContext) -> np.ndarray:
        return NodeAvailabilityPlugin.score(ctx)

    def start(self, ctx: PlacementContext) -> Scored:
        return Scored(ctx.fits_idle * SCORE)

    def at_row(self, ctx: PlacementContext, kept: Scored, row: int) -> tuple[float, bool]:
        return (SCORE if ctx.fits_idle[row] else 0.0), True

    def update(self, ctx: PlacementContext, kept: Scored, rows: list[int]) -> bool:
        values, fits_idle = kept.values, ctx.fits_idle
        for row in rows:
            values[row] = SCORE if fits_idle[row] else 0.0  # type: ignore[index]
        return True


register_plugin("nodeavailability")(lambda args: NodeAvailabilityPlugin())
