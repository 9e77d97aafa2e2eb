"""`kai simulate-trace` (a workload over virtual time, with a report) and `kai what-if` (when would
this job start on that cluster, and whom would it displace). Plain functions that kai/cli.py
registers as commands; bad input ends with one line per problem naming the object and field.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kai.api.errors import InvalidInput, Problem
from kai.api.timeutil import format_time, parse_time
from kai.console import Output, err, fail, load_config, read_yaml, warn
from kai.framework.config import SchedulerConfig

TraceOutput = Output  # table or json


@contextmanager
def _progress(enabled: bool, total: float, label: str) -> Iterator[Callable[[float], None] | None]:
    """A progress bar over virtual time on stderr (only on a terminal, unless asked for)."""
    if not enabled:
        yield None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[virtual]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=max(total, 1.0), virtual="")
        state = {"last": 0.0}

        def update(elapsed: float) -> None:
            if elapsed > bar.tasks[0].total:  # type: ignore[operator]
                bar.update(task, total=elapsed)
            if elapsed - state["last"] >= 60.0 or elapsed == 0.0:
                state["last"] = elapsed
                bar.update(task, completed=elapsed, virtual=f"{elapsed / 3600:.1f} h virtual")

        yield update


def _label(path: Path, taken: set[str]) -> str:
    label, number = path.stem, 1
    while label in taken:
        number += 1
        label = f"{path.stem}-{number}"
    taken.add(label)
    return label


def simulate_trace(
    workload_file: Annotated[Path, typer.Argument(help="Workload YAML: cluster, queues, jobs or a synthetic trace.")],
    report: Annotated[
        Path | None, typer.Option("--report", help="Write report.html, plots (PNG), metrics.json, jobs CSV here.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Scheduler configuration (default: the workload's).")
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option("--compare", help="Two scheduler configurations to run on the same workload, side by side."),
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Stop after this much virtual time (e.g. 7d).")] = None,
    exact: Annotated[bool, typer.Option("--exact", help="Run every cycle of the grid (no skipping).")] = False,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bar (default: on a terminal).")
    ] = None,
    output: Annotated[TraceOutput, typer.Option("-o", "--output", help="table or json (the metrics).")] = (
        TraceOutput.table
    ),
) -> None:
    """Replay a workload over virtual time through kai's own scheduling cycle and report what happened."""
    from kai.cycle import ConfigError
    from kai.sim.metrics import compute_metrics
    from kai.sim.workload import parse_span, parse_workload, simulate_workload

    if config is not None and compare is not None:
        raise fail(["--config and --compare: give one or the other"])
    try:
        limit = parse_span(until) if until else None
    except ValueError:
        raise fail([f"--until: {until!r} is not a duration such as 12h or 7d"]) from None
    try:
        workload = parse_workload(read_yaml(workload_file), f"workload {workload_file}")
        configs: list[tuple[str, SchedulerConfig]] = []
        if compare is not None:
            taken: set[str] = set()
            for path in compare:
                configs.append((_label(path, taken), load_config(read_yaml(path), f"config {path}")))
        elif config is not None:
            configs.append((config.stem, load_config(read_yaml(config), f"config {config}")))
        else:
            where = f"workload {workload_file}: scheduler"
            configs.append(("workload config", load_config(workload.scheduler, where)))
        show = sys.stderr.isatty() if progress is None else progress
        expected = max((j.submit + j.duration for j in workload.jobs), default=0.0)
        if limit is not None or workload.simulation.until is not None:
            expected = limit if limit is not None else float(workload.simulation.until or 0.0)
        runs = []
        for label, cfg in configs:
            started = time.perf_counter()
            with _progress(show, expected, f"simulating {label}") as tick:
                callback = (lambda t, tick=tick: tick(t - workload.start)) if tick is not None else None
                result = simulate_workload(workload, cfg, callback, exact=exact, until=limit)
            seconds = time.perf_counter() - started
            err.print(
                f"{label}: {len(workload.jobs)} jobs, {len(result.cycles)} cycles, "
                f"{(result.end - result.start) / 3600:.1f} h virtual in {seconds:.1f} s real",
                soft_wrap=True,
            )
            runs.append((label, result, compute_metrics(result)))
    except (InvalidInput, ConfigError) as problem:
        raise fail([str(p) for p in problem.problems]) from None

    if report is not None:
        from kai.sim.html_report import write_report

        try:
            write_report(report, runs, workload)
        except OSError as e:
            raise fail([f"--report {report}: cannot write: {e.strerror or e}"]) from None
        err.print(f"report written to {report / 'report.html'}", soft_wrap=True)
    if output is TraceOutput.json:
        document = {label: metrics for label, _, metrics in runs}
        sys.stdout.write(json.dumps(document if len(runs) > 1 else runs[0][2], indent=2, sort_keys=True) + "\n")
        return
    _print_summary(runs)


