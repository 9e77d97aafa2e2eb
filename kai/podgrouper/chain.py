"""What a grouping rule reads: the pod, its owners up to the top owner, and a few extra objects.

Every object is a plain Kubernetes object dict as the API server returns it
(`apiVersion`, `kind`, `metadata`, `spec`, `status`). The controller fetches
them; the rules only read them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kai.api import keys

from .errors import GroupingError

KubeObject = Mapping[str, Any]

WILDCARD_VERSION = "*"


@dataclass(frozen=True)
class GroupVersionKind:
    """The key a grouper is registered under; `version` may be `*` (any version)."""

    group: str
    version: str
    kind: str

    @classmethod
    def of(cls, obj: KubeObject) -> GroupVersionKind:
        """The GVK of an object dict, from its `apiVersion` and `kind`."""
        group, version = split_api_version(str(obj.get("apiVersion") or ""))
        return cls(group, version, str(obj.get("kind") or ""))

    def any_version(self) -> GroupVersionKind:
        return replace(self, version=WILDCARD_VERSION)

    @property
    def group_kind(self) -> str:
        """`Kind.group` as Kubernetes prints a GroupKind (`Kind` alone for the core group)."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def __str__(self) -> str:
        return f"{self.group}/{self.version}/{self.kind}" if self.group else f"{self.version}/{self.kind}"


def split_api_version(api_version: str) -> tuple[str, str]:
    """`apps/v1` -> (`apps`, `v1`); `v1` -> (``, `v1`)."""
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


@dataclass(frozen=True)
class WorkloadDefaults:
    """One entry of the default-priorities ConfigMap: defaults for a kind (and optionally its group)."""

    type_name: str
    group: str = ""
    priority_name: str = ""
    preemptibility: str = ""

    @property
    def group_kind(self) -> str:
        return f"{self.type_name}.{self.group}" if self.group else self.type_name


def parse_default_priorities(types_json: str) -> tuple[WorkloadDefaults, ...]:
    """Parse the `types` value of the default-priorities ConfigMap.

    It is a JSON list of `{typeName, group, priorityName, preemptibility}`.
    """
    configmap = {"kind": "ConfigMap", "metadata": {"name": "default-priorities"}}
    try:
        entries = json.loads(types_json)
    except json.JSONDecodeError as err:
        raise GroupingError(configmap, "data.types", f"not valid JSON: {err.msg}") from err
    if not isinstance(entries, list):
        raise GroupingError(configmap, "data.types", "must be a JSON list of {typeName, group, priorityName}")
    result = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("typeName"):
            raise GroupingError(configmap, f"data.types[{index}].typeName", "is required")
        result.append(
            WorkloadDefaults(
                type_name=str(entry["typeName"]),
                group=str(entry.get("group") or ""),
                priority_name=str(entry.get("priorityName") or ""),
                preemptibility=str(entry.get("preemptibility") or ""),
            )
        )
    return tuple(result)


@dataclass(frozen=True)
class RelatedObjects:
    """The few objects outside the owner chain that some kinds need.

    - `pod_gang`: the `scheduler.grove.io` PodGang named by the pod label `grove.io/podgang` (Grove).
    - `mpi_launcher_pods`: pods labelled `training.kubeflow.org/job-name=<MPIJob>` and
      `training.kubeflow.org/job-role=launcher` (MPIJob with `launcherCreationPolicy: WaitForWorkersReady`).
    - `knative_revision`: the Revision named by the pod label `serving.knative.dev/revision`, when it is
      not already in the owner chain.
    - `knative_revision_pods`: the pods of that Revision, to recognise a revision grouped per pod by an
      older podgrouper.
    - `ray_cluster`: the RayCluster a RayJob or RayService points to in its status, when it is not
      already in the owner chain.
    """

    pod_gang: KubeObject | None = None
    mpi_launcher_pods: Sequence[KubeObject] = ()
    knative_revision: KubeObject | None = None
    knative_revision_pods: Sequence[KubeObject] = ()
    ray_cluster: KubeObject | None = None


@dataclass(frozen=True)
class OwnerChain:
    """The input of a grouping rule.

    `owners` runs from the pod's direct owner up to the top owner (the last
    element); it is empty for a pod without owner. `priority_classes` lists the
    PriorityClass names that exist (None: unknown, every named class is trusted).
    `existing_podgroups` maps the names of PodGroups already in the pod's
    namespace to their manifests: kinds that renamed their PodGroups keep using a
    legacy one that exists.
    """

    pod: KubeObject
    owners: Sequence[KubeObject] = ()
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    default_priorities: Sequence[WorkloadDefaults] = ()
    priority_classes: frozenset[str] | None = None
    existing_podgroups: Mapping[str, KubeObject] = field(default_factory=dict)
    related: RelatedObjects = field(default_factory=RelatedObjects)

    @property
    def top_owner(self) -> KubeObject:
        return self.owners[-1] if self.owners else self.pod


@dataclass(frozen=True)
class GroupingOptions:
    """The podgrouper's configuration (KAI's flags and operator settings)."""

    scheduler_name: str = keys.SCHEDULER_NAME
    queue_label_key: str = keys.QUEUE_LABEL
    node_pool_label_key: str = keys.NODE_POOL_LABEL
    default_queue: str = keys.DEFAULT_QUEUE
    gang_schedule_knative: bool = True
    search_legacy_podgroups: bool = True


@dataclass(frozen=True)
class GroupingContext:
    """What a grouper sees: the chain, the options, and the effective owners.

    `owners` runs from the pod's direct owner to the effective top owner
    (`owners[-1]`); for a pod without owner it is `(pod,)`. Skipping a top owner
    (Argo Workflow, TrainJob, ...) shortens it and copies the skipped owner's
    labels and annotations onto the new top owner.
    """

    chain: OwnerChain
    options: GroupingOptions
    owners: tuple[KubeObject, ...]

    @classmethod
    def start(cls, chain: OwnerChain, options: GroupingOptions) -> GroupingContext:
        return cls(chain, options, tuple(chain.owners) or (chain.pod,))

    @property
    def pod(self) -> KubeObject:
        return self.chain.pod

    @property
    def top_owner(self) -> KubeObject:
        return self.owners[-1]
