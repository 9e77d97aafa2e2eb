"""Admission rules as pure functions: GPU-sharing validation, runtime-class mutation, Queue and PodGroup checks.

Every function takes plain object dicts (as the API server sends them) and
returns values: a list of :class:`~kai.api.errors.Problem` (empty = allowed) or a
JSONPatch list (empty = nothing to change). No I/O, no client: the webhook server
(`kai.admission.server`) is one adapter, the offline snapshot loader can be another.

Rules (KAI's admission plugins; where kai differs: kai/admission/NOTES.md):

* pod, GPU sharing (only pods for the kai scheduler): with sharing disabled, no
  `gpu-fraction` / `gpu-memory`; a fraction must lie in (0, 1) and excludes
  whole-GPU limits and `gpu-memory`; `gpu-memory` is a positive integer (MiB) and
  excludes whole GPUs; `gpu-fraction-num-devices` is a positive integer and needs a
  fraction or memory request; `mps: "true"` needs a fraction or memory request;
  `gpu-fraction-container-name` must name one of the pod's containers.
* pod, runtime class: a pod requesting any GPU (whole, MIG or shared) and naming no
  `runtimeClassName` gets the configured one (default `nvidia`; empty disables);
  GPU reservation pods are exempt.
* Queue: `spec.resources` is required (as KAI's webhook says); quota, limit and
  `overQuotaWeight` are finite numbers (the CRD's `type: number`); a queue is not its own
  parent. Values KAI accepts but that are odd (a negative weight, a quota or limit below zero
  other than -1, a quota above its limit) are allowed with a warning (`queue_warnings`).
* PodGroup: sub-group names unique, every parent exists, no cycles.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kai.api import keys
from kai.api.errors import Problem, show
from kai.api.gpusharing import parse_gpu_sharing
from kai.api.quantity import QuantityError, parse_quantity
from kai.api.queuevalues import UNLIMITED, odd_queue_values

MPS_ANNOTATION = "mps"
SHARED_GPU_CONFIGMAP_ANNOTATION = keys.SHARED_GPU_CONFIGMAP_ANNOTATION
RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_APP_LABEL = "kai-resource-reservation"
DEFAULT_GPU_RUNTIME_CLASS = "nvidia"
SHARING_ANNOTATIONS = (
    keys.GPU_FRACTION_ANNOTATION,
    keys.GPU_MEMORY_ANNOTATION,
    keys.GPU_FRACTION_NUM_DEVICES_ANNOTATION,
    keys.GPU_FRACTION_CONTAINER_ANNOTATION,
    MPS_ANNOTATION,
)
QUEUE_RESOURCES = ("gpu", "cpu", "memory")

KubeObject = Mapping[str, Any]


@dataclass(frozen=True)
class PodRules:
    """Configuration of the pod webhooks (KAI's admission settings)."""

    scheduler_name: str = keys.SCHEDULER_NAME
    gpu_sharing: bool = False
    gpu_runtime_class: str = DEFAULT_GPU_RUNTIME_CLASS
    reservation_namespace: str = RESERVATION_NAMESPACE


# ---------------------------------------------------------------------------------------------------------
# Reading pods


def _map(value: Any) -> Mapping[str, Any]:
    """The value if it is a map, else an empty one (a wrongly shaped field reads as unset)."""
    return value if isinstance(value, Mapping) else {}


def _meta(obj: KubeObject) -> Mapping[str, Any]:
    return _map(_map(obj).get("metadata"))


def _spec(obj: KubeObject) -> Mapping[str, Any]:
    return _map(_map(obj).get("spec"))


def _annotations(obj: KubeObject) -> Mapping[str, Any]:
    return _map(_meta(obj).get("annotations"))


def describe(obj: KubeObject, kind: str) -> str:
    """`Kind namespace/name` (or `Kind name`); a pod created with generateName shows `prefix*`."""
    meta = _meta(obj)
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "")
    namespace = meta.get("namespace")
    name = name if isinstance(name, str) else show(name)
    name = name if len(name) <= 120 else name[:100] + "..."
    if namespace:
        namespace = namespace if isinstance(namespace, str) and len(namespace) <= 120 else show(namespace, 100)
        return f"{kind} {namespace}/{name}"
    return f"{kind} {name}"


def _containers(pod: KubeObject) -> list[Mapping[str, Any]]:
    spec = _spec(pod)
    found: list[Mapping[str, Any]] = []
    for section in ("initContainers", "containers"):
        items = spec.get(section)
        if isinstance(items, list):
            found.extend(c for c in items if isinstance(c, Mapping))
    return found


def _resource_amount(container: Mapping[str, Any], resource: str) -> Decimal:
    resources = _map(container.get("resources"))
    amount = Decimal(0)
    for section in ("limits", "requests"):
        value = _map(resources.get(section)).get(resource)
        if value is None:
            continue
        try:
            amount = max(amount, parse_quantity(value))
        except QuantityError:
            continue
    return amount