def _print_summary(runs: list[tuple[str, Any, dict[str, Any]]]) -> None:
    from kai.sim.html_report import SUMMARY_ROWS, _dig

    table = Table(title="Simulation over time", title_justify="left")
    table.add_column("metric")
    for label, _, _ in runs:
        table.add_column(label, justify="right")
    for name, path, unit in SUMMARY_ROWS:
        cells = []
        for _, _, metrics in runs:
            value = _dig(metrics, path)
            if value is None:
                cells.append("–")
            elif unit == "s":
                cells.append(f"{value:,.0f} s")
            else:
                cells.append(str(value))
        table.add_row(name, *cells)
    Console(width=max(Console().width, 100)).print(table)


# -- what-if ---------------------------------------------------------------------------------------

DURATION_ANNOTATION = "kai.sim/duration"  # how long the job runs in all
REMAINING_ANNOTATION = "kai.sim/remaining"  # how long a running job still runs


def _annotations(objects: list[dict[str, Any]]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """PodGroup annotations by namespace/name, and pod annotations by namespace/name."""
    groups: dict[str, dict[str, str]] = {}
    pods: dict[str, dict[str, str]] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict) or not meta.get("name"):
            continue
        key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        if obj.get("kind") == "PodGroup":
            groups[key] = annotations
        elif obj.get("kind") == "Pod":
            pods[key] = annotations
    return groups, pods


def _job_duration(
    annotations: dict[str, str], where: str, running: bool, elapsed: float | None, default: float
) -> float:
    """Seconds the job still has to run (running) or runs in all (waiting), from annotations or the default."""
    from kai.sim.workload import parse_span

    def read(key: str) -> float | None:
        if key not in annotations:
            return None
        try:
            seconds = parse_span(annotations[key])
        except ValueError as e:
            raise InvalidInput([Problem(where, f"metadata.annotations[{key}]", str(e))]) from e
        if seconds < 0:
            raise InvalidInput([Problem(where, f"metadata.annotations[{key}]", "must not be negative")])
        return seconds

    remaining, total = read(REMAINING_ANNOTATION), read(DURATION_ANNOTATION)
    if running:
        if remaining is not None:
            return remaining
        if total is not None:
            return max(total - (elapsed or 0.0), 0.0)
        return default
    return total if total is not None else default


def what_if(
    files: Annotated[list[Path], typer.Option("-f", "--filename", help="Snapshot YAML (repeatable).")],
    job: Annotated[Path, typer.Option("--job", help="The job: PodGroup + Pods (Kubernetes YAML) or a workload job.")],
    config: Annotated[Path | None, typer.Option("--config", help="Scheduler configuration file.")] = None,
    now: Annotated[str | None, typer.Option("--now", help="RFC 3339 instant the snapshot was taken.")] = None,
    horizon: Annotated[str, typer.Option("--horizon", help="How far ahead to look (e.g. 7d).")] = "7d",
    default_duration: Annotated[
        str,
        typer.Option(
            "--default-duration",
            help=f"Run time of jobs without a {DURATION_ANNOTATION} or {REMAINING_ANNOTATION} annotation.",
        ),
    ] = "1h",
    cycle_period: Annotated[str, typer.Option("--cycle-period", help="Virtual time between cycles.")] = "10s",
    output: Annotated[TraceOutput, typer.Option("-o", "--output", help="table or json.")] = TraceOutput.table,
) -> None:
    """When would this job start on the cluster in the snapshot, and which running jobs would it displace?"""
    from kai.cycle import ConfigError
    from kai.sim.workload import parse_span

    try:
        moment = parse_time(now) if now else datetime.now(UTC).timestamp()
    except ValueError:
        raise fail([f"--now: {now!r} is not an RFC 3339 time such as 2026-01-01T00:00:00Z"]) from None
    spans = {}
    given = (("--horizon", horizon), ("--default-duration", default_duration), ("--cycle-period", cycle_period))
    for name, value in given:
        try:
            spans[name] = parse_span(value)
        except ValueError:
            raise fail([f"{name}: {value!r} is not a duration such as 10s, 1h or 7d"]) from None
        if spans[name] <= 0:
            raise fail([f"{name}: must be positive, got {value!r}"])
    try:
        cfg = load_config(read_yaml(config) if config is not None else None, f"config {config}")
        answer = run_what_if(
            list(files), job, cfg, moment, spans["--horizon"], spans["--default-duration"], spans["--cycle-period"]
        )
    except (InvalidInput, ConfigError) as problem:
        raise fail([str(p) for p in problem.problems]) from None
    if output is TraceOutput.json:
        sys.stdout.write(json.dumps(answer, indent=2, sort_keys=True) + "\n")
        return
    _print_answer(answer)


