"""The report of `kai simulate-trace`: one self-contained HTML page (plots embedded as base64 PNG),
the plots as PNG files, the metrics as JSON and one CSV row per job. With several runs (`--compare`)
the page shows them side by side and the files are prefixed with each run's label.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import re
from pathlib import Path
from typing import Any

from kai.sim.metrics import job_rows
from kai.sim.plots import all_plots
from kai.sim.trace import TraceResult
from kai.sim.workload import Workload

Run = tuple[str, TraceResult, dict[str, Any]]

PLOT_TITLES = {
    "allocation": "GPU allocation over time",
    "queues": "Allocation against fair share, per queue",
    "usage": "Queue usage (time-based fair share)",
    "wait": "Queue wait",
    "fragmentation": "Fragmentation",
    "fairness": "Fairness",
}

# (label, path into the metrics, unit) for the summary table.
SUMMARY_ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("jobs finished", ("jobs", "finished"), ""),
    ("jobs never started", ("jobs", "neverStarted"), ""),
    ("queue wait p50", ("waitSeconds", "p50"), "s"),
    ("queue wait p95", ("waitSeconds", "p95"), "s"),
    ("queue wait p99", ("waitSeconds", "p99"), "s"),
    ("queue wait mean", ("waitSeconds", "mean"), "s"),
    ("job completion time p50", ("completionSeconds", "p50"), "s"),
    ("job completion time p95", ("completionSeconds", "p95"), "s"),
    ("job completion time mean", ("completionSeconds", "mean"), "s"),
    ("makespan", ("makespanSeconds",), "s"),
    ("GPU utilisation", ("gpuUtilisation",), ""),
    ("mean allocated GPUs", ("meanAllocatedGpus",), ""),
    ("evicted pods", ("evictions", "pods"), ""),
    ("interrupted jobs", ("evictions", "jobsInterrupted"), ""),
    ("GPU-hours lost to evictions", ("evictions", "gpuHoursLost"), ""),
    ("mean fragmented GPUs", ("fragmentation", "meanFragmentedGpus"), ""),
    ("fragmented share of free GPUs while jobs wait", ("fragmentation", "fragmentedShareOfFreeWhileJobsWait"), ""),
    ("Jain's index (time mean)", ("fairness", "jainIndexMean"), ""),
    ("Jain's index (whole run)", ("fairness", "jainIndexOverall"), ""),
    ("scheduling cycles", ("simulation", "cycles"), ""),
    ("time-based fair share", ("simulation", "timeBasedFairShare"), ""),
]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1800px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.runs{display:grid;grid-template-columns:repeat(var(--n),1fr);gap:16px}
.runs img{width:100%;height:auto;border:1px solid #eee}
.muted{color:#777;font-size:.85em}
"""


def slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-") or "run"


def _dig(metrics: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = metrics
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit == "s" and isinstance(value, int | float):
        return _duration(float(value))
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return html.escape(str(value))


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.2f} d"


def _summary_table(runs: list[Run]) -> str:
    head = "".join(f"<th>{html.escape(label)}</th>" for label, _, _ in runs)
    rows = []
    for label, path, unit in SUMMARY_ROWS:
        cells = "".join(f"<td>{_fmt(_dig(m, path), unit)}</td>" for _, _, m in runs)
        rows.append(f"<tr><td>{html.escape(label)}</td>{cells}</tr>")
    return f"<table><tr><th>metric</th>{head}</tr>{''.join(rows)}</table>"


def _queue_table(label: str, metrics: dict[str, Any]) -> str:
    rows = []
    for name, q in metrics["queues"].items():
        wait = q.get("waitSeconds") or {}
        rows.append(
            "<tr>"
            f"<td>{html.escape(name)}</td><td>{html.escape(q.get('parent') or '')}</td>"
            f"<td>{_fmt(q.get('jobs'))}</td><td>{_fmt(q.get('finished'))}</td>"
            f"<td>{_fmt(q.get('gpuHours'))}</td><td>{_fmt(q.get('fairShareGpuHours'))}</td>"
            f"<td>{_fmt(q.get('meanAllocatedGpus'))}</td><td>{_fmt(q.get('meanFairShareGpus'))}</td>"
            f"<td>{_fmt(wait.get('p50'), 's')}</td><td>{_fmt(wait.get('p95'), 's')}</td>"
            f"<td>{_fmt(wait.get('p99'), 's')}</td><td>{_fmt(q.get('evictedJobs'))}</td>"
            "</tr>"
        )
    head = (
        "<tr><th>queue</th><th>parent</th><th>jobs</th><th>finished</th><th>GPU-hours</th>"
        "<th>fair-share GPU-hours</th><th>mean GPUs</th><th>mean fair share</th><th>wait p50</th>"
        "<th>wait p95</th><th>wait p99</th><th>jobs evicted</th></tr>"
    )
    return f"<h3>{html.escape(label)}</h3><table>{head}{''.join(rows)}</table>"


