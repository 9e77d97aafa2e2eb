"""nodeplacement: bin-pack (default) or spread, chosen separately for GPU pods (scored on GPUs) and
CPU-only pods (scored on CPU). Bin-packing prefers the node with the least free amount, spread the
node with the largest free share. Scores lie in 0..9.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from kai.api import keys
from kai.framework.plugin import register_plugin
from kai.framework.rowscore import RowScorer, Scored
from kai.framework.session import PlacementContext, Session
from kai.model import CPU, GPU

MAX_SCORE = 9.0
STRATEGIES = ("binpack", "spread")


@dataclass
class NodePlacementPlugin:
    gpu_strategy: str = "binpack"
    cpu_strategy: str = "binpack"
    name: str = "nodeplacement"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        nodes = ssn.nodes
        self.gpu_col, self.cpu_col = ssn.space.index(GPU), ssn.space.index(CPU)
        capacity = nodes.allocatable.copy()
        counts = nodes.label_values(keys.GPU_COUNT_NODE_LABEL)
        for row, count in enumerate(counts or ()):
            if count and count.isdigit() and int(count) > 0:
                capacity[row, self.gpu_col] = float(count)
        self.capacity = capacity
        # Per scored column (GPU, CPU): which nodes have it, and spread's denominators (whole columns).
        self.has: dict[int, np.ndarray] = {}
        self.spread_valid: dict[int, np.ndarray] = {}
        self.spread_denominator: dict[int, np.ndarray] = {}
        for col in (self.gpu_col, self.cpu_col):
            cap = capacity[:, col]
            self.has[col] = nodes.allocatable[:, col] > 0
            self.spread_valid[col] = self.has[col] & (cap > 0)
            self.spread_denominator[col] = np.where(cap > 0, cap, 1.0)
        ssn.hooks.node_scorers.append(_Scorer(self))

    def score(self, ctx: PlacementContext) -> np.ndarray | float:
        gpu_task = ctx.task.needs_gpu
        col = self.gpu_col if gpu_task else self.cpu_col
        strategy = self.gpu_strategy if gpu_task else self.cpu_strategy
        nodes = self.ssn.nodes
        free = nodes.idle_cols[col] + nodes.releasing_cols[col]
        if strategy == "spread":
            return np.where(self.spread_valid[col], free / self.spread_denominator[col], 0.0)
        has = self.has[col]
        scored = ctx.candidates & has
        if not scored.any():
            return 0.0
        values = free[scored]
        low, high = float(values.min()), float(values.max())
        if high - low <= 1e-9:
            return np.where(has, MAX_SCORE, 0.0)
        return np.where(has, MAX_SCORE * (1.0 - (free - low) / (high - low)), 0.0)


LEVELS = 256  # most distinct free amounts the incremental bin-packing score tabulates
SCAN = 24  # up to this many, the bounds are read from per-amount counts instead of the masked columns


class _Scorer(RowScorer):
    """The plugin's score, kept up to date on changed rows. Spread's value at a row depends on that row
    only. Bin-packing's also depends on the least and the most free amount among the scored candidates:
    when either moves, every row's value changes; it is then computed once per distinct free amount (a
    row's value depends only on its free amount) and gathered by row."""

    def __init__(self, plugin: NodePlacementPlugin) -> None:
        self.plugin = plugin

    def __call__(self, ctx: PlacementContext) -> np.ndarray | float:
        return self.plugin.score(ctx)

    def signature(self, task: object) -> bool:
        return bool(task.needs_gpu)  # type: ignore[attr-defined]

    def _column(self, ctx: PlacementContext) -> tuple[int, str]:
        plugin = self.plugin
        if ctx.task.needs_gpu:
            return plugin.gpu_col, plugin.gpu_strategy
        return plugin.cpu_col, plugin.cpu_strategy

    def start(self, ctx: PlacementContext) -> Scored:
        col, strategy = self._column(ctx)
        plugin = self.plugin
        nodes = plugin.ssn.nodes
        if strategy == "spread":
            return Scored(plugin.score(ctx), _Spread(col, plugin.spread_valid[col], plugin.spread_denominator[col]))
        has = plugin.has[col]
        free = nodes.idle_cols[col] + nodes.releasing_cols[col]
        scored = ctx.candidates & has
        state = _Binpack(col, has, np.where(scored, free, np.inf), np.where(scored, free, -np.inf))
        state.bounds = _bounds(state.low_of, state.high_of)
        levels, inverse = np.unique(free[has], return_inverse=True)
        if len(levels) <= LEVELS:
            codes = np.zeros(len(free), dtype=np.intp)
            codes[has] = inverse + 1
            state.codes = codes
            state.levels = levels.tolist()
            state.order = list(range(1, len(levels) + 1))  # np.unique sorts
            state.level_of = {v: i + 1 for i, v in enumerate(state.levels)}
            state.whole = all(map(_whole, state.levels))
            scored_codes = np.where(scored, codes, 0)
            state.scored_code = scored_codes.tolist()
            state.count = np.bincount(scored_codes, minlength=len(levels) + 1).tolist()
            state.count[0] = 0
        return Scored(plugin.score(ctx), state)

    def at_row(self, ctx: PlacementContext, kept: Scored, row: int) -> tuple[float, bool] | None:
        state = kept.state
        nodes = self.plugin.ssn.nodes
        # Python floats (.item): the same doubles as the columns' scalars, with cheaper arithmetic.
        free = nodes.idle_cols[state.col].item(row) + nodes.releasing_cols[state.col].item(row)
        if isinstance(state, _Spread):
            return (free / state.denominator[row] if state.valid[row] else 0.0), True
        assert isinstance(state, _Binpack)
        bounds = state.bounds
        if state.codes is None or bounds is None or not isinstance(kept.values, np.ndarray):
            return None
        # The other scored rows' amounts, least first, and the values they hold now: fixed until the next
        # update, which is the only thing that changes the state (and forgets this).
        others = state.others
        if others is None or others[0] != row:
            mine = state.scored_code[row]
            count, levels = state.count, state.levels
            amounts = [float(levels[c - 1]) for c in state.order if count[c] - (c == mine) > 0]
            old_low, old_high = bounds
            if old_high - old_low <= 1e-9:
                held = [MAX_SCORE] * len(amounts)
            else:
                held = [MAX_SCORE * (1.0 - (a - old_low) / (old_high - old_low)) for a in amounts]
            # This row's amount when the values were computed, if every amount there is a whole number
            # (exact differences), else None.
            # (The bounds are amounts of `levels` too, so every level a whole number is enough.)
            was = float(levels[mine - 1]) if mine and state.whole else None
            others = state.others = (row, amounts, held, was)
        amounts = others[1]
        # The bounds an update would find: those amounts, and this row's new one if it is still scored.
        # (Every amount here is a Python float: `free` and `amounts` are.)
        has = state.has.item(row)
        scored = has and ctx.candidates.item(row)
        if scored:
            low = free if not amounts or free < amounts[0] else amounts[0]
            high = free if not amounts or free > amounts[-1] else amounts[-1]
        elif amounts:
            low, high = amounts[0], amounts[-1]
        else:
            return None
        flat = high - low <= 1e-9
        if not has:
            value = 0.0
        elif flat:
            value = MAX_SCORE
        else:
            value = MAX_SCORE * (1.0 - (free - low) / (high - low))
        if low == bounds[0] and high == bounds[1]:
            return value, True
        # Every other scored row's value is its amount's, under the new bounds against the ones it holds.
        if flat:
            return value, all(old >= MAX_SCORE for old in others[2])
        was = others[3]
        if was is not None and scored and free <= was and _whole(free):
            # The row was scored and its amount fell: the bounds can only have come down (the least to at
            # most the old least, the most to at most the old most), so each other amount lies a larger
            # share of the way up from the least, in exact arithmetic. With whole numbers every difference
            # is exact and one rounded division keeps that order: no value rose.
            return value, True
        span = high - low
        for amount, old in zip(amounts, others[2], strict=True):
            if MAX_SCORE * (1.0 - (amount - low) / span) > old:
                return value, False
        return value, True

    def update(self, ctx: PlacementContext, kept: Scored, rows: list[int]) -> bool:
        state = kept.state
        nodes = self.plugin.ssn.nodes
        idle, releasing = nodes.idle_cols[state.col], nodes.releasing_cols[state.col]
        values = kept.values
        if isinstance(state, _Spread):
            valid, denominator = state.valid, state.denominator
            for row in rows:
                values[row] = (idle[row] + releasing[row]) / denominator[row] if valid[row] else 0.0  # type: ignore[index]
            return True
        assert isinstance(state, _Binpack)
        has, candidates = state.has, ctx.candidates
        low_of, high_of, codes = state.low_of, state.high_of, state.codes
        changed = []
        for row in rows:
            free = idle.item(row) + releasing.item(row)  # Python floats: the same doubles
            changed.append(free)
            scored = candidates[row] and has[row]
            if scored:
                low_of[row] = high_of[row] = free
            else:
                low_of[row], high_of[row] = np.inf, -np.inf
            if codes is not None:
                code = 0
                if has[row]:
                    code = state.level_of.get(free, -1)
                    if code < 0:
                        if len(state.levels) >= LEVELS:
                            state.codes = codes = None
                            continue
                        code = state.level_of[free] = len(state.levels) + 1
                        state.levels.append(free)
                        if not _whole(free):
                            state.whole = False
                        state.count.append(0)
                        levels = state.levels
                        bisect.insort(state.order, code, key=lambda c: levels[c - 1])
                    codes[row] = code
                old, new = state.scored_code[row], code if scored else 0
                if old != new:
                    state.count[old] -= 1
                    state.count[new] += 1
                    state.scored_code[row] = new
        if codes is not None and len(state.levels) <= SCAN:
            now = _counted_bounds(state.levels, state.order, state.count)
        else:
            now = _bounds(low_of, high_of)
        state.others = None
        bounds, state.bounds = state.bounds, now
        if now is None:
            if bounds is None:
                return True  # still no scored row: 0.0 everywhere
            kept.values = 0.0
            return False
        low, high = now
        if now != bounds or not isinstance(values, np.ndarray):
            if state.codes is None:
                kept.values = self.plugin.score(ctx)
                return False
            if high - low <= 1e-9:
                table = np.array([0.0] + [MAX_SCORE] * len(state.levels))
            else:  # the same float operations as score()'s, one amount at a time
                span = high - low
                table = np.array([0.0] + [MAX_SCORE * (1.0 - (level - low) / span) for level in state.levels])
            if isinstance(values, np.ndarray):
                kept.values = np.take(table, state.codes, out=values)
            else:
                kept.values = table.take(state.codes)
            return False
        flat = high - low <= 1e-9
        for row, free in zip(rows, changed, strict=True):
            if not has[row]:
                values[row] = 0.0
            elif flat:
                values[row] = MAX_SCORE
            else:
                values[row] = MAX_SCORE * (1.0 - (free - low) / (high - low))
        return True


