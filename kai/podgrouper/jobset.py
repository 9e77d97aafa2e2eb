"""Grouper for JobSet (`jobset.x-k8s.io`), which also serves Kubeflow Trainer's TrainJob.

A TrainJob is skipped as top owner (see the registry): its pods are grouped by
the JobSet it creates. With `startupPolicyOrder: InOrder` the JobSet controller
starts one replicated job after the other, so each replicated job gets its own
PodGroup `pg-<jobset>-<uid>-<replicatedJob>`; otherwise the whole JobSet is one
PodGroup. A replicated job needs `replicas x min(parallelism, completions)` pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .chain import GroupingContext, KubeObject
from .common import default_metadata, labels_of, name_of, nested, optional_count
from .errors import GroupingError
from .podgroup import PodGroupMetadata

REPLICATED_JOB_NAME_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
IN_ORDER = "InOrder"


def replicated_job_size(jobset: KubeObject, index: int, replicated_job: Mapping[str, Any]) -> int:
    """Pods one replicated job runs at once: replicas x min(parallelism, completions)."""
    where = f"spec.replicatedJobs[{index}]"
    replicas = optional_count(jobset, f"{where}.replicas", replicated_job.get("replicas"), default=1)
    job_spec = nested(replicated_job, "template", "spec") or {}
    parallelism = optional_count(jobset, f"{where}.template.spec.parallelism", job_spec.get("parallelism"), default=1)
    completions = optional_count(
        jobset, f"{where}.template.spec.completions", job_spec.get("completions"), default=parallelism
    )
    return replicas * min(parallelism, completions)


def group_jobset(ctx: GroupingContext) -> PodGroupMetadata:
    """JobSet: per replicated job PodGroups when started in order, else one PodGroup."""
    jobset = ctx.top_owner
    replicated_jobs = nested(jobset, "spec", "replicatedJobs")
    if not isinstance(replicated_jobs, list) or not replicated_jobs:
        raise GroupingError(jobset, "spec.replicatedJobs", "is required and must not be empty")
    pod_rj = labels_of(ctx.pod).get(REPLICATED_JOB_NAME_LABEL)
    if not pod_rj:
        raise GroupingError(ctx.pod, f"metadata.labels[{REPLICATED_JOB_NAME_LABEL}]", "is required for a JobSet pod")

    metadata = default_metadata(ctx)
    sizes = {str(rj.get("name")): replicated_job_size(jobset, i, rj) for i, rj in enumerate(replicated_jobs)}
    if nested(jobset, "spec", "startupPolicy", "startupPolicyOrder") != IN_ORDER:
        return replace(metadata, min_member=max(1, sum(sizes.values())))
    if pod_rj not in sizes:
        raise GroupingError(
            jobset,
            "spec.replicatedJobs",
            f"has no replicated job {pod_rj!r} (named by pod {name_of(ctx.pod)})",
        )
    return replace(metadata, name=f"{metadata.name}-{pod_rj}", min_member=max(1, sizes[pod_rj]))
