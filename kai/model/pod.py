"""Pods as the scheduler sees them: what they request, where they may go, and their status."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from kai.model.resources import GPU, Resources

if TYPE_CHECKING:
    from kai.model.affinity import HostPort, InterPodAffinity
    from kai.model.dra import PodClaim


class PodStatus(StrEnum):
    """Snapshot statuses (Pending ... Failed) plus the session-only ones a statement produces."""

    PENDING = "Pending"
    GATED = "Gated"
    ALLOCATED = "Allocated"  # placed in this session, to be bound
    PIPELINED = "Pipelined"  # placed on resources still being released
    RUNNING = "Running"  # bound to a node
    RELEASING = "Releasing"  # being deleted, still holds its node's resources
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# Statuses whose pods hold resources on their node.
HOLDS_NODE = frozenset({PodStatus.ALLOCATED, PodStatus.PIPELINED, PodStatus.RUNNING, PodStatus.RELEASING})
# Statuses that count toward a gang's minMember.
ACTIVE = frozenset({PodStatus.ALLOCATED, PodStatus.PIPELINED, PodStatus.RUNNING})
# Statuses that count toward a queue's allocation (pipelined and releasing pods do not).
ALLOCATED = frozenset({PodStatus.ALLOCATED, PodStatus.RUNNING})
# Pods that are alive: they exist and will (or do) run.
ALIVE = frozenset({PodStatus.PENDING, PodStatus.GATED, PodStatus.ALLOCATED, PodStatus.PIPELINED, PodStatus.RUNNING})


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One `matchExpressions` entry of a node selector term."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None and self.values:
            try:
                left, right = int(value), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements that must all hold; a pod's required affinity is an OR of such terms."""

    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches nothing, as in Kubernetes
        fields = {"metadata.name": name}
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a pod asks of GPUs: whole devices, a fraction or memory of N devices, or MIG slices."""

    whole: int = 0
    fraction: float = 0.0  # portion of one device (from gpu-fraction, or gpu-memory once resolved)
    memory_mib: int = 0  # gpu-memory annotation
    num_devices: int = 1  # gpu-fraction-num-devices
    mig: tuple[tuple[str, int], ...] = ()  # (resource name, count)
    dra: int = 0  # GPUs of the pod's DRA resource claims, as KAI books them (kai.model.dra)

    @property
    def is_shared(self) -> bool:
        return self.fraction > 0 or self.memory_mib > 0

    def quota_gpus(self, min_gpu_memory_mib: float = 0.0) -> float:
        """GPUs this request counts as in queue accounting."""
        if self.fraction > 0:
            return self.fraction * self.num_devices + self.dra
        if self.memory_mib > 0 and min_gpu_memory_mib > 0:
            return self.num_devices * self.memory_mib / min_gpu_memory_mib + self.dra
        return float(self.whole) + self.dra + sum(mig_compute(name) * count for name, count in self.mig)


def mig_compute(resource: str) -> int:
    """Compute slices of a MIG profile `nvidia.com/mig-<g>g.<m>gb`."""
    profile = resource.rsplit("mig-", 1)[-1]
    try:
        return int(profile.split("g", 1)[0])
    except ValueError:
        return 1


@dataclass(slots=True)
class PodInfo:
    """One pod. The spec fields never change within a cycle; `status`, `node` and `gpu_groups` do. The
    snapshot builder shares `requests`, `labels`, `tolerations` and `node_selector` between pods written
    alike: never change them in place."""

    namespace: str
    name: str
    uid: str
    creation: float
    requests: Resources  # node resources the pod takes (incl. whole GPUs and `pods: 1`)
    gpu: GpuRequest = field(default_factory=GpuRequest)
    status: PodStatus = PodStatus.PENDING
    node: str = ""
    gpu_groups: tuple[str, ...] = ()
    scheduler_name: str = "kai-scheduler"
    job_key: str = ""  # namespace/podgroup
    subgroup: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    task_priority: int | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    priority_class_name: str = ""
    raw: dict[str, Any] | None = None  # the object as read, for adapters that write it back
    # Placement rules that depend on other pods and volumes (kai.plugins.podaffinity, nodeports, volumes):
    pod_affinity: InterPodAffinity | None = None  # spec.affinity.podAffinity / podAntiAffinity
    host_ports: tuple[HostPort, ...] = ()  # containers[].ports[] with a hostPort
    claims: tuple[str, ...] = ()  # PersistentVolumeClaim names of spec.volumes, in the pod's namespace
    nominated_node: str = ""  # status.nominatedNodeName
    resource_claims: tuple[PodClaim, ...] = ()  # spec.resourceClaims (Dynamic Resource Allocation)
    # The leaf sub-group whose status counters this pod is counted in (kai.model.podgroup); set when
    # the sub-group counts its pods, never copied by `clone`.
    owner: Any = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def placement_signature(self) -> tuple[Any, ...]:
        """Everything that decides which nodes may host the pod, apart from free resources."""
        return (
            self.node_selector,
            self.required_affinity,
            self.tolerations,
            self.pod_affinity,
            self.host_ports,
            self.claims,
            self.resource_claims,
        )

    @property
    def needs_gpu(self) -> bool:
        return self.requests.get(GPU) > 0 or self.gpu.is_shared or bool(self.gpu.mig) or self.gpu.dra > 0

    def clone(self) -> PodInfo:
        """A copy sharing the immutable spec parts (much cheaper than copy.copy on a slotted class)."""
        return PodInfo(
            self.namespace,
            self.name,
            self.uid,
            self.creation,
            self.requests,
            self.gpu,
            self.status,
            self.node,
            self.gpu_groups,
            self.scheduler_name,
            self.job_key,
            self.subgroup,
            self.labels,
            self.task_priority,
            self.node_selector,
            self.required_affinity,
            self.tolerations,
            self.priority_class_name,
            self.raw,
            self.pod_affinity,
            self.host_ports,
            self.claims,
            self.nominated_node,
            self.resource_claims,
        )
