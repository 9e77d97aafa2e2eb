"""Grouper for Grove (`grove.io/v1alpha1` PodCliqueSet, formerly PodGangSet; also under NVIDIA Dynamo).

Grove itself computes the gang: a `scheduler.grove.io/v1alpha1` PodGang, named
by the pod label `grove.io/podgang`, lists `spec.podgroups` (name, minReplicas,
podReferences, topologyConstraint.packConstraint) and groups them in
`spec.topologyConstraintGroupConfigs`. The PodGroup is the PodGang's:
`pg-<podgang>-<uid>`, owned by the PodGang, one leaf sub-group per podgroup
(its parent the topology group that lists it), minMember the sum of minReplicas.
Labels and annotations of the top owner fill what the PodGang lacks.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kai.api import keys

from .chain import GroupingContext, KubeObject
from .common import (
    annotations_of,
    default_metadata,
    labels_of,
    merge_missing,
    name_of,
    namespace_of,
    nested,
    to_count,
    with_metadata,
)
from .errors import GroupingError
from .podgroup import PodGroupMetadata, SubGroup, TopologyConstraint

PODGANG_LABEL = "grove.io/podgang"
TOPOLOGY_NAME_ANNOTATION = "grove.io/topology-name"


def _pack_constraint(topology: str, constraint: Any) -> TopologyConstraint | None:
    pack = nested(constraint, "packConstraint") or {}
    required, preferred = pack.get("required") or "", pack.get("preferred") or ""
    if not (required or preferred):
        return None
    return TopologyConstraint(topology, required, preferred)


def _pod_gang(ctx: GroupingContext) -> KubeObject:
    gang_name = labels_of(ctx.pod).get(PODGANG_LABEL)
    field = f"metadata.labels[{PODGANG_LABEL}]"
    if not gang_name:
        raise GroupingError(ctx.pod, field, "is required for a Grove pod")
    gang = ctx.chain.related.pod_gang
    if gang is None or name_of(gang) != gang_name:
        raise GroupingError(ctx.pod, field, f"names PodGang {gang_name!r}, which was not provided")
    return gang


def _sub_groups(gang: KubeObject, topology: str, pod: KubeObject) -> tuple[list[SubGroup], str | None]:
    parents: list[SubGroup] = []
    parent_of: dict[str, str] = {}
    for config in nested(gang, "spec", "topologyConstraintGroupConfigs") or []:
        if not config.get("podGroupNames"):
            continue
        parents.append(
            SubGroup(config["name"], None, None, _pack_constraint(topology, config.get("topologyConstraint")))
        )
        parent_of.update({member: config["name"] for member in config["podGroupNames"]})
    leaves: list[SubGroup] = []
    pod_subgroup = None
    for index, podgroup in enumerate(nested(gang, "spec", "podgroups") or []):
        field = f"spec.podgroups[{index}]"
        if not podgroup.get("name"):
            raise GroupingError(gang, f"{field}.name", "is required")
        min_replicas = to_count(podgroup.get("minReplicas"), gang, f"{field}.minReplicas", minimum=1)
        name = podgroup["name"]
        leaves.append(
            SubGroup(
                name,
                min_replicas,
                parent_of.get(name),
                _pack_constraint(topology, podgroup.get("topologyConstraint")),
            )
        )
        for reference in podgroup.get("podReferences") or []:
            if reference.get("name") == name_of(pod) and reference.get("namespace", namespace_of(pod)) == namespace_of(
                pod
            ):
                pod_subgroup = name
    if not leaves:
        raise GroupingError(gang, "spec.podgroups", "is required and must not be empty")
    return parents + leaves, pod_subgroup


def group_grove(ctx: GroupingContext) -> PodGroupMetadata:
    gang = _pod_gang(ctx)
    top = ctx.top_owner
    # The PodGang carries the gang; the top owner (PodCliqueSet, or Dynamo's deployment) fills in the rest.
    source = with_metadata(
        gang,
        merge_missing(labels_of(gang), labels_of(top)),
        merge_missing(annotations_of(gang), annotations_of(top)),
    )
    metadata = default_metadata(ctx, top_owner=source)
    explicit = labels_of(source).get(keys.PRIORITY_CLASS_LABEL)
    priority = explicit or nested(gang, "spec", "priorityClassName") or metadata.priority_class_name
    topology = annotations_of(source).get(TOPOLOGY_NAME_ANNOTATION) or annotations_of(source).get(
        keys.TOPOLOGY_ANNOTATION, ""
    )
    gang_constraint = _pack_constraint(topology, nested(gang, "spec", "topologyConstraint"))
    sub_groups, pod_subgroup = _sub_groups(gang, topology, ctx.pod)
    return replace(
        metadata,
        priority_class_name=priority,
        topology_constraint=gang_constraint or metadata.topology_constraint,
        min_member=sum(group.min_member or 0 for group in sub_groups),
        sub_groups=tuple(sub_groups),
        pod_subgroup=pod_subgroup,
    )
