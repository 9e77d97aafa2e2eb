"""ClusterSnapshot: the immutable input of one scheduling cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from kai.model.node import NodeInfo
from kai.model.pod import PodInfo
from kai.model.podgroup import PodGroupInfo
from kai.model.queue import QueueInfo
from kai.model.storage import ClaimInfo, StorageClassInfo, VolumeInfo


@dataclass(slots=True)
class TopologyInfo:
    name: str
    levels: tuple[str, ...]  # node label keys, highest level first


@dataclass(slots=True)
class ClusterSnapshot:
    """Everything one cycle may look at. `now` is the instant of the cycle (epoch seconds)."""

    now: float
    nodes: list[NodeInfo] = field(default_factory=list)  # sorted by name
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    podgroups: dict[str, PodGroupInfo] = field(default_factory=dict)  # by namespace/name
    # Pods that hold node resources but are not ours to schedule (other schedulers, orphans).
    foreign_pods: list[PodInfo] = field(default_factory=list)
    topologies: dict[str, TopologyInfo] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Time-based fair share: per queue, per resource (gpu, cpu, memory names of kai.model), the queue's
    # historical usage as a fraction of the cluster's capacity over the usage window (section 4.3).
    # Computed outside the core (kai.sim.usage); empty means no usage history (plain weights).
    queue_usage: dict[str, dict[str, float]] = field(default_factory=dict)
    # Namespace labels by name (v1 Namespace objects, for pod-affinity namespace selectors).
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # Volumes (kai.plugins.volumes). `storage_listed`: the source lists every claim, so a claim that
    # is not here does not exist (False when the source does not read volumes at all: nothing is checked).
    claims: dict[str, ClaimInfo] = field(default_factory=dict)  # by namespace/name
    volumes: dict[str, VolumeInfo] = field(default_factory=dict)
    storage_classes: dict[str, StorageClassInfo] = field(default_factory=dict)
    storage_listed: bool = False

    def all_pods(self) -> list[PodInfo]:
        pods = [p for pg in self.podgroups.values() for p in pg.pods]
        return pods + self.foreign_pods
