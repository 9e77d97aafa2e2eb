"""The logic every grouper shares: reading objects, the default PodGroup, queue, priority, preemptibility.

The default grouper (`default_metadata`) is what KAI calls the Default Grouper:
name `pg-<topOwner>-<topOwnerUID>`, minMember 1, labels and annotations copied
from the top owner, queue, priority class and preemptibility resolved from the
owners, the pod, the namespace and the default-priorities table, and the
topology constraint from the top owner's annotations. Kind-specific groupers
start from it and change what their kind needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai.api import keys

from .chain import GroupingContext, GroupVersionKind, KubeObject, WorkloadDefaults, split_api_version
from .errors import GroupingError
from .podgroup import OwnerReference, PodGroupMetadata, TopologyConstraint

# ---------------------------------------------------------------------------------------------------------
# Reading object dicts


def metadata_of(obj: KubeObject) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def name_of(obj: KubeObject) -> str:
    return str(metadata_of(obj).get("name") or "")


def uid_of(obj: KubeObject) -> str:
    return str(metadata_of(obj).get("uid") or "")


def namespace_of(obj: KubeObject) -> str:
    return str(metadata_of(obj).get("namespace") or "")


def labels_of(obj: KubeObject) -> Mapping[str, str]:
    return metadata_of(obj).get("labels") or {}


def annotations_of(obj: KubeObject) -> Mapping[str, str]:
    return metadata_of(obj).get("annotations") or {}


def nested(obj: Any, *path: str) -> Any:
    """The value at `path` inside nested dicts, or None when any step is missing."""
    current = obj
    for step in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(step)
    return current


def with_metadata(obj: KubeObject, labels: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    """A shallow copy of `obj` whose labels and annotations are replaced."""
    metadata = {**metadata_of(obj), "labels": dict(labels), "annotations": dict(annotations)}
    return {**obj, "metadata": metadata}


def merge_missing(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """`base` plus the keys of `extra` that `base` lacks (`base` wins)."""
    return {**extra, **base}


def to_count(value: Any, obj: KubeObject, field: str, *, minimum: int = 0) -> int:
    """An integer field (a number, or a decimal string in annotations), at least `minimum`."""
    if value is None:
        raise GroupingError(obj, field, "is required")
    if isinstance(value, bool):
        raise GroupingError(obj, field, f"must be an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        number = int(value)
    else:
        raise GroupingError(obj, field, f"must be an integer, got {value!r}")
    if number < minimum:
        raise GroupingError(obj, field, f"must be at least {minimum}, got {number}")
    return number


def optional_count(obj: KubeObject, field: str, value: Any, *, default: int, minimum: int = 0) -> int:
    """`to_count` for a field that may be absent (then `default`)."""
    if value is None:
        return default
    return to_count(value, obj, field, minimum=minimum)


# ---------------------------------------------------------------------------------------------------------
# Names and references


def podgroup_name(obj: KubeObject) -> str:
    """KAI's PodGroup name for an object: `pg-<name>-<uid>`."""
    return f"{keys.PODGROUP_NAME_PREFIX}-{name_of(obj)}-{uid_of(obj)}"


def owner_reference(obj: KubeObject) -> OwnerReference:
    return OwnerReference(
        api_version=str(obj.get("apiVersion") or ""),
        kind=str(obj.get("kind") or ""),
        name=name_of(obj),
        uid=uid_of(obj),
    )


_YAML_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
_YAML_NUMBER_LIKE = re.compile(r"[-+]?(\.?\d[\d_]*(\.\d*)?([eE][-+]?\d+)?|0[xXoObB][0-9A-Fa-f_]+|\.inf|\.nan)", re.I)
_YAML_RESERVED = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}


def _yaml_scalar(value: str) -> str:
    plain = (
        _YAML_PLAIN.fullmatch(value) and not _YAML_NUMBER_LIKE.fullmatch(value) and value.lower() not in _YAML_RESERVED
    )
    return value if plain else json.dumps(value)


def top_owner_metadata(obj: KubeObject) -> str:
    """The `kai.scheduler/top-owner-metadata` annotation: YAML of name, uid, group, version, kind."""
    group, version = split_api_version(str(obj.get("apiVersion") or ""))
    fields = {
        "name": name_of(obj),
        "uid": uid_of(obj),
        "group": group,
        "version": version,
        "kind": str(obj.get("kind") or ""),
    }
    return "".join(f"{key}: {_yaml_scalar(value)}\n" for key, value in fields.items())


