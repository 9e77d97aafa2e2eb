"""Groupers for Kubeflow's training operator jobs and notebooks.

TFJob, XGBoostJob, JAXJob, MPIJob and PyTorchJob share one rule: a single
PodGroup for the job whose minMember is `spec.runPolicy.schedulingPolicy.minAvailable`,
else the sum of all replicas. PyTorchJob adds elastic jobs (`elasticPolicy.minReplicas`)
and the `master` / `worker` sub-groups, optionally split into segments; MPIJob
discounts a launcher that is created only once the workers are ready.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kai.api import keys

from .chain import GroupingContext, KubeObject
from .common import (
    default_metadata,
    labels_of,
    metadata_of,
    name_of,
    nested,
    optional_count,
    segment_topology,
    to_count,
    worker_setting,
)
from .errors import GroupingError
from .podgroup import PodGroupMetadata, SubGroup

REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

MAX_SEGMENTS = 10000


def replica_specs(job: KubeObject, key: str, required: tuple[str, ...]) -> Mapping[str, Mapping[str, Any]]:
    """`spec.<key>` (e.g. `tfReplicaSpecs`), checked to hold the replica types the kind requires."""
    specs = nested(job, "spec", key)
    if not isinstance(specs, Mapping) or not specs:
        raise GroupingError(job, f"spec.{key}", "is required and must name at least one replica type")
    for replica_type in required:
        if replica_type not in specs:
            raise GroupingError(job, f"spec.{key}.{replica_type}", f"is required for a {job.get('kind')}")
    return specs


def replica_count(job: KubeObject, key: str, replica_type: str, specs: Mapping[str, Any]) -> int:
    """Replicas of one type; absent means 1 (the operator's default), 0 is an error."""
    spec = specs.get(replica_type) or {}
    field = f"spec.{key}.{replica_type}.replicas"
    return optional_count(job, field, spec.get("replicas"), default=1, minimum=1)


def total_replicas(job: KubeObject, key: str, specs: Mapping[str, Any]) -> int:
    return sum(replica_count(job, key, replica_type, specs) for replica_type in specs)


def scheduling_min_available(job: KubeObject) -> int | None:
    value = nested(job, "spec", "runPolicy", "schedulingPolicy", "minAvailable")
    if value is None:
        return None
    return to_count(value, job, "spec.runPolicy.schedulingPolicy.minAvailable", minimum=1)


def distributed_metadata(ctx: GroupingContext, key: str, required: tuple[str, ...]) -> PodGroupMetadata:
    """The shared rule: minMember = schedulingPolicy.minAvailable, else the sum of replicas."""
    job = ctx.top_owner
    specs = replica_specs(job, key, required)
    total = total_replicas(job, key, specs)
    min_available = scheduling_min_available(job)
    return replace(default_metadata(ctx), min_member=total if min_available is None else min_available)


def distributed_grouper(key: str, required: tuple[str, ...] = ()) -> Callable[[GroupingContext], PodGroupMetadata]:
    """A grouper for a training job kind with replica specs under `spec.<key>`."""

    def group(ctx: GroupingContext) -> PodGroupMetadata:
        return distributed_metadata(ctx, key, required)

    return group


group_tfjob = distributed_grouper("tfReplicaSpecs")
group_xgboostjob = distributed_grouper("xgbReplicaSpecs", ("Master", "Worker"))
group_jaxjob = distributed_grouper("jaxReplicaSpecs", ("Worker",))


# ---------------------------------------------------------------------------------------------------------
# MPIJob

MPI_KEY = "mpiReplicaSpecs"
WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


def _is_live_launcher(job: KubeObject, pod: KubeObject) -> bool:
    labels = labels_of(pod)
    return (
        labels.get(JOB_NAME_LABEL) == name_of(job)
        and labels.get(JOB_ROLE_LABEL) == "launcher"
        and not metadata_of(pod).get("deletionTimestamp")
    )


def group_mpijob(ctx: GroupingContext) -> PodGroupMetadata:
    """MPIJob v1 and v2beta1: Launcher and Worker required; with `launcherCreationPolicy: WaitForWorkersReady`
    and no live launcher pod yet, the launcher replicas are not counted."""
    job = ctx.top_owner
    metadata = distributed_metadata(ctx, MPI_KEY, ("Launcher", "Worker"))
    if nested(job, "spec", "launcherCreationPolicy") != WAIT_FOR_WORKERS_READY:
        return metadata
    candidates = (*ctx.chain.related.mpi_launcher_pods, ctx.pod)
    if any(_is_live_launcher(job, pod) for pod in candidates):
        return metadata
    launchers = replica_count(job, MPI_KEY, "Launcher", replica_specs(job, MPI_KEY, ("Launcher",)))
    return replace(metadata, min_member=max(1, metadata.min_member - launchers))


# ---------------------------------------------------------------------------------------------------------
# PyTorchJob

PYTORCH_KEY = "pytorchReplicaSpecs"


def _segment_size(ctx: GroupingContext, worker_template: Mapping[str, Any]) -> int | None:
    value = worker_setting(ctx, worker_template, keys.SEGMENT_SIZE_ANNOTATION)
    if not value:
        return None
    field = f"spec.{PYTORCH_KEY}.Worker.template.metadata.annotations[{keys.SEGMENT_SIZE_ANNOTATION}]"
    return to_count(value, ctx.top_owner, field, minimum=1)


def _pytorch_min_member(job: KubeObject, specs: Mapping[str, Any]) -> int:
    min_available = scheduling_min_available(job)
    if min_available is not None:
        return min_available
    min_replicas = nested(job, "spec", "elasticPolicy", "minReplicas")
    if min_replicas is not None:
        return to_count(min_replicas, job, "spec.elasticPolicy.minReplicas", minimum=1)
    return total_replicas(job, PYTORCH_KEY, specs)


def group_pytorchjob(ctx: GroupingContext) -> PodGroupMetadata:
    """PyTorchJob: minMember from schedulingPolicy.minAvailable, elasticPolicy.minReplicas or the replicas;
    sub-groups `master` and `worker`, the workers split into `worker-<i>` segments with a segment size."""
    job = ctx.top_owner
    specs = replica_specs(job, PYTORCH_KEY, ())
    total_replicas(job, PYTORCH_KEY, specs)  # validates every replica count
    min_member = _pytorch_min_member(job, specs)
    masters = replica_count(job, PYTORCH_KEY, "Master", specs) if "Master" in specs else 0

    sub_groups: list[SubGroup] = []
    if masters:
        sub_groups.append(SubGroup("master", masters))
    replica_type = labels_of(ctx.pod).get(REPLICA_TYPE_LABEL, "").lower()
    pod_subgroup = "master" if replica_type == "master" and masters else None

    if "Worker" in specs:
        worker_template = (specs["Worker"] or {}).get("template") or {}
        workers = replica_count(job, PYTORCH_KEY, "Worker", specs)
        # The masters are gang members first; the workers need the rest, and at least one.
        worker_min = max(1, min_member - masters)
        segment_size = _segment_size(ctx, worker_template)
        if segment_size is None:
            sub_groups.append(SubGroup("worker", worker_min))
            if replica_type == "worker":
                pod_subgroup = "worker"
        else:
            segments = -(-workers // segment_size)
            if segments > MAX_SEGMENTS:
                raise GroupingError(
                    job,
                    f"spec.{PYTORCH_KEY}.Worker",
                    f"{segments} segments of {segment_size}; at most {MAX_SEGMENTS}",
                )
            topology = segment_topology(ctx, worker_template)
            sub_groups.append(SubGroup("worker", None))
            for index in range(segments):
                size = min(segment_size, workers - index * segment_size)
                sub_groups.append(SubGroup(f"worker-{index}", size, "worker", topology))
            if replica_type == "worker":
                pod_subgroup = f"worker-{_replica_index(ctx) // segment_size}"

    return replace(
        default_metadata(ctx), min_member=min_member, sub_groups=tuple(sub_groups), pod_subgroup=pod_subgroup
    )


def _replica_index(ctx: GroupingContext) -> int:
    field = f"metadata.labels[{REPLICA_INDEX_LABEL}]"
    value = labels_of(ctx.pod).get(REPLICA_INDEX_LABEL)
    if value is None:
        raise GroupingError(ctx.pod, field, "is required to place a worker in its segment")
    return to_count(value, ctx.pod, field, minimum=0)


# ---------------------------------------------------------------------------------------------------------
# Notebook


def group_notebook(ctx: GroupingContext) -> PodGroupMetadata:
    """A Kubeflow Notebook: the default grouping with priority `build`."""
    return default_metadata(ctx, keys.BUILD_PRIORITY_CLASS)
