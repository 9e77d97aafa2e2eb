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

The same usage, read from a Prometheus usage DB as KAI reads it (`usageDBConfig.clientType:
prometheus` with a connection string): `prometheus_queries` writes the PromQL (per resource, the
allocation metric by `queue_name` and the cluster's capacity, each summed over the window at
`queryResolution` and multiplied by the decay `0.5^((now - time()) / halfLife)` when a half-life is
set), and `usage_from_answers` turns Prometheus's instant-vector answers into each queue's usage,
allocation over capacity. The HTTP client that asks is an adapter (kai/cluster/usagedb.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kai.api.timeutil import parse_duration
from kai.framework.config import UsageParams
from kai.model import ALLOCATED, CPU, GPU, MEMORY, QUEUE_RESOURCES, ClusterSnapshot

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

    def close(self) -> None:
        """Nothing to release (the Prometheus source stops its fetcher here)."""


# -- usage from a Prometheus usage DB -----------------------------------------------------------------
QUEUE_NAME_LABEL = "queue_name"
_EXTRA_PREFIX = {GPU: "gpu", CPU: "cpu", MEMORY: "memory"}
_CAPACITY_RESOURCE = {GPU: "nvidia_com_gpu", CPU: "cpu", MEMORY: "memory"}  # kube-state-metrics' names
DEFAULT_QUERY_RESOLUTION = 60.0
DEFAULT_QUERY_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class UsageQuery:
    """One PromQL instant query: the allocation by queue (`kind` "allocation") or the capacity of `resource`."""

    resource: str
    kind: str
    promql: str


def _extra_seconds(params: UsageParams, key: str, default: float) -> float:
    """A Go-duration `extraParams` value in seconds; the default when absent or unreadable (as KAI)."""
    text = params.extra(key)
    try:
        seconds = parse_duration(text) if text else default
    except ValueError:
        return default
    return seconds if seconds > 0 else default


def query_resolution(params: UsageParams) -> float:
    return _extra_seconds(params, "queryResolution", DEFAULT_QUERY_RESOLUTION)


def query_timeout(params: UsageParams) -> float:
    return _extra_seconds(params, "usageQueryTimeout", DEFAULT_QUERY_TIMEOUT)


def allocation_metric(params: UsageParams, resource: str, metrics_namespace: str = "kai") -> str:
    """`<gpu|cpu|memory>AllocationMetric`, by default the queue controller's `<ns>_queue_allocated_*`."""
    unit = {GPU: "gpus", CPU: "cpu_cores", MEMORY: "memory_bytes"}[resource]
    default = f"{metrics_namespace}_queue_allocated_{unit}" if metrics_namespace else f"queue_allocated_{unit}"
    return params.extra(f"{_EXTRA_PREFIX[resource]}AllocationMetric", default)


def capacity_metric(params: UsageParams, resource: str) -> str:
    """`<gpu|cpu|memory>CapacityMetric`, by default KAI's: kube-state-metrics' node capacity, summed."""
    default = f'sum(kube_node_status_capacity{{resource="{_CAPACITY_RESOURCE[resource]}"}})'
    return params.extra(f"{_EXTRA_PREFIX[resource]}CapacityMetric", default)


def _promql_duration(seconds: float) -> str:
    whole = max(1, math.ceil(seconds - 1e-9))
    return f"{whole}s"


def _window_sum(expr: str, now: float, params: UsageParams) -> str:
    if params.half_life_period > 0:
        expr = f"({expr}) * (0.5^(({int(now)} - time()) / {params.half_life_period:g}))"
    resolution = query_resolution(params)
    span = max(now - window_start(now, params), resolution)
    return f"sum_over_time(({expr})[{_promql_duration(span)}:{_promql_duration(resolution)}])"


def prometheus_queries(now: float, params: UsageParams, metrics_namespace: str = "kai") -> list[UsageQuery]:
    """The instant queries (evaluated at `now`) whose answers give every queue's usage at `now`."""
    queries = []
    for res in QUEUE_RESOURCES:
        queries.append(UsageQuery(res, "capacity", _window_sum(capacity_metric(params, res), now, params)))
        queries.append(
            UsageQuery(res, "allocation", _window_sum(allocation_metric(params, res, metrics_namespace), now, params))
        )
    return queries


class UsageAnswerError(ValueError):
    """A Prometheus answer that gives no usage (an error status, not a vector, a sample without a number)."""


def _vector(answer: Any, query: UsageQuery) -> list[Any]:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise UsageAnswerError(f"query {query.promql!r} failed: {error or 'not a Prometheus answer'}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector":
        raise UsageAnswerError(f"query {query.promql!r}: expected a vector, got {data.get('resultType')!r}")
    result = data.get("result") or []
    if not isinstance(result, list):
        raise UsageAnswerError(f"query {query.promql!r}: the result is not a list")
    return result


def _sample_value(sample: Any, query: UsageQuery) -> float:
    try:
        value = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        raise UsageAnswerError(f"query {query.promql!r}: a sample without a number: {sample!r}") from None
    return value


def usage_from_answers(answers: list[tuple[UsageQuery, Any]]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Each queue's usage per resource (allocation over capacity) from the answers to `prometheus_queries`,
    and the capacity queries that had no sample.

    A capacity query with no sample means no history in the window for that resource: no queue has
    usage of it (KAI has none either: it reports the query as failed). A queue with no allocation
    sample has no entry for that resource (usage 0); a capacity of 0 gives usage 0.
    """
    capacity: dict[str, float] = {}
    empty: list[str] = []
    for query, answer in answers:
        if query.kind == "capacity":
            samples = _vector(answer, query)
            if samples:
                capacity[query.resource] = _sample_value(samples[0], query)
            else:
                empty.append(query.promql)
    usage: dict[str, dict[str, float]] = {}
    for query, answer in answers:
        if query.kind != "allocation":
            continue
        samples = _vector(answer, query)
        if query.resource not in capacity:
            continue
        total = capacity[query.resource]
        for sample in samples:
            queue = str((sample.get("metric") or {}).get(QUEUE_NAME_LABEL, "")) if isinstance(sample, dict) else ""
            if not queue:
                continue
            value = _sample_value(sample, query)
            share = value / total if total > 0 and math.isfinite(value) else 0.0
            usage.setdefault(queue, dict.fromkeys(QUEUE_RESOURCES, 0.0))[query.resource] = share
    return usage, empty
