"""Small workloads for the simulator-over-time tests, written as a user would write the YAML."""

from __future__ import annotations

from typing import Any

from kai.cycle import known_actions
from kai.framework.config import SchedulerConfig, parse_config
from kai.sim.trace import TraceResult
from kai.sim.workload import Workload, parse_workload, simulate_workload

START = "2026-01-05T00:00:00Z"
START_EPOCH = 1767571200.0

# The plugins of KAI's default tiers that kai has built (the rest are skipped with a warning anyway).
PLUGINS = [
    {"name": name}
    for name in (
        "predicates",
        "priority",
        "nodeavailability",
        "resourcetype",
        "elastic",
        "subgrouporder",
        "taskorder",
        "nodeplacement",
    )
]


def team_queues(*teams: str, parent: str = "dept") -> list[dict[str, Any]]:
    """A parent queue and leaf teams with no quota, equal over-quota weights and no limits."""
    zero = {"quota": 0, "overQuotaWeight": 1, "limit": -1}
    resources = {"gpu": zero, "cpu": {"quota": -1, "limit": -1}, "memory": {"quota": -1, "limit": -1}}
    queues = [{"name": parent, "resources": resources}]
    queues += [{"name": team, "parentQueue": parent, "resources": resources} for team in teams]
    return queues


def scheduler(
    actions: str | None = "allocate",
    time_based: bool = False,
    k: float = 1.0,
    window: str = "2h",
    half_life: str | None = None,
    fetch: str = "10s",
    window_type: str = "sliding",
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "tiers": [{"plugins": [{"name": "proportion", "arguments": {"kValue": str(k)}}, *PLUGINS]}]
    }
    if actions:
        config["actions"] = actions
    if time_based:
        params: dict[str, Any] = {"windowSize": window, "windowType": window_type, "fetchInterval": fetch}
        if half_life:
            params["halfLifePeriod"] = half_life
        config["usageDBConfig"] = {"clientType": "prometheus", "usageParams": params}
    return config


def workload(
    jobs: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    gpus: int = 8,
    nodes: int = 1,
    sched: dict[str, Any] | None = None,
    **simulation: Any,
) -> dict[str, Any]:
    return {
        "name": "test",
        "start": START,
        "simulation": {"cyclePeriod": "10s", **simulation},
        "cluster": {"nodes": [{"name": "node", "count": nodes, "gpus": gpus, "cpu": "64", "memory": "512Gi"}]},
        "queues": queues,
        "scheduler": sched if sched is not None else scheduler(),
        "jobs": jobs,
    }


def config_of(raw: dict[str, Any]) -> SchedulerConfig:
    cfg, problems, _ = parse_config(raw.get("scheduler"), known_actions())
    assert not problems, problems
    return cfg


def simulate(raw: dict[str, Any], exact: bool = False) -> tuple[Workload, TraceResult]:
    wl = parse_workload(raw)
    return wl, simulate_workload(wl, config_of(raw), exact=exact)


def starts(result: TraceResult) -> dict[str, float | None]:
    """Seconds from the start at which each job (by name) first ran."""
    return {
        j.key.split("/", 1)[1]: (None if j.first_start is None else j.first_start - result.start) for j in result.jobs
    }


def finishes(result: TraceResult) -> dict[str, float | None]:
    return {j.key.split("/", 1)[1]: (None if j.finish is None else j.finish - result.start) for j in result.jobs}