def topology_from_annotations(annotations: Mapping[str, str]) -> TopologyConstraint:
    """The PodGroup-level constraint from `kai.scheduler/topology*` annotations."""
    return TopologyConstraint(
        topology=annotations.get(keys.TOPOLOGY_ANNOTATION, ""),
        required_level=annotations.get(keys.TOPOLOGY_REQUIRED_ANNOTATION, ""),
        preferred_level=annotations.get(keys.TOPOLOGY_PREFERRED_ANNOTATION, ""),
    )


def worker_setting(ctx: GroupingContext, worker_template: Mapping[str, Any], key: str) -> str:
    """A worker setting from the pod's annotations, else from the worker pod template's."""
    template_value = nested(worker_template, "metadata", "annotations", key) or ""
    return annotations_of(ctx.pod).get(key) or str(template_value)


def segment_topology(ctx: GroupingContext, worker_template: Mapping[str, Any]) -> TopologyConstraint | None:
    """The constraint of each worker segment (PyTorchJob, LeaderWorkerSet): the topology from the pod, the
    worker template or the top owner; the levels from the `kai.scheduler/segment-topology-*` annotations."""
    topology = worker_setting(ctx, worker_template, keys.TOPOLOGY_ANNOTATION) or annotations_of(ctx.top_owner).get(
        keys.TOPOLOGY_ANNOTATION, ""
    )
    required = worker_setting(ctx, worker_template, keys.SEGMENT_TOPOLOGY_REQUIRED_ANNOTATION)
    preferred = worker_setting(ctx, worker_template, keys.SEGMENT_TOPOLOGY_PREFERRED_ANNOTATION)
    if not topology or not (required or preferred):
        return None
    return TopologyConstraint(topology, required, preferred)


# ---------------------------------------------------------------------------------------------------------
# Queue, priority class, preemptibility


def resolve_queue(ctx: GroupingContext, top_owner: KubeObject | None = None) -> str:
    """Queue: label of the top owner, of the pod, of another owner (from the top down), then the `project`
    label (+`-<node-pool>`), the namespace's label, and the default queue."""
    key = ctx.options.queue_label_key
    top = ctx.top_owner if top_owner is None else top_owner
    pod_labels = labels_of(ctx.pod)
    for labels in (labels_of(top), pod_labels, *(labels_of(o) for o in reversed(ctx.chain.owners))):
        if labels.get(key):
            return labels[key]
    project = labels_of(top).get(keys.PROJECT_LABEL) or pod_labels.get(keys.PROJECT_LABEL)
    if project:
        node_pool = pod_labels.get(ctx.options.node_pool_label_key)
        return f"{project}-{node_pool}" if node_pool else project
    if ctx.chain.namespace_labels.get(key):
        return ctx.chain.namespace_labels[key]
    return ctx.options.default_queue


@dataclass(frozen=True)
class Resolved:
    """A resolved value and what was ignored on the way."""

    value: str
    warnings: tuple[str, ...] = ()


def _priority_class_exists(ctx: GroupingContext, name: str) -> bool:
    known = ctx.chain.priority_classes
    return bool(name) and (known is None or name in known)


def _defaults_for(ctx: GroupingContext, obj: KubeObject) -> WorkloadDefaults | None:
    gvk = GroupVersionKind.of(obj)
    by_key = {entry.group_kind: entry for entry in ctx.chain.default_priorities}
    return by_key.get(gvk.group_kind) or by_key.get(gvk.kind)


def kind_defaults(ctx: GroupingContext, obj: KubeObject) -> tuple[str, str]:
    """(priority class, preemptibility) the default-priorities table gives `obj`'s kind; `` when none."""
    entry = _defaults_for(ctx, obj)
    if entry is None:
        return "", ""
    priority = entry.priority_name if _priority_class_exists(ctx, entry.priority_name) else ""
    return priority, entry.preemptibility.lower()


