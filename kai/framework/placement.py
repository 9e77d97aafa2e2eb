"""Placing tasks on nodes: filter and score vectorised over nodes, pick the best, and gang placement.

Shared by every action that places pods (allocate, and the simulations inside
reclaim, preempt and consolidation). Which nodes pass and how they rank is
decided entirely by the hooks plugins registered.

A gang is placed recursively over its sub-group tree: for the job's implicit root
and then for every sub-group set, the SubsetNodes hooks (topology) split the node set chosen for the
parent into ordered candidate node sets; each candidate is tried in turn (checkpoint, rollback on
failure): child sub-group sets first (by name), then leaves (sub-group order), each leaf subset again by
its own constraint before its tasks are placed inside the chosen set. With no SubsetNodes hook
registered the batch is placed flat, exactly as before.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from kai.framework.placementcache import MISS, PlacementCache, active_cache
from kai.framework.session import EPS, NodeSubset, PlacementContext, Session, SubsetRequest
from kai.framework.statement import Statement
from kai.framework.status import SUCCESS, Code, Status
from kai.model import PodGroupInfo, PodInfo, PodStatus, SubGroupInfo

# Batches of at least this many tasks inside a node set are placed through a cache of their own (below, it
# costs more than it saves); SUBSET_CACHE is a switch only so that tests can compare with the plain path.
SUBSET_CACHE = True
SUBSET_CACHE_FROM = 3


@dataclass(frozen=True, slots=True)
class Placement:
    row: int
    pipelined: bool


def _resource_label(name: str) -> str:
    return {"cpu": "cpu", "memory": "memory", "pods": "pod slots"}.get(name, name)


def filter_nodes(ssn: Session, task: PodInfo) -> np.ndarray:
    """Nodes that pass every predicate except free resources."""
    mask = ssn.nodes.usable.copy()
    for flt in ssn.hooks.node_filters:
        result = flt.fn(task)
        if result is not None:
            mask &= result
    return mask


def _fits(cols: list[np.ndarray], need: tuple[tuple[int, float], ...]) -> np.ndarray | None:
    """Per node: every requested column has the amount (None: the request asks for nothing)."""
    fits = None
    for col, amount in need:
        here = cols[col] >= amount
        fits = here if fits is None else fits & here
    return fits


def find_node(
    ssn: Session, task: PodInfo, allow_pipeline: bool = True, subset: NodeSubset | None = None, cached: bool = True
) -> Placement | None:
    """The best node for the task, or None. Ties go to the first node by name. `subset` restricts the
    nodes to a candidate node set (and adds its per-node score bonuses).

    One pass of whole-column numpy expressions over the node rows: no per-task copies of the node arrays.
    While a placement cache is active (kai.framework.placementcache) a task it can serve gets the same
    answer from what the cache keeps (`cached=False`: the caller asked the cache already)."""
    if subset is None and cached:
        cache = active_cache(ssn)
        if cache is not None:
            found = cache.find(task, allow_pipeline)
            if found is not MISS:
                return None if found is None else Placement(found[0], not found[1])
    nodes = ssn.nodes
    count = len(nodes)
    if not count:
        return None
    vec = ssn.vector(task)
    columns, need = ssn.request_columns(vec)
    mask = nodes.usable
    for flt in ssn.hooks.node_filters:
        result = flt.fn(task)
        if result is not None:
            mask = mask & result
    if subset is not None:
        mask = mask & subset.mask
    fits_idle = _fits(nodes.idle_cols, need)
    if fits_idle is None:
        fits_idle = np.ones(count, dtype=bool)
    fits_future = fits_idle
    if allow_pipeline and nodes.maybe_releasing:
        releasing = nodes.releasing_cols
        busy = [col for col, _ in need if releasing[col].any()]
        if busy:
            idle = nodes.idle_cols
            future = None
            for col, amount in need:
                here = (idle[col] + releasing[col] >= amount) if col in busy else (idle[col] >= amount)
                future = here if future is None else future & here
            fits_future = future if future is not None else fits_idle
    if task.gpu.is_shared:
        shared_now, shared_later = ssn.gpus.fit(task)
        fits_idle = fits_idle & shared_now
        fits_future = fits_future & (shared_later if allow_pipeline else shared_now)
    for fit in ssn.hooks.node_fits:  # resources plugins track themselves (DRA devices)
        found = fit.fn(task)
        if found is not None:
            fits_idle = fits_idle & found[0]
            fits_future = fits_future & (found[1] if allow_pipeline else found[0])
    candidates = mask & fits_future
    if not candidates.any():
        return None
    ctx = PlacementContext(task, vec, columns, candidates, fits_idle)
    score = np.zeros(count)
    for scorer in ssn.hooks.node_scorers:
        score = score + scorer(ctx)
    if subset is not None and subset.scores is not None:
        score = score + subset.scores
    best = int(np.argmax(np.where(candidates, score, -np.inf)))
    return Placement(best, not bool(fits_idle[best]))


def explain_no_node(ssn: Session, task: PodInfo, subset: NodeSubset | None = None) -> str:
    """Why no node fits, summarised as counts per reason (as kube-scheduler does)."""
    total = len(ssn.nodes)
    if not total:
        return "0 nodes are available: the cluster has no nodes."
    reasons = no_node_reasons(ssn, task, subset)
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items(), key=lambda r: (-r[1], r[0])))
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."


def no_node_reasons(ssn: Session, task: PodInfo, subset: NodeSubset | None = None) -> Counter[str]:
    """Per reason, how many nodes it rules out for the task (each node counted once, at its first reason)."""
    nodes = ssn.nodes
    total = len(nodes)
    reasons: Counter[str] = Counter()
    remaining = np.ones(total, dtype=bool)
    unusable = remaining & ~nodes.usable
    if unusable.any():
        reasons["node(s) were unschedulable or not ready"] += int(unusable.sum())
    remaining &= nodes.usable
    if subset is not None:
        outside = remaining & ~subset.mask
        if outside.any():
            reasons[f"node(s) were outside {subset.name or 'the node set chosen for the group'}"] += int(outside.sum())
        remaining &= subset.mask
    for flt in ssn.hooks.node_filters:
        result = flt.fn(task)
        if result is None:
            continue
        failing = remaining & ~result
        if failing.any():
            reasons[f"node(s) {flt.reason}"] += int(failing.sum())
        remaining &= result
    vec = ssn.vector(task)
    future = nodes.idle + nodes.releasing
    for col in np.flatnonzero(vec > 0):
        short = remaining & (future[:, col] < vec[col] - EPS)
        if short.any():
            reasons[f"node(s) had insufficient {_resource_label(ssn.space.names[col])}"] += int(short.sum())
    if task.gpu.is_shared:
        _, later = ssn.gpus.fit(task)
        short = remaining & ~later
        if short.any():
            what = "GPU memory" if task.gpu.memory_mib else "GPU"
            reasons[f"node(s) had no {what} with room for the shared request"] += int(short.sum())
    for fit in ssn.hooks.node_fits:  # resources plugins track themselves (DRA devices)
        found = fit.fn(task)
        if found is not None:
            short = remaining & ~found[1]
            if short.any():
                reasons[f"node(s) {fit.reason}"] += int(short.sum())
    return reasons


def place_tasks(
    ssn: Session,
    stmt: Statement,
    job: PodGroupInfo,
    tasks: list[PodInfo],
    pipeline_only: bool = False,
    within: NodeSubset | None = None,
) -> Status:
    """Place all tasks (a gang's batch) in the statement, or none: the caller discards (or rolls back)
    on failure. Node sets come from the SubsetNodes hooks, recursively over the job's sub-group tree.
    `pipeline_only`: every placement is a pipelining (victims moved inside an eviction simulation).
    `within`: the node set the job's root is offered (None: every node), as KAI's eviction simulations
    offer only their feasible nodes."""
    if not ssn.hooks.subset_nodes:
        return place_in_subset(ssn, stmt, job, tasks, within, pipeline_only)
    return _place_set(ssn, stmt, job, None, tasks, within, pipeline_only)


def _subtree_of(job: PodGroupInfo, leaf: str) -> list[str]:
    """The leaf and its ancestors' names."""
    chain = []
    current = job.subgroups.get(leaf)
    while current is not None:
        chain.append(current.name)
        current = job.subgroups.get(current.parent) if current.parent else None
    return chain


def _place_set(
    ssn: Session,
    stmt: Statement,
    job: PodGroupInfo,
    group: SubGroupInfo | None,
    tasks: list[PodInfo],
    allowed: NodeSubset | None,
    pipeline_only: bool,
) -> Status:
    """Place the tasks of one (sub-)group set (None: the job's root): try each candidate node set the
    SubsetNodes hooks give, in order, rolling back between tries."""
    found = ssn.subset_nodes(SubsetRequest(job, group, tasks, allowed))
    if isinstance(found, Status):
        return found
    candidates: list[NodeSubset | None] = [allowed] if found is None else list(found)
    if not candidates:
        where = f" of sub-group {group.name}" if group is not None else ""
        return Status(Code.UNSCHEDULABLE, "PodSchedulingErrors", f"No node set can host the pods{where}.")
    first: Status | None = None
    for candidate in candidates:
        if candidate is not None and candidate.scores is None and allowed is not None and allowed.scores is not None:
            candidate = NodeSubset(candidate.mask, allowed.scores, candidate.name)  # inherit the parent's ranks
        checkpoint = stmt.checkpoint()
        status = _place_children(ssn, stmt, job, group, tasks, candidate, pipeline_only)
        if status.ok:
            return status
        stmt.rollback(checkpoint)
        first = first or status
    assert first is not None
    if len(candidates) > 1:
        first = Status(
            first.code,
            first.reason,
            f"None of the {len(candidates)} candidate node sets could host the pods; in the first: {first.message}",
            first.cause,
        )
    return first


def _place_children(
    ssn: Session,
    stmt: Statement,
    job: PodGroupInfo,
    group: SubGroupInfo | None,
    tasks: list[PodInfo],
    subset: NodeSubset | None,
    pipeline_only: bool,
) -> Status:
    """Inside a chosen node set: child sub-group sets (by name), then leaves (sub-group order); a leaf
    places its own tasks."""
    if group is not None and group.is_leaf:
        return place_in_subset(ssn, stmt, job, tasks, subset, pipeline_only)
    if group is None:
        children = [s for s in job.subgroups.values() if not s.parent]
    else:
        children = [job.subgroups[name] for name in group.children]
    if len(children) == 1:
        return _place_set(ssn, stmt, job, children[0], tasks, subset, pipeline_only)
    chains = {leaf: _subtree_of(job, leaf) for leaf in {t.subgroup for t in tasks}}
    ordered = sorted((c for c in children if not c.is_leaf), key=lambda c: c.name)
    ordered += sorted((c for c in children if c.is_leaf), key=ssn.subgroup_key)
    for child in ordered:
        mine = [t for t in tasks if child.name in chains[t.subgroup]]
        if not mine:
            continue
        status = _place_set(ssn, stmt, job, child, mine, subset, pipeline_only)
        if not status.ok:
            return status
    return Status()


def place_in_subset(
    ssn: Session,
    stmt: Statement,
    job: PodGroupInfo,
    tasks: list[PodInfo],
    subset: NodeSubset | None,
    pipeline_only: bool = False,
) -> Status:
    """Place the tasks one by one, each on the best node of the node set (all nodes when None). A batch
    of a few tasks inside a node set gets a placement cache of its own (one for that set), so that the
    pods after the first are placed on what changed since (the node the last one took)."""
    if subset is None:
        cache = active_cache(ssn)
    else:
        cache = PlacementCache(ssn, subset) if SUBSET_CACHE and len(tasks) >= SUBSET_CACHE_FROM else None
    # The on_allocate hooks of this batch's allocations are called once, for all of them, when it is
    # placed (or fails): nothing the placement of the next pod reads depends on them (BatchHook).
    deferred: list[PodInfo] | None = [] if not pipeline_only and len(tasks) > 1 and stmt.defers() else None
    try:
        return _place_each(ssn, stmt, job, tasks, subset, pipeline_only, cache, deferred)
    finally:
        if deferred:
            stmt.fire_deferred(deferred)


def _place_each(
    ssn: Session,
    stmt: Statement,
    job: PodGroupInfo,
    tasks: list[PodInfo],
    subset: NodeSubset | None,
    pipeline_only: bool,
    cache: PlacementCache | None,
    deferred: list[PodInfo] | None,
) -> Status:
    pre_predicates = ssn.hooks.pre_predicates
    for placed, task in enumerate(tasks):
        for fn in pre_predicates:
            status = fn(task)
            if status is not SUCCESS and not status.ok:
                return _gang_failure(job, tasks, placed, status.message, status.code, status.cause)
        found = MISS if cache is None else cache.find(task, True)
        if found is MISS:
            placement = find_node(ssn, task, subset=subset, cached=False)
            found = None if placement is None else (placement.row, not placement.pipelined)
        if found is None:
            return _gang_failure(job, tasks, placed, explain_no_node(ssn, task, subset), Code.UNSCHEDULABLE)
        if pipeline_only or not found[1]:
            if deferred:  # the hooks see every placement in order
                stmt.fire_deferred(deferred)
                deferred.clear()
            stmt.pipeline_row(task, found[0])
        else:
            stmt.allocate_row(task, found[0], deferred)
    return Status()


def _gang_failure(
    job: PodGroupInfo, tasks: list[PodInfo], placed: int, why: str, code: Code, cause: object = None
) -> Status:
    if len(tasks) > 1:
        message = (
            f"Resources were found for {placed} of the {len(tasks)} pods the gang needs to start; "
            f"pod {tasks[placed].name} cannot be placed: {why}"
        )
    else:
        message = f"Pod {tasks[0].key} cannot be placed: {why}"
    return Status(code, "PodSchedulingErrors", message, cause)


def tasks_to_allocate(ssn: Session, job: PodGroupInfo) -> list[PodInfo]:
    """The next batch: every leaf below minMember brought up to it, else one elastic extra pod."""
    leaves = job.leaves if len(job.leaves) == 1 else sorted(job.leaves, key=ssn.subgroup_key)
    below = [(sub, need) for sub in leaves if (need := sub.min_member - sub.active()) > 0]
    if below:
        batch: list[PodInfo] = []
        key = ssn.task_order_key()
        for sub, need in below:
            pending = sorted(sub.pending(), key=key)
            if len(pending) < need:
                return []
            batch.extend(pending[:need])
        return batch
    for sub in leaves:
        pending = sub.pending()
        if pending:
            return [min(pending, key=ssn.task_order_key())]
    return []


def leaf_short_of_allocations(job: PodGroupInfo) -> SubGroupInfo | None:
    """A leaf that has pipelined pods but fewer truly allocated pods than its minMember."""
    for sub in job.leaves:
        counts = sub.counts()
        pipelined = counts.get(PodStatus.PIPELINED, 0) > 0
        allocated = counts.get(PodStatus.ALLOCATED, 0) + counts.get(PodStatus.RUNNING, 0)
        if pipelined and allocated < sub.min_member:
            return sub
    return None


def gang_not_ready_message(job: PodGroupInfo) -> str:
    parts = []
    for sub in job.leaves:
        counts = sub.counts()
        exist = len(sub.pods) - counts.get(PodStatus.SUCCEEDED, 0) - counts.get(PodStatus.FAILED, 0)
        gated = counts.get(PodStatus.GATED, 0)
        if exist - gated < sub.min_member:
            where = f" in sub-group {sub.name}" if len(job.subgroups) > 1 else ""
            parts.append(f"waiting for {sub.min_member} pods{where}: {exist} exist, {gated} of them gated")
    return "Job is not ready for scheduling: " + "; ".join(parts) + "."
