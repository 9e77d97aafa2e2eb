"""What a simulation over time measured: utilisation, per-queue allocation against fair share, queue
wait and job completion times, makespan, evictions, fragmentation and Jain's fairness index.

All times in seconds of virtual time; GPU amounts in devices. The dictionary `compute_metrics`
returns is written as the report's metrics.json: it holds no wall-clock value, so that the same
workload and seed give byte-identical files.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kai.api.timeutil import format_time
from kai.sim.trace import CycleRecord, SimJob, TraceResult

PERCENTILES = (50, 95, 99)


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def summary(values: list[float]) -> dict[str, float | None]:
    """Count, mean, p50/p95/p99 and max (nearest-rank percentiles, so values are ones that occurred)."""
    if not values:
        return {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
    arr = np.sort(np.asarray(values, dtype=float))
    out: dict[str, float | None] = {"count": len(values), "mean": _r(arr.mean())}
    for p in PERCENTILES:
        rank = max(int(np.ceil(p / 100.0 * arr.size)) - 1, 0)
        out[f"p{p}"] = _r(arr[rank])
    out["max"] = _r(arr[-1])
    return out


def jain(values: list[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when every x is equal, 1/n when one takes all."""
    if not values:
        return None
    arr = np.asarray(values, dtype=float)
    square = float((arr * arr).sum())
    if square <= 0:
        return 1.0
    return float(arr.sum() ** 2 / (arr.size * square))


def _cycle_weights(cycles: list[CycleRecord], end: float) -> np.ndarray:
    """How long each cycle's picture stood: until the next cycle (the last one until the end)."""
    times = np.array([c.time for c in cycles] + [end], dtype=float)
    return np.maximum(np.diff(times), 0.0)


def _step_integral(times: list[float], values: list[float], start: float, end: float) -> float:
    if not times or end <= start:
        return 0.0
    t = np.clip(np.array([*times, end], dtype=float), start, end)
    return float((np.diff(t) * np.array(values, dtype=float)).sum())


def queue_fairness_samples(cycle: CycleRecord, leaves: list[str]) -> list[float]:
    """Each leaf queue's allocation relative to its fair share, for queues with a fair share."""
    return [cycle.allocated.get(q, 0.0) / cycle.fair_share[q] for q in leaves if cycle.fair_share.get(q, 0.0) > 1e-9]


