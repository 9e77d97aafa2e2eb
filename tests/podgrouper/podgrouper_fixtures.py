"""Helpers for the podgrouper tests: load workload manifests and build owner chains like the controller.

A manifest file holds the objects a workload's operators create (top owner,
intermediate owners, pods), each with its uid and ownerReferences. `chain_for`
walks the pod's ownerReferences by uid, as the controller walks the API.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kai.podgrouper import OwnerChain

MANIFESTS = Path(__file__).resolve().parent / "manifests"
KAI_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kai"


def load(name: str) -> list[dict[str, Any]]:
    """All objects of `manifests/<name>.yaml`."""
    with open(MANIFESTS / f"{name}.yaml") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def find(objects: Iterable[Mapping[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return copy.deepcopy(dict(obj))
    raise KeyError(f"{kind} {name}")


def owners_of(objects: Iterable[Mapping[str, Any]], obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The owner chain of `obj`: its first owner, that owner's first owner, ... up to the top."""
    by_uid = {o["metadata"]["uid"]: o for o in objects}
    chain: list[dict[str, Any]] = []
    current = obj
    while current["metadata"].get("ownerReferences"):
        reference = current["metadata"]["ownerReferences"][0]
        current = by_uid[reference["uid"]]
        chain.append(copy.deepcopy(dict(current)))
    return chain


def chain_for(objects: list[dict[str, Any]], pod_name: str, **extra: Any) -> OwnerChain:
    """The OwnerChain of pod `pod_name` among `objects` (extra fields go to OwnerChain)."""
    pod = find(objects, "Pod", pod_name)
    return OwnerChain(pod=pod, owners=owners_of(objects, pod), **extra)


def owner_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ownerReference a controller puts on the objects it creates for `obj`."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def kai_example(file_name: str) -> list[dict[str, Any]]:
    """The objects of one of the KAI-format example manifests (examples/kai/<file_name>), as a user
    would apply them."""
    with open(KAI_EXAMPLES / file_name) as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def admitted(obj: Mapping[str, Any], uid: str, namespace: str = "default") -> dict[str, Any]:
    """`obj` as the API server returns it once created: with namespace and uid."""
    result = copy.deepcopy(dict(obj))
    result["metadata"] = {**result["metadata"], "namespace": namespace, "uid": uid}
    return result


def pod_from_template(
    owner: Mapping[str, Any],
    template: Mapping[str, Any],
    name: str,
    uid: str,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as `owner`'s controller creates it from a pod template."""
    template_metadata = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner["metadata"]["namespace"],
            "uid": uid,
            "labels": {**(template_metadata.get("labels") or {}), **(labels or {})},
            "annotations": dict(template_metadata.get("annotations") or {}),
            "ownerReferences": [owner_ref(owner)],
        },
        "spec": copy.deepcopy(dict(template["spec"])),
        "status": {"phase": "Pending"},
    }


def pytorch_pods(job: Mapping[str, Any], replica_type: str, count: int, uid_base: str) -> list[dict[str, Any]]:
    """The pods the Kubeflow training operator creates for one replica type."""
    name = job["metadata"]["name"]
    template = job["spec"]["pytorchReplicaSpecs"][replica_type]["template"]
    role = replica_type.lower()
    labels = {
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": role,
    }
    pods = []
    for index in range(count):
        pod_labels = {**labels, "training.kubeflow.org/replica-index": str(index)}
        if role == "master":
            pod_labels["training.kubeflow.org/job-role"] = "master"
        pods.append(pod_from_template(job, template, f"{name}-{role}-{index}", f"{uid_base}{index}", pod_labels))
    return pods


def ray_cluster_of(ray_job: dict[str, Any], cluster_name: str, uid: str) -> dict[str, Any]:
    """The RayCluster KubeRay creates for `ray_job` (and names in the job's status)."""
    ray_job["status"] = {"rayClusterName": cluster_name, "jobDeploymentStatus": "Initializing"}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": cluster_name,
            "namespace": ray_job["metadata"]["namespace"],
            "uid": uid,
            "labels": {
                "ray.io/originated-from-crd": "RayJob",
                "ray.io/originated-from-cr-name": ray_job["metadata"]["name"],
            },
            "ownerReferences": [owner_ref(ray_job)],
        },
        "spec": ray_job["spec"]["rayClusterSpec"],
    }


def ray_pods(cluster: Mapping[str, Any], uid_base: str) -> list[dict[str, Any]]:
    """The head and every worker (`replicas` of each group) KubeRay creates for `cluster`."""
    name = cluster["metadata"]["name"]
    spec = cluster["spec"]
    pods = [
        pod_from_template(
            cluster,
            spec["headGroupSpec"]["template"],
            f"{name}-head",
            f"{uid_base}0",
            {"ray.io/cluster": name, "ray.io/group": "headgroup", "ray.io/node-type": "head"},
        )
    ]
    for group in spec.get("workerGroupSpecs") or []:
        for index in range(int(group.get("replicas", 1))):
            pods.append(
                pod_from_template(
                    cluster,
                    group["template"],
                    f"{name}-{group['groupName']}-worker-{index}",
                    f"{uid_base}{len(pods)}",
                    {"ray.io/cluster": name, "ray.io/group": group["groupName"], "ray.io/node-type": "worker"},
                )
            )
    return pods


def workload_pods(workload: dict[str, Any], uid_base: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every pod the controller of `workload` (an admitted Job, PyTorchJob or RayJob) creates, each with
    its owner chain (direct owner first)."""
    kind = workload["kind"]
    if kind == "Job":
        name = workload["metadata"]["name"]
        labels = {"job-name": name, "batch.kubernetes.io/job-name": name}
        count = int(workload["spec"].get("parallelism", 1))
        template = workload["spec"]["template"]
        return [
            (pod_from_template(workload, template, f"{name}-{i}", f"{uid_base}{i}", labels), [workload])
            for i in range(count)
        ]
    if kind == "PyTorchJob":
        pods = []
        for replica_type, spec in workload["spec"]["pytorchReplicaSpecs"].items():
            base = f"{uid_base}{len(pods)}"
            pods += pytorch_pods(workload, replica_type, int(spec.get("replicas", 1)), base)
        return [(pod, [workload]) for pod in pods]
    if kind == "RayJob":
        cluster = ray_cluster_of(workload, f"{workload['metadata']['name']}-raycluster", f"{uid_base}9")
        return [(pod, [cluster, workload]) for pod in ray_pods(cluster, f"{uid_base}1")]
    raise ValueError(f"no controller for kind {kind}")
