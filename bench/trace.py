"""`make bench-trace`: the simulator over time on a synthetic week — by default 10,000 jobs on
500 nodes x 8 GPUs, shaped after published GPU-cluster traces (kai.sim.generate) — and the real
time it takes: generation, simulation (cycles and cycles per second), metrics and, with --report,
the HTML report.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path
from typing import Any

from kai.cycle import known_actions
from kai.framework.config import parse_config
from kai.sim.metrics import compute_metrics
from kai.sim.workload import parse_workload, simulate_workload


def workload(jobs: int, nodes: int, load: float, seed: int, period: str, time_based: bool) -> dict[str, Any]:
    gpus = nodes * 8
    teams = {"team-a": 0.4, "team-b": 0.3, "team-c": 0.2, "team-d": 0.1}
    queues: list[dict[str, Any]] = [{"name": "research", "resources": {"gpu": {"quota": gpus}}}]
    for name, share in teams.items():
        queues.append(
            {"name": name, "parentQueue": "research", "resources": {"gpu": {"quota": int(gpus * share * 0.5)}}}
        )
    scheduler: dict[str, Any] = {}
    if time_based:
        scheduler["usageDBConfig"] = {"usageParams": {"windowSize": "24h", "halfLifePeriod": "6h"}}
    return {
        "name": f"synthetic-week-{jobs}",
        "start": "2026-01-05T00:00:00Z",
        "simulation": {"cyclePeriod": period, "until": "14d"},
        "cluster": {"nodes": [{"name": "dgx", "count": nodes, "gpus": 8, "cpu": "128", "memory": "2Ti"}]},
        "queues": queues,
        "scheduler": scheduler,
        "synthetic": {
            "jobs": jobs,
            "span": "7d",
            "seed": seed,
            "queues": {k: v * 10 for k, v in teams.items()},
            "load": load,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--load", type=float, default=0.8, help="offered share of the cluster's GPU time")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cycle-period", default="10s")
    parser.add_argument("--time-based", action="store_true", help="turn on time-based fair share")
    parser.add_argument("--report", type=Path, default=None, help="also write the HTML report here")
    args = parser.parse_args()

    t0 = time.perf_counter()
    wl = parse_workload(workload(args.jobs, args.nodes, args.load, args.seed, args.cycle_period, args.time_based))
    config, problems, _ = parse_config(wl.scheduler, known_actions())
    assert not problems, problems
    generated = time.perf_counter() - t0
    gc.collect()
    gc.freeze()
    t1, cpu1 = time.perf_counter(), time.process_time()
    result = simulate_workload(wl, config)
    simulated, simulated_cpu = time.perf_counter() - t1, time.process_time() - cpu1
    t2 = time.perf_counter()
    metrics = compute_metrics(result)
    measured = time.perf_counter() - t2
    print(f"== synthetic week: {args.jobs} jobs on {args.nodes} nodes x 8 GPUs (load {args.load}, seed {args.seed})")
    print(f"   generate workload   {generated:8.2f} s")
    cycles = len(result.cycles)
    print(
        f"   simulate            {simulated:8.2f} s   ({simulated_cpu:.2f} s CPU) {cycles} cycles, "
        f"{cycles / simulated:.0f} cycles/s"
    )
    print(f"   metrics             {measured:8.2f} s")
    if args.report is not None:
        from kai.sim.html_report import write_report

        t3 = time.perf_counter()
        write_report(args.report, [(wl.name, result, metrics)], wl)
        print(f"   report              {time.perf_counter() - t3:8.2f} s   ({args.report})")
    sim = metrics["simulation"]
    print(f"   virtual time        {sim['virtualSeconds'] / 86400:8.2f} days ({sim['start']} .. {sim['end']})")
    wait = metrics["waitSeconds"]
    jobs = metrics["jobs"]
    print(
        f"   jobs                {jobs['finished']} finished, {jobs['neverStarted']} never started;"
        f" wait p50 {wait['p50']} s, p95 {wait['p95']} s, p99 {wait['p99']} s"
    )
    print(
        f"   GPU utilisation     {metrics['gpuUtilisation']}; evictions {metrics['evictions']['pods']} pods, "
        f"{metrics['evictions']['gpuHoursLost']} GPU-hours lost; Jain {metrics['fairness']['jainIndexMean']}"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"   peak memory         {rss / 1024:8.0f} MiB max RSS")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
