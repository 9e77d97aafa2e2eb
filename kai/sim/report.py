"""Rendering a simulation: the contract's JSON, and a table for people (rich)."""

from __future__ import annotations

import gc
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kai.model import CPU, GPU, MEMORY
from kai.sim.simulate import SimulationResult, to_json_dict
from kai.usage import snapshot_allocations


def render_json(result: SimulationResult) -> str:
    """The contract's JSON text: exactly `json.dumps(..., sort_keys=True, indent=2)`, written without the
    standard library's pure-Python indenting encoder (seconds on a cluster of 50,000 pods)."""
    collecting = gc.isenabled()
    gc.disable()  # hundreds of thousands of short-lived dicts and strings, none cyclic
    try:
        data = to_json_dict(result)
        out: list[str] = []
        try:
            _encode(data, "\n", out)
        except _NotPlain:
            return json.dumps(data, sort_keys=True, indent=2) + "\n"
        out.append("\n")
        return "".join(out)
    finally:
        if collecting:
            gc.enable()


class _NotPlain(Exception):
    """A value `_encode` leaves to the json module (a key that is not a string, an odd type)."""


_quote = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
# A dict's keys as given -> its keys sorted, each quoted with its `": "`: the contract's records (a pod, a
# pod group, a binding) repeat one set of keys tens of thousands of times.
_PLANS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}
_PLANS_MAX = 4096


def _plan(value: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    given = tuple(value)
    plan = _PLANS.get(given)
    if plan is None:
        if not all(isinstance(key, str) for key in given):
            raise _NotPlain
        plan = tuple((key, _quote(key) + ": ") for key in sorted(given))
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[given] = plan
    return plan


def _encode(value: Any, newline: str, out: list[str]) -> None:
    """Append `value` as json.dumps(sort_keys=True, indent=2) writes it; `newline` is a newline and the
    current indentation. Strings, None and empty lists inside a collection are written in place (most
    of the contract's leaves), without a call of their own."""
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _NotPlain
        out.append(float.__repr__(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, quoted in _plan(value):
            item = value[key]
            head = separator + quoted
            separator = "," + inner
            kind = type(item)
            if kind is str:
                out.append(head + _quote(item))
            elif item is None:
                out.append(head + "null")
            elif kind is list and not item:
                out.append(head + "[]")
            else:
                out.append(head)
                _encode(item, inner, out)
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            if type(item) is str:
                out.append(separator + _quote(item))
            else:
                out.append(separator)
                _encode(item, inner, out)
            separator = "," + inner
        out.append(newline + "]")
    else:
        raise _NotPlain


def _num(value: float) -> str:
    if value == -1:
        return "∞"
    return f"{value:.2f}".rstrip("0").rstrip(".") if value % 1 else f"{int(value)}"


def _queue_rows(data: dict[str, Any], parents: dict[str, str]) -> list[tuple[str, int]]:
    children: dict[str, list[str]] = {}
    for name in data:
        children.setdefault(parents.get(name, ""), []).append(name)
    rows: list[tuple[str, int]] = []

    stack = [(top, 0) for top in sorted(children.get("", []), reverse=True)]
    while stack:  # depth first, children in name order, without recursion (queue chains can be long)
        name, depth = stack.pop()
        rows.append((name, depth))
        stack.extend((child, depth + 1) for child in sorted(children.get(name, []), reverse=True))
    return rows


def render_table(result: SimulationResult, console: Console) -> None:
    """The decisions for people. Unlike the JSON (queue figures as the last round's session opened),
    the queue table shows what each queue holds once the last round's decisions are applied."""
    data = to_json_dict(result)
    assert result.final is not None
    parents = {name: q.parent for name, q in result.final.queues.items()}
    after = snapshot_allocations(result.final)
    when = f"after round {len(result.rounds)}"

    queues = Table(
        title=f"Queues (GPUs: quota / fair share in the last round / allocated {when} / requested)",
        title_justify="left",
    )
    for col in (
        "queue",
        "GPU quota",
        "GPU fair share",
        f"GPU allocated {when}",
        "GPU requested",
        "CPU fair share (cores)",
        f"CPU allocated {when} (cores)",
        f"memory allocated {when} (GB)",
    ):
        queues.add_column(col, justify="left" if col == "queue" else "right")
    for name, depth in _queue_rows(data["queues"], parents):
        q = data["queues"][name]
        held = after.get(name, {})
        queues.add_row(
            "  " * depth + escape(name),
            _num(q["deserved"]["gpu"]),
            _num(q["fairShare"]["gpu"]),
            _num(round(held.get(GPU, 0.0), 6)),
            _num(q["requested"]["gpu"]),
            _num(q["fairShare"]["cpu"] / 1000),
            _num(round(held.get(CPU, 0.0) / 1000, 6)),
            _num(round(held.get(MEMORY, 0.0) / 1e9, 6)),
        )
    console.print(queues)

    running: dict[str, int] = {}
    total: dict[str, int] = {}
    for pod in data["pods"].values():
        total[pod["podGroup"]] = total.get(pod["podGroup"], 0) + 1
        if pod["status"] == "Running":
            running[pod["podGroup"]] = running.get(pod["podGroup"], 0) + 1
    groups = Table(title="Pod groups", title_justify="left")
    for col in ("pod group", "queue", "status", "running", "why it waits"):
        groups.add_column(col, overflow="fold")
    style = {"Running": "green", "Pending": "yellow", "Releasing": "magenta"}
    assert result.last is not None
    for key, pg in sorted(data["podGroups"].items(), key=lambda kv: (kv[1]["queue"], kv[0])):
        outcome = result.last.jobs.get(key)
        why = escape(pg["message"])
        if pg["message"] and outcome is not None and outcome.causes:
            first = outcome.causes[0]
            why = f"[bold]{escape(first.code)}[/]: {escape(first.message)}"
            if first.remedy:
                why += f" [green]→ {escape(first.remedy)}[/]"
        groups.add_row(
            escape(key),
            escape(pg["queue"]),
            f"[{style.get(pg['status'], 'white')}]{pg['status']}[/]",
            f"{running.get(key, 0)}/{total.get(key, 0)}",
            why,
        )
    console.print(groups)

    for rnd in data["rounds"]:
        console.print(
            f"round {rnd['round']}: {len(rnd['bound'])} pod(s) bound, "
            f"{len(rnd['pipelined'])} pipelined, {len(rnd['evicted'])} evicted"
        )
        for ev in rnd["evicted"]:
            by = f" for {ev['by']}" if ev["by"] else ""
            console.print(escape(f"  evicted {ev['pod']} from {ev['node']} by {ev['action']}{by}"))
