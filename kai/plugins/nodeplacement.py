"""nodeplacement: bin-pack (default) or spread, chosen separately for GPU pods (scored on GPUs) and
CPU-only pods (scored on CPU). Bin-packing prefers the node with the least free amount, spread the
node with the largest free share. Scores lie in 0..9.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kai.api import keys
from kai.framework.plugin import register_plugin
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
        for row, info in enumerate(nodes.infos):
            count = info.labels.get(keys.GPU_COUNT_NODE_LABEL)
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
        ssn.hooks.node_scorers.append(self.score)

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


def _factory(args: dict[str, str]) -> NodePlacementPlugin:
    gpu, cpu = args.get("gpu", "binpack"), args.get("cpu", "binpack")
    for value in (gpu, cpu):
        if value not in STRATEGIES:
            raise ValueError(f"nodeplacement: strategy must be binpack or spread, got {value!r}")
    return NodePlacementPlugin(gpu, cpu)


register_plugin("nodeplacement")(_factory)