def run_what_if(
    files: list[Path],
    job_file: Path,
    config: SchedulerConfig,
    now: float,
    horizon: float,
    default_duration: float,
    cycle_period: float,
) -> dict[str, Any]:
    """Simulate forward from the snapshot with the job submitted at `now`; the answer as a JSON-ready dict."""
    from kai.model import GPU, PodStatus
    from kai.sim.trace import SimJob, TraceParams, TraceSimulator
    from kai.sim.workload import SimulationParams, _Reader, job_podgroup, parse_job_entry
    from kai.snapshot.builder import build_snapshot
    from kai.snapshot.reader import read_objects
    from kai.snapshot.shape import check_shapes

    objects, problems = read_objects([str(f) for f in files])
    job_docs = _read_yaml_all(job_file)
    plain_jobs = [d for d in job_docs if isinstance(d, dict) and "kind" not in d]
    job_objects: list[dict[str, Any]] = []
    if not plain_jobs:
        job_objects, job_problems = read_objects([str(job_file)])
        problems.extend(job_problems)
    objects, shape_problems = check_shapes(objects)
    job_objects, job_shape_problems = check_shapes(job_objects)
    problems.extend([*shape_problems, *job_shape_problems])
    if problems:
        raise InvalidInput(problems)
    scheduler = config.params.scheduler_name
    base = build_snapshot(objects, now, scheduler)
    if base.problems:
        raise InvalidInput(base.problems)
    snapshot = base.snapshot
    targets: list[str] = []
    if plain_jobs:
        if len(plain_jobs) != 1:
            raise InvalidInput([Problem(f"file {job_file}", "", "must describe exactly one job")])
        reader = _Reader(f"file {job_file}")
        entry = plain_jobs[0]
        spec = parse_job_entry(
            reader,
            f"job {entry.get('name') or 'what-if'}",
            {"name": "what-if", **entry},
            snapshot.queues,
            SimulationParams(),
        )
        if spec is None:
            raise InvalidInput(reader.problems)
        pg = job_podgroup(spec, str(entry.get("namespace") or "default"), now)
        if pg.key in snapshot.podgroups:
            raise InvalidInput([Problem(f"file {job_file}", "name", f"job {pg.key} is already in the snapshot")])
        snapshot.podgroups[pg.key] = pg
        targets.append(pg.key)
        target_duration: float | None = spec.duration
    else:
        combined = build_snapshot(objects + job_objects, now, scheduler)
        if combined.problems:
            raise InvalidInput(combined.problems)
        snapshot = combined.snapshot
        targets = sorted(set(snapshot.podgroups) - set(base.snapshot.podgroups))
        target_duration = None
        if not targets:
            raise InvalidInput([Problem(f"file {job_file}", "", "defines no job that is not already in the snapshot")])
        for key in targets:
            if any(p.status is not PodStatus.PENDING for p in snapshot.podgroups[key].pods):
                raise InvalidInput([Problem(f"file {job_file}", key, "every pod of the job must be pending")])
    for warning in snapshot.warnings:
        warn(warning)

    group_notes, pod_notes = _annotations(objects + job_objects)
    jobs: list[SimJob] = []
    runs_since: dict[str, float | None] = {}  # jobs running in the snapshot -> their last start, if known
    for key, pg in snapshot.podgroups.items():
        notes = dict(group_notes.get(key, {}))
        for pod in pg.pods:
            for k, v in pod_notes.get(pod.key, {}).items():
                notes.setdefault(k, v)
        running = pg.phase() == "Running"
        if running:
            runs_since[key] = pg.last_start
        elapsed = now - pg.last_start if pg.last_start is not None else None
        duration = _job_duration(notes, f"PodGroup {key}", running, elapsed, default_duration)
        if key in targets and target_duration is not None:
            duration = target_duration
        gpus = sum(p.requests.get(GPU) + (p.gpu.quota_gpus() if p.gpu.is_shared else 0.0) for p in pg.pods)
        jobs.append(
            SimJob(key=key, queue=pg.queue, submit=now if key in targets else pg.creation, duration=duration, gpus=gpus)
        )
    params = TraceParams(cycle_period=cycle_period, until=now + horizon)
    simulator = TraceSimulator(snapshot, jobs, config, params, stop_when_started=set(targets))
    result = simulator.run()
    by_key = {j.key: j for j in result.jobs}
    target = by_key[targets[0]] if len(targets) == 1 else None
    displaced = []
    for sim_job in result.jobs:
        hits = [(t, action) for t, action, by in sim_job.displaced_by if by in targets]
        if hits:
            displaced.append(
                {
                    "podGroup": sim_job.key,
                    "queue": sim_job.queue,
                    "at": format_time(hits[0][0]),
                    "action": hits[0][1],
                    "pods": len(hits),
                    "lostGpuHours": _lost_gpu_hours(runs_since, sim_job, now),
                }
            )
    starts = [by_key[k].first_start for k in targets]
    started = all(s is not None for s in starts)
    start = max(s for s in starts if s is not None) if started else None
    answer: dict[str, Any] = {
        "job": targets[0] if len(targets) == 1 else targets,
        "queue": by_key[targets[0]].queue,
        "now": format_time(now),
        "horizon": format_time(now + horizon),
        "starts": format_time(start) if start is not None else None,
        "waitSeconds": round(start - now, 3) if start is not None else None,
        "nodes": sorted({n for k in targets for n in by_key[k].nodes}),
        "displaces": displaced,
        "cycles": len(result.cycles),
    }
    if start is None:
        outcome = simulator.last_decisions.jobs.get(targets[0]) if simulator.last_decisions is not None else None
        answer["message"] = (
            outcome.message if outcome and outcome.message else "the job does not start within the horizon"
        )
        if outcome is not None and outcome.causes:
            first = outcome.causes[0]
            remedy = f" What would change it: {first.remedy}." if first.remedy else ""
            answer["message"] = first.message + remedy
            answer["causes"] = [c.to_json() for c in outcome.causes]
    if target is not None and target.duration:
        answer["runSeconds"] = target.duration
    return answer


