"""Shared GPUs: fractional pods (gpu-fraction, gpu-memory, multi-device) placed on physical GPUs.

Every physical GPU that fractional pods share is a *GPU group* with the portion its pods use and
the portion that is being released. A group takes one whole GPU out of its node's idle GPUs while
any pod holds it. Whole GPUs stay in the node arrays' GPU column; this module keeps the groups and
answers, vectorised over nodes, where a fractional request can go now or once releases finish.

Which GPU a pod gets among the candidates of a node is a policy (gpupack / gpuspread): plugins
register `gpu_order` keys on the session; this module only lists candidates and applies choices.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, eq
from typing import Any

import numpy as np

from kai.api import keys
from kai.model import ClusterSnapshot, NodeInfo, PodInfo, PodStatus
from kai.model.node import label_values

EPS = 1e-9
GROUP_NAMESPACE = uuid.UUID("6f1c3a52-5b1e-4b7f-9a50-7a3c0b7e8d11")


@dataclass(slots=True)
class GpuGroup:
    """One physical GPU shared by fractional pods."""

    id: str
    used: float = 0.0  # portions of every pod holding it (allocated, pipelined, running, releasing)
    releasing: float = 0.0  # portions of its releasing pods
    pods: dict[str, float] = field(default_factory=dict)  # pod key -> portion

    @property
    def fully_releasing(self) -> bool:
        return self.used > 0 and self.releasing >= self.used - EPS

    def free_now(self) -> float:
        return 1.0 - self.used

    def free_later(self) -> float:
        return 1.0 - self.used + self.releasing


@dataclass(frozen=True, slots=True)
class GpuCandidate:
    """A GPU a fractional pod could use on one node: an existing group or a whole GPU (group None)."""

    group: str | None
    used: float  # portion already used (0 for a whole GPU)
    needs_release: bool  # room only once releasing pods are gone


def node_fraction(task: PodInfo, gpu_memory_mib: int) -> float:
    """The portion of one GPU of this node the task asks for (inf if the node cannot serve it)."""
    if task.gpu.fraction > 0:
        return task.gpu.fraction
    if gpu_memory_mib <= 0 or task.gpu.memory_mib > gpu_memory_mib:
        return math.inf
    return math.ceil(task.gpu.memory_mib / gpu_memory_mib * 100 - EPS) / 100


class SharedGpus:
    """The GPU groups of every node for one session, and the undo-able operations on them."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        node_index: dict[str, int],
        idle: np.ndarray,
        releasing: np.ndarray,
        gpu_col: int,
        node_state: Any = None,
        node_arrays: tuple[np.ndarray, np.ndarray] | None = None,
        resource_names: Collection[str] | None = None,
    ) -> None:
        """`node_arrays`: what `node_arrays()` of an earlier SharedGpus on the same nodes returned;
        `resource_names`: every resource name the nodes' allocatable has, when the caller knows them."""
        self.index = node_index
        self.node_state = node_state  # the session's NodeState: told when a GPU starts being released
        self.idle = idle  # the session's node arrays (shared, updated in place)
        self.releasing = releasing
        self.gpu_col = gpu_col
        self.groups: dict[int, dict[str, GpuGroup]] = {}
        # Dense views over (node, shared GPU): free portion now and once releases finish (-inf: no GPU).
        width = max(1, int(idle[:, gpu_col].max(initial=0)))
        self.free_now = np.full((len(snapshot.nodes), width), -np.inf)
        self.free_later = np.full((len(snapshot.nodes), width), -np.inf)
        if node_arrays is not None:
            self.node_memory, self.mig = node_arrays
        else:
            self.node_memory = node_gpu_memory(snapshot.nodes)
            self.mig = mig_nodes(snapshot.nodes, resource_names)

    def node_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The per-node facts read from the nodes (GPU memory per device, MIG), which never change."""
        return self.node_memory, self.mig

    # -- loading pods that already hold GPUs ---------------------------------------------------------
    def hold(self, pod: PodInfo) -> None:
        """Account a fractional pod that sits on its node in the snapshot (its groups from its labels)."""
        row = self.index.get(pod.node, -1)
        if row < 0:
            return
        portion = node_fraction(pod, int(self.node_memory[row]))
        if not math.isfinite(portion):
            portion = 1.0
        groups = list(pod.gpu_groups)
        while len(groups) < pod.gpu.num_devices:  # an unlabelled pod gets a group of its own
            groups.append(self._new_id(row, pod, len(groups)))
        node_groups = self.groups.setdefault(row, {})
        releasing = pod.status is PodStatus.RELEASING
        for gid in groups[: pod.gpu.num_devices]:
            group = node_groups.get(gid)
            if group is None:
                group = node_groups[gid] = GpuGroup(gid)
                self.idle[row, self.gpu_col] -= 1
            group.used += portion
            group.pods[pod.key] = portion
            if releasing:
                group.releasing += portion
        pod.gpu_groups = tuple(groups[: pod.gpu.num_devices])

    def finish_loading(self) -> None:
        """A GPU whose every pod is releasing comes back whole: count it as a releasing GPU."""
        for row, node_groups in self.groups.items():
            released = sum(1 for g in node_groups.values() if g.fully_releasing)
            self.releasing[row, self.gpu_col] += released
            if released:
                self._mark_releasing()
            self._sync(row)

    def _mark_releasing(self) -> None:
        if self.node_state is not None:
            self.node_state.maybe_releasing = True

    @staticmethod
    def _new_id(row: int, pod: PodInfo, index: int) -> str:
        return str(uuid.uuid5(GROUP_NAMESPACE, f"{row}/{pod.key}/{index}"))

    # -- where a request fits -----------------------------------------------------------------------
    def fractions(self, task: PodInfo) -> np.ndarray:
        """Per node, the portion of one GPU the task needs there (inf where it cannot go)."""
        if task.gpu.fraction > 0:
            out = np.full(len(self.node_memory), task.gpu.fraction)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.ceil(task.gpu.memory_mib / self.node_memory * 100 - EPS) / 100
            out = np.where((self.node_memory > 0) & (task.gpu.memory_mib <= self.node_memory), ratio, np.inf)
        return np.where(self.mig, np.inf, out)

    def fit(self, task: PodInfo) -> tuple[np.ndarray, np.ndarray]:
        """(fits now, fits once releases finish) per node, for a shared-GPU task."""
        fractions = self.fractions(task)
        need = fractions[:, None] - EPS
        now = self.idle[:, self.gpu_col] + (self.free_now >= need).sum(axis=1)
        later = self.idle[:, self.gpu_col] + self.releasing[:, self.gpu_col] + (self.free_later >= need).sum(axis=1)
        usable = np.isfinite(fractions)
        devices = task.gpu.num_devices - EPS
        return usable & (now >= devices), usable & (later >= devices)

    def shares_a_group(self, task: PodInfo) -> np.ndarray:
        """Nodes with an existing shared GPU the task fits into now (for gpusharingorder)."""
        fractions = self.fractions(task)
        return np.isfinite(fractions) & (self.free_now >= fractions[:, None] - EPS).any(axis=1)

    def _sync(self, row: int) -> None:
        """Refresh the node's row of the dense per-GPU views after its groups changed."""
        shared = [g for g in self.groups.get(row, {}).values() if not g.fully_releasing]
        if len(shared) > self.free_now.shape[1]:
            extra = len(shared) - self.free_now.shape[1]
            self.free_now = np.pad(self.free_now, ((0, 0), (0, extra)), constant_values=-np.inf)
            self.free_later = np.pad(self.free_later, ((0, 0), (0, extra)), constant_values=-np.inf)
        self.free_now[row] = -np.inf
        self.free_later[row] = -np.inf
        for slot, group in enumerate(shared):
            self.free_now[row, slot] = group.free_now()
            self.free_later[row, slot] = group.free_later()

    def candidates(self, row: int, task: PodInfo) -> list[GpuCandidate]:
        f = self.fractions(task)[row]
        found: list[GpuCandidate] = []
        for group in self.groups.get(row, {}).values():
            if group.fully_releasing:
                continue
            if group.free_now() >= f - EPS:
                found.append(GpuCandidate(group.id, group.used, False))
            elif group.free_later() >= f - EPS:
                found.append(GpuCandidate(group.id, group.used, True))
        found.extend(GpuCandidate(None, 0.0, False) for _ in range(int(self.idle[row, self.gpu_col] + EPS)))
        found.extend(GpuCandidate(None, 0.0, True) for _ in range(int(self.releasing[row, self.gpu_col] + EPS)))
        return found

    # -- changes (each returns what undoing it needs) -----------------------------------------------
    def take(self, row: int, task: PodInfo, order: Callable[[GpuCandidate], Any]) -> tuple[list[tuple], bool]:
        """Put the task on the best `num_devices` GPUs of the node. Returns (undo records, pipelined)."""
        f = self.fractions(task)[row]
        chosen = sorted(self.candidates(row, task), key=lambda c: (c.needs_release, order(c)))[: task.gpu.num_devices]
        node_groups = self.groups.setdefault(row, {})
        undo: list[tuple] = []
        ids: list[str] = []
        for index, cand in enumerate(chosen):
            if cand.group is None:
                gid = self._new_id(row, task, index)
                while gid in node_groups:
                    gid = str(uuid.uuid5(GROUP_NAMESPACE, gid))
                node_groups[gid] = GpuGroup(gid)
                col = self.releasing if cand.needs_release else self.idle
                col[row, self.gpu_col] -= 1
                undo.append(("new", gid, cand.needs_release))
            else:
                gid = cand.group
                undo.append(("join", gid, False))
            group = node_groups[gid]
            entry = task.key
            while entry in group.pods:  # an evicted pod placed again on the GPU it is leaving
                entry += "'"
            group.used += f
            group.pods[entry] = f
            undo[-1] = (*undo[-1], entry)
            ids.append(gid)
        task.gpu_groups = tuple(ids)
        self._sync(row)
        return undo, any(c.needs_release for c in chosen)

    def untake(self, row: int, task: PodInfo, undo: list[tuple]) -> None:
        node_groups = self.groups[row]
        for kind, gid, from_releasing, entry in reversed(undo):
            group = node_groups[gid]
            group.used -= group.pods.pop(entry, 0.0)
            if kind == "new":
                del node_groups[gid]
                col = self.releasing if from_releasing else self.idle
                col[row, self.gpu_col] += 1
                if from_releasing:
                    self._mark_releasing()
        self._sync(row)

    def release(self, row: int, task: PodInfo, sign: float = 1.0) -> None:
        """Mark the task's portions as releasing (sign -1 undoes it)."""
        node_groups = self.groups.get(row, {})
        for gid in task.gpu_groups:
            group = node_groups.get(gid)
            if group is None:
                continue
            was = group.fully_releasing
            group.releasing += sign * group.pods.get(task.key, 0.0)
            now = group.fully_releasing
            if now and not was:
                self.releasing[row, self.gpu_col] += 1
                self._mark_releasing()
            elif was and not now:
                self.releasing[row, self.gpu_col] -= 1
                self._mark_releasing()
        self._sync(row)