def render_html(workload: Workload, runs: list[Run], plots: list[dict[str, bytes]]) -> str:
    first = runs[0][2]["simulation"]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>kai simulate-trace: {html.escape(workload.name)}</title><style>{CSS}</style></head><body>",
        f"<h1>Simulation over time: {html.escape(workload.name)}</h1>",
        f"<p>{len(workload.jobs)} jobs on {sum(n.count for n in workload.nodes)} nodes with "
        f"{workload.total_gpus} GPUs; virtual time from {html.escape(first['start'])} to "
        f"{html.escape(first['end'])}; a scheduling cycle every {workload.simulation.cycle_period:g} s. "
        + ("Runs: " + ", ".join(html.escape(label) for label, _, _ in runs) + "." if len(runs) > 1 else "")
        + "</p>",
        "<h2>Summary</h2>",
        _summary_table(runs),
        "<h2>Queues</h2>",
        f"<div class='runs' style='--n:{len(runs)}'>",
        *(f"<div>{_queue_table(label, m)}</div>" for label, _, m in runs),
        "</div>",
    ]
    stems = list(dict.fromkeys(stem for p in plots for stem in p))
    for stem in stems:
        parts.append(f"<h2>{html.escape(PLOT_TITLES.get(stem, stem))}</h2>")
        parts.append(f"<div class='runs' style='--n:{len(runs)}'>")
        for (label, _, _), run_plots in zip(runs, plots, strict=True):
            png = run_plots.get(stem)
            if png is None:
                parts.append(f"<div><p class='muted'>{html.escape(label)}: not applicable</p></div>")
                continue
            data = base64.b64encode(png).decode("ascii")
            caption = f"<p class='muted'>{html.escape(label)}</p>" if len(runs) > 1 else ""
            parts.append(f"<div>{caption}<img alt='{html.escape(stem)}' src='data:image/png;base64,{data}'></div>")
        parts.append("</div>")
    parts.append(
        "<p class='muted'>Made by kai simulate-trace: kai's own scheduling cycle run in virtual time. "
        "Metrics are in metrics.json beside this page; one row per job in the jobs CSV.</p></body></html>"
    )
    return "\n".join(parts) + "\n"


def write_report(out: Path, runs: list[Run], workload: Workload) -> list[Path]:
    """Write report.html, metrics.json, the PNGs and jobs CSV(s) into `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    plots: list[dict[str, bytes]] = []
    many = len(runs) > 1
    for label, result, _ in runs:
        run_plots = all_plots(result)
        plots.append(run_plots)
        prefix = f"{slug(label)}-" if many else ""
        for stem, png in run_plots.items():
            path = out / f"{prefix}{stem}.png"
            path.write_bytes(png)
            written.append(path)
        path = out / f"{prefix}jobs.csv"
        with path.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(job_rows(result.jobs))
        written.append(path)
    workload_info = {
        "name": workload.name,
        "jobs": len(workload.jobs),
        "nodes": sum(n.count for n in workload.nodes),
        "gpus": workload.total_gpus,
        "cyclePeriodSeconds": workload.simulation.cycle_period,
    }
    if many:
        document: dict[str, Any] = {"workload": workload_info, "runs": {label: m for label, _, m in runs}}
    else:
        document = {"workload": workload_info, "label": runs[0][0], **runs[0][2]}
    path = out / "metrics.json"
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written.append(path)
    path = out / "report.html"
    path.write_text(render_html(workload, runs, plots), encoding="utf-8")
    written.append(path)
    return written
