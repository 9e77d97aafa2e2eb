"""Queue usage history for time-based fair share.

A record of each queue's allocation over time and of the cluster's capacity, both as step
functions, and the usage one cycle sees: for each queue and resource,

    usage = ∫ allocated(t) · decay(t) dt  /  ∫ capacity(t) · decay(t) dt     over the window,

with decay(t) = 0.5 ** ((now - t) / halfLife) (1 when no half-life is set). The window is the
last `windowSize` seconds (sliding) or the time since the last multiple of `windowSize` after
`tumblingWindowStartTime` (tumbling). KAI samples Prometheus at a 1 minute resolution; the step
functions here are integrated exactly, which is what those samples approximate.

Pure: no clock is read, time is always an argument. The simulator feeds it virtual time and the
allocations it simulates; the live scheduler can feed it its own snapshots through `UsageTracker`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from kai.framework.config import UsageParams
from kai.model import ALLOCATED, GPU, QUEUE_RESOURCES, ClusterSnapshot

LN2 = math.log(2.0)


def window_start(now: float, params: UsageParams) -> float:
    """Where the usage window of a cycle at `now` begins."""
    if params.window_type == "tumbling":
        size, origin = params.window_size, params.tumbling_window_start_time
        return origin + math.floor((now - origin) / size) * size
    return now - params.window_size


def segment_weights(starts: np.ndarray, ends: np.ndarray, now: float, half_life: float) -> np.ndarray:
    """∫ decay(t) dt over each segment [start, end) (the segment's length when there is no decay)."""
    if half_life <= 0:
        return np.maximum(ends - starts, 0.0)
    scale = half_life / LN2
    return np.maximum(scale * (np.exp2(-(now - ends) / half_life) - np.exp2(-(now - starts) / half_life)), 0.0)


class UsageHistory:
    """Step functions of per-queue allocation and of cluster capacity, in core units.

    `record(t, ...)` says "from t on, the values are these" (until the next record). Records must
    come in time order; a record at the time of the last one replaces it.
    """

    def __init__(self, resources: tuple[str, ...] = QUEUE_RESOURCES) -> None:
        self.resources = resources
        self.queues: dict[str, int] = {}  # queue -> column block (width len(resources))
        self._times = np.zeros(64)
        self._alloc = np.zeros((64, 0))
        self._capacity = np.zeros((64, len(resources)))
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def _column(self, queue: str) -> int:
        block = self.queues.get(queue)
        if block is None:
            block = len(self.queues)
            self.queues[queue] = block
            width = len(self.resources)
            self._alloc = np.hstack([self._alloc, np.zeros((self._alloc.shape[0], width))])
        return block * len(self.resources)

    def record(self, t: float, allocated: Mapping[str, Mapping[str, float]], capacity: Mapping[str, float]) -> None:
        """From `t` on, queue q holds allocated[q][resource] and the cluster has capacity[resource]."""
        width = len(self.resources)
        for queue in allocated:
            self._column(queue)
        if self._count and t < self._times[self._count - 1]:
            raise ValueError(f"usage records must come in time order: {t} is before {self._times[self._count - 1]}")
        if self._count and t == self._times[self._count - 1]:
            row = self._count - 1
        else:
            if self._count == self._times.size:
                self._times = np.concatenate([self._times, np.zeros(self._times.size)])
                self._alloc = np.vstack([self._alloc, np.zeros_like(self._alloc)])
                self._capacity = np.vstack([self._capacity, np.zeros_like(self._capacity)])
            row = self._count
            self._count += 1
        self._times[row] = t
        self._alloc[row] = 0.0
        for queue, amounts in allocated.items():
            col = self.queues[queue] * width
            for i, res in enumerate(self.resources):
                self._alloc[row, col + i] = float(amounts.get(res, 0.0))
        self._capacity[row] = [float(capacity.get(res, 0.0)) for res in self.resources]

    def forget_before(self, t: float) -> None:
        """Drop what no window starting at or after `t` can see (keeps the step in force at `t`)."""
        if not self._count:
            return
        first = int(np.searchsorted(self._times[: self._count], t, side="right")) - 1
        if first <= 0:
            return
        keep = self._count - first
        self._times[:keep] = self._times[first : self._count]
        self._alloc[:keep] = self._alloc[first : self._count]
        self._capacity[:keep] = self._capacity[first : self._count]
        self._count = keep

    def usage(self, now: float, params: UsageParams) -> dict[str, dict[str, float]]:
        """Each queue's usage at `now` as a fraction of capacity, per resource (0 with no history)."""
        result = {q: dict.fromkeys(self.resources, 0.0) for q in self.queues}
        if not self._count:
            return result
        start = window_start(now, params)
        times = self._times[: self._count]
        first = max(int(np.searchsorted(times, start, side="right")) - 1, 0)
        last = int(np.searchsorted(times, now, side="left"))  # records at or after `now` do not count yet
        if last <= first:
            return result
        seg_starts = np.maximum(times[first:last], start)
        seg_ends = np.minimum(np.append(times[first + 1 : last], now), now)
        weights = segment_weights(seg_starts, seg_ends, now, params.half_life_period)
        capacity = weights @ self._capacity[first:last]
        allocated = weights @ self._alloc[first:last]
        width = len(self.resources)
        for queue, block in self.queues.items():
            for i, res in enumerate(self.resources):
                denominator = capacity[i]
                if denominator > 0:
                    result[queue][res] = float(allocated[block * width + i] / denominator)
        return result


def snapshot_allocations(snapshot: ClusterSnapshot) -> dict[str, dict[str, float]]:
    """What each queue (and each ancestor) holds in the snapshot: its running pods, in core units."""
    min_gpu_memory = float(min((n.gpu_memory_mib for n in snapshot.nodes if n.gpu_memory_mib), default=0))
    totals = {name: dict.fromkeys(QUEUE_RESOURCES, 0.0) for name in snapshot.queues}
    for pg in snapshot.podgroups.values():
        path, queue = [], pg.queue
        while queue and queue in snapshot.queues and queue not in path:
            path.append(queue)
            queue = snapshot.queues[queue].parent
        for pod in pg.pods:
            if pod.status not in ALLOCATED:
                continue
            shared = pod.gpu.is_shared or pod.gpu.mig
            amounts = {res: pod.requests.get(res) for res in QUEUE_RESOURCES}
            if shared:
                amounts[GPU] = pod.gpu.quota_gpus(min_gpu_memory)
            else:
                amounts[GPU] += pod.gpu.dra  # DRA claims' GPUs
            for name in path:
                for res, amount in amounts.items():
                    totals[name][res] += amount
    return totals


def snapshot_capacity(snapshot: ClusterSnapshot) -> dict[str, float]:
    """The cluster's capacity (usable nodes' allocatable) per queue resource."""
    return {res: sum(n.allocatable.get(res) for n in snapshot.nodes if n.usable) for res in QUEUE_RESOURCES}


class UsageTracker:
    """Time-based fair share from the scheduler's own record of allocations (no Prometheus needed).

    The live loop calls, every cycle, before `run_cycle`:

        tracker.observe(snapshot)                             # what runs now holds from now on
        snapshot.queue_usage = tracker.queue_usage(snapshot.now)

    Usage is recomputed every `fetchInterval` (as KAI's usage lister refreshes), and history that no
    window can see any more is dropped.
    """

    def __init__(self, params: UsageParams) -> None:
        self.params = params
        self.history = UsageHistory()
        self._cached: dict[str, dict[str, float]] = {}
        self._fetched: float | None = None
        self._observed: float | None = None

    def observe(self, snapshot: ClusterSnapshot) -> None:
        if self._observed is not None and snapshot.now < self._observed:
            return  # a clock that stepped back: keep the record in time order
        self._observed = snapshot.now
        self.history.record(snapshot.now, snapshot_allocations(snapshot), snapshot_capacity(snapshot))

    def queue_usage(self, now: float) -> dict[str, dict[str, float]]:
        if self._fetched is None or now - self._fetched >= self.params.fetch_interval or now < self._fetched:
            self._cached = self.history.usage(now, self.params)
            self._fetched = now
            self.history.forget_before(window_start(now, self.params))
        return self._cached