def whole_gpus(pod: KubeObject) -> Decimal:
    """The most `nvidia.com/gpu` any one container asks for (limits or requests)."""
    return max((_resource_amount(c, keys.GPU_RESOURCE) for c in _containers(pod)), default=Decimal(0))


def requests_mig(pod: KubeObject) -> bool:
    for container in _containers(pod):
        resources = _map(container.get("resources"))
        for section in ("limits", "requests"):
            if any(str(name).startswith(keys.MIG_RESOURCE_PREFIX) for name in _map(resources.get(section))):
                return True
    return False


def requests_shared_gpu(pod: KubeObject) -> bool:
    annotations = _annotations(pod)
    return keys.GPU_FRACTION_ANNOTATION in annotations or keys.GPU_MEMORY_ANNOTATION in annotations


def requests_gpu(pod: KubeObject) -> bool:
    """Any GPU: whole (`nvidia.com/gpu`), a MIG slice, or a shared GPU (fraction or memory annotation)."""
    return whole_gpus(pod) > 0 or requests_mig(pod) or requests_shared_gpu(pod)


def for_scheduler(pod: KubeObject, scheduler_name: str) -> bool:
    return _spec(pod).get("schedulerName") == scheduler_name


def is_reservation_pod(pod: KubeObject, reservation_namespace: str = RESERVATION_NAMESPACE) -> bool:
    """A GPU reservation pod of the binder: its namespace, or its `app` label."""
    meta = _meta(pod)
    labels = _map(meta.get("labels"))
    return meta.get("namespace") == reservation_namespace or labels.get("app") == RESERVATION_APP_LABEL


# ---------------------------------------------------------------------------------------------------------
# Pods: GPU sharing


def _annotation_field(key: str) -> str:
    return f"metadata.annotations[{key}]"


def _positive_int(value: str) -> int | None:
    text = value.strip()
    if not text.isdigit():
        return None
    number = int(text)
    return number if number > 0 else None


def validate_gpu_sharing(pod: KubeObject, gpu_sharing: bool = True) -> list[Problem]:
    """Every GPU-sharing rule the pod breaks; each problem names the annotation at fault."""
    obj = describe(pod, "Pod")
    annotations: Mapping[str, Any] = _annotations(pod)
    container_name = annotations.get(keys.GPU_FRACTION_CONTAINER_ANNOTATION)
    problems: list[Problem] = []

    def reject(key: str, message: str) -> None:
        problems.append(Problem(obj, _annotation_field(key), message))

    if not gpu_sharing:
        for key in (keys.GPU_FRACTION_ANNOTATION, keys.GPU_MEMORY_ANNOTATION):
            if key in annotations:
                reject(key, "GPU sharing is disabled on this cluster (enable it with the Helm value global.gpuSharing)")
        return problems

    sharing = parse_gpu_sharing(annotations, float(whole_gpus(pod)))  # the rules the loader applies too
    problems.extend(Problem(obj, field, message) for field, message in sharing.problems)
    if container_name is not None:
        names = {str(c.get("name")) for c in _containers(pod)}
        if container_name not in names:
            reject(
                keys.GPU_FRACTION_CONTAINER_ANNOTATION,
                f"names container {show(container_name)}, which the pod does not have "
                f"(it has {show(', '.join(sorted(names)), 200)})",
            )
    return problems


def sharing_request_changed(old: KubeObject, new: KubeObject) -> bool:
    """True when an update changes what the pod asks of GPUs (annotations or GPU resources)."""
    old_annotations = _annotations(old)
    new_annotations = _annotations(new)
    if any(old_annotations.get(key) != new_annotations.get(key) for key in SHARING_ANNOTATIONS):
        return True
    return whole_gpus(old) != whole_gpus(new)


def validate_pod(pod: KubeObject, rules: PodRules, old: KubeObject | None = None) -> list[Problem]:
    """The pod webhook's verdict. Pods for other schedulers pass; an update that leaves the GPU request
    alone passes too (a pod admitted before the webhook existed must stay patchable)."""
    if not for_scheduler(pod, rules.scheduler_name):
        return []
    if old is not None and not sharing_request_changed(old, pod):
        return []
    return validate_gpu_sharing(pod, rules.gpu_sharing)


