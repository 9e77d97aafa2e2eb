"""Turning Kubernetes objects (dicts, as read from files or a watch cache) into a ClusterSnapshot.

Every problem is collected with the object and field it concerns; an object with a
problem is left out of the snapshot, so that the live scheduler can go on with the
rest while the offline CLI refuses the whole snapshot.

What pods, PodGroups and nodes written alike share (a pod's requests, labels, tolerations and node
selector, a PodGroup's spec, a node's allocatable) is converted once per distinct content and shared by
the converted objects, which is why nobody may change those parts of a PodInfo or NodeInfo. A cache
keeps only conversions without problems, keyed so that values merely equal to one another (1, 1.0,
True) never meet: by type as well, or only for text, which equals nothing but text.
"""

from __future__ import annotations

import gc
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kai.api import keys
from kai.api.errors import Problem
from kai.api.gpusharing import MPS_ANNOTATION, parse_gpu_sharing
from kai.api.quantity import QuantityError, as_float, cpu_millis
from kai.api.queuevalues import odd_queue_values
from kai.api.timeutil import parse_duration, parse_time, parse_time_text
from kai.model import (
    CPU,
    DEFAULT_SUBGROUP,
    GPU,
    MEMORY,
    PODS,
    UNLIMITED,
    ClaimInfo,
    ClusterSnapshot,
    GpuRequest,
    HostPort,
    InterPodAffinity,
    LabelSelector,
    NodeInfo,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodGroupInfo,
    PodInfo,
    PodStatus,
    QueueInfo,
    QueueResource,
    Resources,
    SelectorRequirement,
    StorageClassInfo,
    SubGroupInfo,
    Taint,
    Toleration,
    TopologyConstraint,
    TopologyInfo,
    VolumeInfo,
    WeightedTerm,
    unsupported_warnings,
)
from kai.model.affinity import WILDCARD_IP
from kai.model.storage import IMMEDIATE, WAIT_FOR_FIRST_CONSUMER
from kai.snapshot import dra

