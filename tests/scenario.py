"""Scenario helpers for tests: small factories for the snapshot contract's kinds, and runners that go
through the contract (YAML files in, the `kai simulate` JSON out) in-process or via the real CLI.

Every factory returns a plain Kubernetes object dict, exactly what a user would write in YAML.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kai.api.timeutil import parse_time
from kai.cycle import known_actions
from kai.framework.config import parse_config
from kai.sim.simulate import simulate, to_json_dict
from kai.snapshot.loader import load_snapshot

NOW = "2026-01-01T00:00:00Z"
KAI = Path(sys.executable).parent / "kai"


def node(
    name: str,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    allocatable.update(extra or {})
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    if taints:
        obj["spec"]["taints"] = taints
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def queue(
    name: str,
    parent: str = "",
    priority: int | None = None,
    gpu: dict[str, float] | None = None,
    cpu: dict[str, float] | None = None,
    memory: dict[str, float] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A Queue; each resource is a dict of quota / overQuotaWeight / limit (KAI units). CPU and memory
    default to unlimited so that tests about GPUs are not distracted by them."""
    unlimited = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    spec: dict[str, Any] = {
        "resources": {
            "gpu": gpu if gpu is not None else {"quota": 0, "overQuotaWeight": 1, "limit": -1},
            "cpu": cpu if cpu is not None else unlimited,
            "memory": memory if memory is not None else unlimited,
        }
    }
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {"name": name}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": meta, "spec": spec}


def podgroup(
    name: str,
    queue: str,
    min_member: int = 1,
    ns: str = "ns",
    priority_class: str | None = None,
    preemptibility: str | None = None,
    subgroups: list[dict[str, Any]] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if preemptibility:
        spec["preemptibility"] = preemptibility
    if subgroups:
        spec["subGroups"] = subgroups
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta, "spec": spec}


def pod(
    name: str,
    group: str | None = None,
    queue: str | None = None,
    ns: str = "ns",
    gpus: int = 0,
    cpu: str | None = None,
    memory: str | None = None,
    node: str | None = None,
    phase: str | None = None,
    deleting: bool = False,
    gated: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    scheduler: str = "kai-scheduler",
    priority_class: str | None = None,
    created: str | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if group:
        meta["annotations"]["pod-group-name"] = group
    if queue:
        meta["labels"]["kai.scheduler/queue"] = queue
    if created:
        meta["creationTimestamp"] = created
    if deleting:
        meta["deletionTimestamp"] = NOW
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    requests.update(extra or {})
    resources: dict[str, Any] = {"requests": requests}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if node:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if priority_class:
        spec["priorityClassName"] = priority_class
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/wait"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase or ("Running" if node else "Pending")},
    }


def write(objects: list[dict[str, Any]], directory: Path, name: str = "snapshot.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return path


def run(
    objects: list[dict[str, Any]], rounds: int = 1, config: dict[str, Any] | None = None, now: str = NOW
) -> dict[str, Any]:
    """`kai simulate -o json` on the objects, in-process (same loader, same cycle, same JSON)."""
    cfg, problems, _ = parse_config(config, known_actions())
    assert not problems, problems
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = load_snapshot([write(objects, Path(tmp))], parse_time(now), cfg.params.scheduler_name)
    return to_json_dict(simulate(snapshot, cfg, rounds))


def run_cli(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real `kai` command in a subprocess."""
    return subprocess.run([str(KAI), *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def cli_json(paths: list[Path], *extra: str) -> dict[str, Any]:
    args = ["simulate", *[a for p in paths for a in ("-f", str(p))], "--now", NOW, "-o", "json", *extra]
    done = run_cli(args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def bound(result: dict[str, Any], round_number: int = 1) -> dict[str, str]:
    """pod -> node for the pods bound in a round."""
    return {b["pod"]: b["node"] for b in result["rounds"][round_number - 1]["bound"]}


def running_on(result: dict[str, Any]) -> dict[str, str]:
    """pod -> node for every pod running after the last round."""
    return {k: v["node"] for k, v in result["pods"].items() if v["status"] == "Running"}


# -- Dynamic Resource Allocation (resource.k8s.io/v1) ---------------------------------------------------
def device_class(name: str = "gpu.nvidia.com", *selectors: str) -> dict[str, Any]:
    """A DeviceClass; with no selector given it selects the devices of the driver of the same name."""
    exprs = selectors or (f'device.driver == "{name}"',)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]},
    }


def gpu_device(name: str, model: str = "H100", memory: str = "80Gi", **attributes: Any) -> dict[str, Any]:
    """A device for resource_slice: attributes `model` (string) and any given (int, bool or string), and
    capacity `memory`."""
    attrs: dict[str, Any] = {"model": {"string": model}}
    for key, value in attributes.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        attrs[key] = {kind: value}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}


def resource_slice(
    node_name: str, devices: list[dict[str, Any]] | int, driver: str = "gpu.nvidia.com", name: str | None = None
) -> dict[str, Any]:
    """A ResourceSlice of one node; `devices` is a list of gpu_device()s or a number of plain GPUs."""
    listed = [gpu_device(f"gpu-{i}") for i in range(devices)] if isinstance(devices, int) else devices
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node_name}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": listed,
        },
    }


def device_request(
    name: str = "gpu",
    count: int = 1,
    device_class_name: str = "gpu.nvidia.com",
    selectors: tuple[str, ...] = (),
    mode: str = "ExactCount",
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def resource_claim(
    name: str,
    *requests: dict[str, Any],
    ns: str = "ns",
    queue: str | None = None,
    allocated: dict[str, list[str]] | None = None,
    reserved_for: tuple[str, ...] = (),
    constraints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ResourceClaim (one 1-GPU request unless given). `queue` sets its queue label (KAI wants one on a
    shared GPU claim); `allocated` = {node: [device, ...]} of the gpu.nvidia.com driver (pool = node)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if queue:
        meta["labels"] = {"kai.scheduler/queue": queue}
    spec: dict[str, Any] = {"devices": {"requests": list(requests or (device_request(),))}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": spec}
    status: dict[str, Any] = {}
    if allocated:
        ((node_name, devices),) = allocated.items()
        first = spec["devices"]["requests"][0]["name"]
        status["allocation"] = {
            "devices": {
                "results": [
                    {"request": first, "driver": "gpu.nvidia.com", "pool": node_name, "device": d} for d in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            },
        }
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved_for]
    if status:
        obj["status"] = status
    return obj


def claim_template(name: str, *requests: dict[str, Any], ns: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": list(requests or (device_request(),))}}},
    }


def with_claims(obj: dict[str, Any], claims: dict[str, str] | None = None, templates: dict[str, str] | None = None):
    """The pod with `spec.resourceClaims`: entry name -> ResourceClaim name, or -> ResourceClaimTemplate name."""
    entries = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    entries += [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    obj["spec"]["resourceClaims"] = entries
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": e["name"]} for e in entries]
    return obj