def mutate_pod(pod: KubeObject, rules: PodRules) -> list[dict[str, Any]]:
    """The JSONPatch (RFC 6902) the mutating webhook returns: the GPU runtime class where it applies, and
    for a shared-GPU pod the wiring of its GPU container to the ConfigMaps the binder fills."""
    if not for_scheduler(pod, rules.scheduler_name) or is_reservation_pod(pod, rules.reservation_namespace):
        return []
    patch: list[dict[str, Any]] = []
    if rules.gpu_runtime_class and not _spec(pod).get("runtimeClassName") and requests_gpu(pod):
        patch.append({"op": "add", "path": "/spec/runtimeClassName", "value": rules.gpu_runtime_class})
    if rules.gpu_sharing and requests_shared_gpu(pod):
        patch.extend(_shared_gpu_wiring(pod))
    return patch


def shared_gpu_configmap_prefix(pod: KubeObject) -> str:
    """The prefix of a shared-GPU pod's ConfigMaps: `<prefix>-0` holds NVIDIA_VISIBLE_DEVICES and GPU_PORTION
    (filled by the binder once the pod has its GPUs), `<prefix>-0-evar` the same as environment variables."""
    meta = _meta(pod)
    annotations = _map(meta.get("annotations"))
    given = annotations.get(SHARED_GPU_CONFIGMAP_ANNOTATION)
    if given:
        return str(given)
    name = meta.get("name") or f"{meta.get('generateName') or 'pod-'}{uuid.uuid4().hex[:5]}"
    return f"{name}-shared-gpu"


def _shared_gpu_wiring(pod: KubeObject) -> list[dict[str, Any]]:
    """Env of the GPU container (`gpu-fraction-container-name`, else the first container) from the
    pod's GPU-sharing ConfigMaps, and the annotation that names them (KAI's admission does the same)."""
    spec = _spec(pod)
    annotations = _annotations(pod)
    wanted = annotations.get(keys.GPU_FRACTION_CONTAINER_ANNOTATION)
    section, index = "containers", 0
    for candidate in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(candidate) or []):
            if wanted and container.get("name") == wanted:
                section, index = candidate, i
    containers = spec.get(section) or []
    if not containers:
        return []
    container = containers[index]
    prefix = shared_gpu_configmap_prefix(pod)
    env_names = {e.get("name") for e in container.get("env") or []}
    base = f"/spec/{section}/{index}"
    patch: list[dict[str, Any]] = []
    if "annotations" not in _meta(pod):
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    patch.append({"op": "add", "path": "/metadata/annotations/runai~1shared-gpu-configmap", "value": prefix})
    if "env" not in container:
        patch.append({"op": "add", "path": f"{base}/env", "value": []})
    for variable in ("NVIDIA_VISIBLE_DEVICES", "GPU_PORTION"):
        if variable in env_names:
            continue
        ref = {"configMapKeyRef": {"name": f"{prefix}-0", "key": variable}}
        patch.append({"op": "add", "path": f"{base}/env/-", "value": {"name": variable, "valueFrom": ref}})
    if "envFrom" not in container:
        patch.append({"op": "add", "path": f"{base}/envFrom", "value": []})
    patch.append({"op": "add", "path": f"{base}/envFrom/-", "value": {"configMapRef": {"name": f"{prefix}-0-evar"}}})
    return patch


# ---------------------------------------------------------------------------------------------------------
# Queues


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def validate_queue(queue: KubeObject) -> list[Problem]:
    """Problems of a `scheduling.run.ai/v2` Queue (empty when valid)."""
    obj = describe(queue, "Queue")
    spec = _spec(queue)
    problems: list[Problem] = []
    if spec.get("parentQueue") and spec.get("parentQueue") == _meta(queue).get("name"):
        problems.append(Problem(obj, "spec.parentQueue", "a queue cannot be its own parent"))
    resources = spec.get("resources")
    if not isinstance(resources, Mapping):
        message = "must be specified (quota, limit and overQuotaWeight per resource)"
        problems.append(Problem(obj, "spec.resources", message))
        return problems
    for resource in QUEUE_RESOURCES:
        values = resources.get(resource)
        if values is None:
            continue
        base = f"spec.resources.{resource}"
        if not isinstance(values, Mapping):
            problems.append(Problem(obj, base, "must be an object with quota, limit and overQuotaWeight"))
            continue
        for field in ("quota", "limit", "overQuotaWeight"):
            if values.get(field) is None:
                continue
            number = _number(values[field])
            if number is None or not math.isfinite(number):
                problems.append(Problem(obj, f"{base}.{field}", f"must be a finite number, got {show(values[field])}"))
    return problems


def queue_warnings(queue: KubeObject) -> list[str]:
    """Warnings about values KAI accepts but that are odd, for the AdmissionReview response."""
    resources = _spec(queue).get("resources")
    if not isinstance(resources, Mapping):
        return []
    warnings = []
    defaults = {"quota": 0.0, "overQuotaWeight": 1.0, "limit": UNLIMITED}
    for resource in QUEUE_RESOURCES:
        values = resources.get(resource)
        if not isinstance(values, Mapping):
            continue
        numbers = {f: _number(values.get(f)) if values.get(f) is not None else d for f, d in defaults.items()}
        if any(n is None or not math.isfinite(n) for n in numbers.values()):
            continue
        odd = odd_queue_values(resource, numbers["quota"], numbers["overQuotaWeight"], numbers["limit"])  # type: ignore[arg-type]
        warnings += [f"spec.resources.{resource}.{field}: {message}" for field, message in odd]
    return warnings


