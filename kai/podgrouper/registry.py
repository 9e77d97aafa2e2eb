"""Which grouper handles a pod: selected by the top owner's group/version/kind.

The lookup tries the exact version first, then the same group and kind under
any version (`*`), then falls back to the default grouper. Some kinds are only
wrappers (Argo Workflow, Kubeflow Trainer's TrainJob, Run:ai workloads, NVIDIA
Dynamo): they are *skipped*, their labels and annotations copied onto the next
owner down (the pod itself when nothing is left), and that owner's grouper
decides.

`group_pod(chain)` is the entry point the controller calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Final

from kai.api import keys

from . import core_kinds, grove, jobset, knative, kubeflow, lws, ray, vendors
from .chain import (
    WILDCARD_VERSION,
    GroupingContext,
    GroupingOptions,
    GroupVersionKind,
    KubeObject,
    OwnerChain,
)
from .common import (
    annotations_of,
    default_metadata,
    kind_defaults,
    labels_of,
    merge_missing,
    metadata_of,
    name_of,
    nested,
    uid_of,
    with_metadata,
)
from .errors import GroupingError
from .podgroup import PodGroupMetadata

Grouper = Callable[[GroupingContext], PodGroupMetadata]


class _SkipTopOwner:
    """Marker registered for kinds whose next owner down is grouped instead."""

    def __repr__(self) -> str:
        return "SKIP_TOP_OWNER"


SKIP_TOP_OWNER: Final = _SkipTopOwner()


class GrouperRegistry:
    """Groupers by top-owner GVK, a default grouper, and the skip-top-owner kinds."""

    def __init__(self, default: Grouper = default_metadata) -> None:
        self.default = default
        self._entries: dict[GroupVersionKind, Grouper | _SkipTopOwner] = {}

    def register(self, group: str, version: str, kind: str, grouper: Grouper) -> None:
        self._entries[GroupVersionKind(group, version, kind)] = grouper

    def register_skip(self, group: str, version: str, kind: str) -> None:
        self._entries[GroupVersionKind(group, version, kind)] = SKIP_TOP_OWNER

    def lookup(self, gvk: GroupVersionKind) -> Grouper | _SkipTopOwner:
        """The exact version's entry, else the any-version entry, else the default grouper."""
        return self._entries.get(gvk) or self._entries.get(gvk.any_version()) or self.default

    def registered(self) -> dict[GroupVersionKind, Grouper | _SkipTopOwner]:
        return dict(self._entries)

    def group(self, chain: OwnerChain, options: GroupingOptions | None = None) -> PodGroupMetadata | None:
        """The PodGroup of the chain's pod, or None for a pod the podgrouper leaves alone.

        Left alone: a pod for another scheduler, and a pod without owner that
        already names its PodGroup (a user-managed PodGroup).
        """
        options = options or GroupingOptions()
        pod = {
            **chain.pod,
            "apiVersion": chain.pod.get("apiVersion") or "v1",
            "kind": chain.pod.get("kind") or "Pod",
        }
        chain = replace(chain, pod=pod)
        if nested(pod, "spec", "schedulerName") != options.scheduler_name:
            return None
        if not chain.owners and keys.POD_GROUP_ANNOTATION in annotations_of(pod):
            return None
        check_owner_chain(chain)
        ctx = GroupingContext.start(chain, options)
        while True:
            grouper = self.lookup(GroupVersionKind.of(ctx.top_owner))
            if not isinstance(grouper, _SkipTopOwner):
                break
            ctx = skip_top_owner(ctx)
        return finish(ctx, grouper(ctx))


def check_owner_chain(chain: OwnerChain) -> None:
    """Each link must be the single owner its child references, with a matching UID."""
    child: KubeObject = chain.pod
    for owner in chain.owners:
        references = metadata_of(child).get("ownerReferences") or []
        field = "metadata.ownerReferences"
        if child is not chain.pod and len(references) > 1:
            raise GroupingError(child, field, f"has {len(references)} owners; the podgrouper follows a single owner")
        if not references:
            raise GroupingError(
                child, field, f"is empty, yet {owner.get('kind')} {name_of(owner)} was given as its owner"
            )
        reference = references[0]
        if reference.get("uid") != uid_of(owner):
            raise GroupingError(
                child,
                field,
                f"references {reference.get('kind')} {reference.get('name')} uid {reference.get('uid')}, "
                f"but the owner given has uid {uid_of(owner)} (replaced since?)",
            )
        child = owner
    top_references = metadata_of(child).get("ownerReferences") or []
    if chain.owners and len(top_references) > 1:
        raise GroupingError(child, "metadata.ownerReferences", f"has {len(top_references)} owners")