MB = 1_000_000.0
PRESSURE_CONDITIONS = {"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}
STORAGE_KINDS = ("Namespace", "PersistentVolumeClaim", "PersistentVolume", "StorageClass")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NO_LABELS: tuple[dict[str, str], tuple[str, ...], None, str] = ({}, (), None, DEFAULT_SUBGROUP)
POD_GROUP_ANNOTATION = keys.POD_GROUP_ANNOTATION
# Enum members read once: a PodStatus.X lookup goes through the enum metaclass's attribute hook.
_PENDING, _GATED, _RUNNING, _RELEASING, _SUCCEEDED, _FAILED = (
    PodStatus.PENDING,
    PodStatus.GATED,
    PodStatus.RUNNING,
    PodStatus.RELEASING,
    PodStatus.SUCCEEDED,
    PodStatus.FAILED,
)
# Parts of a pod's spec that most pods do not have; a spec without any is read on a shorter path.
_RARE_SPEC_KEYS = frozenset(
    {
        "initContainers",
        "overhead",
        "schedulingGates",
        "affinity",
        "nodeSelector",
        "tolerations",
        "priorityClassName",
        "volumes",
        "resourceClaims",
    }
)
# The model's slotted dataclasses, made the way their class call would make them but without its
# generic path (type.__call__ -> slot_tp_init -> a prepended argument copy), which in CPython 3.11
# costs about as much as the __init__ itself: object.__new__, then the dataclass __init__ as a plain
# Python call. For the classes the builder makes tens of thousands of.
_new = object.__new__
_init_pod = PodInfo.__init__
_init_podgroup = PodGroupInfo.__init__
_init_subgroup = SubGroupInfo.__init__


ACCEPTED_KINDS = {
    ("", "Node"),
    ("", "Pod"),
    ("scheduling.run.ai", "Queue"),
    ("scheduling.run.ai", "PodGroup"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("kai.scheduler", "Topology"),
    ("", "Namespace"),
    ("", "PersistentVolumeClaim"),
    ("", "PersistentVolume"),
    ("storage.k8s.io", "StorageClass"),
    *((dra.GROUP, kind) for kind in dra.KINDS),
}  # every kind the builder reads (group, kind); the shape check covers those it has a schema for
PODGROUP_TIMESTAMP_ANNOTATIONS = (keys.LAST_START_TIMESTAMP_ANNOTATION, keys.STALE_TIMESTAMP_ANNOTATION)
GPU_SHARING_ANNOTATIONS = (
    keys.GPU_FRACTION_ANNOTATION,
    keys.GPU_MEMORY_ANNOTATION,
    keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION,
    MPS_ANNOTATION,
)
_GPU_SHARING_KEYS = frozenset(GPU_SHARING_ANNOTATIONS)
_NO_RESOURCES: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ())  # the requests key of a container without any
# The API server's form of a timestamp, `YYYY-MM-DDTHH:MM:SSZ`, with an hour, minute and second in range: such
# text is its minute's epoch plus its seconds (see _text_time).
_API_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z")
_SECONDS = {f"{n:02d}Z": n for n in range(60)}  # the last three characters of that form: `00Z` to `59Z`


def _plain_content_key(spec: dict[str, Any]) -> tuple[Any, ...] | None:
    """For the common pod (one container, no init containers, no overhead), the items of its limits and
    requests; None for any other pod. Keys only pods whose quantities are all text (see _pod_requests)."""
    containers = spec.get("containers")
    if type(containers) is not list or len(containers) != 1 or spec.get("initContainers"):
        return None
    container = containers[0]
    if type(container) is not dict or spec.get("overhead") is not None:
        return None
    res = container.get("resources")
    if not res:
        return (), ()
    if type(res) is not dict:
        return None
    limits, requests = res.get("limits"), res.get("requests")
    if (limits and type(limits) is not dict) or (requests and type(requests) is not dict):
        return None
    return tuple(limits.items()) if limits else (), tuple(requests.items()) if requests else ()


def _content_key(spec: dict[str, Any]) -> tuple[Any, ...] | None:
    """What decides a pod's effective request (containers' and init containers' requests and limits,
    overhead), as a key (unhashable when it holds anything but plain strings and numbers); None when a
    part is not the map it should be."""
    containers = spec.get("containers")
    if type(containers) is list and len(containers) == 1 and not spec.get("initContainers"):
        # the common pod: one container, its requests and limits (the general walk below gives the same key)
        container = containers[0]
        res = container.get("resources") or {} if type(container) is dict else None
        if type(res) is dict and spec.get("overhead") is None:
            limits, requests = res.get("limits") or {}, res.get("requests") or {}
            if type(limits) is dict and type(requests) is dict:
                return (
                    tuple(limits.items()),
                    tuple(map(type, limits.values())),
                    tuple(requests.items()),
                    tuple(map(type, requests.values())),
                    "containers",
                    "initContainers",
                )
    parts: list[Any] = []
    for section in ("containers", "initContainers"):
        for container in spec.get(section) or ():
            if not isinstance(container, dict):
                parts.append(None)
                continue
            res = container.get("resources") or {}
            if not isinstance(res, dict):
                return None
            for part in ("limits", "requests"):
                values = res.get(part) or {}
                if not isinstance(values, dict):
                    return None
                parts.append(tuple(values.items()))
                parts.append(tuple(map(type, values.values())))
        parts.append(section)
    overhead = spec.get("overhead")
    if overhead is not None:
        if not isinstance(overhead, dict):
            return None
        parts.append(tuple(overhead.items()))
        parts.append(tuple(map(type, overhead.values())))
    return tuple(parts)


@dataclass
class BuildResult:
    snapshot: ClusterSnapshot
    problems: list[Problem] = field(default_factory=list)


class ConversionMemo:
    """Per-object conversions kept from one build to the next, for a source that never mutates an
    object it hands over (the live cache replaces an object's dict on every change): a Pod, Node or
    PodGroup dict given again, the very same dict, is not converted again, and the problems and
    warnings its conversion gave are repeated (a PodGroup's only while its queue and priority read
    the same). What each build does not see again is forgotten at its end.

    The converted PodInfo and NodeInfo are shared by the snapshots of successive builds, so their
    users must not change them (the session works on clones of the pods); each build gets its own
    PodGroupInfo (the pods are attached to it)."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[dict[str, Any], Any, list[Problem], list[str]]] = {}
        self._seen: dict[int, tuple[dict[str, Any], Any, list[Problem], list[str]]] = {}
        self.converted = 0  # conversions done (misses), for tests and metrics
        self.reused = 0

    def get(self, obj: dict[str, Any]) -> tuple[dict[str, Any], Any, list[Problem], list[str]] | None:
        entry = self._kept.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        self._seen[id(obj)] = entry
        self.reused += 1
        return entry

    def put(self, obj: dict[str, Any], value: Any, problems: list[Problem], warnings: list[str]) -> None:
        self._seen[id(obj)] = (obj, value, problems, warnings)
        self.converted += 1

    def finish(self) -> None:
        """End of a build: keep only what it saw."""
        self._kept, self._seen = self._seen, {}


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _describe(kind: str, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or "<unnamed>"
    namespace = meta.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


class SnapshotBuilder:
    """Collects objects by kind, then builds the snapshot in dependency order."""

    def __init__(
        self,
        now: float,
        scheduler_name: str = keys.SCHEDULER_NAME,
        storage_listed: bool = False,
        queue_label_key: str = keys.QUEUE_LABEL,
        memo: ConversionMemo | None = None,
    ) -> None:
        self.now = now
        self.memo = memo
        self.scheduler_name = scheduler_name
        self.storage_listed = storage_listed
        self.queue_label_key = queue_label_key  # KAI's --queue-label-key: names a lone pod's queue
        self.problems: list[Problem] = []
        self.warnings: list[str] = []
        self._requests: dict[tuple[Any, ...], Resources] = {}  # pod request content -> its Resources
        # the same for text-only quantities, with the GPU request of such pods without sharing annotations
        self._plain_requests: dict[tuple[Any, ...], tuple[Resources, GpuRequest | None]] = {}
        # those of them whose GPU request is known too (a second pod asked for it): the pod loop's common path
        self._common_requests: dict[tuple[Any, ...], tuple[Resources, GpuRequest]] = {}
        self._gpu_requests: dict[int, tuple[Resources, GpuRequest]] = {}  # for pods without sharing annotations
        self._allocatables: dict[tuple[Any, ...], Resources] = {}  # node allocatable content -> its Resources
        self._times: dict[Any, float] = {}  # timestamps parsed, by their text (a cluster repeats a few thousand)
        self._minutes: dict[str, float] = {}  # `YYYY-MM-DDTHH:MM:` of those in the API server's form -> its epoch
        self._shared_tolerations: dict[tuple[Any, ...], tuple[Toleration, ...]] = {}  # by the fields read
        self._shared_selectors: dict[tuple[Any, ...], tuple[tuple[str, str], ...]] = {}  # nodeSelector content
        self._shared_labels: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # pod labels content -> _pod_labels
        self._group_specs: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # PodGroup spec content -> derived values
        self._last_group_spec: tuple[Any, Any, Any] = (None, None, None)  # the last spec found in it (_podgroup)
        self._leaf_queues: set[str] = set()  # queues _check_queue accepted
        self._claimed: set[int] = set()  # ids of the Pod dicts with spec.resourceClaims (_pod finds them)
        self.by_kind: dict[str, list[dict[str, Any]]] = {
            k: [] for k in ("Node", "Queue", "PodGroup", "PriorityClass", "Pod", "Topology", *STORAGE_KINDS)
        }

    # -- intake -------------------------------------------------------------------------------
    def add(self, objects: Iterable[dict[str, Any]]) -> None:
        ignored: dict[str, int] = {}
        # kind -> apiVersion -> its list (two lookups cost less than making, hashing and comparing a pair)
        targets: dict[Any, dict[Any, list[dict[str, Any]] | None]] = {}
        for obj in objects:
            # The common object (a kind already seen, a metadata map with a name) in subscripts alone; a
            # lookup that fails (KeyError, TypeError) or a kind not read (None has no append) goes below.
            # A read document's metadata that is not a map is a list, text, a number or null: `["name"]`
            # raises TypeError for each, so no type check is needed.
            try:
                meta = obj["metadata"]
                if meta["name"]:
                    targets[obj["kind"]][obj["apiVersion"]].append(obj)  # type: ignore[union-attr]
                    continue
            except (KeyError, TypeError, AttributeError):
                pass
            kind = obj.get("kind")
            try:
                target = targets[kind][obj.get("apiVersion")]
            except (KeyError, TypeError):
                target = self._kind_list((kind, obj.get("apiVersion")), targets)
            if target is None:
                label = f"{str(obj.get('kind') or '') or '<no kind>'} ({obj.get('apiVersion', '')})"
                ignored[label] = ignored.get(label, 0) + 1
                continue
            meta = obj.get("metadata")
            if not isinstance(meta, dict) or not meta.get("name"):
                self._problem(str(obj.get("kind") or ""), obj, "metadata.name", "is missing")
                continue
            target.append(obj)
        for label, count in sorted(ignored.items()):
            self.warnings.append(f"ignored {count} object(s) of kind {label}")

    def _kind_list(
        self, pair: tuple[Any, Any], targets: dict[Any, dict[Any, list[dict[str, Any]] | None]]
    ) -> list[dict[str, Any]] | None:
        """The list objects of this (kind, apiVersion) go to, None for a kind the builder does not read;
        kept for text pairs (a text key is never equal to a number's)."""
        kind, version = str(pair[0] or ""), str(pair[1] or "")
        target = self.by_kind.setdefault(kind, []) if (_group(version), kind) in ACCEPTED_KINDS else None
        if type(pair[0]) is str and type(pair[1]) is str:
            targets.setdefault(pair[0], {})[pair[1]] = target
        return target

    def _problem(self, kind: str, obj: dict[str, Any], fld: str, message: str) -> None:
        self.problems.append(Problem(_describe(kind, obj), fld, message))

    def _converted(self, obj: dict[str, Any], convert: Callable[[dict[str, Any]], Any]) -> Any:
        """`convert(obj)`, or what it gave for this very object in an earlier build (with the memo)."""
        memo = self.memo
        if memo is None:
            return convert(obj)
        entry = memo.get(obj)
        if entry is not None:
            self.problems.extend(entry[2])
            self.warnings.extend(entry[3])
            return entry[1]
        problems, warnings = len(self.problems), len(self.warnings)
        value = convert(obj)
        memo.put(obj, value, self.problems[problems:], self.warnings[warnings:])
        return value

    # -- build --------------------------------------------------------------------------------
    def build(self) -> BuildResult:
        priorities = dict(keys.DEFAULT_PRIORITY_CLASSES)
        global_default: int | None = None
        for obj in self.by_kind["PriorityClass"]:
            value = obj.get("value")
            if not isinstance(value, int) or isinstance(value, bool):
                self._problem("PriorityClass", obj, "value", f"must be an integer, got {value!r}")
                continue
            priorities[obj["metadata"]["name"]] = value
            if obj.get("globalDefault") is True:
                global_default = value
        self.priorities = priorities
        self.default_priority = global_default if global_default is not None else keys.DEFAULT_PRIORITY

        snapshot = ClusterSnapshot(now=self.now)
        snapshot.nodes = self._nodes()
        self.dra = dra.DraReader(self, snapshot)
        self.dra.read()
        snapshot.topologies = self._topologies()
        snapshot.queues = self._queues()
        self._namespaces_and_storage(snapshot)
        self._podgroups_and_pods(snapshot)
        snapshot.warnings = self.warnings + unsupported_warnings(snapshot.unsupported)
        if self.memo is not None:
            self.memo.finish()
        return BuildResult(snapshot, self.problems)

    # -- nodes --------------------------------------------------------------------------------
    def _nodes(self) -> list[NodeInfo]:
        nodes: dict[str, NodeInfo] = {}
        for obj in self.by_kind["Node"]:
            name = obj["metadata"]["name"]
            if name in nodes:
                self._problem("Node", obj, "metadata.name", "is defined twice")
                continue
            node = self._node(obj) if self.memo is None else self._converted(obj, self._node)
            if node is not None:
                nodes[name] = node
        return [nodes[n] for n in sorted(nodes)]

    def _node(self, obj: dict[str, Any]) -> NodeInfo | None:
        name = obj["metadata"]["name"]
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        raw_labels = obj["metadata"].get("labels") or {}
        labels = {str(k): str(v) for k, v in raw_labels.items()}
        allocatable = self._allocatable(obj, status.get("allocatable"))
        if allocatable is None:
            return None
        raw_taints = spec.get("taints")
        taints = (
            tuple(
                Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
                for t in raw_taints
                if isinstance(t, dict)
            )
            if raw_taints
            else ()
        )
        ready = True
        for cond in status.get("conditions") or []:
            ctype, cstatus = cond.get("type"), str(cond.get("status"))
            if (ctype == "Ready" and cstatus != "True") or (ctype in PRESSURE_CONDITIONS and cstatus == "True"):
                ready = False
        gpu_memory = 0
        if keys.GPU_MEMORY_NODE_LABEL in labels:
            try:
                gpu_memory = int(float(labels[keys.GPU_MEMORY_NODE_LABEL]))
            except ValueError:
                self._problem(
                    "Node",
                    obj,
                    f"metadata.labels[{keys.GPU_MEMORY_NODE_LABEL}]",
                    f"must be a number of MiB, got {labels[keys.GPU_MEMORY_NODE_LABEL]!r}",
                )
                return None
        # Every slot set, as NodeInfo's __init__ would set it, without the call (a test checks that none is left out).
        node = _new(NodeInfo)
        node.name = name
        node.allocatable = allocatable
        node.labels = labels
        node.taints = taints
        node.unschedulable = bool(spec.get("unschedulable"))
        node.ready = ready
        node.gpu_memory_mib = gpu_memory
        node.gpu_product = labels.get(keys.GPU_PRODUCT_NODE_LABEL, "")
        node.dra_gpus = 0
        return node

    def _allocatable(self, obj: dict[str, Any], raw: Any) -> Resources | None:
        """A node's status.allocatable (`pods` 110 when not given), parsed once per distinct content: nodes
        of one pool share one (never changed) Resources. Only text quantities are kept (1 == 1.0 == True)."""
        key = None
        if type(raw) is dict:
            key = tuple(raw.items())
            try:
                found = self._allocatables.get(key)
            except TypeError:
                key = found = None
            if found is not None:
                return found
        before = len(self.problems)
        allocatable = self._resource_list("Node", obj, "status.allocatable", raw)
        if allocatable is None:
            return None
        if PODS not in allocatable.amounts:
            allocatable.amounts[PODS] = 110.0
        if key is not None and len(self.problems) == before and all(type(k) is str and type(v) is str for k, v in key):
            self._allocatables[key] = allocatable
        return allocatable

    def _resource_list(self, kind: str, obj: dict[str, Any], where: str, value: Any) -> Resources | None:
        if value is None:
            return Resources()
        if not isinstance(value, dict):
            self._problem(kind, obj, where, "must be a map of resource name to quantity")
            return None
        out: dict[str, float] = {}
        ok = True
        for name, raw in value.items():
            try:
                amount = cpu_millis(raw) if name == CPU else as_float(raw)
            except QuantityError:
                self._problem(kind, obj, f"{where}.{name}", f"is not a quantity: {raw!r}")
                ok = False
                continue
            if amount < 0:
                self._problem(kind, obj, f"{where}.{name}", f"must not be negative, got {raw!r}")
                ok = False
                continue
            if amount:
                out[str(name)] = amount
        return Resources(out) if ok else None

    # -- topologies -----------------------------------------------------------------------------
    def _topologies(self) -> dict[str, TopologyInfo]:
        out: dict[str, TopologyInfo] = {}
        for obj in self.by_kind["Topology"]:
            name = obj["metadata"]["name"]
            levels = (obj.get("spec") or {}).get("levels") or []
            labels = [lvl.get("nodeLabel") for lvl in levels if isinstance(lvl, dict)]
            if not labels or not all(isinstance(x, str) and x for x in labels):
                self._problem("Topology", obj, "spec.levels", "must list 1 to 16 levels, each with a nodeLabel")
                continue
            if name in out:
                self._problem("Topology", obj, "metadata.name", "is defined twice")
                continue
            out[name] = TopologyInfo(name, tuple(labels))
        return out

    # -- queues -------------------------------------------------------------------------------
    def _queues(self) -> dict[str, QueueInfo]:
        queues: dict[str, QueueInfo] = {}
        for obj in self.by_kind["Queue"]:
            name = obj["metadata"]["name"]
            if name in queues:
                self._problem("Queue", obj, "metadata.name", "is defined twice")
                continue
            queue = self._queue(obj)
            if queue is not None:
                queues[name] = queue
        # Drop queues whose parent is missing (and, transitively, their children).
        for name, queue in sorted(queues.items()):
            if queue.parent and queue.parent not in queues:
                self.problems.append(
                    Problem(f"Queue {name}", "spec.parentQueue", f"names queue {queue.parent!r}, which does not exist")
                )
        changed = True
        while changed:
            changed = False
            for name in list(queues):
                parent = queues[name].parent
                if parent and parent not in queues:
                    del queues[name]
                    changed = True
        # Cycles.
        for name in sorted(queues):
            seen, current = [name], queues[name].parent
            while current:
                if current in seen:
                    self.problems.append(
                        Problem(f"Queue {name}", "spec.parentQueue", "makes a cycle: " + " -> ".join([*seen, current]))
                    )
                    break
                seen.append(current)
                current = queues[current].parent if current in queues else ""
        in_cycle = {p.obj.split(" ", 1)[1] for p in self.problems if p.message.startswith("makes a cycle")}
        for name in in_cycle:
            queues.pop(name, None)
        for name in sorted(queues):
            parent = queues[name].parent
            if parent in queues:
                queues[parent].children.append(name)
        return queues

    def _queue(self, obj: dict[str, Any]) -> QueueInfo | None:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        name = meta["name"]
        ok = True
        priority = spec.get("priority", 100)
        if not isinstance(priority, int) or isinstance(priority, bool):
            self._problem("Queue", obj, "spec.priority", f"must be an integer, got {priority!r}")
            ok = False
        resources: dict[str, QueueResource] = {}
        spec_resources = spec.get("resources")
        if spec_resources is None:
            self.warnings.append(f"Queue {name}: spec.resources is not set: no quota, unlimited")
            spec_resources = {}
        elif not isinstance(spec_resources, dict):
            self._problem("Queue", obj, "spec.resources", "must be a map with gpu, cpu and memory")
            return None
        for key, resource, scale in (("gpu", GPU, 1.0), ("cpu", CPU, 1.0), ("memory", MEMORY, MB)):
            section = spec_resources.get(key) or {}
            if not isinstance(section, dict):
                self._problem("Queue", obj, f"spec.resources.{key}", "must be a map with quota, overQuotaWeight, limit")
                ok = False
                continue
            values = self._queue_numbers(obj, key, section)
            if values is None:
                ok = False
                continue
            quota, limit = values["quota"], values["limit"]
            resources[resource] = QueueResource(
                quota=quota * scale if quota != UNLIMITED else UNLIMITED,
                over_quota_weight=values["overQuotaWeight"],
                limit=limit * scale if limit != UNLIMITED else UNLIMITED,
            )
        runtimes: dict[str, float | None] = {}
        for fld in ("preemptMinRuntime", "reclaimMinRuntime"):
            raw = spec.get(fld)
            runtimes[fld] = None
            if raw is not None:
                try:
                    runtimes[fld] = max(0.0, parse_duration(raw))
                except ValueError as err:
                    self._problem("Queue", obj, f"spec.{fld}", str(err))
                    ok = False
        creation = self._timestamp("Queue", obj)
        if not ok or creation is None:
            return None
        return QueueInfo(
            name=name,
            parent=str(spec.get("parentQueue") or ""),
            priority=int(priority),
            resources=resources,
            creation=creation,
            display_name=str(spec.get("displayName") or ""),
            preempt_min_runtime=runtimes["preemptMinRuntime"],
            reclaim_min_runtime=runtimes["reclaimMinRuntime"],
        )

    def _queue_numbers(self, obj: dict[str, Any], key: str, section: dict[str, Any]) -> dict[str, float] | None:
        """quota, overQuotaWeight and limit of one resource, as KAI reads them: any finite number (the CRD
        says `type: number`), used as given. Only -1 means unlimited; the merely odd gets a warning."""
        name = obj["metadata"]["name"]
        values: dict[str, float] = {}
        ok = True
        for fld, default in (("quota", 0.0), ("overQuotaWeight", 1.0), ("limit", UNLIMITED)):
            raw = section.get(fld)
            where = f"spec.resources.{key}.{fld}"
            if raw is None:
                values[fld] = default
            elif isinstance(raw, bool) or not isinstance(raw, int | float):
                self._problem("Queue", obj, where, f"must be a number, got {raw!r}")
                ok = False
            elif not math.isfinite(raw):
                self._problem("Queue", obj, where, f"must be a finite number, got {raw!r}")
                ok = False
            else:
                values[fld] = float(raw)
        if not ok:
            return None
        for fld, message in odd_queue_values(key, values["quota"], values["overQuotaWeight"], values["limit"]):
            self.warnings.append(f"Queue {name}: spec.resources.{key}.{fld}: {message}")
        return values

    def _timestamp(self, kind: str, obj: dict[str, Any], fld: str = "creationTimestamp") -> float | None:
        raw = (obj.get("metadata") or {}).get(fld)
        if raw is None:
            return 0.0 if fld == "creationTimestamp" else None
        try:
            return self._time(raw)
        except ValueError:
            self._problem(kind, obj, f"metadata.{fld}", f"is not an RFC 3339 timestamp: {raw!r}")
            return None

    def _text_time(self, raw: Any) -> float:
        """The epoch of timestamp text not met before, kept (ValueError for text that is not one, TypeError
        for what is not text: both leave the object to the general path). Text in the API server's form
        whose minute was met before is that minute's epoch plus its seconds, as parse_time_text reads it,
        without the parser (a cluster's objects were made over a few minutes each: thousands of texts,
        hundreds of minutes)."""
        minutes = self._minutes
        if minutes:
            minute = minutes.get(raw[:17])  # (only text of that form is kept: a prefix of it is text)
            if minute is not None:
                second = _SECONDS.get(raw[17:])
                if second is not None:
                    found = self._times[raw] = minute + second
                    return found
        found = self._times[raw] = parse_time_text(raw)
        if type(raw) is str and _API_TIME.fullmatch(raw):
            minutes[raw[:17]] = found - _SECONDS[raw[17:]]
        return found

    def _time(self, raw: Any) -> float:
        """parse_time(raw), kept per text."""
        if type(raw) is not str:
            return parse_time(raw)
        found = self._times.get(raw)
        return self._text_time(raw) if found is None else found

    def _ensure_default_queues(self, queues: dict[str, QueueInfo]) -> None:
        """KAI's Helm chart installs these two; a snapshot that relies on them need not list them."""
        if keys.DEFAULT_QUEUE in queues:
            return
        if keys.DEFAULT_PARENT_QUEUE not in queues:
            queues[keys.DEFAULT_PARENT_QUEUE] = QueueInfo(keys.DEFAULT_PARENT_QUEUE)
        queues[keys.DEFAULT_QUEUE] = QueueInfo(keys.DEFAULT_QUEUE, parent=keys.DEFAULT_PARENT_QUEUE)
        queues[keys.DEFAULT_PARENT_QUEUE].children.append(keys.DEFAULT_QUEUE)
        self._leaf_queues.clear()  # the parent queue has a child now: what was checked against it is not
        self._group_specs.clear()
        self._last_group_spec = (None, None, None)
        self.warnings.append(f"queue {keys.DEFAULT_QUEUE} is not in the snapshot: using KAI's default queues")

    def _priority(self, class_name: str) -> int:
        return self.priorities.get(class_name, self.default_priority) if class_name else self.default_priority

    def _check_queue(self, kind: str, obj: dict[str, Any], fld: str, queue: str, queues: dict[str, QueueInfo]) -> bool:
        if queue == keys.DEFAULT_QUEUE:
            self._ensure_default_queues(queues)
        if queue not in queues:
            self._problem(kind, obj, fld, f"names queue {queue!r}, which does not exist")
            return False
        if not queues[queue].is_leaf:
            self._problem(kind, obj, fld, f"names queue {queue!r}, which has child queues (only leaf queues run jobs)")
            return False
        self._leaf_queues.add(queue)
        return True

    # -- namespaces and volumes -----------------------------------------------------------------
    def _namespaces_and_storage(self, snapshot: ClusterSnapshot) -> None:
        for obj in self.by_kind["Namespace"]:
            name = obj["metadata"]["name"]
            labels = {str(k): str(v) for k, v in (obj["metadata"].get("labels") or {}).items()}
            labels.setdefault(NAMESPACE_NAME_LABEL, name)
            snapshot.namespaces[name] = labels
        snapshot.storage_listed = self.storage_listed
        for obj in self.by_kind["StorageClass"]:
            name = obj["metadata"]["name"]
            mode = str(obj.get("volumeBindingMode") or IMMEDIATE)
            if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
                self._problem(
                    "StorageClass", obj, "volumeBindingMode", f"must be {IMMEDIATE} or {WAIT_FOR_FIRST_CONSUMER}"
                )
                continue
            default = str((obj["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION, "")) == "true"
            snapshot.storage_classes[name] = StorageClassInfo(name, mode, default)
        for obj in self.by_kind["PersistentVolume"]:
            name = obj["metadata"]["name"]
            spec = obj.get("spec") or {}
            required = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms") or []
            terms = self._node_selector_terms(
                "PersistentVolume", obj, "spec.nodeAffinity.required.nodeSelectorTerms", required
            )
            if terms is None:
                continue
            snapshot.volumes[name] = VolumeInfo(name, terms)
        # A claim written without a class gets the default class, as the API server's admission does.
        default_class = min((c.name for c in snapshot.storage_classes.values() if c.default), default="")
        for obj in self.by_kind["PersistentVolumeClaim"]:
            meta, spec = obj["metadata"], obj.get("spec") or {}
            namespace = str(meta.get("namespace") or "default")
            annotations = meta.get("annotations") or {}
            storage_class = spec.get("storageClassName")
            if storage_class is None:  # the beta annotation, which the API server still honours
                storage_class = annotations.get("volume.beta.kubernetes.io/storage-class")
            claim = ClaimInfo(
                namespace,
                meta["name"],
                str(spec.get("volumeName") or ""),
                default_class if storage_class is None else str(storage_class),
                bool(meta.get("deletionTimestamp")),
            )
            snapshot.claims[f"{namespace}/{claim.name}"] = claim

    # -- pod groups and pods --------------------------------------------------------------------
    def _podgroups_and_pods(self, snapshot: ClusterSnapshot) -> None:
        groups = self._podgroups(snapshot.queues)
        self._pods(snapshot, groups)
        ordered = sorted(groups)  # sorting the keys alone, and building the dict in C, is the fastest
        snapshot.podgroups = dict(zip(ordered, map(groups.__getitem__, ordered), strict=True))

    def _podgroups(self, queues: dict[str, QueueInfo]) -> dict[str, PodGroupInfo]:
        """Every PodGroup, by `namespace/name`. Without the memo, a PodGroup whose spec was kept (see
        _podgroup) and whose creation timestamp is known or in the API server's form is read here, as
        _podgroup reads it, and made slot by slot; any other goes to _podgroup."""
        groups: dict[str, PodGroupInfo] = {}
        if self.memo is not None:
            for obj in self.by_kind["PodGroup"]:
                group = self._podgroup_of(obj, queues)
                if group is not None:
                    self._add_group(groups, obj, group)
            return groups
        specs_get = self._group_specs.get
        new_time = self._text_time
        times = self._times
        times_get = times.get
        minutes_get = self._minutes.get
        seconds_get = _SECONDS.get
        last_spec, last_type, last_shared = self._last_group_spec
        for obj in self.by_kind["PodGroup"]:
            meta = obj["metadata"]
            try:
                spec = obj["spec"]
                min_type = type(spec["minMember"])  # (a spec without one is read by _podgroup)
                # the spec as the last one kept, or as one kept before (see _podgroup)
                if min_type is last_type and spec == last_spec:
                    shared = last_shared
                else:
                    shared = specs_get((tuple(spec.items()), min_type))
                    if shared is not None:
                        last_spec, last_type, last_shared = spec, min_type, shared
                raw_time = meta.get("creationTimestamp")
                if raw_time is None:
                    creation = 0.0
                else:
                    creation = times_get(raw_time)
                    if not creation:  # not met before (or the epoch itself): of a known minute, as _text_time
                        minute = minutes_get(raw_time[:17])
                        second = seconds_get(raw_time[17:]) if minute is not None else None
                        if second is None:
                            creation = new_time(raw_time)
                        else:
                            creation = times[raw_time] = minute + second
                namespace = str(meta["namespace"] or "default")
            except (AttributeError, KeyError, TypeError, ValueError):  # not a map, not text: read by _podgroup
                shared = None
            if shared is None:
                self._last_group_spec = (last_spec, last_type, last_shared)
                group = self._podgroup(obj, queues)
                last_spec, last_type, last_shared = self._last_group_spec  # (or cleared by it)
                if group is not None:
                    self._add_group(groups, obj, group)
                continue
            last_start = stale_since = None
            if "annotations" in meta:  # (most PodGroups have none: `in` is the cheaper miss)
                annotations = meta["annotations"]
                if annotations:
                    stamps = self._podgroup_stamps(obj, annotations)
                    if stamps is None:
                        continue
                    last_start, stale_since = stamps
            queue, priority, class_name, preemptible, min_member = shared
            name = meta["name"]
            key = f"{namespace}/{name}"
            if key in groups:
                self._problem("PodGroup", obj, "metadata.name", "is defined twice")
                continue
            # Both made slot by slot, as their __init__ would make them (a test checks every slot is set).
            sub = _new(SubGroupInfo)
            sub.name = DEFAULT_SUBGROUP
            sub.min_member = min_member
            sub.parent = ""
            sub.topology = None
            sub.children = []
            sub.pods = []
            sub._counts = None
            sub._counted = -1
            sub._version = 0
            group = _new(PodGroupInfo)
            group.namespace = namespace
            group.name = name
            group.uid = str(meta.get("uid") or key)
            group.queue = queue
            group.creation = creation
            group.priority = priority
            group.priority_class_name = class_name
            group.preemptible = preemptible
            group.min_member = min_member
            group.subgroups = {DEFAULT_SUBGROUP: sub}
            group.topology = None
            group.last_start = last_start
            group.stale_since = stale_since
            group.implicit = False
            group._leaves = [sub]  # its leaves (see _implicit_group)
            group.memo = {}
            groups[key] = group
        self._last_group_spec = (last_spec, last_type, last_shared)
        return groups

    def _add_group(self, groups: dict[str, PodGroupInfo], obj: dict[str, Any], group: PodGroupInfo) -> None:
        key = f"{group.namespace}/{group.name}"
        if key in groups:
            self._problem("PodGroup", obj, "metadata.name", "is defined twice")
        else:
            groups[key] = group

    def _pods(self, snapshot: ClusterSnapshot, groups: dict[str, PodGroupInfo]) -> None:
        """Every pod, converted and put in its job's sub-group.

        The common pod is read here in one pass (each field once, the builder's caches as locals): one
        container without ports whose requests and GPU request are an earlier pod's, none of the rarer
        spec parts, no GPU-sharing annotation, a known phase and timestamp. It is made slot by slot, as
        PodInfo's __init__ would make it, without the call. When it also names an existing PodGroup
        whose sub-group is a leaf, runs on a known node or none, is ours and is not a duplicate, it is
        put in its sub-group here too. Any other pod (and anything that would be a problem or a
        warning) takes the general path: `_pod`, then the checks below, in the order they always had."""
        queues = snapshot.queues
        node_names = {n.name for n in snapshot.nodes}
        seen: set[str] = set()
        seen_add = seen.add
        memo = self.memo
        memo_get = memo.get if memo is not None else None
        claimed = self._claimed
        scheduler_name = self.scheduler_name
        holding = (_RUNNING, _RELEASING)
        groups_get = groups.get
        problems, warnings = self.problems, self.warnings
        labels_get = self._shared_labels.get
        common_get = self._common_requests.get
        new_time = self._text_time
        times_get = self._times.get
        rare_disjoint = _RARE_SPEC_KEYS.isdisjoint
        sharing_disjoint = _GPU_SHARING_KEYS.isdisjoint
        pod_labels = self._pod_labels
        last_res: Any = None  # the last requests found kept, and what was kept for them
        last_shared: tuple[Resources, GpuRequest] | None = None
        prev_res: Any = None  # and the one before it
        prev_shared: tuple[Resources, GpuRequest] | None = None
        last_labels: Any = None  # the same for labels
        last_parts: Any = None
        for obj in self.by_kind["Pod"]:
            meta = obj["metadata"]
            pod = None
            if memo_get is not None:
                entry = memo_get(obj)
                if entry is not None:
                    problems.extend(entry[2])
                    warnings.extend(entry[3])
                    pod = entry[1]
                    if pod is None:
                        continue
            placed = False
            while pod is None:  # the common pod (a block to leave early: `break` leaves the pod to _pod)
                # Parts that are not the maps or lists they should be, or a part the common pod always has
                # that is missing, raise below (AttributeError, KeyError, TypeError, ValueError; no other is
                # possible before the pod is made): _pod reads those. A part present in almost every pod is
                # read by subscript (a scheduled pod has labels and annotations: its queue and PodGroup), one
                # most pods lack is looked for with `in` (both cheaper than `get`).
                try:
                    spec = obj["spec"]
                    containers = spec["containers"]
                    scheduler = spec["schedulerName"]
                    # A spec of those two and the node's name alone has none of the rarer parts; any other is
                    # looked through.
                    size = len(spec)
                    if size == 2:
                        node_name = None
                    else:
                        node_name = spec.get("nodeName")
                        if (size != 3 or node_name is None) and not rare_disjoint(spec):
                            break
                    annotations = meta["annotations"]
                    if annotations:
                        group_name = annotations.get(POD_GROUP_ANNOTATION)
                        # the PodGroup's name alone is no GPU-sharing annotation; any other is looked through
                        if (group_name is None or len(annotations) != 1) and not sharing_disjoint(annotations):
                            break
                    else:
                        group_name = None
                    # one container (ValueError for more or none; a map or text of one would be unpacked as
                    # well, to a key or a character: text, which has no `get` below)
                    (container,) = containers
                    if "ports" in container and container["ports"]:  # noqa: RUF019 (`in` is the cheaper miss)
                        break
                    res = container.get("resources")
                    if res:
                        # Equal to the last pod's, or to the one's before (a job's pods come one after another,
                        # or two kinds take turns): that one's, compared as two maps; equal to a map of text
                        # alone, it is that text.
                        if res == last_res:
                            shared = last_shared
                        elif res == prev_res:
                            shared = prev_shared
                        else:
                            limits, asked = res.get("limits"), res.get("requests")
                            shared = common_get(
                                (tuple(limits.items()) if limits else (), tuple(asked.items()) if asked else ())
                            )
                            if shared is not None:
                                prev_res, prev_shared, last_res, last_shared = last_res, last_shared, res, shared
                    else:
                        shared = common_get(_NO_RESOURCES)
                    if shared is None:
                        break
                    if "creationTimestamp" in meta:
                        raw_time = meta["creationTimestamp"]
                        creation = 0.0 if raw_time is None else times_get(raw_time) or new_time(raw_time)
                    else:
                        creation = 0.0
                    raw_labels = meta["labels"]
                    if not raw_labels:
                        parts = _NO_LABELS
                    elif raw_labels == last_labels:  # (as the requests above)
                        parts = last_parts
                    else:
                        parts = labels_get(tuple(raw_labels.items()))
                        if parts is None:
                            parts = pod_labels(raw_labels)
                        else:
                            last_labels, last_parts = raw_labels, parts
                    labels, gpu_groups, task_priority, subgroup = parts
                    status = obj["status"]
                    phase = status["phase"]
                    namespace = str(meta["namespace"] or "default")
                    known_node = not node_name or node_name in node_names
                except (AttributeError, KeyError, TypeError, ValueError):
                    break
                if phase == "Running" or phase == "Pending" or phase == "Unknown":
                    deleting = "deletionTimestamp" in meta and meta["deletionTimestamp"]
                    if node_name:
                        pod_status = _RELEASING if deleting else _RUNNING
                    else:
                        pod_status = _SUCCEEDED if deleting else _PENDING
                elif phase == "Succeeded":
                    pod_status = _SUCCEEDED
                elif phase == "Failed":
                    pod_status = _FAILED
                else:
                    break
                name = meta["name"]
                key = f"{namespace}/{name}"
                # Where the pod goes, when that needs none of the checks below.
                sub = None
                if group_name and key not in seen and known_node and scheduler == scheduler_name:
                    group_key = f"{namespace}/{group_name}"
                    group = groups_get(group_key)
                    if group is not None:
                        sub = group.subgroups.get(subgroup)
                        if sub is not None and sub.children:
                            sub = None
                # Every slot set here, as PodInfo's __init__ would set it, without the call (the fields are
                # listed in the class's order; a test checks that none is left out).
                pod = _new(PodInfo)
                pod.namespace = namespace
                pod.name = name
                pod.uid = str(meta.get("uid") or key)
                pod.creation = creation
                pod.requests, pod.gpu = shared
                pod.status = pod_status
                pod.node = (node_name or "") if known_node else str(node_name)  # (a node's name is text)
                pod.gpu_groups = gpu_groups
                pod.scheduler_name = scheduler if scheduler == scheduler_name else str(scheduler or "default-scheduler")
                pod.job_key = group_key if sub is not None else ""
                pod.subgroup = subgroup
                pod.labels = labels
                pod.task_priority = task_priority
                pod.node_selector = ()
                pod.required_affinity = ()
                pod.tolerations = ()
                pod.priority_class_name = ""
                pod.raw = obj
                pod.pod_affinity = None
                pod.host_ports = ()
                pod.claims = ()
                pod.nominated_node = str(status["nominatedNodeName"] or "") if "nominatedNodeName" in status else ""
                pod.resource_claims = ()
                pod.owner = None
                if memo is not None:
                    memo.put(obj, pod, [], [])
                if sub is not None:
                    seen_add(key)
                    sub.pods.append(pod)
                    placed = True
                break
            if placed:
                continue
            if pod is None:
                pod = self._pod(obj) if memo is None else self._converted(obj, self._pod)
                if pod is None:
                    continue
            namespace = pod.namespace
            key = f"{namespace}/{pod.name}"
            if key in seen:
                self._problem("Pod", obj, "metadata.name", "is defined twice")
                continue
            seen_add(key)
            if pod.node and pod.node not in node_names and pod.status in holding:
                warnings.append(f"Pod {key}: spec.nodeName {pod.node!r} is not a node of the snapshot")
            if memo is not None:
                spec = obj.get("spec")
                if isinstance(spec, dict) and spec.get("resourceClaims"):  # the pod's DRA claims, if any
                    self.dra.attach(obj, pod)
            elif claimed and id(obj) in claimed:  # (as _pod found them)
                self.dra.attach(obj, pod)
            if pod.scheduler_name != scheduler_name:
                # The session writes the GPU groups it finds for a foreign shared-GPU pod on the pod itself.
                snapshot.foreign_pods.append(pod.clone() if memo is not None else pod)
                continue
            annotations = meta.get("annotations")
            group_name = (annotations or {}).get(POD_GROUP_ANNOTATION)
            if group_name:
                group_key = f"{namespace}/{group_name}"
                group = groups_get(group_key)
                if group is None:
                    self._problem(
                        "Pod",
                        obj,
                        f"metadata.annotations[{keys.POD_GROUP_ANNOTATION}]",
                        f"names PodGroup {group_name!r}, which does not exist in namespace {pod.namespace}",
                    )
                    continue
            else:
                group = self._implicit_group(obj, pod, key, queues)
                if group is None:
                    continue
                group_key = f"{group.namespace}/{group.name}"
                groups[group_key] = group
            pod.job_key = group_key
            sub = group.subgroups.get(pod.subgroup)
            if sub is None or sub.children:
                warnings.append(
                    f"Pod {key}: sub-group {pod.subgroup!r} is not a leaf of PodGroup {group_key}: not scheduled"
                )
                continue
            sub.pods.append(pod)

    def _implicit_group(
        self, obj: dict[str, Any], pod: PodInfo, key: str, queues: dict[str, QueueInfo]
    ) -> PodGroupInfo | None:
        """The pod group of a pod that names none (its own, as KAI's pod grouper makes), or None when the
        queue its label names cannot run it."""
        labels = pod.labels
        queue = labels.get(self.queue_label_key) or keys.DEFAULT_QUEUE
        if queue not in self._leaf_queues and not self._check_queue(
            "Pod", obj, f"metadata.labels[{self.queue_label_key}]", queue, queues
        ):
            return None
        class_name = labels.get(keys.PRIORITY_CLASS_LABEL) or pod.priority_class_name
        priority = self._priority(class_name)
        name, uid = pod.name, pod.uid
        sub = _new(SubGroupInfo)
        _init_subgroup(sub, DEFAULT_SUBGROUP, 1, "", None, [], [])
        group = _new(PodGroupInfo)
        _init_podgroup(
            group,
            pod.namespace,
            f"pg-{name}-{uid}" if uid != key else f"pg-{name}",
            uid,
            queue,
            pod.creation,
            priority,
            class_name,
            self._preemptible(labels.get(keys.PREEMPTIBILITY_LABEL, ""), priority),
            1,
            {DEFAULT_SUBGROUP: sub},
            None,
            None,
            None,
            True,
            [sub],  # its leaves, known here (the first cycle would otherwise work them out for every job)
        )
        return group

    def _podgroup_of(self, obj: dict[str, Any], queues: dict[str, QueueInfo]) -> PodGroupInfo | None:
        """`_podgroup`, or (with the memo) a fresh copy of what it gave for this very object when its queue
        and priority read the same. A group of KAI's default queue is converted each time (its check may
        add the default queues to the snapshot)."""
        if self.memo is None:
            return self._podgroup(obj, queues)
        spec = obj.get("spec") or {}
        queue_name = str(spec.get("queue") or keys.DEFAULT_QUEUE)
        if queue_name == keys.DEFAULT_QUEUE:
            return self._podgroup(obj, queues)
        queue = queues.get(queue_name)
        context = (queue is not None and queue.is_leaf, self._priority(str(spec.get("priorityClassName") or "")))
        entry = self.memo.get(obj)
        if entry is not None and entry[1][0] == context:
            self.problems.extend(entry[2])
            self.warnings.extend(entry[3])
            return entry[1][1].clone() if entry[1][1] is not None else None
        problems, warnings = len(self.problems), len(self.warnings)
        group = self._podgroup(obj, queues)
        template = group.clone() if group is not None else None  # no pods yet: each build attaches its own
        self.memo.put(obj, (context, template), self.problems[problems:], self.warnings[warnings:])
        return group

    @staticmethod
    def _preemptible(value: str, priority: int) -> bool:
        if value == keys.PREEMPTIBLE:
            return True
        if value == keys.NON_PREEMPTIBLE:
            return False
        return priority < keys.NON_PREEMPTIBLE_PRIORITY_THRESHOLD

    def _podgroup(self, obj: dict[str, Any], queues: dict[str, QueueInfo]) -> PodGroupInfo | None:
        """A PodGroup. Its spec's checks and derived values are kept per distinct content (the spec of a
        job's PodGroup repeats across jobs) when they passed; the metadata is read for each object."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        key = shared = None
        if type(spec) is dict:
            last_spec, last_type, last_shared = self._last_group_spec
            min_type = type(spec.get("minMember"))
            # A spec equal to the last one kept (text but for minMember, whose type must match: 1 == True)
            # is that one; two maps compare in C, without the key's tuples.
            if min_type is last_type and spec == last_spec:
                shared = last_shared
            else:
                # 1 == 1.0 == True: kept only for text, but for minMember, whose type is part of the key
                key = (tuple(spec.items()), min_type)
                try:
                    shared = self._group_specs.get(key)
                except TypeError:  # subGroups, a topology constraint (lists, maps): checked in full below
                    key = None
                if shared is not None:
                    self._last_group_spec = (spec, min_type, shared)
        if shared is None:
            before = len(self.problems)
            group = self._podgroup_checked(obj, meta, spec, queues)
            if (
                key is not None
                and group is not None
                and len(self.problems) == before
                and all(type(k) is str and (type(v) is str or k == "minMember") for k, v in key[0])
            ):
                self._group_specs[key] = (
                    group.queue,
                    group.priority,
                    group.priority_class_name,
                    group.preemptible,
                    group.min_member,
                )
                self._last_group_spec = (spec, key[1], self._group_specs[key])
            return group
        # A spec already checked (so without sub-groups or a topology constraint): the metadata's checks.
        raw_time = meta.get("creationTimestamp")
        if raw_time is None:
            creation: float | None = 0.0
        else:
            creation = self._times.get(raw_time) if type(raw_time) is str else None
            if creation is None:
                try:
                    if type(raw_time) is str:
                        creation = self._times[raw_time] = parse_time_text(raw_time)
                except ValueError:
                    pass
                if creation is None:
                    creation = self._timestamp("PodGroup", obj)  # (a datetime, or the problem)
        annotations = meta.get("annotations")
        last_start = stale_since = None
        if annotations:
            stamps = self._podgroup_stamps(obj, annotations)
            if stamps is None:
                return None
            last_start, stale_since = stamps
        if creation is None:
            return None
        queue, priority, class_name, preemptible, min_member = shared
        namespace = str(meta.get("namespace") or "default")
        name = meta["name"]
        sub = _new(SubGroupInfo)
        _init_subgroup(sub, DEFAULT_SUBGROUP, min_member, "", None, [], [])
        group = _new(PodGroupInfo)
        _init_podgroup(
            group,
            namespace,
            name,
            str(meta.get("uid") or f"{namespace}/{name}"),
            queue,
            creation,
            priority,
            class_name,
            preemptible,
            min_member,
            {DEFAULT_SUBGROUP: sub},
            None,
            last_start,
            stale_since,
            False,
            [sub],  # its leaves (see _implicit_group)
        )
        return group

    def _podgroup_stamps(self, obj: dict[str, Any], annotations: Any) -> tuple[float | None, float | None] | None:
        """The last-start and stale timestamps of a PodGroup's annotations (truthy), None on a problem."""
        stamps: dict[str, float | None] = dict.fromkeys(PODGROUP_TIMESTAMP_ANNOTATIONS)
        ok = True
        for key in PODGROUP_TIMESTAMP_ANNOTATIONS:
            raw = annotations.get(key)
            if raw:
                try:
                    stamps[key] = self._time(raw)
                except ValueError:
                    self._problem(
                        "PodGroup",
                        obj,
                        f"metadata.annotations[{key}]",
                        f"is not an RFC 3339 timestamp: {raw!r}",
                    )
                    ok = False
        if not ok:
            return None
        return stamps[keys.LAST_START_TIMESTAMP_ANNOTATION], stamps[keys.STALE_TIMESTAMP_ANNOTATION]

    def _podgroup_checked(
        self, obj: dict[str, Any], meta: dict[str, Any], spec: Any, queues: dict[str, QueueInfo]
    ) -> PodGroupInfo | None:
        namespace = str(meta.get("namespace") or "default")
        ok = True
        min_member = spec.get("minMember", 1)
        if min_member is None:
            min_member = 1
        if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 0:
            self._problem("PodGroup", obj, "spec.minMember", f"must be a whole number >= 1, got {min_member!r}")
            ok = False
        queue = str(spec.get("queue") or keys.DEFAULT_QUEUE)
        if not self._check_queue("PodGroup", obj, "spec.queue", queue, queues):
            ok = False
        preemptibility = str(spec.get("preemptibility") or "")
        if preemptibility not in ("", keys.PREEMPTIBLE, keys.NON_PREEMPTIBLE):
            self._problem(
                "PodGroup",
                obj,
                "spec.preemptibility",
                f"must be preemptible or non-preemptible, got {preemptibility!r}",
            )
            ok = False
        creation = self._timestamp("PodGroup", obj)
        annotations = meta.get("annotations")
        stamps = self._podgroup_stamps(obj, annotations) if annotations else (None, None)
        if stamps is None:
            ok = False
        subgroups = self._subgroups(obj, spec.get("subGroups"), max(int(min_member or 1), 1) if ok else 1)
        topology = self._topology_constraint(spec["topologyConstraint"]) if spec.get("topologyConstraint") else None
        if not ok or subgroups is None or creation is None:
            return None
        class_name = str(spec.get("priorityClassName") or "")
        priority = self._priority(class_name)
        return PodGroupInfo(
            namespace=namespace,
            name=meta["name"],
            uid=str(meta.get("uid") or f"{namespace}/{meta['name']}"),
            queue=queue,
            creation=creation,
            priority=priority,
            priority_class_name=class_name,
            preemptible=self._preemptible(preemptibility, priority),
            min_member=max(int(min_member), 1),
            subgroups=subgroups,
            topology=topology,
            last_start=stamps[0],
            stale_since=stamps[1],
            _leaves=[s for s in subgroups.values() if not s.children],  # complete by now (see _implicit_group)
        )

    @staticmethod
    def _topology_constraint(raw: Any) -> TopologyConstraint | None:
        if not isinstance(raw, dict) or not raw.get("topology"):
            return None
        return TopologyConstraint(
            str(raw.get("topology") or ""),
            str(raw.get("requiredTopologyLevel") or ""),
            str(raw.get("preferredTopologyLevel") or ""),
        )

    def _subgroups(self, obj: dict[str, Any], raw: Any, min_member: int) -> dict[str, SubGroupInfo] | None:
        if not raw:
            return {DEFAULT_SUBGROUP: SubGroupInfo(DEFAULT_SUBGROUP, min_member)}
        if not isinstance(raw, list):
            self._problem("PodGroup", obj, "spec.subGroups", "must be a list")
            return None
        out: dict[str, SubGroupInfo] = {}
        for index, item in enumerate(raw):
            where = f"spec.subGroups[{index}]"
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str) or not name:
                self._problem("PodGroup", obj, f"{where}.name", "is required")
                return None
            if name in out:
                self._problem("PodGroup", obj, f"{where}.name", f"{name!r} is used twice")
                return None
            sub_min = item.get("minMember", 1)
            if not isinstance(sub_min, int) or isinstance(sub_min, bool) or sub_min < 1:
                self._problem("PodGroup", obj, f"{where}.minMember", f"must be a whole number >= 1, got {sub_min!r}")
                return None
            out[name] = SubGroupInfo(
                name, sub_min, str(item.get("parent") or ""), self._topology_constraint(item.get("topologyConstraint"))
            )
        lowered = {n.lower(): n for n in out}
        for name, sub in out.items():
            if not sub.parent:
                continue
            parent = lowered.get(sub.parent.lower())
            if parent is None:
                self._problem(
                    "PodGroup",
                    obj,
                    f"spec.subGroups[{name}].parent",
                    f"names sub-group {sub.parent!r}, which does not exist",
                )
                return None
            sub.parent = parent
            out[parent].children.append(name)
        for name in out:
            seen, current = {name}, out[name].parent
            while current:
                if current in seen:
                    self._problem("PodGroup", obj, "spec.subGroups", f"sub-group {name!r} is in a parent cycle")
                    return None
                seen.add(current)
                current = out[current].parent
        return out

    def _pod(self, obj: dict[str, Any]) -> PodInfo | None:
        """One pod, each field read once. The parts a job's pods share (requests, GPU request, labels,
        tolerations, node selector) are converted once per distinct content; the problems keep their order.
        A pod whose spec has none of the rarer parts (_RARE_SPEC_KEYS) skips reading them one by one. The
        pod loop reads the common pod itself (see _pods), as this reads it."""
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        namespace = str(meta.get("namespace") or "default")
        raw_labels = meta.get("labels")
        if raw_labels:
            parts = None
            if type(raw_labels) is dict:
                try:
                    parts = self._shared_labels.get(tuple(raw_labels.items()))
                except TypeError:  # values that are not text: converted (and not kept) below
                    parts = None
            labels, groups, task_priority, subgroup = parts or self._pod_labels(raw_labels)
        else:
            labels, groups, task_priority, subgroup = _NO_LABELS
        shared = None  # (requests, GPU request or None) of the pods whose one container is written alike
        container = None  # the only container of a one-container pod (a map)
        containers = spec.get("containers")
        if type(containers) is list and len(containers) == 1 and type(containers[0]) is dict:
            # the common pod (see _plain_content_key): its requests, as parsed for an earlier pod
            container = containers[0]
            res = container.get("resources")
            try:
                if res:
                    limits, asked = res.get("limits"), res.get("requests")
                    plain_key = (tuple(limits.items()) if limits else (), tuple(asked.items()) if asked else ())
                else:
                    plain_key = ((), ())
                shared = self._plain_requests.get(plain_key)
            except (AttributeError, TypeError):  # not maps, or values that are not text: parsed below
                shared = None
        annotations = meta.get("annotations")
        raw_time = meta.get("creationTimestamp")
        annotations = annotations or {}
        plain = _RARE_SPEC_KEYS.isdisjoint(spec)  # (a set's isdisjoint is the cheaper of the two)
        requests = plain_gpu = None
        if container is not None:
            if shared is not None and (plain or not (spec.get("initContainers") or spec.get("overhead") is not None)):
                requests, plain_gpu = shared
            else:
                shared = None
        if requests is None:
            requests = self._pod_requests(obj, spec)
        gpu = None
        if requests is not None and (not annotations or _GPU_SHARING_KEYS.isdisjoint(annotations)):
            gpu = plain_gpu  # kept beside the shared requests once a second pod asked for it
            if gpu is None:
                found = self._gpu_requests.get(id(requests))  # the GPU request of pods with these requests
                if found is not None and found[0] is requests:
                    gpu = found[1]
                    if shared is not None:
                        self._plain_requests[plain_key] = (requests, gpu)
                        self._common_requests[plain_key] = (requests, gpu)
        if gpu is None:
            gpu = self._gpu_request(obj, annotations, requests)
        if raw_time is None:
            creation = 0.0
        else:
            creation = self._times.get(raw_time) if type(raw_time) is str else None
            if creation is None:
                creation = self._timestamp("Pod", obj)
        if requests is None or gpu is None or creation is None:
            return None
        node_name = spec.get("nodeName")
        phase = status.get("phase") or "Pending"
        if phase == "Running" or phase == "Pending" or phase == "Unknown":
            deleting = meta.get("deletionTimestamp")
            if node_name:
                pod_status = _RELEASING if deleting else _RUNNING
            elif deleting:
                pod_status = _SUCCEEDED  # never bound and going away: it takes nothing and needs nothing
            elif not plain and spec.get("schedulingGates"):
                pod_status = _GATED
            else:
                pod_status = _PENDING
        elif phase == "Succeeded":
            pod_status = _SUCCEEDED
        elif phase == "Failed":
            pod_status = _FAILED
        else:
            self._problem("Pod", obj, "status.phase", f"is not a pod phase: {phase!r}")
            return None
        if not plain and spec.get("affinity"):
            affinity = self._required_affinity(obj, spec)
            pod_affinity: InterPodAffinity | bool | None = self._pod_affinity(obj, spec, namespace)
            if pod_affinity is True:  # no terms
                pod_affinity = None
        else:
            affinity, pod_affinity = (), None
        host_ports: tuple[HostPort, ...] | None = ()
        if container is not None:
            if container.get("ports"):
                host_ports = self._host_ports(obj, spec)
        elif type(containers) is list:
            for container in containers:
                if type(container) is not dict or container.get("ports"):
                    host_ports = self._host_ports(obj, spec)
                    break
        elif containers:
            host_ports = self._host_ports(obj, spec)
        if affinity is None or pod_affinity is False or host_ports is None:
            return None
        name = meta["name"]
        if plain:
            node_selector: tuple[tuple[str, str], ...] = ()
            tolerations: tuple[Toleration, ...] = ()
            class_name = ""
            claims: tuple[str, ...] = ()
        else:
            raw_selector = spec.get("nodeSelector")
            node_selector = self._node_selector(raw_selector) if raw_selector else ()
            raw_tolerations = spec.get("tolerations")
            tolerations = self._tolerations(raw_tolerations) if raw_tolerations else ()
            class_name = str(spec.get("priorityClassName") or "")
            claims = self._claims(str(name), spec) if spec.get("volumes") else ()
            if spec.get("resourceClaims"):
                self._claimed.add(id(obj))  # for the pod loop, which attaches them
        pod = _new(PodInfo)
        _init_pod(
            pod,
            namespace,
            name,
            str(meta.get("uid") or f"{namespace}/{name}"),
            creation,
            requests,
            gpu,
            pod_status,
            str(node_name or ""),
            groups,
            str(spec.get("schedulerName") or "default-scheduler"),
            "",
            subgroup,
            labels,
            task_priority,
            node_selector,
            affinity,
            tolerations,
            class_name,
            obj,
            pod_affinity,
            host_ports,
            claims,
            str(status.get("nominatedNodeName") or ""),
        )
        return pod

    def _pod_labels(self, raw: Any) -> tuple[dict[str, str], tuple[str, ...], int | None, str]:
        """A pod's labels (truthy) as text, its GPU groups (runai-gpu-group, then runai-gpu-group/<id>
        sorted), task priority and sub-group; converted once per distinct content (pods of a job share
        one labels dict, which nobody changes)."""
        key = tuple(raw.items()) if type(raw) is dict else None
        if key is not None:
            try:
                found = self._shared_labels.get(key)
            except TypeError:
                key = found = None
            if found is not None:
                return found
        labels = {str(k): str(v) for k, v in raw.items()}
        task_priority = None
        if keys.TASK_PRIORITY_LABEL in labels:
            try:
                task_priority = int(labels[keys.TASK_PRIORITY_LABEL])
            except ValueError:
                task_priority = None  # unparsable loses to labelled pods, as in KAI
        groups = [v for k, v in labels.items() if k.startswith(keys.MULTI_GPU_GROUP_LABEL_PREFIX)]
        if len(groups) > 1:
            groups.sort()
        if labels.get(keys.GPU_GROUP_LABEL):
            groups.insert(0, labels[keys.GPU_GROUP_LABEL])
        parts = (
            labels,
            tuple(dict.fromkeys(groups)) if groups else (),
            task_priority,
            labels.get(keys.SUBGROUP_LABEL, DEFAULT_SUBGROUP),
        )
        if key is not None and all(type(k) is str and type(v) is str for k, v in key):
            self._shared_labels[key] = parts  # only text: a number equal to another (1 == True) never hits
        return parts

    def _tolerations(self, raw: Any) -> tuple[Toleration, ...]:
        """spec.tolerations (truthy), converted once per distinct content of the fields read."""
        key: tuple[Any, ...] | None = None
        if type(raw) is list:
            parts = []
            for t in raw:
                if type(t) is not dict:
                    break
                part = (t.get("key"), t.get("operator"), t.get("value"), t.get("effect"))
                for value in part:
                    if value is not None and type(value) is not str:  # 1 == True: only text is keyed
                        break
                else:
                    parts.append(part)
                    continue
                break
            else:
                key = tuple(parts)
                found = self._shared_tolerations.get(key)
                if found is not None:
                    return found
        converted = tuple(
            Toleration(
                str(t.get("key") or ""),
                str(t.get("operator") or "Equal"),
                str(t.get("value") or ""),
                str(t.get("effect") or ""),
            )
            for t in raw
            if isinstance(t, dict)
        )
        if key is not None:
            self._shared_tolerations[key] = converted
        return converted

    def _node_selector(self, raw: Any) -> tuple[tuple[str, str], ...]:
        """spec.nodeSelector (truthy), sorted (key, value) pairs, converted once per distinct content."""
        key = None
        if type(raw) is dict:
            key = (tuple(raw.items()), tuple(map(type, raw)), tuple(map(type, raw.values())))
            try:
                found = self._shared_selectors.get(key)
            except TypeError:
                key = found = None
            if found is not None:
                return found
        converted = tuple(sorted((str(k), str(v)) for k, v in raw.items()))
        if key is not None and all(t is str for t in (*key[1], *key[2])):  # only text: 1 == True, 0.0 == -0.0
            self._shared_selectors[key] = converted
        return converted

    def _pod_requests(self, obj: dict[str, Any], spec: dict[str, Any]) -> Resources | None:
        """Effective request: max(sum of containers, largest init container) plus overhead (as kube-scheduler).
        Parsed once per distinct content: pods with the same requests share one (never changed) Resources."""
        plain = _plain_content_key(spec)
        if plain is not None:
            try:
                shared = self._plain_requests.get(plain)
            except TypeError:  # a value that is not a plain string or number: parsed (and named) below
                plain = shared = None
            if shared is not None:
                return shared[0]
        key = _content_key(spec)
        if key is not None:
            try:
                found = self._requests.get(key)
            except TypeError:
                key = found = None
            if found is not None:
                return found
        before = len(self.problems)
        parsed = self._parse_pod_requests(obj, spec)
        if key is not None and parsed is not None and len(self.problems) == before:
            self._requests[key] = parsed
            if plain is not None and all(type(k) is str and type(v) is str for part in plain for k, v in part):
                # only text: a number equal to another (1 == 1.0) never hits
                self._plain_requests[plain] = (parsed, None)
        return parsed

    def _parse_pod_requests(self, obj: dict[str, Any], spec: dict[str, Any]) -> Resources | None:
        total: dict[str, float] = {}
        init_max: dict[str, float] = {}
        ok = True
        for section, combine in (("containers", "sum"), ("initContainers", "max")):
            for index, container in enumerate(spec.get(section) or []):
                if not isinstance(container, dict):
                    continue
                res = container.get("resources") or {}
                requests = dict(res.get("limits") or {})  # limits stand in for missing requests
                requests.update(res.get("requests") or {})
                parsed = self._resource_list("Pod", obj, f"spec.{section}[{index}].resources.requests", requests)
                if parsed is None:
                    ok = False
                    continue
                target = total if combine == "sum" else init_max
                for name, amount in parsed.amounts.items():
                    target[name] = (
                        target.get(name, 0.0) + amount if combine == "sum" else max(target.get(name, 0.0), amount)
                    )
        if not ok:
            return None
        for name, amount in init_max.items():
            total[name] = max(total.get(name, 0.0), amount)
        overhead = self._resource_list("Pod", obj, "spec.overhead", spec.get("overhead"))
        if overhead is None:
            return None
        for name, amount in overhead.amounts.items():
            total[name] = total.get(name, 0.0) + amount
        gpus = total.get(GPU, 0.0)
        if gpus != math.floor(gpus):
            self._problem("Pod", obj, f"resources {GPU}", f"must be a whole number of GPUs, got {gpus:g}")
            return None
        total[PODS] = 1.0
        return Resources(total)

    def _gpu_request(
        self, obj: dict[str, Any], annotations: dict[str, Any], requests: Resources | None
    ) -> GpuRequest | None:
        if requests is None:
            return None
        plain = not annotations or _GPU_SHARING_KEYS.isdisjoint(annotations)
        if plain:
            found = self._gpu_requests.get(id(requests))
            if found is not None and found[0] is requests:
                return found[1]
        whole = int(requests.get(GPU))
        sharing = parse_gpu_sharing(annotations, whole)
        for fld, message in sharing.problems:
            self._problem("Pod", obj, fld, message)
        if sharing.problems:
            return None
        mig = tuple(sorted((n, int(a)) for n, a in requests.amounts.items() if n.startswith(keys.MIG_RESOURCE_PREFIX)))
        request = GpuRequest(
            whole=whole,
            fraction=sharing.fraction,
            memory_mib=sharing.memory_mib,
            num_devices=sharing.num_devices if sharing.shared else 1,
            mig=mig,
        )
        if plain:
            self._gpu_requests[id(requests)] = (requests, request)
        return request

    def _required_affinity(self, obj: dict[str, Any], spec: dict[str, Any]) -> tuple[NodeSelectorTerm, ...] | None:
        node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if not required:
            return ()
        where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        return self._node_selector_terms("Pod", obj, where, required.get("nodeSelectorTerms") or [])

    def _node_selector_terms(
        self, kind: str, obj: dict[str, Any], where: str, raw: Any
    ) -> tuple[NodeSelectorTerm, ...] | None:
        terms = []
        for index, term in enumerate(raw if isinstance(raw, list) else []):
            parsed: dict[str, list[SelectorRequirement]] = {"matchExpressions": [], "matchFields": []}
            for section in parsed:
                for expr in (term or {}).get(section) or []:
                    op = expr.get("operator")
                    if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                        self._problem(kind, obj, f"{where}[{index}].{section}", f"has unknown operator {op!r}")
                        return None
                    parsed[section].append(
                        SelectorRequirement(
                            str(expr.get("key", "")), op, tuple(str(v) for v in expr.get("values") or [])
                        )
                    )
            terms.append(NodeSelectorTerm(tuple(parsed["matchExpressions"]), tuple(parsed["matchFields"])))
        return tuple(terms)

    def _pod_affinity(self, obj: dict[str, Any], spec: dict[str, Any], namespace: str) -> InterPodAffinity | bool:
        """spec.affinity.podAffinity / podAntiAffinity: the terms, True when there are none, False on a problem."""
        affinity = spec.get("affinity")
        if not affinity or ("podAffinity" not in affinity and "podAntiAffinity" not in affinity):
            return True
        parts: dict[str, Any] = {}
        for kind, prefix in (("podAffinity", ""), ("podAntiAffinity", "anti_")):
            section = affinity.get(kind) or {}
            where = f"spec.affinity.{kind}"
            required = []
            for index, raw in enumerate(section.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
                term = self._affinity_term(
                    obj, f"{where}.requiredDuringSchedulingIgnoredDuringExecution[{index}]", raw, namespace
                )
                if term is None:
                    return False
                required.append(term)
            preferred = []
            for index, raw in enumerate(section.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
                at = f"{where}.preferredDuringSchedulingIgnoredDuringExecution[{index}]"
                weight = (raw or {}).get("weight") if isinstance(raw, dict) else None
                if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
                    self._problem("Pod", obj, f"{at}.weight", f"must be a whole number from 1 to 100, got {weight!r}")
                    return False
                term = self._affinity_term(obj, f"{at}.podAffinityTerm", raw.get("podAffinityTerm"), namespace)
                if term is None:
                    return False
                preferred.append(WeightedTerm(weight, term))
            parts[f"{prefix}required"] = tuple(required)
            parts[f"{prefix}preferred"] = tuple(preferred)
        if not any(parts.values()):
            return True
        return InterPodAffinity(**parts)

    def _affinity_term(self, obj: dict[str, Any], where: str, raw: Any, namespace: str) -> PodAffinityTerm | None:
        if not isinstance(raw, dict):
            self._problem("Pod", obj, where, "must be a pod affinity term (labelSelector, topologyKey, ...)")
            return None
        key = raw.get("topologyKey")
        if not isinstance(key, str) or not key:
            self._problem("Pod", obj, f"{where}.topologyKey", "is required")
            return None
        selector = self._label_selector(obj, f"{where}.labelSelector", raw.get("labelSelector"))
        if selector is None:
            return None
        namespaces = raw.get("namespaces") or []
        if not isinstance(namespaces, list):
            self._problem("Pod", obj, f"{where}.namespaces", "must be a list of namespace names")
            return None
        ns_selector = None
        if raw.get("namespaceSelector") is not None:
            ns_selector = self._label_selector(obj, f"{where}.namespaceSelector", raw["namespaceSelector"])
            if ns_selector is None:
                return None
        if not namespaces and ns_selector is None:
            namespaces = [namespace]  # neither given: the pod's own namespace
        # matchLabelKeys / mismatchLabelKeys are merged into labelSelector by the API server when the pod
        # is created; kube-scheduler (and KAI) read only labelSelector, and so do we. Say so when a key
        # was evidently not merged (a hand-written snapshot).
        merged = {r.key for r in selector.match_expressions}
        for fld in ("matchLabelKeys", "mismatchLabelKeys"):
            missing = [str(k) for k in raw.get(fld) or [] if str(k) not in merged]
            if missing:
                self.warnings.append(
                    f"Pod {namespace}/{obj['metadata']['name']}: {where}.{fld} {missing} is not in labelSelector: "
                    "the API server merges it when it creates the pod; the selector is used as written"
                )
        return PodAffinityTerm(selector, key, frozenset(str(n) for n in namespaces), ns_selector)

    def _label_selector(self, obj: dict[str, Any], where: str, raw: Any) -> LabelSelector | None:
        if raw is None:
            return LabelSelector(nothing=True)  # a null selector matches no pod
        if not isinstance(raw, dict):
            self._problem("Pod", obj, where, "must be a label selector (matchLabels, matchExpressions)")
            return None
        labels = raw.get("matchLabels") or {}
        if not isinstance(labels, dict):
            self._problem("Pod", obj, f"{where}.matchLabels", "must be a map of label to value")
            return None
        exprs = []
        for index, expr in enumerate(raw.get("matchExpressions") or []):
            op = (expr or {}).get("operator") if isinstance(expr, dict) else None
            values = tuple(str(v) for v in (expr.get("values") or [])) if isinstance(expr, dict) else ()
            if op not in LABEL_OPERATORS:
                self._problem(
                    "Pod",
                    obj,
                    f"{where}.matchExpressions[{index}].operator",
                    f"must be one of {', '.join(LABEL_OPERATORS)}, got {op!r}",
                )
                return None
            if (op in ("In", "NotIn")) != bool(values):
                need = "must list values" if op in ("In", "NotIn") else "must not list values"
                self._problem("Pod", obj, f"{where}.matchExpressions[{index}].values", f"{need} for operator {op}")
                return None
            exprs.append(SelectorRequirement(str(expr.get("key", "")), op, values))
        return LabelSelector(tuple(sorted((str(k), str(v)) for k, v in labels.items())), tuple(exprs))

    def _host_ports(self, obj: dict[str, Any], spec: dict[str, Any]) -> tuple[HostPort, ...] | None:
        """containers[].ports[] that bind a port on the node (kube-scheduler's NodePorts reads only containers)."""
        ports: list[HostPort] = []
        for c_index, container in enumerate(spec.get("containers") or []):
            listed = container.get("ports") if isinstance(container, dict) else None
            if not listed:
                continue
            for p_index, port in enumerate(listed):
                if not isinstance(port, dict) or not port.get("hostPort"):
                    continue
                number = port["hostPort"]
                if not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 65536:
                    where = f"spec.containers[{c_index}].ports[{p_index}].hostPort"
                    self._problem("Pod", obj, where, f"must be a port number from 1 to 65535, got {number!r}")
                    return None
                protocol = str(port.get("protocol") or "TCP")
                ports.append(HostPort(protocol, str(port.get("hostIP") or WILDCARD_IP), number))
        return tuple(ports)

    @staticmethod
    def _claims(name: str, spec: dict[str, Any]) -> tuple[str, ...]:
        """Claim names of spec.volumes: persistentVolumeClaim.claimName, and `<pod>-<volume>` for an
        ephemeral volume (the claim its controller creates)."""
        volumes = spec.get("volumes")
        if not volumes:
            return ()
        claims: list[str] = []
        for volume in volumes:
            if not isinstance(volume, dict):
                continue
            pvc = volume.get("persistentVolumeClaim")
            if isinstance(pvc, dict) and pvc.get("claimName"):
                claims.append(str(pvc["claimName"]))
            elif isinstance(volume.get("ephemeral"), dict):
                claims.append(f"{name}-{volume.get('name', '')}")
        return tuple(dict.fromkeys(claims))


def build_snapshot(
    objects: Iterable[dict[str, Any]],
    now: float,
    scheduler_name: str = keys.SCHEDULER_NAME,
    *,
    storage_listed: bool = False,
    queue_label_key: str = keys.QUEUE_LABEL,
    memo: ConversionMemo | None = None,
) -> BuildResult:
    """`storage_listed`: the objects include every PersistentVolumeClaim there is (a snapshot file);
    False for a source that does not read volumes, where claims are then not checked. `memo`: reuse
    the conversions of earlier builds for the very same Pod and Node dicts (see ConversionMemo)."""
    builder = SnapshotBuilder(now, scheduler_name, storage_listed, queue_label_key, memo)
    collecting = gc.isenabled()
    gc.disable()  # tens of thousands of new objects, none cyclic: spare the collector's rescans
    try:
        builder.add(objects)
        return builder.build()
    finally:
        if collecting:
            gc.enable()
