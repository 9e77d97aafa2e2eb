"""Groupers for KubeRay (`ray.io` v1 and v1alpha1): RayCluster, RayJob and RayService.

One PodGroup per top owner (`pg-<topOwner>-<uid>`). The gang is computed from
the RayCluster (for a RayJob the one named by `status.rayClusterName`, for a
RayService the active, else the pending, cluster): the head, plus for each
worker group `minReplicas` (or `replicas` when minReplicas is 0) x `numOfHosts`;
suspended and empty groups are skipped. Sub-groups `headgroup` and one per
worker group, with the topology constraint of their pod template; pods are
placed by their `ray.io/group` label. A PodGroup that already exists without
sub-groups (made by an older podgrouper) is kept flat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kai.api import keys

from .chain import GroupingContext, KubeObject
from .common import default_metadata, labels_of, name_of, nested, optional_count
from .errors import GroupingError
from .podgroup import PodGroupMetadata, SubGroup, TopologyConstraint

HEAD_GROUP = "headgroup"
NODE_GROUP_LABEL = "ray.io/group"
PRIORITY_CLASS_LABEL = "ray.io/priority-class-name"


def _template_topology(owner: KubeObject, field: str, group_spec: Mapping[str, Any]) -> TopologyConstraint | None:
    annotations = nested(group_spec, "template", "metadata", "annotations") or {}
    required = annotations.get(keys.TOPOLOGY_REQUIRED_ANNOTATION, "")
    preferred = annotations.get(keys.TOPOLOGY_PREFERRED_ANNOTATION, "")
    if not (required or preferred):
        return None
    topology = annotations.get(keys.TOPOLOGY_ANNOTATION, "")
    if not topology:
        raise GroupingError(
            owner,
            f"{field}.template.metadata.annotations[{keys.TOPOLOGY_ANNOTATION}]",
            "is required when a topology placement annotation is set",
        )
    return TopologyConstraint(topology, required, preferred)


def cluster_gang(cluster: KubeObject) -> tuple[int, tuple[SubGroup, ...]]:
    """(minMember, sub-groups) of a RayCluster spec."""
    head = SubGroup(
        HEAD_GROUP,
        1,
        None,
        _template_topology(cluster, "spec.headGroupSpec", nested(cluster, "spec", "headGroupSpec") or {}),
    )
    groups = [head]
    for index, group_spec in enumerate(nested(cluster, "spec", "workerGroupSpecs") or []):
        field = f"spec.workerGroupSpecs[{index}]"
        if group_spec.get("suspended"):
            continue
        replicas = optional_count(cluster, f"{field}.replicas", group_spec.get("replicas"), default=0)
        min_replicas = optional_count(cluster, f"{field}.minReplicas", group_spec.get("minReplicas"), default=0)
        if min_replicas > replicas:
            raise GroupingError(cluster, f"{field}.minReplicas", f"{min_replicas} is more than replicas ({replicas})")
        if replicas == 0:
            continue
        hosts = optional_count(cluster, f"{field}.numOfHosts", group_spec.get("numOfHosts"), default=1, minimum=1)
        name = group_spec.get("groupName") or f"worker-group-{index}"
        groups.append(
            SubGroup(name, (min_replicas or replicas) * hosts, None, _template_topology(cluster, field, group_spec))
        )
    return sum(group.min_member or 0 for group in groups), tuple(groups)


def _find_cluster(ctx: GroupingContext, cluster_name: str) -> KubeObject | None:
    candidates = (*ctx.owners, ctx.chain.related.ray_cluster)
    return next(
        (obj for obj in candidates if obj and obj.get("kind") == "RayCluster" and name_of(obj) == cluster_name),
        None,
    )


def _ray_metadata(ctx: GroupingContext, cluster: KubeObject) -> PodGroupMetadata:
    metadata = default_metadata(ctx)
    min_member, sub_groups = cluster_gang(cluster)
    ray_priority = labels_of(ctx.top_owner).get(PRIORITY_CLASS_LABEL)
    if ray_priority:
        metadata = replace(metadata, priority_class_name=ray_priority)
    existing = ctx.chain.existing_podgroups.get(metadata.name)
    if existing is not None and not nested(existing, "spec", "subGroups"):
        return replace(metadata, min_member=min_member)
    group = labels_of(ctx.pod).get(NODE_GROUP_LABEL)
    warnings = metadata.warnings
    if group not in {sub_group.name for sub_group in sub_groups}:
        warnings += (
            f"pod {name_of(ctx.pod)}: label {NODE_GROUP_LABEL}={group!r} names no Ray node group; "
            "the pod is in no sub-group and will not be scheduled",
        )
        group = None
    return replace(metadata, min_member=min_member, sub_groups=sub_groups, pod_subgroup=group, warnings=warnings)


def _cluster_named_in_status(ctx: GroupingContext, *paths: tuple[str, ...]) -> KubeObject:
    owner = ctx.top_owner
    for path in paths:
        cluster_name = nested(owner, *path)
        if cluster_name:
            cluster = _find_cluster(ctx, cluster_name)
            if cluster is None:
                raise GroupingError(owner, ".".join(path), f"names RayCluster {cluster_name!r}, which was not provided")
            return cluster
    raise GroupingError(owner, ".".join(paths[0]), "is empty: the ray operator has not created the RayCluster yet")


def group_raycluster(ctx: GroupingContext) -> PodGroupMetadata:
    return _ray_metadata(ctx, ctx.top_owner)


def group_rayjob(ctx: GroupingContext) -> PodGroupMetadata:
    return _ray_metadata(ctx, _cluster_named_in_status(ctx, ("status", "rayClusterName")))


def group_rayservice(ctx: GroupingContext) -> PodGroupMetadata:
    cluster = _cluster_named_in_status(
        ctx,
        ("status", "activeServiceStatus", "rayClusterName"),
        ("status", "pendingServiceStatus", "rayClusterName"),
    )
    return _ray_metadata(ctx, cluster)
