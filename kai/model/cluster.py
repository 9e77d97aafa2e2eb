"""ClusterSnapshot: the immutable input of one scheduling cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from kai.model.dra import Device, DeviceClassInfo, ResourceClaimInfo
from kai.model.node import NodeInfo
from kai.model.pod import PodInfo
from kai.model.podgroup import PodGroupInfo
from kai.model.queue import QueueInfo
from kai.model.storage import ClaimInfo, StorageClassInfo, VolumeInfo


@dataclass(slots=True)
class TopologyInfo:
    name: str
    levels: tuple[str, ...]  # node label keys, highest level first


DRA_PRIORITIZED_LIST = "DRAPrioritizedList"
# What kai does, for now, with an object that uses a feature it has not built (for messages).
UNSUPPORTED_FEATURES: dict[str, str] = {
    DRA_PRIORITIZED_LIST: "device requests with alternatives (firstAvailable) are not built in kai yet (the "
    "dynamicresources plugin leaves such pods Pending)",
}


@dataclass(frozen=True, slots=True)
class UnsupportedUse:
    """An object that uses a KAI feature kai has not built. Never silent: `kai simulate` warns, the live
    scheduler counts it (`kai_unsupported_feature_uses_total{feature}`) and records an event on it."""

    feature: str  # a key of UNSUPPORTED_FEATURES
    kind: str  # Pod
    name: str  # namespace/name
    field: str  # where the object uses it, e.g. spec.resourceClaims
    detail: str  # what it uses there, e.g. "gpu (ResourceClaim gpu-claim)"

    @property
    def note(self) -> str:
        """What the use amounts to (for an event on the object): `spec.resourceClaims: uses ...: ...`."""
        what = UNSUPPORTED_FEATURES.get(self.feature, f"{self.feature} is not built in kai yet")
        return f"{self.field}: uses {self.detail}: {what}"

    @property
    def message(self) -> str:
        return f"{self.kind} {self.name}: {self.note}"


def unsupported_warnings(uses: list[UnsupportedUse], shown: int = 5) -> list[str]:
    """One warning per feature, naming the first few objects that use it."""
    lines = []
    by_feature: dict[str, list[UnsupportedUse]] = {}
    for use in uses:
        by_feature.setdefault(use.feature, []).append(use)
    for feature, group in sorted(by_feature.items()):
        if len(group) == 1:
            lines.append(group[0].message)
            continue
        names = ", ".join(f"{u.kind} {u.name} ({u.field}: {u.detail})" for u in group[:shown])
        more = f" and {len(group) - shown} more" if len(group) > shown else ""
        note = UNSUPPORTED_FEATURES.get(feature, f"{feature} is not built in kai yet")
        lines.append(f"{len(group)} objects use {feature}: {names}{more}: {note}")
    return lines


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
    unsupported: list[UnsupportedUse] = field(default_factory=list)  # uses of features kai has not built
    # Time-based fair share: per queue, per resource (gpu, cpu, memory names of kai.model), the queue's
    # historical usage as a fraction of the cluster's capacity over the usage window (kai/usage.py).
    # Computed outside the core (kai.usage); empty means no usage history (plain weights).
    queue_usage: dict[str, dict[str, float]] = field(default_factory=dict)
    # Namespace labels by name (v1 Namespace objects, for pod-affinity namespace selectors).
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # Volumes (kai.plugins.volumes). `storage_listed`: the source lists every claim, so a claim that
    # is not here does not exist (False when the source does not read volumes at all: nothing is checked).
    claims: dict[str, ClaimInfo] = field(default_factory=dict)  # by namespace/name
    volumes: dict[str, VolumeInfo] = field(default_factory=dict)
    storage_classes: dict[str, StorageClassInfo] = field(default_factory=dict)
    storage_listed: bool = False
    # Dynamic Resource Allocation (kai.plugins.dynamicresources): ResourceSlices' devices (in slice order),
    # device classes by name, and resource claims by namespace/name (with those made from templates).
    devices: list[Device] = field(default_factory=list)
    device_classes: dict[str, DeviceClassInfo] = field(default_factory=dict)
    resource_claims: dict[str, ResourceClaimInfo] = field(default_factory=dict)

    def all_pods(self) -> list[PodInfo]:
        pods = [p for pg in self.podgroups.values() for p in pg.pods]
        return pods + self.foreign_pods
