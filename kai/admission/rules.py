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
from kai.api.errors import Problem
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


def _meta(obj: KubeObject) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: KubeObject) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def describe(obj: KubeObject, kind: str) -> str:
    """`Kind namespace/name` (or `Kind name`); a pod created with generateName shows `prefix*`."""
    meta = _meta(obj)
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "")
    namespace = meta.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _containers(pod: KubeObject) -> list[Mapping[str, Any]]:
    spec = _spec(pod)
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def _resource_amount(container: Mapping[str, Any], resource: str) -> Decimal:
    resources = container.get("resources") or {}
    amount = Decimal(0)
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(resource)
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
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            if any(str(name).startswith(keys.MIG_RESOURCE_PREFIX) for name in resources.get(section) or {}):
                return True
    return False


def requests_shared_gpu(pod: KubeObject) -> bool:
    annotations = _meta(pod).get("annotations") or {}
    return keys.GPU_FRACTION_ANNOTATION in annotations or keys.GPU_MEMORY_ANNOTATION in annotations


def requests_gpu(pod: KubeObject) -> bool:
    """Any GPU: whole (`nvidia.com/gpu`), a MIG slice, or a shared GPU (fraction or memory annotation)."""
    return whole_gpus(pod) > 0 or requests_mig(pod) or requests_shared_gpu(pod)


def for_scheduler(pod: KubeObject, scheduler_name: str) -> bool:
    return _spec(pod).get("schedulerName") == scheduler_name


def is_reservation_pod(pod: KubeObject, reservation_namespace: str = RESERVATION_NAMESPACE) -> bool:
    """A GPU reservation pod of the binder: its namespace, or its `app` label."""
    meta = _meta(pod)
    labels = meta.get("labels") or {}
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
    annotations: Mapping[str, str] = _meta(pod).get("annotations") or {}
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
                f"names container {container_name!r}, which the pod does not have (it has {', '.join(sorted(names))})",
            )
    return problems


def sharing_request_changed(old: KubeObject, new: KubeObject) -> bool:
    """True when an update changes what the pod asks of GPUs (annotations or GPU resources)."""
    old_annotations = _meta(old).get("annotations") or {}
    new_annotations = _meta(new).get("annotations") or {}
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
    annotations = meta.get("annotations") or {}
    given = annotations.get(SHARED_GPU_CONFIGMAP_ANNOTATION)
    if given:
        return str(given)
    name = meta.get("name") or f"{meta.get('generateName') or 'pod-'}{uuid.uuid4().hex[:5]}"
    return f"{name}-shared-gpu"


def _shared_gpu_wiring(pod: KubeObject) -> list[dict[str, Any]]:
    """Env of the GPU container (`gpu-fraction-container-name`, else the first container) from the
    pod's GPU-sharing ConfigMaps, and the annotation that names them (KAI's admission does the same)."""
    spec = _spec(pod)
    annotations = _meta(pod).get("annotations") or {}
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
                problems.append(Problem(obj, f"{base}.{field}", f"must be a finite number, got {values[field]!r}"))
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


def validate_podgroup(podgroup: KubeObject) -> list[Problem]:
    """Sub-group integrity of a `scheduling.run.ai/v2alpha2` PodGroup: unique names, known parents, no cycles.

    Parent names are matched lower-cased, as the scheduler does.
    """
    obj = describe(podgroup, "PodGroup")
    sub_groups: Sequence[Any] = _spec(podgroup).get("subGroups") or []
    problems: list[Problem] = []
    index_of: dict[str, int] = {}
    for index, group in enumerate(sub_groups):
        name = str((group or {}).get("name") or "")
        if not name:
            problems.append(Problem(obj, f"spec.subGroups[{index}].name", "is required"))
            continue
        key = name.lower()
        if key in index_of:
            problems.append(
                Problem(
                    obj, f"spec.subGroups[{index}].name", f"{name!r} is already used by spec.subGroups[{index_of[key]}]"
                )
            )
            continue
        index_of[key] = index
    parent_of: dict[str, str] = {}
    for index, group in enumerate(sub_groups):
        parent = (group or {}).get("parent")
        name = str((group or {}).get("name") or "").lower()
        if parent is None or not name:
            continue
        if str(parent).lower() not in index_of:
            message = f"names sub-group {parent!r}, which does not exist"
            problems.append(Problem(obj, f"spec.subGroups[{index}].parent", message))
            continue
        parent_of.setdefault(name, str(parent).lower())
    reported: set[str] = set()
    for start in parent_of:
        seen: list[str] = []
        current: str | None = start
        while current is not None and current not in seen:
            seen.append(current)
            current = parent_of.get(current)
        if current is None or current in reported:
            continue
        cycle = seen[seen.index(current) :]
        reported.update(cycle)
        index = index_of[current]
        path = " -> ".join([*(str(sub_groups[index_of[n]]["name"]) for n in cycle), str(sub_groups[index]["name"])])
        problems.append(Problem(obj, f"spec.subGroups[{index}].parent", f"forms a cycle: {path}"))
    return problems
