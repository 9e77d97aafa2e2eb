"""The scheduler's view of a cluster: resource vectors, nodes, pods, pod groups, queues."""

from kai.model.affinity import HostPort, InterPodAffinity, LabelSelector, PodAffinityTerm, WeightedTerm
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
from kai.model.storage import IMMEDIATE, WAIT_FOR_FIRST_CONSUMER, ClaimInfo, StorageClassInfo, VolumeInfo

__all__ = [
    "ACTIVE",
    "ALIVE",
    "ALLOCATED",
    "CPU",
    "DEFAULT_SUBGROUP",
    "DYNAMIC_RESOURCE_ALLOCATION",
    "GPU",
    "HOLDS_NODE",
    "IMMEDIATE",
    "MEMORY",
    "PODS",
    "QUEUE_RESOURCES",
    "UNLIMITED",
    "UNSUPPORTED_FEATURES",
    "WAIT_FOR_FIRST_CONSUMER",
    "ClaimInfo",
    "ClusterSnapshot",
    "GpuRequest",
    "HostPort",
    "InterPodAffinity",
    "LabelSelector",
    "NodeInfo",
    "NodeSelectorTerm",
    "PodAffinityTerm",
    "PodGroupInfo",
    "PodInfo",
    "PodStatus",
    "QueueInfo",
    "QueueResource",
    "ResourceSpace",
    "Resources",
    "SelectorRequirement",
    "StorageClassInfo",
    "SubGroupInfo",
    "Taint",
    "Toleration",
    "TopologyConstraint",
    "TopologyInfo",
    "UnsupportedUse",
    "VolumeInfo",
    "WeightedTerm",
    "mig_compute",
    "unsupported_warnings",
]
