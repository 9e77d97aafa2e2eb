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
        ssn.hooks.node_scorers.append(self.score)

    def score(self, ctx: PlacementContext) -> np.ndarray:
        gpu_task = ctx.task.needs_gpu
        col = self.gpu_col if gpu_task else self.cpu_col
        strategy = self.gpu_strategy if gpu_task else self.cpu_strategy
        rows = ctx.candidates
        nodes = self.ssn.nodes
        free = nodes.idle[rows, col] + nodes.releasing[rows, col]
        has = nodes.allocatable[rows, col] > 0
        if strategy == "spread":
            cap = self.capacity[rows, col]
            return np.where(has & (cap > 0), free / np.where(cap > 0, cap, 1.0), 0.0)
        if not has.any():
            return np.zeros(rows.size)
        low, high = free[has].min(), free[has].max()
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
