"""`make bench`: build synthetic snapshots (S, M, L), run one full scheduling cycle on each, and print
snapshot-build time, time per action, total cycle time and peak memory. Every time is shown as wall
time and as this process's CPU time (the machines are shared: CPU time is what to compare)."""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from endtoend import file_scenario, help_time, idle_round, print_targets
from generate import cluster

from kai.cycle import run_cycle
from kai.framework.config import SchedulerConfig
from kai.snapshot.builder import build_snapshot


def measure(name: str, spec: dict, repeat: int) -> dict[str, float]:
    objects = cluster(spec)
    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    result = build_snapshot(objects, now=1_767_225_600.0)
    build, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.collect()
    gc.freeze()  # the snapshot lives on: keep the collector off it (the cycle pauses the collector itself)
    assert not result.problems, result.problems[:3]
    timings: dict[str, tuple[float, float]] = {}
    best_total, best_cpu = float("inf"), float("inf")
    decisions = None
    for _ in range(repeat):
        step_times: dict[str, tuple[float, float]] = {}

        def timed(step: str, fn, step_times=step_times) -> None:
            start, cpu = time.perf_counter(), time.process_time()
            fn()
            step_times[step] = (time.perf_counter() - start, time.process_time() - cpu)

        start, cpu = time.perf_counter(), time.process_time()
        decisions = run_cycle(result.snapshot, SchedulerConfig(), timed)
        total, total_cpu = time.perf_counter() - start, time.process_time() - cpu
        if total_cpu < best_cpu:
            best_total, best_cpu, timings = total, total_cpu, step_times
    assert decisions is not None
    pending = sum(1 for pg in result.snapshot.podgroups.values() for p in pg.pods if p.status.value == "Pending")
    print(
        f"\n== {name}: {spec['nodes']} nodes x {spec['gpus_per_node']} GPUs, "
        f"{sum(len(list(pg.pods)) for pg in result.snapshot.podgroups.values())} pods "
        f"({pending} pending in {sum(1 for pg in result.snapshot.podgroups.values() if pg.has_pending())} jobs)"
    )
    print(f"   {'':<19} {'wall':>8}   {'CPU':>8}")
    print(f"   snapshot build      {build:8.3f} s {build_cpu:8.3f} s")
    for step, (seconds, cpu_seconds) in timings.items():
        print(f"   {step:<19} {seconds:8.3f} s {cpu_seconds:8.3f} s")
    verdict = "ok" if best_cpu <= spec["budget_seconds"] else "OVER BUDGET"
    print(
        f"   cycle total         {best_total:8.3f} s {best_cpu:8.3f} s   "
        f"(budget {spec['budget_seconds']} s of CPU: {verdict})"
    )
    print(
        f"   bound {len(decisions.bindings)}, pipelined {len(decisions.pipelined)}, evicted {len(decisions.evictions)}"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"   peak memory         {rss / 1024:8.0f} MiB max RSS of the process "
        f"(+{(rss - rss_before) / 1024:.0f} MiB for this size)"
    )
    out = {"build": build, "cycle": best_total, "build_cpu": build_cpu, "cycle_cpu": best_cpu, "nodes": spec["nodes"]}
    out.update({f"{step}_cpu": cpu_seconds for step, (_, cpu_seconds) in timings.items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes",
        default="S,M,M-fractions,L,M-reclaim,M-preempt,M-reclaim-scattered,M-topology",
        help="comma-separated sizes from scenarios.yaml",
    )
    parser.add_argument("--repeat", type=int, default=3, help="cycles per size; the one with least CPU is reported")
    parser.add_argument(
        "--end-to-end",
        default="L",
        help="sizes to run as `kai simulate` on a JSON file and as a round with nothing to do ('' for none)",
    )
    args = parser.parse_args()
    specs = yaml.safe_load((Path(__file__).parent / "scenarios.yaml").read_text())["sizes"]
    results: dict[str, dict[str, float]] = {}
    for name in args.sizes.split(","):
        results[name] = measure(name, specs[name], args.repeat if name != "L" else 1)
    gc.collect()
    for name in filter(None, args.end_to_end.split(",")):
        results[f"idle:{name}"] = idle_round(name, specs[name])
        gc.collect()
        results[f"file:{name}"] = file_scenario(name, specs[name])
    results["help"] = help_time()
    print_targets(results)


if __name__ == "__main__":
    main()
