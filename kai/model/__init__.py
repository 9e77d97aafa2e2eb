"""The scheduler's view of a cluster: resource vectors, nodes, pods, pod groups, queues."""

from kai.model.cluster import (
    DYNAMIC_RESOURCE_ALLOCATION,
    UNSUPPORTED_FEATURES,
    ClusterSnapshot,
    TopologyInfo,
    UnsupportedUse,
    unsupported_warnings,
)
from kai.model.node import NodeInfo
from kai.model.pod import (
    ACTIVE,
    ALIVE,
    ALLOCATED,
    HOLDS_NODE,
    GpuRequest,
    NodeSelectorTerm,
    PodInfo,
    PodStatus,
    SelectorRequirement,
    Taint,
    Toleration,
    mig_compute,
)
from kai.model.podgroup import DEFAULT_SUBGROUP, PodGroupInfo, SubGroupInfo, TopologyConstraint
from kai.model.queue import UNLIMITED, QueueInfo, QueueResource
from kai.model.resources import CPU, GPU, MEMORY, PODS, QUEUE_RESOURCES, Resources, ResourceSpace

__all__ = [
    "ACTIVE",
    "ALIVE",
    "ALLOCATED",
    "CPU",
    "DEFAULT_SUBGROUP",
    "DYNAMIC_RESOURCE_ALLOCATION",
    "GPU",
    "HOLDS_NODE",
    "MEMORY",
    "PODS",
    "QUEUE_RESOURCES",
    "UNLIMITED",
    "UNSUPPORTED_FEATURES",
    "ClusterSnapshot",
    "GpuRequest",
    "NodeInfo",
    "NodeSelectorTerm",
    "PodGroupInfo",
    "PodInfo",
    "PodStatus",
    "QueueInfo",
    "QueueResource",
    "ResourceSpace",
    "Resources",
    "SelectorRequirement",
    "SubGroupInfo",
    "Taint",
    "Toleration",
    "TopologyConstraint",
    "TopologyInfo",
    "UnsupportedUse",
    "mig_compute",
    "unsupported_warnings",
]
