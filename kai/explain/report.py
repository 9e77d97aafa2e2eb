"""The explanation of one cycle: every pod group's ranked causes, as a JSON-ready dict and for people.

:func:`explain_objects` builds the snapshot from plain Kubernetes objects with the builder the live
scheduler and ``kai simulate`` use, runs one cycle, and reports each pod group that waits or lost
pods, with the causes the core recorded. Objects the builder leaves out become causes of their own:
a PodGroup (or a pod without one) naming a missing queue is ``QueueDoesNotExist``, a pod naming a
missing PodGroup is ``PodGroupDoesNotExist``, any other refused object ``InvalidObject``. The JSON
schema is in docs/explain.md (``schemaVersion`` 1).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kai.api.errors import Problem
from kai.api.timeutil import format_time
from kai.cycle import run_cycle
from kai.framework.causes import Cause, ranked
from kai.framework.config import SchedulerConfig
from kai.snapshot.builder import build_snapshot

SCHEMA_VERSION = 1


def _problem_cause(
    problem: Problem, objects: dict[str, dict[str, Any]], refused: dict[str, Problem]
) -> tuple[str, Cause] | None:
    """The pod group a refused object stands for, and the cause (`refused`: the first problem per object)."""
    kind, _, name = problem.obj.partition(" ")
    if kind not in ("PodGroup", "Pod"):
        return None
    obj = objects.get(problem.obj) or {}
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or name.partition("/")[0]
    group = name
    if kind == "Pod":
        pg_name = (meta.get("annotations") or {}).get("pod-group-name")
        if pg_name:
            group = f"{namespace}/{pg_name}"
    subject = f"{kind} {name}"
    if "names queue" in problem.message and "does not exist" in problem.message:
        queue = problem.message.split("'")[1] if "'" in problem.message else ""
        own = refused.get(f"Queue {queue}")
        if own is not None:  # the queue is there, but was itself refused
            return group, Cause(
                "InvalidObject",
                f"Queue {queue} is left out of the cycle: {own.field}: {own.message}.",
                f"Queue {queue}",
                f"fix {own.field} of queue {queue}",
                {"field": own.field},
            )
        return group, Cause(
            "QueueDoesNotExist",
            f"{subject}: {problem.field}: {problem.message}.",
            f"Queue {queue}" if queue else subject,
            f"create queue {queue} or name an existing leaf queue" if queue else "name an existing leaf queue",
            {"queue": queue, "field": problem.field},
        )
    if "names PodGroup" in problem.message and "does not exist" in problem.message:
        if f"PodGroup {group}" in objects:
            return None  # the PodGroup is there but was itself refused: its own cause says why
        return group, Cause(
            "PodGroupDoesNotExist",
            f"{subject}: {problem.field}: {problem.message}.",
            f"PodGroup {group}",
            f"create PodGroup {group} (the podgrouper makes one for known workload kinds)",
            {"field": problem.field},
        )
    return group, Cause(
        "InvalidObject",
        f"{subject} is left out of the cycle: {problem.field}: {problem.message}.",
        subject,
        f"fix {problem.field}",
        {"field": problem.field},
    )


def _describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name")
    return f"{obj.get('kind')} {namespace}/{name}" if namespace else f"{obj.get('kind')} {name}"


def explain_objects(
    objects: list[dict[str, Any]],
    now: float,
    config: SchedulerConfig,
    *,
    queue_label_key: str | None = None,
    storage_listed: bool = False,
    source: str = "",
) -> dict[str, Any]:
    """The explanation (schema: docs/explain.md) of one cycle on these objects."""
    extra = {"queue_label_key": queue_label_key} if queue_label_key else {}
    result = build_snapshot(objects, now, config.params.scheduler_name, storage_listed=storage_listed, **extra)
    snapshot = result.snapshot
    decisions = run_cycle(snapshot, config)
    groups: dict[str, dict[str, Any]] = {}
    for key, outcome in decisions.jobs.items():
        pg = snapshot.podgroups[key]
        evicted = any(c.code == "Evicted" for c in outcome.causes)
        if not outcome.causes or (not evicted and outcome.status not in ("Pending", "Gated") and not pg.has_pending()):
            continue
        groups[key] = {
            "queue": outcome.queue,
            "status": outcome.status,
            "message": outcome.message,
            "causes": [c.to_json() for c in outcome.causes],
        }
    by_name = {_describe(o): o for o in objects if isinstance(o, dict)}
    first_problem: dict[str, Problem] = {}
    for problem in result.problems:
        first_problem.setdefault(problem.obj, problem)
    refused: dict[str, list[Cause]] = {}
    for problem in result.problems:
        found = _problem_cause(problem, by_name, first_problem)
        if found is not None:
            refused.setdefault(found[0], []).append(found[1])
    for key, causes in refused.items():
        entry = groups.setdefault(key, {"queue": "", "status": "Pending", "message": "", "causes": []})
        ordered = ranked([*causes, *(_from_json(c) for c in entry["causes"])])
        entry["causes"] = [c.to_json() for c in ordered]
        entry["message"] = entry["message"] or ordered[0].message
        if not entry["queue"]:
            entry["queue"] = next((c.numbers.get("queue", "") for c in causes if c.code == "QueueDoesNotExist"), "")
    return {
        "schemaVersion": SCHEMA_VERSION,
        "source": source,
        "now": format_time(now),
        "podGroups": dict(sorted(groups.items())),
        "warnings": [*snapshot.warnings, *(f"left out of the cycle: {p}" for p in result.problems)],
    }


def _from_json(data: dict[str, Any]) -> Cause:
    return Cause(data["code"], data["message"], data["subject"], data["remedy"], data["numbers"])


def select(report: dict[str, Any], job: str | None) -> dict[str, Any] | None:
    """The report narrowed to one pod group (None: it is not in the report)."""
    if job is None:
        return report
    entry = report["podGroups"].get(job)
    if entry is None:
        return None
    return {**report, "podGroups": {job: entry}}


def render(report: dict[str, Any], console: Console) -> None:
    """The readable view: per pod group, its causes in rank order, the first one marked as the main one."""
    groups = report["podGroups"]
    if not groups:
        console.print("Every pod group is running or done: nothing waits.")
        return
    for key, entry in groups.items():
        status = entry["status"]
        console.print(f"[bold]{escape(key)}[/] (queue {escape(entry['queue'] or '?')}): {status}")
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col in ("#", "cause", "why", "what would change it"):
            table.add_column(col, overflow="fold")
        for i, cause in enumerate(entry["causes"], 1):
            code = f"[red]{escape(cause['code'])}[/]" if i == 1 else escape(cause["code"])
            table.add_row(str(i), code, escape(cause["message"]), escape(cause["remedy"]))
        console.print(table)
        first = entry["causes"][0] if entry["causes"] else None
        if first is not None and first.get("queue"):
            q = first["queue"]
            console.print(
                escape(
                    f"  queue {q['name']}: deserved {_gpu(q['deserved'])}, fair share {_gpu(q['fairShare'])}, "
                    f"allocated {_gpu(q['allocated'])}, limit {_gpu(q['limit'])}; this job asks for "
                    f"{_gpu(q['podGroupRequested'])}"
                )
            )
        live = entry.get("liveStatus")
        if live:
            for cond in live.get("schedulingConditions") or []:
                reasons = ", ".join(r.get("reason", "") for r in cond.get("reasons") or [])
                wrote = f"  the scheduler wrote: {cond.get('type')} [{reasons}] {cond.get('message', '')}"
                console.print(escape(wrote))
        console.print()
    for warning in report.get("warnings") or []:
        console.print(f"[yellow]warning:[/] {escape(warning)}")


def _gpu(values: dict[str, float]) -> str:
    value = values.get("gpu", 0.0)
    if value < 0:
        return "unlimited"
    return f"{value:g} GPU" + ("" if value == 1 else "s")
