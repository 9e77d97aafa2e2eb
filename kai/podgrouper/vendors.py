"""Groupers for vendor workloads KAI knows: Run:ai RunaiJob, Azure ML AmlJob, NVIDIA SPOTRequest."""

from __future__ import annotations

from dataclasses import replace

from kai.api import keys

from .chain import GroupingContext
from .common import default_metadata, name_of, nested, to_count, uid_of
from .podgroup import PodGroupMetadata


def group_runaijob(ctx: GroupingContext) -> PodGroupMetadata:
    """RunaiJob (`run.ai/v1`): `pg-<pod name without its last -segment>-<uid>`; an existing legacy
    PodGroup (`pg-<pod>-<uid>` when parallelism > 1, else `pg-<job>-<uid>`) is kept."""
    job = ctx.top_owner
    metadata = default_metadata(ctx)
    parallelism = nested(job, "spec", "parallelism")
    legacy_base = name_of(ctx.pod) if isinstance(parallelism, int) and parallelism > 1 else name_of(job)
    legacy_name = f"{keys.PODGROUP_NAME_PREFIX}-{legacy_base}-{uid_of(job)}"
    if ctx.options.search_legacy_podgroups and legacy_name in ctx.chain.existing_podgroups:
        return replace(metadata, name=legacy_name)
    base = name_of(ctx.pod).rsplit("-", 1)[0]
    return replace(metadata, name=f"{keys.PODGROUP_NAME_PREFIX}-{base}-{uid_of(job)}")


def group_amljob(ctx: GroupingContext) -> PodGroupMetadata:
    """AmlJob (`amlarc.azureml.com`): minMember from `spec.job.options.envs.AZUREML_NODE_COUNT`."""
    job = ctx.top_owner
    field = "spec.job.options.envs.AZUREML_NODE_COUNT"
    count = to_count(nested(job, "spec", "job", "options", "envs", "AZUREML_NODE_COUNT"), job, field, minimum=1)
    return replace(default_metadata(ctx), min_member=count)


def group_spotrequest(ctx: GroupingContext) -> PodGroupMetadata:
    """SPOTRequest (`egx.nvidia.io/v1`): the default grouping with priority `inference`."""
    return default_metadata(ctx, keys.INFERENCE_PRIORITY_CLASS)