def _lost_gpu_hours(runs_since: dict[str, float | None], sim_job: Any, now: float) -> float | None:
    """GPU-hours of work the displaced job loses; None (unknown) when it was running in the snapshot with no
    known start (no `kai.scheduler/last-start-timestamp`): the work it had done before cannot be known."""
    lost = sim_job.lost_gpu_seconds
    if sim_job.key in runs_since:
        started = runs_since[sim_job.key]
        if started is None:
            return None
        if not sim_job.checkpoint_interval:
            lost += max(now - started, 0.0) * sim_job.gpus  # the run before the snapshot, all lost
    return round(lost / 3600.0, 3)


def _read_yaml_all(path: Path) -> list[Any]:
    """Every document of a YAML file, with the snapshot reader's limits (size, depth, encoding)."""
    from kai.snapshot.reader import parse_text, read_text

    where = f"file {path}"
    text, problem = read_text(path, where)
    if problem is None and text is not None:
        documents, problem = parse_text(text, where)
        if problem is None:
            return [d for d in documents if d is not None]
    raise InvalidInput([problem] if problem else [Problem(where, "", "cannot be read")])


def _print_answer(answer: dict[str, Any]) -> None:
    console = Console(width=max(Console().width, 100), highlight=False)
    job = answer["job"] if isinstance(answer["job"], str) else ", ".join(answer["job"])
    if answer["starts"] is None:
        console.print(
            f"Job {escape(job)} (queue {escape(answer['queue'])}) would not start before {answer['horizon']}: "
            f"{escape(answer.get('message', ''))}",
            soft_wrap=True,
        )
    else:
        wait = answer["waitSeconds"]
        when = "at once" if wait <= 0 else f"after {_human(wait)}"
        console.print(
            f"Job {escape(job)} (queue {escape(answer['queue'])}) would start {when}, at {answer['starts']}, "
            f"on {', '.join(answer['nodes']) or 'no node'}.",
            soft_wrap=True,
        )
    if answer["displaces"]:
        table = Table(title="It would displace", title_justify="left")
        for col in ("pod group", "queue", "pods evicted", "by", "at", "GPU-hours lost"):
            table.add_column(col)
        for d in answer["displaces"]:
            lost = "unknown (no start time)" if d["lostGpuHours"] is None else str(d["lostGpuHours"])
            table.add_row(d["podGroup"], d["queue"], str(d["pods"]), d["action"], d["at"], lost)
        console.print(table)
    elif answer["starts"] is not None:
        console.print("It would displace no running job.")


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
