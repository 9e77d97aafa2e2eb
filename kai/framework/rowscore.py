"""Node scorers that can bring an earlier score up to date when only some node rows changed.

A plain node scorer (kai.framework.session.NodeScorer) is called with every task and scores every node
row. A RowScorer is also such a callable, and in addition lets the placement cache
(kai.framework.placementcache) keep its score for a kind of task across placements: `start` scores all
rows once, and `update` revises that score after the node rows in `rows` changed (a pod placed there,
or taken away by a rollback). The values must be exactly what calling the scorer would give now, so
that cached and uncached placements pick the same node, and finite (the cache keeps -inf at rows that
are not candidates and adds scores to it).

`at_row(ctx, scored, row)` lets the cache skip an update altogether while one row alone changes (the
node the last pod of that kind went to): the value `update` would give at that row, and whether it
would leave every other row's value at most what `scored` holds, without changing anything (None:
not known; the cache then updates).

`signature(task)` names everything of the task the score depends on, besides the node state and the
context's arrays (None: this task cannot be scored incrementally; the placement core then calls the
scorer as a plain one).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kai.framework.session import PlacementContext


@dataclass(slots=True)
class Scored:
    """A score kept for one kind of task: per node row (an array the scorer owns and may change in
    place) or one value for every row, and whatever the scorer needs to update it."""

    values: np.ndarray | float
    state: Any = None


class RowScorer:
    """Base class: a scorer whose value at a node row depends only on that row (and the task's
    signature). Subclasses that depend on more (a minimum over all candidates) override `update`.
    `fixed`: the score never changes with the nodes' state (`update` is then never called)."""

    fixed = False

    def __call__(self, ctx: PlacementContext) -> np.ndarray | float:
        raise NotImplementedError

    def signature(self, task: Any) -> Hashable | None:
        return ()

    def start(self, ctx: PlacementContext) -> Scored:
        values = self(ctx)
        if isinstance(values, np.ndarray):
            values = values.copy()  # the scorer may hand out an array it keeps: the cache changes its copy
        return Scored(values)

    def at_row(self, ctx: PlacementContext, scored: Scored, row: int) -> tuple[float, bool] | None:
        """After only `row` changed (and the context's flags at it were brought up to date): the value an
        update would give at `row`, and whether it would keep every other row's value at most what
        `scored` holds now. Changes nothing. None: not known."""
        return None

    def update(self, ctx: PlacementContext, scored: Scored, rows: list[int]) -> bool:
        """Bring `scored` up to date after the node rows `rows` changed. True: only those rows of
        `scored.values` changed (updated in place); False: `scored.values` was replaced as a whole."""
        fresh = self(ctx)
        if isinstance(fresh, np.ndarray):
            if isinstance(scored.values, np.ndarray):
                scored.values[rows] = fresh[rows]
                return True
            scored.values = fresh.copy()
            return False
        same = not isinstance(scored.values, np.ndarray) and scored.values == fresh
        scored.values = fresh
        return same
