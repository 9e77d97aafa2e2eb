"""Workload kind -> PodGroup rules (pure); their controller is `kai.podgrouper.controller`.

`group_pod(OwnerChain(pod, owners, ...))` returns the `PodGroupMetadata` of the
pod's PodGroup (`to_manifest()` gives the `scheduling.run.ai/v2alpha2` object,
`pod_patch()` what to set on the pod), or None for a pod left alone. A workload
that cannot be grouped raises `GroupingError`, naming the object and field.
The rules read only the objects they are given: no client, no I/O, no clock.
"""

from .chain import (
    GroupingContext,
    GroupingOptions,
    GroupVersionKind,
    OwnerChain,
    RelatedObjects,
    WorkloadDefaults,
    parse_default_priorities,
)
from .errors import GroupingError
from .podgroup import OwnerReference, PodGroupMetadata, SubGroup, TopologyConstraint
from .registry import SKIP_TOP_OWNER, Grouper, GrouperRegistry, default_registry, group_pod

__all__ = [
    "SKIP_TOP_OWNER",
    "GroupVersionKind",
    "Grouper",
    "GrouperRegistry",
    "GroupingContext",
    "GroupingError",
    "GroupingOptions",
    "OwnerChain",
    "OwnerReference",
    "PodGroupMetadata",
    "RelatedObjects",
    "SubGroup",
    "TopologyConstraint",
    "WorkloadDefaults",
    "default_registry",
    "group_pod",
    "parse_default_priorities",
]
