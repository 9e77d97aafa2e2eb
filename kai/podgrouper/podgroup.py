"""What a grouping rule produces: the PodGroup to create and what to patch on the pod."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kai.api import keys


@dataclass(frozen=True)
class TopologyConstraint:
    """`{topology, requiredTopologyLevel, preferredTopologyLevel}` of a PodGroup or sub-group."""

    topology: str = ""
    required_level: str = ""
    preferred_level: str = ""

    def is_empty(self) -> bool:
        return not (self.topology or self.required_level or self.preferred_level)

    def to_manifest(self) -> dict[str, str]:
        fields = {
            "topology": self.topology,
            "requiredTopologyLevel": self.required_level,
            "preferredTopologyLevel": self.preferred_level,
        }
        return {key: value for key, value in fields.items() if value}


@dataclass(frozen=True)
class SubGroup:
    """One entry of `spec.subGroups`. A parent (a sub-group with children) has no `min_member`."""

    name: str
    min_member: int | None
    parent: str | None = None
    topology_constraint: TopologyConstraint | None = None

    def to_manifest(self) -> dict[str, Any]:
        result: dict[str, Any] = {"name": self.name}
        if self.min_member is not None:
            result["minMember"] = self.min_member
        if self.parent is not None:
            result["parent"] = self.parent
        if self.topology_constraint is not None and not self.topology_constraint.is_empty():
            result["topologyConstraint"] = self.topology_constraint.to_manifest()
        return result


@dataclass(frozen=True)
class OwnerReference:
    """The PodGroup's owner: normally the top owner, the pod for per-pod groups."""

    api_version: str
    kind: str
    name: str
    uid: str

    def to_manifest(self) -> dict[str, str]:
        return {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}


@dataclass(frozen=True)
class PodGroupMetadata:
    """The PodGroup a pod belongs to, and the sub-group (leaf) the pod goes to.

    `warnings` lists what the rule ignored (an unknown priority class, an invalid
    preemptibility label, ...): the controller reports them as `PodGrouperWarning`
    events without failing.
    """

    name: str
    namespace: str
    owner: OwnerReference
    min_member: int
    queue: str
    priority_class_name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    preemptibility: str = ""
    sub_groups: tuple[SubGroup, ...] = ()
    topology_constraint: TopologyConstraint = field(default_factory=TopologyConstraint)
    pod_subgroup: str | None = None
    warnings: tuple[str, ...] = ()

    def sub_group(self, name: str) -> SubGroup | None:
        return next((group for group in self.sub_groups if group.name == name), None)

    def to_manifest(self) -> dict[str, Any]:
        """The `scheduling.run.ai/v2alpha2` PodGroup dict to create."""
        spec: dict[str, Any] = {
            "minMember": self.min_member,
            "queue": self.queue,
            "priorityClassName": self.priority_class_name,
        }
        if self.preemptibility:
            spec["preemptibility"] = self.preemptibility
        if not self.topology_constraint.is_empty():
            spec["topologyConstraint"] = self.topology_constraint.to_manifest()
        if self.sub_groups:
            spec["subGroups"] = [group.to_manifest() for group in self.sub_groups]
        return {
            "apiVersion": keys.PODGROUP_API_VERSION,
            "kind": "PodGroup",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": dict(self.labels),
                "annotations": dict(self.annotations),
                "ownerReferences": [self.owner.to_manifest()],
            },
            "spec": spec,
        }

    def pod_patch(self) -> dict[str, Any]:
        """A merge patch for the pod: its PodGroup annotation and, if any, its sub-group label."""
        metadata: dict[str, Any] = {"annotations": {keys.POD_GROUP_ANNOTATION: self.name}}
        if self.pod_subgroup is not None:
            metadata["labels"] = {keys.SUBGROUP_LABEL: self.pod_subgroup}
        return {"metadata": metadata}
