"""Groupers for Kubernetes' own workloads: bare Pod (and Spark), batch Job, CronJob, Deployment.

StatefulSet and ReplicaSet use the default grouper (one PodGroup for all pods,
minMember 1) and need no code here.
"""

from __future__ import annotations

from dataclasses import replace

from kai.api import keys

from .chain import GroupingContext
from .common import (
    annotations_of,
    default_metadata,
    first_owner_of_kind,
    labels_of,
    name_of,
    optional_count,
    per_pod_fields,
    uid_of,
)
from .errors import GroupingError
from .podgroup import PodGroupMetadata

SPARK_APP_NAME_LABEL = "spark-app-name"
SPARK_APP_SELECTOR_LABEL = "spark-app-selector"


def group_bare_pod(ctx: GroupingContext) -> PodGroupMetadata:
    """A pod whose top owner is a pod: `pg-<pod>-<podUID>`; Spark pods share `<spark-app-selector>`.

    Spark executors are owned by the driver pod, and both carry `spark-app-name`
    and `spark-app-selector`: the whole application becomes one PodGroup named
    after the selector.
    """
    metadata = default_metadata(ctx)
    pod_labels = labels_of(ctx.pod)
    if SPARK_APP_NAME_LABEL in pod_labels and pod_labels.get(SPARK_APP_SELECTOR_LABEL):
        return replace(metadata, name=pod_labels[SPARK_APP_SELECTOR_LABEL])
    return metadata


def group_batch_job(ctx: GroupingContext) -> PodGroupMetadata:
    """One PodGroup per Job, `pg-<job>-<jobUID>`, minMember 1 (or `kai.scheduler/batch-min-member`).

    A PodGroup named per pod (`pg-<pod>-<jobUID>`, what KAI up to v0.13 created)
    that already exists is kept, so that running pods are not moved.
    """
    job = ctx.top_owner
    metadata = default_metadata(ctx)
    legacy_name = f"{keys.PODGROUP_NAME_PREFIX}-{name_of(ctx.pod)}-{uid_of(job)}"
    if (
        ctx.options.search_legacy_podgroups
        and legacy_name != metadata.name
        and legacy_name in ctx.chain.existing_podgroups
    ):
        return replace(metadata, name=legacy_name, min_member=1)
    field = f"metadata.annotations[{keys.BATCH_MIN_MEMBER_ANNOTATION}]"
    min_member = optional_count(
        job, field, annotations_of(job).get(keys.BATCH_MIN_MEMBER_ANNOTATION), default=1, minimum=1
    )
    return replace(metadata, min_member=min_member)


def group_cronjob(ctx: GroupingContext) -> PodGroupMetadata:
    """A CronJob's pods are grouped per Job run: the default grouping with the Job as top owner.

    Labels of the CronJob still count for the queue, priority class and preemptibility.
    """
    job_index = first_owner_of_kind(ctx.owners, "Job")
    if job_index is None:
        raise GroupingError(ctx.pod, "metadata.ownerReferences", "a CronJob's pod must be owned by one of its Jobs")
    return default_metadata(ctx, top_owner=ctx.owners[job_index])


def group_deployment(ctx: GroupingContext) -> PodGroupMetadata:
    """Each pod of a Deployment is its own PodGroup (`pg-<pod>-<podUID>`, owned by the pod), `inference`."""
    metadata = default_metadata(ctx, keys.INFERENCE_PRIORITY_CLASS)
    return replace(metadata, **per_pod_fields(ctx.pod))