class _Spread:
    __slots__ = ("col", "denominator", "valid")

    def __init__(self, col: int, valid: np.ndarray, denominator: np.ndarray) -> None:
        self.col, self.valid, self.denominator = col, valid, denominator


class _Binpack:
    """What the incremental bin-packing score keeps: per row the free amount where scored (+inf / -inf
    elsewhere, for the least / the most), the bounds, each row's free amount as a code into `levels`
    (0: a row without the scored resource; None: too many distinct amounts to tabulate), and per code
    how many scored rows have it."""

    __slots__ = (
        "bounds",
        "codes",
        "col",
        "count",
        "has",
        "high_of",
        "level_of",
        "levels",
        "low_of",
        "order",
        "others",
        "scored_code",
        "whole",
    )

    def __init__(self, col: int, has: np.ndarray, low_of: np.ndarray, high_of: np.ndarray) -> None:
        self.col, self.has = col, has
        self.low_of, self.high_of = low_of, high_of
        self.bounds: tuple[float, float] | None = None
        self.codes: np.ndarray | None = None
        self.levels: list[float] = []
        self.level_of: dict[float, int] = {}
        self.scored_code: list[int] = []  # per row: its code while it is a scored candidate, else 0
        self.count: list[int] = []  # per code: scored rows with it
        self.order: list[int] = []  # the codes by their free amount, least first
        self.whole = False  # every amount in `levels` is a whole number (see _whole)
        # at_row's memo, until an update: (row, the other scored rows' amounts least first, their values,
        # the row's own amount then if every amount is a whole number)
        self.others: tuple[int, list[float], list[float], float | None] | None = None