def is_mig_node(node: NodeInfo) -> bool:
    """MIG-partitioned GPUs cannot be shared by fractions."""
    return (
        node.labels.get(keys.MIG_ENABLED_NODE_LABEL) == "true"
        or node.labels.get(keys.MIG_STRATEGY_NODE_LABEL) in ("single", "mixed")
        or any(r.startswith(keys.MIG_RESOURCE_PREFIX) for r in node.allocatable.names())
    )


def mig_nodes(nodes: list[NodeInfo], resource_names: Collection[str] | None = None) -> np.ndarray:
    """`is_mig_node` of every node, with the labels read in C (each label's values only when some node has
    it) and each node's resource names looked at only when some node has a MIG resource
    (`resource_names`: every name the nodes have, if known)."""
    count = len(nodes)
    labels = list(map(attrgetter("labels"), nodes))
    mig = np.zeros(count, dtype=bool)
    enabled = label_values(labels, keys.MIG_ENABLED_NODE_LABEL)
    if enabled is not None:
        mig |= np.fromiter(map(eq, enabled, repeat("true")), dtype=bool, count=count)
    strategy = label_values(labels, keys.MIG_STRATEGY_NODE_LABEL)
    if strategy is not None:
        mig |= np.fromiter(map(("single", "mixed").__contains__, strategy), dtype=bool, count=count)
    if resource_names is None or any(r.startswith(keys.MIG_RESOURCE_PREFIX) for r in resource_names):
        mig |= np.fromiter(
            (any(r.startswith(keys.MIG_RESOURCE_PREFIX) for r in n.allocatable.names()) for n in nodes),
            dtype=bool,
            count=count,
        )
    return mig


def node_gpu_memory(nodes: list[NodeInfo]) -> np.ndarray:
    """`_node_gpu_memory` of every node, as floats (read in C, worked out on whole numbers at once)."""
    mib = list(map(attrgetter("gpu_memory_mib"), nodes))
    column = np.array(mib)
    if column.dtype != np.int64 or column.shape != (len(mib),):  # not all plain whole numbers: one at a time
        return np.array([_node_gpu_memory(m) for m in mib], dtype=float)
    column = np.where(column >= 1024 * 1024, column // (1024 * 1024), column)
    return (column // 100 * 100).astype(float)


def _node_gpu_memory(mib: int) -> float:
    """GPU memory per device in MiB, floored to a multiple of 100 (values in bytes are converted)."""
    if mib >= 1024 * 1024:  # at least 1 TiB written as MiB: the label was in bytes
        mib = mib // (1024 * 1024)
    return float(mib // 100 * 100)
