"""Grouper for LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`).

Each replica group (one leader and `size - 1` workers) is its own gang:
PodGroup `pg-<lws>-<uid>-group-<groupIndex>`. Sub-groups `leader` (1) and
`workers` (size - 1); with a segment size S (`subGroupPolicy.subGroupSize`, or
the `kai.scheduler/segment-size` annotation on the LWS or its worker template)
the group is split like LWS splits it: leaves `segment-<i>` of S pods, the
leader inside `segment-0` (`LeaderWorker`, the default), or in a leaf `leader`
of its own (`LeaderExcluded`, which needs `size - 1` divisible by S).

With `startupPolicy: LeaderReady` the workers are created once the leader runs,
so a leader that is not scheduled yet is a gang of one.
"""

from __future__ import annotations

from dataclasses import replace

from kai.api import keys

from .chain import GroupingContext, KubeObject
from .common import (
    annotations_of,
    default_metadata,
    labels_of,
    nested,
    optional_count,
    segment_topology,
    to_count,
)
from .errors import GroupingError
from .podgroup import PodGroupMetadata, SubGroup

SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"

LEADER_CREATED = "LeaderCreated"
LEADER_READY = "LeaderReady"
LEADER_WORKER = "LeaderWorker"
LEADER_EXCLUDED = "LeaderExcluded"

MAX_SEGMENTS = 10000


def _segment_size(lws: KubeObject) -> int | None:
    template = nested(lws, "spec", "leaderWorkerTemplate") or {}
    sources = (
        (
            "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize",
            nested(template, "subGroupPolicy", "subGroupSize"),
        ),
        (
            f"metadata.annotations[{keys.SEGMENT_SIZE_ANNOTATION}]",
            annotations_of(lws).get(keys.SEGMENT_SIZE_ANNOTATION),
        ),
        (
            f"spec.leaderWorkerTemplate.workerTemplate.metadata.annotations[{keys.SEGMENT_SIZE_ANNOTATION}]",
            nested(template, "workerTemplate", "metadata", "annotations", keys.SEGMENT_SIZE_ANNOTATION),
        ),
    )
    for field, value in sources:
        if value not in (None, ""):
            return to_count(value, lws, field, minimum=1)
    return None


def _segment_of(worker_index: int, size: int, segment_size: int, policy: str) -> str:
    """The leaf of the pod with that worker index (0 is the leader), as LWS numbers its sub-groups."""
    divisible = (size - 1) % segment_size == 0
    if policy == LEADER_EXCLUDED:
        return "leader" if worker_index == 0 else f"segment-{(worker_index - 1) // segment_size}"
    if worker_index == 0:
        return "segment-0"
    return f"segment-{(worker_index - 1) // segment_size if divisible else worker_index // segment_size}"


def _sub_groups(ctx: GroupingContext, size: int) -> tuple[list[SubGroup], int | None, str]:
    """The leaves of a full replica group, the segment size (None: no segments) and the segment policy."""
    lws = ctx.top_owner
    segment_size = _segment_size(lws)
    if segment_size is None:
        groups = [SubGroup("leader", 1)]
        if size > 1:
            groups.append(SubGroup("workers", size - 1))
        return groups, None, LEADER_WORKER
    policy = nested(lws, "spec", "leaderWorkerTemplate", "subGroupPolicy", "subGroupPolicyType") or LEADER_WORKER
    if policy not in (LEADER_WORKER, LEADER_EXCLUDED):
        field = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType"
        raise GroupingError(lws, field, f"must be {LEADER_WORKER} or {LEADER_EXCLUDED}, got {policy!r}")
    if policy == LEADER_EXCLUDED and (size - 1) % segment_size:
        raise GroupingError(
            lws,
            "spec.leaderWorkerTemplate.subGroupPolicy",
            f"{LEADER_EXCLUDED} needs size - 1 ({size - 1}) divisible by the segment size {segment_size}",
        )
    counts: dict[str, int] = {}
    for worker_index in range(size):
        leaf = _segment_of(worker_index, size, segment_size, policy)
        counts[leaf] = counts.get(leaf, 0) + 1
    if len(counts) > MAX_SEGMENTS:
        raise GroupingError(lws, "spec.leaderWorkerTemplate", f"{len(counts)} segments; at most {MAX_SEGMENTS}")
    worker_template = nested(lws, "spec", "leaderWorkerTemplate", "workerTemplate") or {}
    topology = segment_topology(ctx, worker_template)
    groups = [SubGroup(leaf, count, None, None if leaf == "leader" else topology) for leaf, count in counts.items()]
    return groups, segment_size, policy


def group_leaderworkerset(ctx: GroupingContext) -> PodGroupMetadata:
    """LeaderWorkerSet: one PodGroup per replica group, leader and workers (or segments) as sub-groups."""
    lws = ctx.top_owner
    pod_labels = labels_of(ctx.pod)
    spec_size = optional_count(
        lws,
        "spec.leaderWorkerTemplate.size",
        nested(lws, "spec", "leaderWorkerTemplate", "size"),
        default=1,
        minimum=1,
    )
    pod_size = annotations_of(ctx.pod).get(SIZE_ANNOTATION)
    size = to_count(pod_size, ctx.pod, f"metadata.annotations[{SIZE_ANNOTATION}]", minimum=1) if pod_size else spec_size
    policy = nested(lws, "spec", "startupPolicy") or LEADER_CREATED
    if policy not in (LEADER_CREATED, LEADER_READY):
        raise GroupingError(lws, "spec.startupPolicy", f"must be {LEADER_CREATED} or {LEADER_READY}, got {policy!r}")
    index_field = f"metadata.labels[{WORKER_INDEX_LABEL}]"
    if WORKER_INDEX_LABEL not in pod_labels:
        raise GroupingError(ctx.pod, index_field, "is required for a LeaderWorkerSet pod")
    worker_index = to_count(pod_labels[WORKER_INDEX_LABEL], ctx.pod, index_field, minimum=0)

    sub_groups, segment_size, segment_policy = _sub_groups(ctx, size)
    if segment_size is None:
        pod_subgroup = "leader" if worker_index == 0 else "workers"
    else:
        pod_subgroup = _segment_of(worker_index, size, segment_size, segment_policy)
    min_member = size
    leader_unscheduled = worker_index == 0 and not nested(ctx.pod, "spec", "nodeName")
    if policy == LEADER_READY and leader_unscheduled:
        # Only the leader exists until it is ready: a gang of one, in the leaf the leader will stay in.
        min_member = 1
        sub_groups = [replace(group, min_member=1) for group in sub_groups if group.name == pod_subgroup]

    metadata = default_metadata(ctx)
    name = metadata.name
    group_index = pod_labels.get(GROUP_INDEX_LABEL, "")
    if group_index.isdigit():
        name = f"{name}-group-{int(group_index)}"
    return replace(metadata, name=name, min_member=min_member, sub_groups=tuple(sub_groups), pod_subgroup=pod_subgroup)
