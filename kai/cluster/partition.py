"""A scheduler's partition of the cluster (KAI's ``--nodepool-label-key`` + ``--partition-label-value``).

With a partition value, the scheduler sees only the nodes and the PodGroups whose node-pool label
has that value: a bound pod stays in view when its node does (it holds that node's resources), an
unbound pod when its PodGroup does (a pod without one: when it carries the label itself). Queues,
PriorityClasses and Topologies are shared by every partition. Without a value nothing is filtered.
This is the scheduler's view only: one Deployment per partition (KAI's SchedulingShards) is not
rendered by the chart yet.
"""

from __future__ import annotations

from typing import Any

from kai.api import keys


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def select(objects: list[dict[str, Any]], label_key: str, value: str) -> list[dict[str, Any]]:
    """The objects one partition sees (all of them when `value` is empty)."""
    if not value or not label_key:
        return objects
    nodes = {
        (o.get("metadata") or {}).get("name")
        for o in objects
        if o.get("kind") == "Node" and _labels(o).get(label_key) == value
    }
    groups = {
        f"{(o.get('metadata') or {}).get('namespace')}/{(o.get('metadata') or {}).get('name')}"
        for o in objects
        if o.get("kind") == "PodGroup" and _labels(o).get(label_key) == value
    }
    kept: list[dict[str, Any]] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            if obj["metadata"].get("name") in nodes:
                kept.append(obj)
        elif kind == "PodGroup":
            meta = obj.get("metadata") or {}
            if f"{meta.get('namespace')}/{meta.get('name')}" in groups:
                kept.append(obj)
        elif kind == "Pod":
            meta = obj.get("metadata") or {}
            node = (obj.get("spec") or {}).get("nodeName")
            if node:
                if node in nodes:
                    kept.append(obj)
                continue
            group = (meta.get("annotations") or {}).get(keys.POD_GROUP_ANNOTATION)
            if (f"{meta.get('namespace')}/{group}" in groups) if group else _labels(obj).get(label_key) == value:
                kept.append(obj)
        else:
            kept.append(obj)
    return kept
