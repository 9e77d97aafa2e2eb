"""The `kai explain` command: offline on snapshot files, or live on a cluster.

* ``kai explain -f SNAPSHOT [--job ns/name] [--now T] [--config C] [-o table|json]`` runs one cycle on
  the snapshot (a recorded live snapshot included: ``kai run --record-snapshot``, or the scheduler's
  ``/snapshot`` endpoint saved to a file) and explains every pod group that waits, or one.
* ``kai explain --kubeconfig K [--job] ns/name`` lists the kinds the live scheduler watches, turns
  them into its per-cycle view (the same cache view, BindRequests applied) and snapshot, runs one
  cycle on it, and shows, beside the causes, the status the scheduler wrote on the PodGroup
  (``status.schedulingConditions``) and on its pending pods (``PodScheduled``).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from kai.api.errors import InvalidInput, Problem
from kai.api.timeutil import parse_time
from kai.console import Output, fail, load_config, read_yaml, warn


def explain(
    job_arg: Annotated[str | None, typer.Argument(help="The pod group, namespace/name.", show_default=False)] = None,
    files: Annotated[list[Path] | None, typer.Option("-f", "--filename", help="Snapshot YAML (repeatable).")] = None,
    job: Annotated[str | None, typer.Option("--job", help="The pod group, namespace/name.")] = None,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Explain on the live cluster of this kubeconfig.")
    ] = None,
    snapshot_url: Annotated[
        str | None,
        typer.Option(
            "--snapshot-url",
            help="Explain the live scheduler's last cycle input, from its /snapshot endpoint "
            "(e.g. http://127.0.0.1:8082/snapshot after a port-forward).",
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Scheduler configuration file.")] = None,
    now: Annotated[str | None, typer.Option("--now", help="RFC 3339 instant of the cycle (offline).")] = None,
    output: Annotated[Output, typer.Option("-o", "--output", help="table or json.")] = Output.table,
) -> None:
    """Why does this pod group wait, or why was it evicted? Ranked causes, offline (-f) or live (--kubeconfig).

    The first cause is the main one."""
    from kai.cycle import ConfigError

    target = job or job_arg
    if job and job_arg and job != job_arg:
        raise fail([f"--job {job!r} and argument {job_arg!r} name two pod groups: give one"])
    if target is not None and target.count("/") != 1:
        raise fail([f"{target!r}: name the pod group as namespace/name"])
    if sum(map(bool, (files, kubeconfig, snapshot_url))) != 1:
        raise fail(["give one of -f SNAPSHOT (offline), --kubeconfig FILE or --snapshot-url URL (live)"])
    try:
        moment = parse_time(now) if now else (_recorded_now(files or []) or datetime.now(UTC).timestamp())
    except ValueError:
        raise fail([f"--now: {now!r} is not an RFC 3339 time such as 2026-01-01T00:00:00Z"]) from None
    try:
        cfg = load_config(read_yaml(config) if config is not None else None, f"config {config}")
        if files:
            report = _offline(files, moment, cfg)
        elif snapshot_url:
            report = _from_endpoint(snapshot_url, cfg, parse_time(now) if now else None)
        else:
            assert kubeconfig is not None
            report = _live(kubeconfig, cfg, target)
    except (InvalidInput, ConfigError) as problem:
        raise fail([str(p) for p in problem.problems]) from None
    from kai.explain.report import render, select

    chosen = select(report, target)
    if chosen is None:
        raise fail([f"pod group {target} is not waiting and lost no pods in this cycle (or does not exist)"], code=3)
    if output is Output.json:
        sys.stdout.write(json.dumps(chosen, indent=2, sort_keys=True) + "\n")
        return
    for warning in chosen.get("warnings") or []:
        warn(warning)
    chosen = {**chosen, "warnings": []}
    render(chosen, Console(width=max(Console().width, 120), highlight=False))


def _recorded_now(files: list[Path]) -> float | None:
    """The instant a recorded snapshot was taken (`kai.scheduler/snapshot-time` on the JSON `v1 List` that
    `kai run --record-snapshot` and `/snapshot` write), so that explaining it replays that very cycle."""
    from kai.snapshot.reader import read_text

    for path in files:
        text, problem = read_text(path, f"file {path}")
        if problem is not None or not text or not text.lstrip().startswith("{"):
            continue
        try:
            data = json.loads(text)
            stamp = data["metadata"]["annotations"]["kai.scheduler/snapshot-time"]
            return parse_time(str(stamp))
        except (ValueError, KeyError, TypeError):
            continue
    return None


def _offline(files: list[Path], now: float, cfg: Any) -> dict[str, Any]:
    from kai.explain.report import explain_objects
    from kai.snapshot.reader import read_objects
    from kai.snapshot.shape import check_shapes

    objects, problems = read_objects([str(f) for f in files])
    objects, shape_problems = check_shapes(objects)
    problems.extend(shape_problems)
    if problems:
        raise InvalidInput(problems)
    source = ", ".join(f"file {f}" for f in files)
    return explain_objects(objects, now, cfg, storage_listed=True, source=source)


def _from_endpoint(url: str, cfg: Any, now: float | None) -> dict[str, Any]:
    """The scheduler's own record of its last cycle's input (its `/snapshot` endpoint), at that cycle's instant."""
    import urllib.error
    import urllib.request

    from kai.explain.report import explain_objects

    where = f"snapshot endpoint {url}"
    if not url.startswith(("http://", "https://")):
        raise InvalidInput([Problem(where, "", "must be an http:// or https:// URL")])
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:  # the scheme is checked above
            data = json.loads(resp.read())
    except (urllib.error.URLError, OSError) as err:
        raise InvalidInput([Problem(where, "", f"cannot be read: {err}")]) from None
    except ValueError as err:
        raise InvalidInput([Problem(where, "", f"is not JSON: {err}")]) from None
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise InvalidInput([Problem(where, "items", "is not a v1 List of objects")])
    if now is None:
        stamp = ((data.get("metadata") or {}).get("annotations") or {}).get("kai.scheduler/snapshot-time")
        try:
            now = parse_time(str(stamp)) if stamp else datetime.now(UTC).timestamp()
        except ValueError:
            raise InvalidInput([Problem(where, "metadata.annotations", f"bad snapshot time {stamp!r}")]) from None
    from kai.snapshot.shape import check_shapes

    objects, problems = check_shapes([o for o in items if isinstance(o, dict)])
    if problems:
        raise InvalidInput(problems)
    return explain_objects(objects, now, cfg, source=where)


