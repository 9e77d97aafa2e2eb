"""A scheduler's partition of the cluster (KAI's ``--nodepool-label-key`` + ``--partition-label-value``).

One scheduler runs per node pool (KAI's SchedulingShard; the Helm chart renders one Deployment per
shard). Each sees only the nodes, Queues and PodGroups whose node-pool label has its value; the
shard with the empty value (KAI's ``default`` shard) sees those that carry no node-pool label at
all, so that pods, queues and nodes nobody assigned to a pool go to the default shard. A bound pod
stays in view when its node does (it holds that node's resources), an unbound pod when its
PodGroup does (a pod without one, or naming one that does not exist: when its own label matches, so
that exactly one scheduler reports it). PriorityClasses, Topologies,
BindRequests and the rest are shared by every partition. Without a node-pool label key nothing is
filtered.
"""

from __future__ import annotations

import dataclasses
import operator
from itertools import compress
from typing import Any

from kai.api import keys
from kai.api.errors import Problem

PARTITIONED = ("Node", "Queue", "PodGroup")
"""The kinds a partition selects by their own node-pool label."""


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def member(labels: dict[str, str], label_key: str, value: str) -> bool:
    """Whether an object with these labels belongs to the partition `value` (KAI's selector:
    ``key=value``, or for the empty value ``!key``)."""
    if not label_key:
        return True
    return labels.get(label_key) == value if value else label_key not in labels


class Unlabelled:
    """The last list of objects found without a label key, for the next call of :meth:`all_of`: the live
    cache hands over the same objects in the same places until one changes, so that the default
    partition's check "does any object carry the label" looks at the changed places only."""

    def __init__(self) -> None:
        self._key = ""
        self._last: list[dict[str, Any]] = []  # every object in it is without the label

    def all_of(self, objects: list[dict[str, Any]], label_key: str) -> bool:
        """Whether no object of `objects` carries `label_key`."""
        last = self._last if label_key == self._key and len(self._last) == len(objects) else None
        self._key, self._last = label_key, []
        if last is None:
            if any(label_key in ((o.get("metadata") or {}).get("labels") or ()) for o in objects):
                return False
        else:  # the places whose object changed, found at C speed
            for o in compress(objects, map(operator.is_not, objects, last)):
                if label_key in ((o.get("metadata") or {}).get("labels") or ()):
                    return False
        self._last = objects
        return True


def select(
    objects: list[dict[str, Any]], label_key: str, value: str, unlabelled: Unlabelled | None = None
) -> list[dict[str, Any]]:
    """The objects one partition sees (all of them when `label_key` is empty, and, for the default
    partition, when no object carries the label: then the very list given is returned). `unlabelled`
    keeps, between calls, which objects were seen without the label."""
    if not label_key:
        return objects
    if not value:
        if unlabelled is not None:
            if unlabelled.all_of(objects, label_key):
                return objects
        elif not any(label_key in ((o.get("metadata") or {}).get("labels") or ()) for o in objects):
            return objects
    nodes: set[str] = set()
    groups: set[str] = set()
    every_group: set[str] = set()
    every_node: set[str] = set()
    for o in objects:
        kind = o.get("kind")
        meta = o.get("metadata") or {}
        if kind == "PodGroup":
            every_group.add(f"{meta.get('namespace')}/{meta.get('name')}")
        elif kind == "Node":
            every_node.add(meta.get("name"))
        if kind in ("Node", "PodGroup") and member(_labels(o), label_key, value):
            if kind == "Node":
                nodes.add(meta.get("name"))
            else:
                groups.add(f"{meta.get('namespace')}/{meta.get('name')}")
    kept: list[dict[str, Any]] = []
    for obj in objects:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        if kind == "Node":
            if meta.get("name") in nodes:
                kept.append(obj)
        elif kind == "PodGroup":
            if f"{meta.get('namespace')}/{meta.get('name')}" in groups:
                kept.append(obj)
        elif kind == "Queue":
            if member(_labels(obj), label_key, value):
                kept.append(obj)
        elif kind == "Pod":
            node = (obj.get("spec") or {}).get("nodeName")
            if node and node in every_node:  # (on a node that is gone: as if unbound, the builder tells)
                if node in nodes:
                    kept.append(obj)
                continue
            group = (meta.get("annotations") or {}).get(keys.POD_GROUP_ANNOTATION)
            key = f"{meta.get('namespace')}/{group}"
            if group and key in every_group:
                if key in groups:
                    kept.append(obj)
            elif member(_labels(obj), label_key, value):  # no PodGroup (or a missing one): the pod's own label
                kept.append(obj)
        else:
            kept.append(obj)
    return kept


def explain(problems: list[Problem], queues: dict[str, dict[str, Any]], label_key: str, value: str) -> list[Problem]:
    """A PodGroup naming a queue of another node pool reads "which does not exist" to the builder; say
    why (`queues`: every Queue of the cluster, by name)."""
    if not label_key:
        return problems
    out = []
    for problem in problems:
        if problem.field == "spec.queue" and problem.obj.startswith("PodGroup "):
            name = next((q for q in queues if f"queue {q!r}" in problem.message), None)
            if name is not None:
                theirs = _labels(queues[name]).get(label_key)
                pool = f"{label_key}={theirs}" if theirs is not None else f"no {label_key} label"
                ours = f"{label_key}={value}" if value else f"no {label_key} label"
                message = f"names queue {name!r}, of another node pool ({pool}; this scheduler's: {ours})"
                problem = dataclasses.replace(problem, message=message)
        out.append(problem)
    return out
