"""nodeavailability: +100 for nodes where the task fits idle resources now, not only after releases."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.framework.plugin import register_plugin
from kai.framework.session import PlacementContext, Session

SCORE = 100.0


@dataclass
class NodeAvailabilityPlugin:
    name: str = "nodeavailability"

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.node_scorers.append(self.score)

    @staticmethod
    def score(ctx: PlacementContext) -> np.ndarray:
        return ctx.fits_idle * SCORE


register_plugin("nodeavailability")(lambda args: NodeAvailabilityPlugin())