def resolve_priority_class(ctx: GroupingContext, default: str, owners: Iterable[KubeObject] | None = None) -> Resolved:
    """Priority class: `priorityClassName` label of the owners (direct owner first) or the pod, the pod's
    `spec.priorityClassName`, then the default-priorities table for an owner's kind, then `default`.

    A named class that does not exist is skipped with a warning.
    """
    owners = tuple(ctx.owners if owners is None else owners)
    warnings: list[str] = []
    candidates = [(o, labels_of(o).get(keys.PRIORITY_CLASS_LABEL)) for o in owners]
    candidates.append((ctx.pod, labels_of(ctx.pod).get(keys.PRIORITY_CLASS_LABEL)))
    candidates.append((ctx.pod, nested(ctx.pod, "spec", "priorityClassName")))
    for obj, name in candidates:
        if not name:
            continue
        if _priority_class_exists(ctx, name):
            return Resolved(name, tuple(warnings))
        warnings.append(f"{obj.get('kind')} {name_of(obj)}: priority class {name!r} does not exist, ignored")
    for owner in owners:
        priority, _ = kind_defaults(ctx, owner)
        if priority:
            return Resolved(priority, tuple(warnings))
    return Resolved(default, tuple(warnings))


def resolve_preemptibility(ctx: GroupingContext, owners: Iterable[KubeObject] | None = None) -> Resolved:
    """Preemptibility: `kai.scheduler/preemptibility` label of the owners, then of the pod, then the
    default-priorities table; empty means "derived from the priority"."""
    owners = tuple(ctx.owners if owners is None else owners)
    warnings: list[str] = []
    valid = (keys.PREEMPTIBLE, keys.NON_PREEMPTIBLE)
    for obj in (*owners, ctx.pod):
        value = labels_of(obj).get(keys.PREEMPTIBILITY_LABEL)
        if value is None:
            continue
        if value in valid:
            return Resolved(value, tuple(warnings))
        warnings.append(
            f"{obj.get('kind')} {name_of(obj)}: label {keys.PREEMPTIBILITY_LABEL}={value!r} is not one of "
            f"{', '.join(valid)}, ignored"
        )
    for owner in owners:
        _, preemptibility = kind_defaults(ctx, owner)
        if preemptibility in valid:
            return Resolved(preemptibility, tuple(warnings))
    return Resolved("", tuple(warnings))


# ---------------------------------------------------------------------------------------------------------
# The default PodGroup


def podgroup_labels(top_owner: KubeObject, pod: KubeObject) -> dict[str, str]:
    """All the top owner's labels, plus the pod's `user` label when the owner has none."""
    labels = dict(labels_of(top_owner))
    user = labels_of(pod).get(keys.USER_LABEL)
    if keys.USER_LABEL not in labels and user is not None:
        labels[keys.USER_LABEL] = user
    return labels


def podgroup_annotations(top_owner: KubeObject, pod: KubeObject) -> dict[str, str]:
    """The pod's `user` annotation, the top-owner metadata, then all the top owner's annotations."""
    annotations: dict[str, str] = {}
    user = annotations_of(pod).get(keys.USER_LABEL)
    if user is not None:
        annotations[keys.USER_LABEL] = user
    annotations[keys.TOP_OWNER_METADATA_ANNOTATION] = top_owner_metadata(top_owner)
    annotations.update(annotations_of(top_owner))
    return annotations


def default_metadata(
    ctx: GroupingContext,
    default_priority: str = keys.TRAIN_PRIORITY_CLASS,
    top_owner: KubeObject | None = None,
) -> PodGroupMetadata:
    """KAI's default grouping of the pod under `top_owner` (the context's top owner unless given)."""
    top = ctx.top_owner if top_owner is None else top_owner
    priority = resolve_priority_class(ctx, default_priority)
    preemptibility = resolve_preemptibility(ctx)
    return PodGroupMetadata(
        name=podgroup_name(top),
        namespace=namespace_of(ctx.pod),
        owner=owner_reference(top),
        min_member=1,
        queue=resolve_queue(ctx, top),
        priority_class_name=priority.value,
        preemptibility=preemptibility.value,
        labels=podgroup_labels(top, ctx.pod),
        annotations=podgroup_annotations(top, ctx.pod),
        topology_constraint=topology_from_annotations(annotations_of(top)),
        warnings=priority.warnings + preemptibility.warnings,
    )


def per_pod_fields(pod: KubeObject) -> dict[str, Any]:
    """The fields that make a PodGroup the pod's own: `pg-<pod>-<podUID>`, owned by the pod, minMember 1."""
    return {"name": podgroup_name(pod), "owner": owner_reference(pod), "min_member": 1}


def first_owner_of_kind(owners: Sequence[KubeObject], kind: str) -> int | None:
    """Index of the first owner (from the pod up) of that kind."""
    return next((index for index, owner in enumerate(owners) if owner.get("kind") == kind), None)