def skip_top_owner(ctx: GroupingContext) -> GroupingContext:
    """Drop the top owner; the next owner down inherits its labels, annotations and kind defaults."""
    skipped = ctx.top_owner
    below = ctx.owners[:-1]
    heir = below[-1] if below else ctx.pod
    labels = merge_missing(labels_of(heir), labels_of(skipped))
    priority, preemptibility = kind_defaults(ctx, skipped)
    if priority:
        labels.setdefault(keys.PRIORITY_CLASS_LABEL, priority)
    if preemptibility:
        labels.setdefault(keys.PREEMPTIBILITY_LABEL, preemptibility)
    heir = with_metadata(heir, labels, merge_missing(annotations_of(heir), annotations_of(skipped)))
    return replace(ctx, owners=(*below[:-1], heir))


def finish(ctx: GroupingContext, metadata: PodGroupMetadata) -> PodGroupMetadata:
    """Common last steps: the pod's node-pool label goes onto the PodGroup; the pod's leaf must exist."""
    node_pool_key = ctx.options.node_pool_label_key
    node_pool = labels_of(ctx.pod).get(node_pool_key)
    if node_pool is not None and node_pool_key not in metadata.labels:
        metadata = replace(metadata, labels={**metadata.labels, node_pool_key: node_pool})
    if metadata.pod_subgroup is not None:
        leaf = metadata.sub_group(metadata.pod_subgroup)
        if leaf is None or leaf.min_member is None:
            raise GroupingError(
                ctx.pod,
                "metadata.labels",
                f"sub-group {metadata.pod_subgroup!r} is not a leaf of {metadata.name}",
            )
    return metadata


def default_registry() -> GrouperRegistry:
    """The registry with every kind KAI groups."""
    registry = GrouperRegistry(default_metadata)
    table: list[tuple[str, str, str, Grouper]] = [
        ("", "v1", "Pod", core_kinds.group_bare_pod),
        ("batch", "v1", "Job", core_kinds.group_batch_job),
        ("batch", "v1", "CronJob", core_kinds.group_cronjob),
        ("apps", "v1", "Deployment", core_kinds.group_deployment),
        ("apps", "v1", "StatefulSet", default_metadata),
        ("apps", "v1", "ReplicaSet", default_metadata),
        ("machinelearning.seldon.io", "v1", "SeldonDeployment", default_metadata),
        ("machinelearning.seldon.io", "v1alpha2", "SeldonDeployment", default_metadata),
        ("kubevirt.io", "v1", "VirtualMachineInstance", default_metadata),
        ("workspace.devfile.io", "v1alpha2", "DevWorkspace", default_metadata),
        ("kubeflow.org", "v1alpha1", "ScheduledWorkflow", default_metadata),
        ("tekton.dev", "v1", "PipelineRun", default_metadata),
        ("tekton.dev", "v1", "TaskRun", default_metadata),
        ("kubeflow.org", "v1", "PyTorchJob", kubeflow.group_pytorchjob),
        ("kubeflow.org", "v1", "TFJob", kubeflow.group_tfjob),
        ("kubeflow.org", "v1", "XGBoostJob", kubeflow.group_xgboostjob),
        ("kubeflow.org", "v1", "JAXJob", kubeflow.group_jaxjob),
        ("kubeflow.org", "v1", "MPIJob", kubeflow.group_mpijob),
        ("kubeflow.org", "v2beta1", "MPIJob", kubeflow.group_mpijob),
        ("kubeflow.org", "v1beta1", "Notebook", kubeflow.group_notebook),
        ("jobset.x-k8s.io", "v1alpha2", "JobSet", jobset.group_jobset),
        ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", lws.group_leaderworkerset),
        ("serving.knative.dev", "v1", "Service", knative.group_knative_service),
        ("grove.io", "v1alpha1", "PodCliqueSet", grove.group_grove),
        ("grove.io", "v1alpha1", "PodGangSet", grove.group_grove),
        ("run.ai", "v1", "RunaiJob", vendors.group_runaijob),
        ("amlarc.azureml.com", "v1alpha1", "AmlJob", vendors.group_amljob),
        ("egx.nvidia.io", "v1", "SPOTRequest", vendors.group_spotrequest),
    ]
    for version in ("v1", "v1alpha1"):
        table += [
            ("ray.io", version, "RayCluster", ray.group_raycluster),
            ("ray.io", version, "RayJob", ray.group_rayjob),
            ("ray.io", version, "RayService", ray.group_rayservice),
        ]
    for group, version, kind, grouper in table:
        registry.register(group, version, kind, grouper)

    registry.register_skip("argoproj.io", "v1alpha1", "Workflow")
    registry.register_skip("trainer.kubeflow.org", "v1alpha1", "TrainJob")
    registry.register_skip("nvidia.com", WILDCARD_VERSION, "DynamoGraphDeployment")
    for kind in (
        "TrainingWorkload",
        "InteractiveWorkload",
        "DistributedWorkload",
        "InferenceWorkload",
        "DistributedInferenceWorkload",
    ):
        registry.register_skip("run.ai", WILDCARD_VERSION, kind)
    return registry


@cache
def _shared_registry() -> GrouperRegistry:
    return default_registry()


def group_pod(chain: OwnerChain, options: GroupingOptions | None = None) -> PodGroupMetadata | None:
    """The PodGroup for the chain's pod with the default registry (None: leave the pod alone)."""
    return _shared_registry().group(chain, options)
