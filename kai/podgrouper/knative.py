"""Grouper for Knative Serving `Service` (`serving.knative.dev/v1`).

Gang mode (the default, `gang_schedule_knative`): one PodGroup per Revision,
`pg-<revision>-<uid>`, owned by the Revision, minMember from the Revision's
`autoscaling.knative.dev/min-scale` (default 1). Without gang mode, and for a
revision whose pods an older podgrouper grouped one by one, each pod is its own
PodGroup `pg-<pod>-<uid>`. Priority `inference` unless a label says otherwise.
"""

from __future__ import annotations

from dataclasses import replace

from kai.api import keys

from .chain import GroupingContext, KubeObject
from .common import annotations_of, default_metadata, labels_of, name_of, nested, per_pod_fields
from .errors import GroupingError
from .podgroup import PodGroupMetadata

REVISION_LABEL = "serving.knative.dev/revision"
MIN_SCALE_ANNOTATION = "autoscaling.knative.dev/min-scale"


def _revision(ctx: GroupingContext) -> KubeObject:
    revision_name = labels_of(ctx.pod).get(REVISION_LABEL)
    if not revision_name:
        raise GroupingError(ctx.pod, f"metadata.labels[{REVISION_LABEL}]", "is required for a Knative Service pod")
    candidates = (*ctx.owners, ctx.chain.related.knative_revision)
    for obj in candidates:
        if obj and obj.get("kind") == "Revision" and name_of(obj) == revision_name:
            return obj
    raise GroupingError(
        ctx.pod,
        f"metadata.labels[{REVISION_LABEL}]",
        f"names Revision {revision_name!r}, which was not provided",
    )


def revision_grouped_per_pod(ctx: GroupingContext, revision: KubeObject) -> bool:
    """True for a revision whose pods already have PodGroups of their own (made before gang mode)."""
    podgroups = [
        annotations_of(pod)[keys.POD_GROUP_ANNOTATION]
        for pod in ctx.chain.related.knative_revision_pods
        if keys.POD_GROUP_ANNOTATION in annotations_of(pod)
    ]
    if len(podgroups) != len(set(podgroups)):
        return False  # two pods share a PodGroup: a gang
    if len(podgroups) > 1:
        return True
    if len(podgroups) == 1:
        existing = ctx.chain.existing_podgroups.get(podgroups[0])
        owners = nested(existing, "metadata", "ownerReferences") or []
        return bool(owners) and owners[0].get("kind") == "Pod"
    return False


def group_knative_service(ctx: GroupingContext) -> PodGroupMetadata:
    revision = _revision(ctx)
    metadata = default_metadata(ctx, keys.INFERENCE_PRIORITY_CLASS, top_owner=revision)
    if not ctx.options.gang_schedule_knative or revision_grouped_per_pod(ctx, revision):
        return replace(metadata, **per_pod_fields(ctx.pod))
    min_scale = annotations_of(revision).get(MIN_SCALE_ANNOTATION, "1")
    min_member = int(min_scale) if min_scale.isdigit() and int(min_scale) > 0 else 1
    return replace(metadata, min_member=min_member)
