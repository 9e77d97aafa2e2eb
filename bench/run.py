"""`make bench`: build synthetic snapshots (S, M, L) and run full scheduling cycles on each, `--repeat`
times each (3 by default), and print snapshot-build time, time per action, total cycle time and peak
memory; the build and the cycle shown are the runs with least CPU. Every time is shown as wall time
and as this process's CPU time (the machines are shared: CPU time is what to compare).

Budgets (CPU seconds) come from scenarios.yaml: `budget_seconds` for the whole cycle, `step_budgets`
for single steps. Scenarios of one `series` (the same cluster at growing sizes, `extends` naming the
base scenario) also get the growth exponent of their eviction steps between sizes, flagged above 1
(worse than linear). Every miss is listed again at the end."""

from __future__ import annotations

import argparse
import gc
import math
import resource
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from endtoend import busy_round, file_scenario, help_time, idle_round, print_targets
from generate import cluster

from kai.cycle import run_cycle
from kai.framework.config import SchedulerConfig
from kai.snapshot.builder import build_snapshot

MISSES: list[str] = []  # every target missed in this run, for the summary at the end
GROWTH_STEPS = ("consolidation", "reclaim", "preempt")  # steps whose growth a series reports


def measure(name: str, spec: dict, repeat: int) -> dict[str, float]:
    objects = cluster(spec)
    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    build, build_cpu = float("inf"), float("inf")
    for _ in range(repeat):  # the build with least CPU is reported, as the cycle's
        result = None  # one snapshot in memory at a time (the peak memory below is one build's)
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        result = build_snapshot(objects, now=1_767_225_600.0)
        wall, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        if cpu_seconds < build_cpu:
            build, build_cpu = wall, cpu_seconds
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
    step_budgets = spec.get("step_budgets") or {}
    for step, (seconds, cpu_seconds) in timings.items():
        note = ""
        if step in step_budgets:
            ok = cpu_seconds <= step_budgets[step]
            note = f"   (target {step_budgets[step]} s of CPU: {'ok' if ok else 'MISSED'})"
            if not ok:
                MISSES.append(f"{name}: {step} {cpu_seconds:.3f} s CPU, target {step_budgets[step]} s")
        print(f"   {step:<19} {seconds:8.3f} s {cpu_seconds:8.3f} s{note}")
    verdict = "ok" if best_cpu <= spec["budget_seconds"] else "OVER BUDGET"
    if best_cpu > spec["budget_seconds"]:
        MISSES.append(f"{name}: cycle {best_cpu:.3f} s CPU, budget {spec['budget_seconds']} s")
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


def resolve(specs: dict[str, dict]) -> dict[str, dict]:
    """Each scenario with the keys of the one it `extends` filled in (the series tag included)."""
    out: dict[str, dict] = {}
    for name, spec in specs.items():
        chain = [spec]
        while "extends" in chain[-1]:
            chain.append(specs[chain[-1]["extends"]])
        merged: dict = {}
        for part in reversed(chain):
            merged.update(part)
        merged.pop("extends", None)
        out[name] = merged
    return out


def report_growth(specs: dict[str, dict], results: dict[str, dict[str, float]]) -> None:
    """Per series: the eviction steps' CPU time at each size, and the exponent between sizes."""
    series: dict[str, list[str]] = {}
    for name in results:
        if specs[name].get("series"):
            series.setdefault(specs[name]["series"], []).append(name)
    for tag, names in series.items():
        names.sort(key=lambda n: specs[n]["nodes"])
        if len(names) < 2:
            continue
        print(f"\n== growth of {tag} (CPU seconds; exponent between sizes, 1 = linear)")
        steps = [s for s in GROWTH_STEPS if all(results[n].get(f"{s}_cpu", 0.0) > 0.01 for n in names)]
        print("   " + f"{'nodes':>7}" + "".join(f" {s:>14}" for s in steps))
        previous: str | None = None
        for name in names:
            line = f"   {specs[name]['nodes']:>7}"
            for step in steps:
                cpu = results[name][f"{step}_cpu"]
                cell = f"{cpu:.3f}"
                if previous is not None:
                    ratio = specs[name]["nodes"] / specs[previous]["nodes"]
                    exponent = math.log(cpu / results[previous][f"{step}_cpu"]) / math.log(ratio)
                    cell += f" ^{exponent:.2f}"
                    if exponent > 1.0 and cpu >= 0.5:  # smaller steps are too noisy to judge
                        cell += "!"
                        MISSES.append(
                            f"{tag}: {step} grows with the {exponent:.2f} power of the cluster "
                            f"({specs[previous]['nodes']} -> {specs[name]['nodes']} nodes), target <= 1"
                        )
                line += f" {cell:>14}"
            print(line)
            previous = name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes",
        default=(
            "S,M,M-fractions,L,M-reclaim,M-preempt,M-reclaim-scattered,M-reclaim-scattered-2500,"
            "M-reclaim-scattered-5000,M-topology"
        ),
        help="comma-separated sizes from scenarios.yaml",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="builds and cycles per size; the one with least CPU of each is reported"
    )
    parser.add_argument(
        "--end-to-end",
        default="L",
        help=(
            "sizes to run as `kai simulate` on a JSON file and as a round with nothing to do ('' for none)"
        ),
    )
    parser.add_argument(
        "--busy-round",
        default=None,
        help="sizes to run as a round after a round with decisions (default: those of --end-to-end; '' for none)",
    )
    args = parser.parse_args()
    specs = resolve(yaml.safe_load((Path(__file__).parent / "scenarios.yaml").read_text())["sizes"])
    results: dict[str, dict[str, float]] = {}
    for name in args.sizes.split(","):
        results[name] = measure(name, specs[name], args.repeat)
    report_growth(specs, results)
    gc.collect()
    for name in filter(None, args.end_to_end.split(",")):
        results[f"idle:{name}"] = idle_round(name, specs[name])
        gc.collect()
        results[f"file:{name}"] = file_scenario(name, specs[name])
    busy = args.end_to_end if args.busy_round is None else args.busy_round
    for name in filter(None, busy.split(",")):
        results[f"busy:{name}"] = busy_round(name, specs[name])
        gc.collect()
    results["help"] = help_time()
    MISSES.extend(print_targets(results))
    if MISSES:
        print("\n== targets missed")
        for miss in MISSES:
            print(f"   {miss}")
    else:
        print("\n== every target met")


if __name__ == "__main__":
    main()
