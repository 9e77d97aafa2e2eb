"""Dynamic Resource Allocation as the scheduler sees it (`resource.k8s.io`): the devices ResourceSlices
publish (by driver, pool, attributes and capacity, and the nodes they can be used on), device classes,
resource claims (their requests and, once allocated, their devices and node) and a pod's references to
them. Plain values: the allocation itself is kai.plugins.dynamicresources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai.model.pod import NodeSelectorTerm

EXACT_COUNT = "ExactCount"
ALL = "All"
# A claim may be reserved for at most this many consumers (ResourceClaimReservedForMaxSize).
RESERVED_FOR_MAX = 256


def is_gpu_class(name: str) -> bool:
    """KAI counts a device class (or a ResourceSlice's driver) as GPUs when its name is `nvidia.com/gpu`
    or contains "gpu" in any case (`gpu.nvidia.com`, `gpu.example.com`)."""
    return name == "nvidia.com/gpu" or "gpu" in name.lower()


@dataclass(frozen=True, slots=True)
class SemVer:
    """A device attribute of type `version` (semantic versioning 2.0.0)."""

    text: str


AttributeValue = int | bool | str | SemVer


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice. `node` is set for a slice of one node (`spec.nodeName`); otherwise
    the device can be used on every node (`allNodes`) or on the nodes `node_terms` select."""

    driver: str
    pool: str
    name: str
    node: str = ""
    all_nodes: bool = False
    node_terms: tuple[NodeSelectorTerm, ...] = ()
    # Fully qualified names (`<domain>/<id>`; an unqualified name gets the driver as its domain).
    attributes: dict[str, AttributeValue] = field(default_factory=dict, hash=False, compare=False)
    capacity: dict[str, float] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"

    def usable_on(self, name: str, labels: dict[str, str]) -> bool:
        if self.node:
            return self.node == name
        if self.all_nodes:
            return True
        return any(t.matches(name, labels) for t in self.node_terms)


@dataclass(frozen=True, slots=True)
class DeviceClassInfo:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all of which a device must satisfy
    config: tuple[dict[str, Any], ...] = field(default=(), hash=False, compare=False)  # spec.config, as written


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim (`spec.devices.requests[]`, the `exactly` form)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT  # ExactCount or All
    count: int = 1

    @property
    def gpu_count(self) -> int:
        """What KAI books for this request in queue usage: its count for a GPU class, 1 for `All`."""
        if not is_gpu_class(self.device_class):
            return 0
        return max(self.count, 1) if self.mode == EXACT_COUNT else 1

    def describe(self) -> str:
        what = "all devices" if self.mode == ALL else f"{self.count} device{'s' if self.count != 1 else ''}"
        where = f" matching {len(self.selectors)} selector(s)" if self.selectors else ""
        return f"request {self.name}: {what} of class {self.device_class}{where}"


@dataclass(frozen=True, slots=True)
class MatchConstraint:
    """`spec.devices.constraints[]`: the devices of these requests (all when empty) share this attribute."""

    attribute: str  # fully qualified
    requests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(slots=True)
class ResourceClaimInfo:
    """A ResourceClaim. `generated`: made from a ResourceClaimTemplate for a pod whose claim does not
    exist yet (the resource-claim controller makes it when the pod is created)."""

    namespace: str
    name: str
    uid: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchConstraint, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    queue: str = ""  # its queue label (KAI requires one on a shared GPU claim)
    template: str = ""  # the ResourceClaimTemplate it comes from ("" for a claim made by hand: shared)
    generated: bool = False
    owner_pod: str = ""  # namespace/name of the pod that owns it (a claim from a template)
    allocated: bool = False
    devices: tuple[AllocatedDevice, ...] = ()
    node_terms: tuple[NodeSelectorTerm, ...] = ()  # status.allocation.nodeSelector (empty: any node)
    reserved_for: tuple[str, ...] = ()  # namespace/name of the pods it is reserved for
    deleting: bool = False
    config: tuple[dict[str, Any], ...] = ()  # spec.devices.config, as written (the allocation carries it)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gpu_count(self) -> int:
        return sum(r.gpu_count for r in self.requests)

    @property
    def is_gpu(self) -> bool:
        return any(r.gpu_count for r in self.requests)


@dataclass(frozen=True, slots=True)
class PodClaim:
    """An entry of `pod.spec.resourceClaims`: its name, and the ResourceClaim it stands for (`namespace/
    name`; "" when it names neither a claim nor a template)."""

    name: str
    claim: str
    template: str = ""


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """What a bind carries for one of the pod's claims (the BindRequest's `resourceClaimAllocations`)."""

    name: str  # the pod's claim entry
    claim: str  # namespace/name of the ResourceClaim
    node: str
    devices: tuple[AllocatedDevice, ...]
