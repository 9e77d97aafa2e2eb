"""The placement cache: what find_node computed for one kind of task, kept across placements.

Most pending pods of a cluster come in a few kinds (the same request, node selector, tolerations):
the pods of a gang, and the gangs of one workload. Between two placements of such pods only the node
rows the statement changed differ (the node a pod just took, or rows a rollback gave back), so the
cache keeps, per kind, the filter mask, which rows fit, every scorer's score and their sum, and
updates them on the changed rows only (the session's nodes log every row a statement changes).

A kind is the request vector, the results of the node filters (static ones only: a filter whose answer
depends on other pods' placements makes the task uncacheable), and each scorer's signature of the
task; every scorer must be a RowScorer. Tasks that do not qualify (shared GPUs, devices, dynamic
filters, plain scorers) are placed by the full computation. A cache made for one node set (a topology
domain) answers as find_node does with that set, for one batch placed inside it. Either way the chosen node is the
same: every array holds exactly the values the full computation gives.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from kai.framework.rowscore import RowScorer, Scored
from kai.framework.session import NodeSubset, PlacementContext, Session
from kai.model import PodInfo

MISS = object()  # the task is not cacheable: place it by the full computation
STICKY = True  # answer from the last best row while only it changed (PlacementCache._still_best); tests switch it off


@dataclass(slots=True)
class _Entry:
    pos: int  # how much of the nodes' change log the arrays reflect
    keep: tuple[Any, ...]  # the objects whose ids make the key (kept alive so the ids stay theirs)
    mask: np.ndarray  # usable & static filters
    need: tuple[tuple[int, float], ...]
    pipeline: bool  # fits_future counts releasing resources
    fits_idle: np.ndarray
    candidates: np.ndarray
    ctx: PlacementContext
    parts: list[Scored]
    # sums[i]: the score summed over parts[:i], in hook order, as find_node adds them (0.0 + the first
    # part + ...), at candidate rows; -inf at the others (scores are finite: -inf stays -inf). A part that
    # is the scalar 0.0 adds nothing and its sum is the previous one. sums[-1] is the total.
    sums: list[np.ndarray]
    best: int = -1  # the first row of the greatest total in `sums` (-1: no candidate)
    seen: int = 0  # how much of the change log was checked to name `best` only (see `_still_best`)


class PlacementCache:
    """Per session, while an action places many pods (see the module docstring)."""

    def __init__(self, ssn: Session, subset: NodeSubset | None = None) -> None:
        self.ssn = ssn
        # A cache for the placements inside one node set (a gang's batch in a topology domain): every
        # answer is find_node's with that `subset` (its mask narrows the candidates, its scores are added
        # last). Kept only while the batch is placed: the set's arrays are not part of the entries' keys.
        self.subset = subset
        self.entries: dict[Hashable, _Entry] = {}
        self.scorers: list[RowScorer] | None = None
        self.moving: list[tuple[int, RowScorer]] = []  # the scorers (by position) whose score follows the nodes
        self._hooks: list[Any] = []
        self._seen: tuple[int, int] = (0, -1)  # id and length of the hook list the scorers were read from
        # The last task find keyed, the filter list then (id, length), its vector, filter answers and key
        # parts: a task of the same kind after it gets the same (see _remember, same_kind).
        self.stale_after = max(len(ssn.nodes) // 16, 8)  # more changed rows than this: start the entry anew
        self._last: tuple[PodInfo, tuple[int, int], np.ndarray, list[np.ndarray], tuple[Any, ...]] | None = None
        self.refresh_scorers()

    def refresh_scorers(self) -> None:
        scorers = self.ssn.hooks.node_scorers
        self.scorers = list(scorers) if all(isinstance(s, RowScorer) for s in scorers) else None  # type: ignore[misc]
        self.moving = [(i, s) for i, s in enumerate(self.scorers or ()) if not s.fixed]
        self.moving_at: list[RowScorer | None] = [None if s.fixed else s for s in self.scorers or ()]
        self.signed = [s for s in self.scorers or () if type(s).signature is not RowScorer.signature]
        self._last = None
        self._held: tuple[bool, tuple[Any, ...], _Entry] | None = None  # the last task's entry (find), its key
        self._hooks = list(scorers)
        self._seen = (id(scorers), len(scorers))
        self.entries.clear()

    def find(self, task: PodInfo, allow_pipeline: bool) -> Any:
        """(row, fits idle) of the best node, None when no node fits, or MISS."""
        ssn = self.ssn
        hooks = ssn.hooks
        listed = hooks.node_scorers
        if (id(listed), len(listed)) != self._seen or self._hooks != listed:
            self.refresh_scorers()
        scorers = self.scorers
        if scorers is None or task.gpu.is_shared:
            return MISS
        nodes = ssn.nodes
        last = self._last
        filters = hooks.node_filters
        pipeline = allow_pipeline and nodes.maybe_releasing
        if (
            last is not None
            and last[1] == (id(filters), len(filters))
            and not hooks.node_fits
            and same_kind(last[0], task)
        ):
            # The pod before (a gang's pods come in a row) asked the same: the same filters' answers and
            # signatures (every filter static, see _remember), the same key.
            _, _, vec, filtered, kind = last
            held = self._held
            if held is not None and held[0] == pipeline:
                key, entry = held[1], held[2]
            else:
                key = (id(vec), pipeline, *kind)
                entry = self.entries.get(key)
                self._held = None if entry is None else (pipeline, key, entry)
        else:
            for fit in hooks.node_fits:
                if fit.fn(task) is not None:
                    return MISS
            filtered = []
            for flt in filters:
                result = flt.fn(task)
                if result is not None:
                    if not flt.static:
                        return MISS
                    filtered.append(result)
            signatures = []
            for scorer in self.signed:  # the scorers whose signature is not always ()
                sig = scorer.signature(task)
                if sig is None:
                    return MISS
                signatures.append(sig)
            vec = ssn.vector(task)
            kind = (tuple(map(id, filtered)) if filtered else (), tuple(signatures))
            self._remember(task, vec, filtered, kind)
            key = (id(vec), pipeline, *kind)
            entry = self.entries.get(key)
            self._held = None if entry is None else (pipeline, key, entry)
        log = nodes.changed
        if entry is None or len(log) - entry.pos > self.stale_after:
            entry = self.entries[key] = self._start(task, vec, filtered, pipeline, len(log))
            self._held = (pipeline, key, entry)
        elif entry.pos < len(log):
            if STICKY and entry.best >= 0:
                fits_idle = self._still_best(entry, task, log)
                if fits_idle is not None:
                    return entry.best, fits_idle
            rows = log[entry.pos :]
            self._update(entry, task, rows if len(rows) == 1 else sorted(set(rows)), len(log))
        else:
            return None if entry.best < 0 else (entry.best, bool(entry.fits_idle[entry.best]))
        total = entry.sums[-1]
        extra = self.subset.scores if self.subset is not None else None
        best = int(total.argmax() if extra is None else (total + extra).argmax())
        if not entry.candidates[best] and not entry.candidates.any():
            entry.best = -1
            return None
        entry.best, entry.seen = best, len(log)
        return best, bool(entry.fits_idle[best])

    def _remember(self, task: PodInfo, vec: np.ndarray, filtered: list[np.ndarray], kind: tuple[Any, ...]) -> None:
        """Keep what `find` worked out for the task, for the next task if it is of the same kind: only
        while every node filter is static (a dynamic one's answer changes with each placement) and no
        node fit is registered (it may answer differently for the same spec as devices are taken)."""
        hooks = self.ssn.hooks
        filters = hooks.node_filters
        if hooks.node_fits or not all(flt.static for flt in filters):
            self._last = None
        else:
            self._last = (task, (id(filters), len(filters)), vec, filtered, kind)
        self._held = None

    def _still_best(self, entry: _Entry, task: PodInfo, log: list[int]) -> bool | None:
        """Whether the entry's best row is still the best, when it is the only row changed since the
        arrays were last brought up to date (a gang's pods, or jobs of one kind, bin-packed onto one
        node): then the arrays are left as they are, behind the change log, until another row changes
        or this check fails.

        The row is still the best when it is still a candidate, its new total (computed at that row
        exactly as the update would: the same parts, added in the same order) is at least its old one,
        and every scorer vouches that no other row's value rose (`RowScorer.at_row`): every other
        candidate's total is then at most its old one (a float sum never falls when one of its terms
        rises), below the old best's where it lies before the best row, at most equal after it.

        Returns whether the row fits the task on idle resources (None: it is not known to be the best)."""
        row = entry.best
        seen = entry.seen
        if len(log) - seen == 1:  # the common case: one placement since
            if log[seen] != row:
                return None
        else:
            changed = log[seen:]
            if changed.count(row) != len(changed):
                return None
        if not entry.mask.item(row):
            return None
        nodes = self.ssn.nodes
        idle = nodes.idle_cols
        fit = True
        for col, amount in entry.need:
            if not idle[col].item(row) >= amount:
                fit = False
                break
        if not fit:
            if not entry.pipeline:
                return None
            releasing = nodes.releasing_cols
            for col, amount in entry.need:
                if not idle[col].item(row) + releasing[col].item(row) >= amount:
                    return None
        # The row's own flags as an update would set them (it sets them again from the nodes' state).
        fits_idle = entry.fits_idle
        if fits_idle.item(row) is not fit:
            fits_idle[row] = fit
        candidates = entry.candidates
        if not candidates.item(row):
            candidates[row] = True
        ctx = entry.ctx
        ctx.task = task
        # Python floats (.item): the same doubles as the arrays' scalars, added alike, at a fraction of the cost.
        total: Any = 0.0
        for scorer, part in zip(self.moving_at, entry.parts, strict=True):
            if scorer is None:
                values = part.values
                value = values.item(row) if isinstance(values, np.ndarray) else values
            else:
                found = scorer.at_row(ctx, part, row)
                if found is None or not found[1]:
                    return None
                value = found[0]
            total = total + value
        if not total >= entry.sums[-1].item(row):
            return None
        entry.seen = len(log)
        return fit

    def _start(self, task: PodInfo, vec: np.ndarray, filtered: list[np.ndarray], pipeline: bool, pos: int) -> _Entry:
        ssn = self.ssn
        nodes = ssn.nodes
        columns, need = ssn.request_columns(vec)
        mask = nodes.usable
        for result in filtered:
            mask = mask & result
        if self.subset is not None:
            mask = mask & self.subset.mask
        fits_idle = np.ones(len(nodes), dtype=bool)
        for col, amount in need:
            fits_idle &= nodes.idle_cols[col] >= amount
        if pipeline:
            fits_future = np.ones(len(nodes), dtype=bool)
            for col, amount in need:
                fits_future &= nodes.idle_cols[col] + nodes.releasing_cols[col] >= amount
        else:
            fits_future = fits_idle
        candidates = mask & fits_future
        ctx = PlacementContext(task, vec, columns, candidates, fits_idle)
        assert self.scorers is not None
        parts = [scorer.start(ctx) for scorer in self.scorers]
        entry = _Entry(pos, (vec, *filtered), mask, need, pipeline, fits_idle, candidates, ctx, parts, [])
        self._sum_from(entry, 0)
        return entry

    @staticmethod
    def _sum_from(entry: _Entry, first: int) -> None:
        """Recompute the sums from part `first` on (the earlier ones are up to date)."""
        sums = entry.sums
        del sums[first + 1 :]
        total = sums[first] if sums else np.where(entry.candidates, 0.0, -np.inf)
        if not sums:
            sums.append(total)
        for part in entry.parts[first:]:
            values = part.values
            if isinstance(values, np.ndarray) or values != 0.0:
                total = total + values
            sums.append(total)

    def _update(self, entry: _Entry, task: PodInfo, rows: list[int], pos: int) -> None:
        nodes = self.ssn.nodes
        # The node columns' values as Python floats (.item): the same doubles, compared and added alike.
        idle, releasing = nodes.idle_cols, nodes.releasing_cols
        fits_idle, candidates, mask = entry.fits_idle, entry.candidates, entry.mask
        for row in rows:
            fit = True
            for col, amount in entry.need:
                if not idle[col].item(row) >= amount:
                    fit = False
                    break
            fits_idle[row] = fit
            if entry.pipeline:
                fit = True
                for col, amount in entry.need:
                    if not idle[col].item(row) + releasing[col].item(row) >= amount:
                        fit = False
                        break
            candidates[row] = mask[row] and fit
        entry.pos = pos
        ctx = entry.ctx
        ctx.task = task
        assert self.scorers is not None
        first = -1
        parts = entry.parts
        for i, scorer in self.moving:
            if not scorer.update(ctx, parts[i], rows) and first < 0:
                first = i
        end = len(entry.parts) if first < 0 else first
        sums = entry.sums
        for row in rows:
            candidate = candidates[row]
            total: Any = 0.0
            sums[0][row] = total if candidate else -np.inf
            for i in range(end):
                values = parts[i].values
                if isinstance(values, np.ndarray):
                    total = total + values[row]
                elif values != 0.0:
                    total = total + values
                sums[i + 1][row] = total if candidate else -np.inf
        if first >= 0:
            self._sum_from(entry, first)


def same_kind(a: PodInfo, b: PodInfo) -> bool:
    """Whether two pods ask for the same on every spec field a node filter, a scorer's signature or the
    request vector may read (everything but the pod's name, uid, creation and state): a gang's pods,
    written alike, share these objects, so the identity checks decide at once."""
    return a is b or (
        a.requests is b.requests
        and a.gpu is b.gpu
        and a.namespace == b.namespace
        and a.job_key == b.job_key
        and a.subgroup == b.subgroup
        and (a.labels is b.labels or a.labels == b.labels)
        and a.node_selector == b.node_selector
        and a.required_affinity == b.required_affinity
        and a.tolerations == b.tolerations
        and a.pod_affinity == b.pod_affinity
        and a.host_ports == b.host_ports
        and a.claims == b.claims
        and a.resource_claims == b.resource_claims
        and a.nominated_node == b.nominated_node
        and a.task_priority == b.task_priority
        and a.priority_class_name == b.priority_class_name
        and a.scheduler_name == b.scheduler_name
    )


@contextmanager
def placement_cache(ssn: Session) -> Iterator[PlacementCache]:
    """Keep a placement cache on the session while the block runs (find_node uses it)."""
    cache = ssn.state["placement cache"] = PlacementCache(ssn)
    try:
        yield cache
    finally:
        ssn.state.pop("placement cache", None)


def active_cache(ssn: Session) -> PlacementCache | None:
    return ssn.state.get("placement cache")
