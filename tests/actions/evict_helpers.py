"""Small builders for the eviction tests (reclaim, preempt, consolidation, stale gangs, min-runtime,
the disruption budget): jobs as Kubernetes objects, and readers of the `kai simulate` JSON."""

from __future__ import annotations

from typing import Any

from tests.scenario import pod, podgroup, queue

GPU_ONLY = {"quota": -1, "overQuotaWeight": 1, "limit": -1}


def gq(name: str, quota: float, parent: str = "", weight: float = 1, limit: float = -1, **kw: Any) -> dict[str, Any]:
    """A queue with a GPU quota (CPU and memory unlimited)."""
    return queue(name, parent=parent, gpu={"quota": quota, "overQuotaWeight": weight, "limit": limit}, **kw)


def stamp(minute: int) -> str:
    return f"2025-12-31T{23 - minute // 60:02d}:{59 - minute % 60:02d}:00Z"


def job(
    name: str,
    q: str,
    gpus: int = 1,
    size: int = 1,
    nodes: list[str] | str | None = None,
    min_member: int | None = None,
    priority_class: str | None = None,
    preemptibility: str | None = None,
    age: int = 0,
    last_start: str | None = None,
    stale_since: str | None = None,
    phases: list[str] | None = None,
) -> list[dict[str, Any]]:
    """A pod group of `size` pods of `gpus` GPUs each; `nodes` places them (one node, or one per pod).
    `age` in minutes before NOW orders creation (larger = older)."""
    group = podgroup(
        name,
        q,
        min_member if min_member is not None else size,
        priority_class=priority_class,
        preemptibility=preemptibility,
        created=stamp(age),
    )
    annotations = {}
    if last_start:
        annotations["kai.scheduler/last-start-timestamp"] = last_start
    if stale_since:
        annotations["kai.scheduler/stale-podgroup-timestamp"] = stale_since
    if annotations:
        group["metadata"]["annotations"] = annotations
    where = [nodes] * size if isinstance(nodes, str) or nodes is None else nodes
    objects = [group]
    for i in range(size):
        objects.append(
            pod(
                f"{name}-{i}" if size > 1 else name,
                group=name,
                queue=q,
                gpus=gpus,
                node=where[i],
                created=stamp(age),
                phase=phases[i] if phases else None,
                priority_class=priority_class,
            )
        )
    return objects


def evictions(result: dict[str, Any], round_number: int = 1) -> dict[str, tuple[str, str]]:
    """pod -> (action, by) for the pods evicted in a round."""
    return {e["pod"]: (e["action"], e["by"]) for e in result["rounds"][round_number - 1]["evicted"]}


def all_evictions(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for r in result["rounds"] for e in r["evicted"]]


def status(result: dict[str, Any], pod_key: str) -> str:
    return result["pods"][pod_key]["status"]


def placed(result: dict[str, Any], round_number: int = 1) -> dict[str, str]:
    """pod -> node for pods bound or pipelined in a round."""
    rnd = result["rounds"][round_number - 1]
    return {**{b["pod"]: b["node"] for b in rnd["bound"]}, **{p["pod"]: p["node"] for p in rnd["pipelined"]}}