def compute_metrics(result: TraceResult) -> dict[str, Any]:
    jobs = result.jobs
    start, end = result.start, result.end
    span = max(end - start, 0.0)
    capacity = result.capacity.get("gpu", 0.0)
    leaves = result.leaf_queues

    waits = [j.first_start - j.submit for j in jobs if j.first_start is not None]
    completions = [j.finish - j.submit for j in jobs if j.finish is not None]
    submitted = [j for j in jobs if j.state != "future"]
    never = [j for j in submitted if j.first_start is None]
    finished = [j for j in jobs if j.finish is not None]
    first_submit = min((j.submit for j in submitted), default=start)
    makespan = (max(j.finish for j in finished) - first_submit) if finished and len(finished) == len(jobs) else None

    allocated_gpu_seconds = _step_integral(result.alloc_times, result.alloc_total, start, end)
    utilisation = allocated_gpu_seconds / (capacity * span) if capacity > 0 and span > 0 else None

    weights = _cycle_weights(result.cycles, end) if result.cycles else np.zeros(0)
    total_weight = float(weights.sum())

    def time_mean(values: list[float]) -> float | None:
        if not values or total_weight <= 0:
            return None
        return float(np.dot(weights, np.asarray(values, dtype=float)) / total_weight)

    fragmented = [c.fragmented_gpus for c in result.cycles]
    free = [c.free_gpus for c in result.cycles]
    waiting = np.array([c.pending_gpus > 0 for c in result.cycles], dtype=bool)
    free_while_waiting = float(np.dot(weights[waiting], np.asarray(free)[waiting])) if waiting.any() else 0.0
    frag_while_waiting = float(np.dot(weights[waiting], np.asarray(fragmented)[waiting])) if waiting.any() else 0.0

    jain_values: list[float] = []
    jain_weights: list[float] = []
    for cycle, weight in zip(result.cycles, weights, strict=True):
        index = jain(queue_fairness_samples(cycle, leaves))
        if index is not None:
            jain_values.append(index)
            jain_weights.append(float(weight))
    jain_mean = (
        float(np.dot(jain_values, jain_weights) / sum(jain_weights)) if jain_values and sum(jain_weights) > 0 else None
    )

    queues: dict[str, Any] = {}
    overall: list[float] = []
    for name in sorted(result.queues):
        q_jobs = [j for j in jobs if j.queue == name]
        gpu_seconds = _step_integral(result.alloc_times, result.alloc_by_queue.get(name, []), start, end)
        fair_seconds = (
            float(np.dot(weights, [c.fair_share.get(name, 0.0) for c in result.cycles])) if result.cycles else 0.0
        )
        entry: dict[str, Any] = {
            "parent": result.queues[name] or None,
            "gpuHours": _r(gpu_seconds / 3600.0),
            "fairShareGpuHours": _r(fair_seconds / 3600.0),
            "meanAllocatedGpus": _r(gpu_seconds / span) if span > 0 else None,
            "meanFairShareGpus": _r(fair_seconds / total_weight) if total_weight > 0 else None,
        }
        if name in leaves:
            entry.update(
                {
                    "jobs": len(q_jobs),
                    "started": sum(1 for j in q_jobs if j.first_start is not None),
                    "finished": sum(1 for j in q_jobs if j.finish is not None),
                    "waitSeconds": summary([j.first_start - j.submit for j in q_jobs if j.first_start is not None]),
                    "completionSeconds": summary([j.finish - j.submit for j in q_jobs if j.finish is not None]),
                    "evictedJobs": sum(1 for j in q_jobs if j.interruptions),
                    "gpuHoursLost": _r(sum(j.lost_gpu_seconds for j in q_jobs) / 3600.0),
                }
            )
            if fair_seconds > 0:
                overall.append(gpu_seconds / fair_seconds)
        queues[name] = entry

    return {
        "simulation": {
            "start": format_time(start),
            "end": format_time(end),
            "virtualSeconds": _r(span),
            "cycles": len(result.cycles),
            "timeBasedFairShare": result.time_based,
            "stoppedBy": result.stopped_by,
        },
        "cluster": {"gpus": _r(capacity), "cpuMillicores": _r(result.capacity.get("cpu", 0.0))},
        "jobs": {
            "total": len(jobs),
            "submitted": len(submitted),
            "started": len(waits),
            "finished": len(finished),
            "neverStarted": len(never),
        },
        "waitSeconds": summary(waits),
        "completionSeconds": summary(completions),
        "makespanSeconds": _r(makespan),
        "gpuUtilisation": _r(utilisation, 4),
        "meanAllocatedGpus": _r(allocated_gpu_seconds / span) if span > 0 else None,
        "evictions": {
            "pods": result.evicted_pods,
            "jobsInterrupted": sum(1 for j in jobs if j.interruptions),
            "interruptions": sum(j.interruptions for j in jobs),
            "gpuHoursLost": _r(sum(j.lost_gpu_seconds for j in jobs) / 3600.0),
        },
        "fragmentation": {
            "meanFragmentedGpus": _r(time_mean(fragmented)),
            "meanFreeGpus": _r(time_mean(free)),
            "fragmentedShareOfFreeWhileJobsWait": _r(frag_while_waiting / free_while_waiting, 4)
            if free_while_waiting > 0
            else None,
        },
        "fairness": {
            "jainIndexMean": _r(jain_mean, 4),
            "jainIndexOverall": _r(jain(overall), 4),
        },
        "queues": queues,
    }


def job_rows(jobs: list[SimJob]) -> list[list[Any]]:
    """One row per job for jobs.csv."""
    rows: list[list[Any]] = [
        ["job", "queue", "gpus", "submit", "start", "finish", "waitSeconds", "interruptions", "gpuHoursLost"]
    ]
    for j in jobs:
        rows.append(
            [
                j.key,
                j.queue,
                _r(j.gpus),
                format_time(j.submit),
                format_time(j.first_start) if j.first_start is not None else "",
                format_time(j.finish) if j.finish is not None else "",
                _r(j.first_start - j.submit) if j.first_start is not None else "",
                j.interruptions,
                _r(j.lost_gpu_seconds / 3600.0),
            ]
        )
    return rows