# ---------------------------------------------------------------------------------------------------------
# PodGroups


MAX_SUBGROUPS = 1000  # also `maxItems` of spec.subGroups in the PodGroup CRD
MAX_SUBGROUP_DEPTH = 32  # levels of parent links under a top-level sub-group


def subgroup_problems(obj: str, sub_groups: Any) -> list[Problem]:
    """Sub-group integrity: unique names, known parents, no cycles, at most MAX_SUBGROUPS entries and
    MAX_SUBGROUP_DEPTH levels. Linear in the number of sub-groups (each parent chain is walked once).

    Parent names are matched lower-cased, as the scheduler does."""
    if sub_groups is None:
        return []
    if not isinstance(sub_groups, Sequence) or isinstance(sub_groups, str | bytes):
        return [Problem(obj, "spec.subGroups", f"must be a list, got {show(sub_groups)}")]
    if len(sub_groups) > MAX_SUBGROUPS:
        return [Problem(obj, "spec.subGroups", f"has {len(sub_groups)} sub-groups, more than {MAX_SUBGROUPS}")]
    problems: list[Problem] = []
    index_of: dict[str, int] = {}
    names: list[str] = []
    for index, group in enumerate(sub_groups):
        raw = group.get("name") if isinstance(group, Mapping) else None
        if not isinstance(group, Mapping):
            problems.append(Problem(obj, f"spec.subGroups[{index}]", f"must be an object, got {show(group)}"))
        name = raw if isinstance(raw, str) else ""
        names.append(name)
        if raw is not None and not isinstance(raw, str):
            problems.append(Problem(obj, f"spec.subGroups[{index}].name", f"must be a string, got {show(raw)}"))
            continue
        if not name:
            if isinstance(group, Mapping):
                problems.append(Problem(obj, f"spec.subGroups[{index}].name", "is required"))
            continue
        key = name.lower()
        if key in index_of:
            message = f"{show(name)} is already used by spec.subGroups[{index_of[key]}]"
            problems.append(Problem(obj, f"spec.subGroups[{index}].name", message))
            continue
        index_of[key] = index
    parent_of: dict[str, str] = {}
    for index, group in enumerate(sub_groups):
        parent = group.get("parent") if isinstance(group, Mapping) else None
        name = names[index].lower()
        if parent is None or not name:
            continue
        if not isinstance(parent, str):
            problems.append(Problem(obj, f"spec.subGroups[{index}].parent", f"must be a string, got {show(parent)}"))
            continue
        if parent.lower() not in index_of:
            message = f"names sub-group {show(parent)}, which does not exist"
            problems.append(Problem(obj, f"spec.subGroups[{index}].parent", message))
            continue
        parent_of.setdefault(name, parent.lower())
    depth: dict[str, int] = {}  # levels below a top-level sub-group; -1 while on the chain being walked
    too_deep = False
    for start in parent_of:
        chain: list[str] = []
        current: str | None = start
        while current is not None and current not in depth:
            depth[current] = -1
            chain.append(current)
            current = parent_of.get(current)
        if current is not None and depth[current] == -1:  # the walk came back onto its own chain: a cycle
            cycle = chain[chain.index(current) :]
            index = index_of[current]
            path = " -> ".join([names[index_of[n]] for n in cycle[:8]] + (["..."] if len(cycle) > 8 else []))
            problems.append(Problem(obj, f"spec.subGroups[{index}].parent", f"forms a cycle: {path} -> {names[index]}"))
            for name in chain:
                depth[name] = 0
            continue
        base = depth[current] if current is not None else 0
        for offset, name in enumerate(reversed(chain), start=1):
            depth[name] = base + offset
            if depth[name] > MAX_SUBGROUP_DEPTH and not too_deep:
                too_deep = True
                problems.append(
                    Problem(
                        obj,
                        f"spec.subGroups[{index_of[name]}].parent",
                        f"is {depth[name]} levels deep; at most {MAX_SUBGROUP_DEPTH} levels of sub-groups are allowed",
                    )
                )
    return problems


def validate_podgroup(podgroup: KubeObject) -> list[Problem]:
    """Problems of a `scheduling.run.ai/v2alpha2` PodGroup's sub-groups (see `subgroup_problems`)."""
    spec = _spec(podgroup)
    return subgroup_problems(describe(podgroup, "PodGroup"), spec.get("subGroups"))