def _live(kubeconfig: Path, cfg: Any, target: str | None) -> dict[str, Any]:
    """One listing of every kind the scheduler watches, through the scheduler's own cache view."""
    import time

    from kai.cluster.cache import SCHEDULER_KINDS, ClusterCache
    from kai.cluster.kube import ApiError, Kube
    from kai.explain.report import explain_objects

    try:
        kube = Kube.from_kubeconfig(str(kubeconfig))
    except Exception as err:  # the client's own errors: a missing file, a bad context
        raise InvalidInput([Problem(f"kubeconfig {kubeconfig}", "", f"cannot be used: {err}")]) from None
    cache = ClusterCache(kube, SCHEDULER_KINDS)
    now = time.time()
    try:
        for resource in SCHEDULER_KINDS:
            listed = kube.list_all(resource.path())
            store = cache.store(resource)
            for item in listed.get("items") or []:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                store.put(item)
    except ApiError as err:
        raise InvalidInput([Problem(f"cluster {kube.host}", "", f"cannot be listed: {err}")]) from None
    except OSError as err:
        raise InvalidInput([Problem(f"cluster {kube.host}", "", f"cannot be reached: {err}")]) from None
    view = cache.view()
    report = explain_objects(view.objects, now, cfg, source=f"cluster {kube.host}")
    for key, entry in report["podGroups"].items():
        if target is not None and key != target:
            continue
        raw = view.podgroups.get(key)
        live: dict[str, Any] = {}
        if raw is not None:
            live["schedulingConditions"] = (raw.get("status") or {}).get("schedulingConditions") or []
        pods = []
        for pod_key, pod in view.pods.items():
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            if pod_key.split("/")[0] != key.split("/")[0] or annotations.get("pod-group-name") != key.split("/")[1]:
                continue
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    pods.append({"pod": pod_key, "reason": cond.get("reason", ""), "message": cond.get("message", "")})
        live["podScheduled"] = sorted(pods, key=lambda p: p["pod"])
        entry["liveStatus"] = live
    return report