def _whole(amount: float) -> bool:
    """A whole number small enough that differences of such numbers are exact in floats."""
    return float(amount).is_integer() and abs(amount) < 2.0**52


def _bounds(low_of: np.ndarray, high_of: np.ndarray) -> tuple[float, float] | None:
    """The least and the most free amount among the scored rows (None: no row is scored)."""
    low = float(np.minimum.reduce(low_of)) if len(low_of) else np.inf
    if low == np.inf:
        return None
    return low, float(np.maximum.reduce(high_of))


def _counted_bounds(levels: list[float], order: list[int], count: list[int]) -> tuple[float, float] | None:
    """The least and the most free amount among the scored rows, from the per-code counts."""
    for low_code in order:
        if count[low_code]:
            break
    else:
        return None
    for high_code in reversed(order):
        if count[high_code]:
            break
    return float(levels[low_code - 1]), float(levels[high_code - 1])


def _factory(args: dict[str, str]) -> NodePlacementPlugin:
    gpu, cpu = args.get("gpu", "binpack"), args.get("cpu", "binpack")
    for value in (gpu, cpu):
        if value not in STRATEGIES:
            raise ValueError(f"nodeplacement: strategy must be binpack or spread, got {value!r}")
    return NodePlacementPlugin(gpu, cpu)


register_plugin("nodeplacement")(_factory)
