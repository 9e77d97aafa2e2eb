"""Synthetic GPU-cluster workloads shaped after published traces.

What the large public traces of deep-learning clusters agree on — Microsoft Philly (Jeon et al.,
USENIX ATC 2019), SenseTime Helios (Hu et al., SC 2021) and Alibaba PAI (Weng et al., NSDI 2022):

* sizes: most jobs ask for one GPU, the count falls off roughly geometrically over powers of two,
  and a few very large gangs (tens to hundreds of GPUs) hold a large share of the GPU time;
* durations: heavy-tailed, close to log-normal: a median of minutes to an hour, a tail of days;
* arrivals: a Poisson process whose rate follows the working day (and drops at weekends).

The `synthetic` section of a workload file:

```yaml
synthetic:
  jobs: 10000                  # how many jobs (exactly)
  span: 7d                     # arrivals spread over this span ...
  submitFrom: 0s               # ... starting here (offset from the workload's start)
  seed: 1
  queues: {team-a: 3, team-b: 1}           # arrival weights (default: every leaf queue alike)
  sizes: {1: 0.70, 2: 0.10, 4: 0.08, 8: 0.07, 16: 0.025, 32: 0.015, 64: 0.007, 128: 0.003}
  gpusPerPod: 8                # larger jobs are gangs of such pods (default: the largest node)
  duration: {median: 30m, sigma: 1.5, min: 1m, max: 3d}   # log-normal, clipped
  load: 0.7                    # optional: scale durations so the jobs offer this share of GPU time
  diurnal: 0.5                 # day/night swing of the arrival rate (0 = flat)
  weekendFactor: 0.6           # arrival rate at weekends relative to weekdays
  priorities: {train: 0.9, build: 0.1}     # priority classes, by weight
  cpuPerGpu: "4"
  memoryPerGpu: 32Gi
  namePrefix: job
```
The same section and seed always give the same jobs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from kai.api import keys
from kai.api.errors import InvalidInput
from kai.sim.workload import JobSpec, _Reader

if TYPE_CHECKING:
    from kai.sim.workload import Workload

DEFAULT_SIZES: dict[int, float] = {1: 0.70, 2: 0.10, 4: 0.08, 8: 0.07, 16: 0.025, 32: 0.015, 64: 0.007, 128: 0.003}
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def arrival_rate(epoch: np.ndarray, diurnal: float, weekend_factor: float) -> np.ndarray:
    """Relative arrival rate at each instant: a day that peaks mid-afternoon (UTC), quieter weekends."""
    hour = (epoch % DAY) / HOUR
    rate = 1.0 + diurnal * np.sin(2 * math.pi * (hour - 9.0) / 24.0)
    weekday = ((epoch // DAY).astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    return np.maximum(rate, 0.0) * np.where(weekday >= 5, weekend_factor, 1.0)


def _weights(r: _Reader, fld: str, raw: Any, default: dict[Any, float]) -> dict[Any, float]:
    if raw is None:
        return dict(default)
    if not isinstance(raw, dict) or not raw:
        r.problem("synthetic", fld, "must be a non-empty mapping of name to weight")
        return dict(default)
    weights: dict[Any, float] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            r.problem("synthetic", f"{fld}.{key}", f"must be a weight >= 0, got {value!r}")
            continue
        weights[key] = float(value)
    if weights and sum(weights.values()) <= 0:
        r.problem("synthetic", fld, "needs at least one weight above 0")
    return weights or dict(default)


def generate_jobs(workload: Workload, raw: dict[str, Any]) -> list[JobSpec]:
    """The jobs of a `synthetic` section; raises InvalidInput naming the field on bad parameters."""
    r = _Reader(f"{workload.name}")
    count = r.integer("synthetic", "jobs", raw.get("jobs"), 0, minimum=1)
    if raw.get("jobs") is None:
        r.problem("synthetic", "jobs", "is required (how many jobs to generate)")
    span = r.span("synthetic", "span", raw.get("span"), 7 * DAY, positive=True)
    offset = r.span("synthetic", "submitFrom", raw.get("submitFrom"), 0.0)
    seed = r.integer("synthetic", "seed", raw.get("seed"), 1)
    leaves = {name: 1.0 for name, q in workload.queues.items() if not q.children}
    queue_weights = _weights(r, "queues", raw.get("queues"), leaves)
    for name in queue_weights:
        if name not in leaves:
            r.problem("synthetic", f"queues.{name}", "is not a leaf queue of the workload")
    size_raw = _weights(r, "sizes", raw.get("sizes"), DEFAULT_SIZES)
    sizes: dict[int, float] = {}
    for key, weight in size_raw.items():
        try:
            gpus = int(key)
        except (TypeError, ValueError):
            r.problem("synthetic", f"sizes.{key}", "keys must be whole numbers of GPUs")
            continue
        if gpus < 1:
            r.problem("synthetic", f"sizes.{key}", "keys must be at least 1 GPU")
            continue
        sizes[gpus] = weight
    per_pod = r.integer("synthetic", "gpusPerPod", raw.get("gpusPerPod"), max(workload.max_node_gpus, 1), minimum=1)
    dur = r.mapping("synthetic", "duration", raw.get("duration"))
    median = r.span("synthetic", "duration.median", dur.get("median"), 30 * MINUTE, positive=True)
    sigma = dur.get("sigma", 1.5)
    if isinstance(sigma, bool) or not isinstance(sigma, int | float) or sigma < 0:
        r.problem("synthetic", "duration.sigma", f"must be a number >= 0, got {sigma!r}")
        sigma = 1.5
    low = r.span("synthetic", "duration.min", dur.get("min"), MINUTE, positive=True)
    high = r.span("synthetic", "duration.max", dur.get("max"), 3 * DAY, positive=True)
    if high < low:
        r.problem("synthetic", "duration.max", "is shorter than duration.min")
    load = raw.get("load")
    if load is not None and (isinstance(load, bool) or not isinstance(load, int | float) or not 0 < load <= 10):
        r.problem("synthetic", "load", f"must be a number above 0 (a share of the cluster's GPU time), got {load!r}")
        load = None
    diurnal = raw.get("diurnal", 0.5)
    weekend = raw.get("weekendFactor", 0.6)
    for fld, value in (("diurnal", diurnal), ("weekendFactor", weekend)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            r.problem("synthetic", fld, f"must be a number from 0 to 1, got {value!r}")
    priorities = _weights(r, "priorities", raw.get("priorities"), {keys.TRAIN_PRIORITY_CLASS: 1.0})
    for name in priorities:
        if name not in keys.DEFAULT_PRIORITY_CLASSES:
            r.problem("synthetic", f"priorities.{name}", f"must be one of {', '.join(keys.DEFAULT_PRIORITY_CLASSES)}")
    cpu_per_gpu = r.quantity("synthetic", "cpuPerGpu", raw.get("cpuPerGpu"), 4000.0, cpu=True)
    mem_per_gpu = r.quantity("synthetic", "memoryPerGpu", raw.get("memoryPerGpu"), 32 * 2.0**30)
    checkpoint = r.span(
        "synthetic", "checkpointInterval", raw.get("checkpointInterval"), workload.simulation.checkpoint_interval
    )
    prefix = str(raw.get("namePrefix") or "job")
    if r.problems:
        raise InvalidInput(r.problems)

    rng = np.random.default_rng(seed)
    # Arrivals: given the count, Poisson arrival instants are independent draws from the rate's shape.
    grid = np.arange(0.0, span, MINUTE)
    rate = arrival_rate(workload.start + offset + grid, float(diurnal), float(weekend))
    if rate.sum() <= 0:
        rate = np.ones_like(rate)
    cdf = np.cumsum(rate)
    cdf /= cdf[-1]
    slots = np.searchsorted(cdf, rng.random(count), side="right")
    submits = np.sort(offset + grid[np.minimum(slots, grid.size - 1)] + rng.random(count) * MINUTE)
    submits = np.round(submits, 3)

    queue_names = sorted(queue_weights)
    queue_p = np.array([queue_weights[q] for q in queue_names])
    queue_idx = rng.choice(len(queue_names), size=count, p=queue_p / queue_p.sum())
    size_values = sorted(sizes)
    size_p = np.array([sizes[s] for s in size_values])
    gpus = np.array(size_values)[rng.choice(len(size_values), size=count, p=size_p / size_p.sum())]
    class_names = sorted(priorities)
    class_p = np.array([priorities[c] for c in class_names])
    class_idx = rng.choice(len(class_names), size=count, p=class_p / class_p.sum())
    durations = median * np.exp(float(sigma) * rng.standard_normal(count))
    durations = np.clip(durations, low, high)
    if load is not None:
        capacity = workload.total_gpus * span
        for _ in range(4):  # scaling then clipping moves the total a little: converge in a few steps
            offered = float((gpus * durations).sum())
            if offered <= 0 or capacity <= 0:
                break
            durations = np.clip(durations * (float(load) * capacity / offered), low, high)
    durations = np.round(durations)

    digits = len(str(count))
    jobs: list[JobSpec] = []
    for i in range(count):
        size = int(gpus[i])
        pods = max(1, math.ceil(size / per_pod)) if size > per_pod else 1
        per = size if pods == 1 else per_pod
        class_name = class_names[int(class_idx[i])]
        priority = keys.DEFAULT_PRIORITY_CLASSES[class_name]
        jobs.append(
            JobSpec(
                name=f"{prefix}-{i + 1:0{digits}d}",
                queue=queue_names[int(queue_idx[i])],
                submit=float(submits[i]),
                pods=pods,
                gpus_per_pod=per,
                duration=max(float(durations[i]), 1.0),
                gang=pods,
                priority_class=class_name,
                priority=priority,
                preemptible=priority < keys.NON_PREEMPTIBLE_PRIORITY_THRESHOLD,
                cpu_per_pod=cpu_per_gpu * per,
                memory_per_pod=mem_per_gpu * per,
                checkpoint_interval=checkpoint,
            )
        )
    return jobs
