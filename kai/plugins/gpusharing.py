"""GPU sharing policies: which GPU of a node a fractional pod takes (gpupack fills the most used
shared GPU first, gpuspread prefers empty GPUs), gpusharingorder's preference for nodes where the pod
joins an existing shared GPU, and the pre-check that some node can serve a shared request at all.

The groups themselves (who uses how much of which GPU) are session state: kai.framework.gpushare.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import eq

import numpy as np

from kai.api import keys
from kai.framework.gpushare import GpuCandidate
from kai.framework.plugin import register_plugin
from kai.framework.rowscore import RowScorer, Scored
from kai.framework.session import NamedFilter, PlacementContext, Session
from kai.framework.status import SUCCESS, Status, unresolvable
from kai.model import PodInfo

SHARING_ORDER_SCORE = 1000.0


def pack_key(candidate: GpuCandidate) -> tuple[int, float]:
    return (1, 0.0) if candidate.group is None else (0, -candidate.used)


def spread_key(candidate: GpuCandidate) -> tuple[int, float]:
    return (0, 0.0) if candidate.group is None else (1, candidate.used)


@dataclass
class GpuOrderPlugin:
    name: str
    key: object

    def on_session_open(self, ssn: Session) -> None:
        ssn.hooks.gpu_order.append(self.key)  # type: ignore[arg-type]
        ssn.hooks.pre_predicates.append(lambda task: shared_request_possible(ssn, task))
        strategy = ssn.nodes.label_values(keys.MIG_STRATEGY_NODE_LABEL)
        # (no node names a MIG strategy: no node is "mixed")
        mixed = np.fromiter(map(eq, strategy, repeat("mixed")), dtype=bool, count=len(strategy)) if strategy else None
        if mixed is not None and mixed.any():
            whole_ok = ~mixed
            ssn.hooks.node_filters.append(
                NamedFilter(
                    "migstrategy",
                    "had MIG (mixed strategy) GPUs, which serve only MIG slices",
                    lambda task: whole_ok if task.gpu.whole else None,
                    static=True,
                )
            )


def shared_request_possible(ssn: Session, task: PodInfo) -> Status:
    """A shared request some node could serve with enough free GPUs; otherwise say what is missing."""
    if not task.gpu.is_shared:
        return SUCCESS
    gpus = ssn.gpus
    if not (
        np.isfinite(gpus.fractions(task)) & (ssn.nodes.allocatable[:, ssn.nodes.gpu_col] >= task.gpu.num_devices)
    ).any():
        if task.gpu.memory_mib:
            largest = int(gpus.node_memory.max()) if gpus.node_memory.size else 0
            if largest <= 0:
                return unresolvable(
                    "GpuMemory",
                    f"pod {task.key} asks for {task.gpu.memory_mib} MiB of GPU memory, "
                    f"and no node publishes nvidia.com/gpu.memory",
                )
            return unresolvable(
                "GpuMemory",
                f"pod {task.key} asks for {task.gpu.memory_mib} MiB of GPU memory "
                f"on {task.gpu.num_devices} GPU(s); the largest GPU has {largest} MiB",
            )
        return unresolvable(
            "SharedGpu",
            f"pod {task.key} asks for a share of {task.gpu.num_devices} GPU(s), "
            f"and no node (without MIG) has that many GPUs",
        )
    return SUCCESS


@dataclass
class GpuSharingOrderPlugin:
    name: str = "gpusharingorder"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        ssn.hooks.node_scorers.append(_SharingScorer(self))

    def score(self, ctx: PlacementContext) -> np.ndarray | float:
        if not ctx.task.gpu.is_shared or not self.ssn.gpus.groups:
            return 0.0
        return self.ssn.gpus.shares_a_group(ctx.task) * SHARING_ORDER_SCORE


class _SharingScorer(RowScorer):
    """0 for a whole-GPU task, which the placement cache may keep; a shared one is scored afresh."""

    fixed = True

    def __init__(self, plugin: GpuSharingOrderPlugin) -> None:
        self.plugin = plugin

    def __call__(self, ctx: PlacementContext) -> np.ndarray | float:
        return self.plugin.score(ctx)

    def signature(self, task: object) -> tuple[()] | None:
        return None if task.gpu.is_shared else ()  # type: ignore[attr-defined]

    def start(self, ctx: PlacementContext) -> Scored:
        return Scored(0.0)

    def update(self, ctx: PlacementContext, kept: Scored, rows: list[int]) -> bool:
        return True


register_plugin("gpupack")(lambda args: GpuOrderPlugin("gpupack", pack_key))
register_plugin("gpuspread")(lambda args: GpuOrderPlugin("gpuspread", spread_key))
register_plugin("gpusharingorder")(lambda args: GpuSharingOrderPlugin())
