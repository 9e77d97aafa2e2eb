"""The statement: a transaction of allocate / pipeline / evict operations on the session.

Every operation changes the session at once (so later placements see it) and
leaves an undo record; `checkpoint`/`rollback` undo part of it, `discard` undoes
all of it, and `commit` turns it into decisions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.framework.decisions import Eviction, Pipelining, new_binding
from kai.framework.session import Session
from kai.model import PodInfo, PodStatus

_ALLOCATED = PodStatus.ALLOCATED


def moved_pods(ssn: Session) -> list[PodInfo]:
    """Every pod a statement of the session changed the status of, in the order it did (a pod once per
    change). A statement is the only thing that changes a pod within a session, so the pods that may
    differ from how a scan at some moment saw them are those logged since (see kai.framework.jobscan)."""
    return ssn.kept("moved pods", list)


def _move(task: PodInfo, status: PodStatus, log: list[PodInfo]) -> None:
    """Change the task's status, keeping its sub-group's status counters right (and the session's log)."""
    old = task.status
    task.status = status
    owner = task.owner
    if owner is not None:
        owner.moved(old, status)
    log.append(task)


class BatchHook:
    """An on_allocate hook that can also be told of several allocations at once, after them (`many`, in
    their order). A statement defers the hooks of a batch of pods it allocates in a row only while every
    on_allocate hook is one of these: it is for state that nothing reads while one batch is placed (the
    placement hooks: pre-predicates, node filters and fits, scorers) and that no other hook reads."""

    def __call__(self, task: PodInfo) -> None:
        raise NotImplementedError

    def many(self, tasks: list[PodInfo]) -> None:
        for task in tasks:
            self(task)


@dataclass(slots=True)
class _Op:
    kind: str  # allocate | pipeline | evict
    task: PodInfo
    row: int
    prev_status: PodStatus
    prev_node: str
    from_releasing: np.ndarray | None = None
    gpu_undo: list[tuple] | None = None  # shared-GPU groups taken (see kai.framework.gpushare)
    prev_groups: tuple[str, ...] = ()
    action: str = ""
    by: str = ""
    message: str = ""


class Statement:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.moved = moved_pods(ssn)
        self.ops: list[_Op] = []
        self.closed = False

    # -- operations -------------------------------------------------------------------------------
    def allocate(self, task: PodInfo, node: str) -> None:
        """Place the task on idle resources of the node; it will be bound."""
        self.allocate_row(task, self.ssn.nodes.index[node])

    def allocate_row(self, task: PodInfo, row: int, deferred: list[PodInfo] | None = None) -> None:
        """`allocate` on the node of that row of the session's nodes. `deferred` (see `defers`): the
        on_allocate hooks are not called; the task joins the list, for `fire_deferred`."""
        ssn = self.ssn
        ssn.touch(task)
        nodes = ssn.nodes
        idle = nodes.idle[row]
        idle -= ssn.vector(task)  # in place, in the row's view: `nodes.idle[row] -= ...` without writing it back
        nodes.changed.append(row)
        old = task.status
        op = _Op("allocate", task, row, old, task.node, None, None, task.gpu_groups)
        # _move written out
        task.status = _ALLOCATED
        owner = task.owner
        if owner is not None:
            owner.moved(old, _ALLOCATED)
        self.moved.append(task)
        task.node = nodes.names[row]
        if task.gpu.is_shared:
            op.gpu_undo, _ = ssn.gpus.take(row, task, ssn.gpu_key)
        self.ops.append(op)
        if deferred is not None:
            deferred.append(task)
            return
        for fn in ssn.hooks.on_allocate:
            fn(task)

    def defers(self) -> bool:
        """Whether allocations may defer the on_allocate hooks (every hook is a BatchHook)."""
        return all(isinstance(fn, BatchHook) for fn in self.ssn.hooks.on_allocate)

    def fire_deferred(self, tasks: list[PodInfo]) -> None:
        """Call the on_allocate hooks deferred for these allocations (before anything reads their state)."""
        if tasks:
            for fn in self.ssn.hooks.on_allocate:
                fn.many(tasks)  # type: ignore[attr-defined]

    def pipeline(self, task: PodInfo, node: str) -> None:
        """Place the task on resources that are still being released; it waits for them."""
        self.pipeline_row(task, self.ssn.nodes.index[node])

    def pipeline_row(self, task: PodInfo, row: int) -> None:
        """`pipeline` on the node of that row of the session's nodes."""
        self.ssn.touch(task)
        nodes = self.ssn.nodes
        node = nodes.names[row]
        vec = self.ssn.vector(task)
        taken = np.minimum(vec, np.maximum(nodes.releasing[row], 0.0))
        nodes.releasing[row] -= taken
        nodes.idle[row] -= vec - taken
        nodes.changed.append(row)
        op = _Op("pipeline", task, row, task.status, task.node, from_releasing=taken, prev_groups=task.gpu_groups)
        _move(task, PodStatus.PIPELINED, self.moved)
        task.node = node
        if task.gpu.is_shared:
            op.gpu_undo, _ = self.ssn.gpus.take(row, task, self.ssn.gpu_key)
        self.ops.append(op)
        self.ssn.fire_allocate(task)

    def evict(self, task: PodInfo, action: str, by: str = "", message: str = "") -> None:
        """Release a running (or just placed) task; its resources become releasing on its node."""
        self.ssn.touch(task)
        nodes = self.ssn.nodes
        row = nodes.index.get(task.node, -1)
        vec = self.ssn.vector(task)
        if row >= 0:
            nodes.releasing[row] += vec
            nodes.maybe_releasing = True
            nodes.changed.append(row)
            if task.gpu.is_shared:
                self.ssn.gpus.release(row, task)
        self.ops.append(
            _Op(
                "evict",
                task,
                row,
                task.status,
                task.node,
                action=action,
                by=by,
                message=message,
                prev_groups=task.gpu_groups,
            )
        )
        _move(task, PodStatus.RELEASING, self.moved)
        self.ssn.fire_deallocate(task)

    def convert_to_pipelined(self, job_key: str) -> None:
        """Turn this statement's allocations of one job into pipelined placements (nothing is bound)."""
        for op in self.ops:
            if op.kind == "allocate" and op.task.job_key == job_key and op.task.status is PodStatus.ALLOCATED:
                op.kind = "pipeline"
                op.from_releasing = np.zeros_like(self.ssn.vector(op.task))
                _move(op.task, PodStatus.PIPELINED, self.moved)

    def unevict(self, task: PodInfo) -> None:
        """Forget that the task was evicted and placed again: it was pipelined back onto the node (and
        GPUs) it held, so it simply keeps running there. Both operations leave the statement; the node's
        free resources stay what they are (what the placement took from `releasing` comes from idle)."""
        kinds = {"evict": -1, "pipeline": -1}
        for i in range(len(self.ops) - 1, -1, -1):
            op = self.ops[i]
            if op.task is task and op.kind in kinds and kinds[op.kind] < 0:
                kinds[op.kind] = i
        ev, pl = kinds["evict"], kinds["pipeline"]
        if ev < 0 or pl < ev:
            return
        nodes = self.ssn.nodes
        placed, evicted = self.ops[pl], self.ops[ev]
        vec = self.ssn.vector(task)
        row = placed.row
        taken = placed.from_releasing if placed.from_releasing is not None else 0.0
        nodes.releasing[row] += taken - vec
        nodes.idle[row] += vec - taken
        nodes.maybe_releasing = True
        short = np.minimum(nodes.releasing[row], 0.0)
        nodes.releasing[row] -= short
        nodes.idle[row] += short
        nodes.changed.append(row)
        if placed.gpu_undo is not None:
            self.ssn.gpus.untake(row, task, placed.gpu_undo)
        if task.gpu.is_shared and evicted.row >= 0:
            self.ssn.gpus.release(evicted.row, task, sign=-1.0)
            nodes.changed.append(evicted.row)
        _move(task, evicted.prev_status, self.moved)
        task.node, task.gpu_groups = evicted.prev_node, evicted.prev_groups
        del self.ops[pl]
        del self.ops[ev]

    # -- transaction control ---------------------------------------------------------------------
    def checkpoint(self) -> int:
        return len(self.ops)

    def rollback(self, checkpoint: int) -> None:
        nodes = self.ssn.nodes
        while len(self.ops) > checkpoint:
            op = self.ops.pop()
            vec = self.ssn.vector(op.task)
            if op.row >= 0:
                nodes.changed.append(op.row)
            if op.kind == "allocate":
                nodes.idle[op.row] += vec
                self.ssn.fire_deallocate(op.task)
            elif op.kind == "pipeline":
                taken = op.from_releasing if op.from_releasing is not None else 0.0
                nodes.releasing[op.row] += taken
                nodes.maybe_releasing = True
                nodes.idle[op.row] += vec - taken
                self.ssn.fire_deallocate(op.task)
            else:
                if op.row >= 0:
                    nodes.releasing[op.row] -= vec
                    if op.task.gpu.is_shared:
                        self.ssn.gpus.release(op.row, op.task, sign=-1.0)
                _move(op.task, op.prev_status, self.moved)
                self.ssn.fire_allocate(op.task)
            if op.gpu_undo is not None:
                self.ssn.gpus.untake(op.row, op.task, op.gpu_undo)
            _move(op.task, op.prev_status, self.moved)
            op.task.node, op.task.gpu_groups = op.prev_node, op.prev_groups

    def discard(self) -> None:
        self.rollback(0)
        self.closed = True

    def commit(self) -> None:
        decisions = self.ssn.decisions
        for op in self.ops:
            task = op.task
            if op.kind == "allocate":
                decisions.bindings.append(new_binding(task.key, task.node, task.gpu_groups))
            elif op.kind == "pipeline":
                decisions.pipelined.append(Pipelining(task.key, task.node))
            else:
                decisions.evictions.append(Eviction(task.key, op.prev_node, op.action, op.by, op.message))
        self.ops.clear()
        self.closed = True

    def placed(self) -> list[PodInfo]:
        return [op.task for op in self.ops if op.kind in ("allocate", "pipeline")]
