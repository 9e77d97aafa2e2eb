"""The podgrouper controller on a real API server, one workload kind at a time.

Each case creates what the workload's operator would create (the owner, any
intermediate owners, and the pods with ownerReferences carrying the UIDs the API
server assigned; the operator's CRD is installed as a minimal schema), then checks
the PodGroup the controller made (name, owner, spec) and every pod's
`pod-group-name` annotation and sub-group label. The controller reads the owners
through the API, so a wrong REST mapping, a missing related object (PodGang,
RayCluster, Revision, launcher pods) or a wrong namespace would show here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from podgrouper_support import (
    create_tree,
    grouped_pod,
    load_manifests,
    operator_pod,
    podgroup,
    prepared_kube,
    running_controller,
    wait_for,
    warnings_on,
    workload,
)

from kai.api import keys
from kai.cluster.kube import Kube
from kai.devcluster.live import LiveCluster
from kai.podgrouper.controller import ControllerConfig, PodGrouperController

KUBEFLOW_LABELS = "training.kubeflow.org"


@pytest.fixture(scope="module")
def kube(live_cluster: LiveCluster) -> Kube:
    return prepared_kube(live_cluster)


@pytest.fixture(scope="module")
def controller(kube: Kube) -> Iterator[PodGrouperController]:
    with running_controller(kube, ControllerConfig(workers=4)) as controller:
        yield controller


# ---------------------------------------------------------------------------------------------------------
# Workloads: objects to create, and the PodGroup(s) that must result


def kubeflow_job(kind: str, name: str, pods: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """A training-operator job and the pods the operator makes for it: (replica type, index) each."""
    job = next(o for o in load_manifests("kubeflow") if o["kind"] == kind and o["metadata"]["name"] == name)
    key = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs", "TFJob": "tfReplicaSpecs"}[kind]
    objects = [job]
    for replica_type, index in pods:
        role = replica_type.lower()
        labels = {
            f"{KUBEFLOW_LABELS}/job-name": name,
            f"{KUBEFLOW_LABELS}/replica-type": role,
            f"{KUBEFLOW_LABELS}/replica-index": str(index),
            f"{KUBEFLOW_LABELS}/job-role": role if role in ("master", "launcher") else "",
            f"{KUBEFLOW_LABELS}/operator-name": "kubeflow-training-operator",
        }
        labels = {k: v for k, v in labels.items() if v}
        template = job["spec"][key][replica_type]["template"]
        objects.append(operator_pod(job, template, f"{name}-{role}-{index}", labels))
    return objects


def from_manifest(file: str, kind: str, name: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: workload(load_manifests(file), kind, name)


@dataclass
class Expected:
    """One PodGroup: its name (`{uid}` = the UID of `owner`), owner, spec, and its pods' sub-groups."""

    name: str
    owner: str  # Kind/name of the PodGroup's owner among the created objects
    spec: dict[str, Any]
    pods: dict[str, str | None] = field(default_factory=dict)


@dataclass
class Case:
    kind: str
    objects: Callable[[], list[dict[str, Any]]]
    podgroups: list[Expected]


CLIQUE = "nvidia.com/gpu.clique"
CASES = [
    Case(
        "batch/v1 Job",
        from_manifest("batch", "Job", "resnet-sweep"),
        [
            Expected(
                "pg-resnet-sweep-{uid}",
                "Job/resnet-sweep",
                {
                    "minMember": 1,
                    "queue": "research",
                    "priorityClassName": "build-preemptible",
                    "preemptibility": "preemptible",
                },
                {"resnet-sweep-0-4kx7q": None, "resnet-sweep-1-h2m8d": None, "resnet-sweep-2-pq6zt": None},
            ),
        ],
    ),
    Case(
        "batch/v1 CronJob",
        from_manifest("core", "CronJob", "nightly-eval"),
        [
            Expected(
                "pg-nightly-eval-29383200-{uid}",
                "Job/nightly-eval-29383200",
                {"minMember": 1, "queue": "team-a", "priorityClassName": "train"},
                {"nightly-eval-29383200-x7k2p": None},
            ),
        ],
    ),
    Case(
        "apps/v1 Deployment",
        from_manifest("core", "Deployment", "vllm"),
        [
            Expected(
                "pg-vllm-5d8f7c9b6d-4xq9z-{uid}",
                "Pod/vllm-5d8f7c9b6d-4xq9z",
                {"minMember": 1, "queue": "inference-queue", "priorityClassName": "inference"},
                {"vllm-5d8f7c9b6d-4xq9z": None},
            ),
            Expected(
                "pg-vllm-5d8f7c9b6d-b7hnm-{uid}",
                "Pod/vllm-5d8f7c9b6d-b7hnm",
                {"minMember": 1, "queue": "inference-queue", "priorityClassName": "inference"},
                {"vllm-5d8f7c9b6d-b7hnm": None},
            ),
        ],
    ),
    Case(
        "apps/v1 StatefulSet",
        from_manifest("core", "StatefulSet", "etcd-bench"),
        [
            Expected(
                "pg-etcd-bench-{uid}",
                "StatefulSet/etcd-bench",
                {"minMember": 1, "queue": "team-b", "priorityClassName": "train"},
                {"etcd-bench-2": None},
            ),
        ],
    ),
    Case(
        "kubeflow.org/v1 PyTorchJob",
        lambda: kubeflow_job("PyTorchJob", "llama-pretrain", [("Master", 0), *(("Worker", i) for i in range(5))]),
        [
            Expected(
                "pg-llama-pretrain-{uid}",
                "PyTorchJob/llama-pretrain",
                {
                    "minMember": 6,
                    "queue": "research",
                    "priorityClassName": "train",
                    "topologyConstraint": {
                        "topology": "dc-topology",
                        "preferredTopologyLevel": "topology.kubernetes.io/zone",
                    },
                    "subGroups": [
                        {"name": "master", "minMember": 1},
                        {"name": "worker"},
                        *(
                            {
                                "name": f"worker-{i}",
                                "minMember": n,
                                "parent": "worker",
                                "topologyConstraint": {"topology": "dc-topology", "requiredTopologyLevel": CLIQUE},
                            }
                            for i, n in ((0, 2), (1, 2), (2, 1))
                        ),
                    ],
                },
                {
                    "llama-pretrain-master-0": "master",
                    "llama-pretrain-worker-0": "worker-0",
                    "llama-pretrain-worker-1": "worker-0",
                    "llama-pretrain-worker-2": "worker-1",
                    "llama-pretrain-worker-3": "worker-1",
                    "llama-pretrain-worker-4": "worker-2",
                },
            ),
        ],
    ),
    Case(
        "kubeflow.org/v2beta1 MPIJob (launcher after workers)",
        lambda: kubeflow_job("MPIJob", "pi", [("Worker", i) for i in range(4)]),
        [
            Expected(
                "pg-pi-{uid}",
                "MPIJob/pi",
                {"minMember": 4, "queue": "default-queue", "priorityClassName": "train"},
                {f"pi-worker-{i}": None for i in range(4)},
            ),
        ],
    ),
    Case(
        "kubeflow.org/v1beta1 Notebook",
        from_manifest("kubeflow", "Notebook", "jupyter-ada"),
        [
            Expected(
                "pg-jupyter-ada-{uid}",
                "Notebook/jupyter-ada",
                {"minMember": 1, "queue": "default-queue", "priorityClassName": "build"},
                {"jupyter-ada-0": None},
            ),
        ],
    ),
    Case(
        "jobset.x-k8s.io/v1alpha2 JobSet",
        from_manifest("jobset", "JobSet", "llm-train"),
        [
            Expected(
                "pg-llm-train-{uid}",
                "JobSet/llm-train",
                {"minMember": 9, "queue": "research", "priorityClassName": "train"},
                {"llm-train-workers-1-2-7xk2p": None, "llm-train-driver-0-0-m4q8z": None},
            ),
        ],
    ),
    Case(
        "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet",
        from_manifest("leaderworkerset", "LeaderWorkerSet", "vllm-405b"),
        [
            Expected(
                "pg-vllm-405b-{uid}-group-1",
                "LeaderWorkerSet/vllm-405b",
                {
                    "minMember": 4,
                    "queue": "inference",
                    "priorityClassName": "train",
                    "topologyConstraint": {"topology": "dc-topology"},
                    "subGroups": [{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 3}],
                },
                {"vllm-405b-1": "leader", "vllm-405b-1-1": "workers"},
            ),
        ],
    ),
    Case(
        "ray.io/v1 RayCluster",
        from_manifest("ray", "RayCluster", "analytics"),
        [
            Expected(
                "pg-analytics-{uid}",
                "RayCluster/analytics",
                {
                    "minMember": 8,
                    "queue": "analytics",
                    "priorityClassName": "train",
                    "subGroups": [
                        {"name": "headgroup", "minMember": 1},
                        {"name": "small", "minMember": 1},
                        {
                            "name": "large",
                            "minMember": 6,
                            "topologyConstraint": {"topology": "dc-topology", "requiredTopologyLevel": CLIQUE},
                        },
                    ],
                },
                {"analytics-head-8hx2k": "headgroup", "analytics-large-worker-q7d5m": "large"},
            ),
        ],
    ),
    Case(
        "ray.io/v1 RayService",
        from_manifest("ray", "RayService", "llm-serve"),
        [
            Expected(
                "pg-llm-serve-{uid}",
                "RayService/llm-serve",
                {
                    "minMember": 3,
                    "queue": "serving",
                    "priorityClassName": "inference",
                    "subGroups": [{"name": "headgroup", "minMember": 1}, {"name": "gpu", "minMember": 2}],
                },
                {"llm-serve-raycluster-7dkq2-gpu-worker-x2v9c": "gpu"},
            ),
        ],
    ),
    Case(
        "serving.knative.dev/v1 Service",
        from_manifest("knative", "Service", "hello"),
        [
            Expected(
                "pg-hello-00001-{uid}",
                "Revision/hello-00001",
                {"minMember": 2, "queue": "inference", "priorityClassName": "inference"},
                {"hello-00001-deployment-6d9f8b7c5-7q2xk": None, "hello-00001-deployment-6d9f8b7c5-r8m4p": None},
            ),
        ],
    ),
    Case(
        "grove.io PodCliqueSet under nvidia.com DynamoGraphDeployment",
        from_manifest("grove", "DynamoGraphDeployment", "llama-disagg"),
        [
            Expected(
                "pg-llama-disagg-0-{uid}",
                "PodGang/llama-disagg-0",
                {
                    "minMember": 5,
                    "queue": "llm-serving",
                    "priorityClassName": "inference",
                    "preemptibility": "non-preemptible",
                    "topologyConstraint": {
                        "topology": "grove-topology",
                        "requiredTopologyLevel": "topology.kubernetes.io/zone",
                    },
                    "subGroups": [
                        {
                            "name": "llama-disagg-0-decode-0",
                            "topologyConstraint": {
                                "topology": "grove-topology",
                                "requiredTopologyLevel": "topology.kubernetes.io/rack",
                                "preferredTopologyLevel": "kubernetes.io/hostname",
                            },
                        },
                        {"name": "llama-disagg-0-prefill", "minMember": 2},
                        {
                            "name": "llama-disagg-0-decode-0-decode-leader",
                            "minMember": 1,
                            "parent": "llama-disagg-0-decode-0",
                        },
                        {
                            "name": "llama-disagg-0-decode-0-decode-worker",
                            "minMember": 2,
                            "parent": "llama-disagg-0-decode-0",
                            "topologyConstraint": {
                                "topology": "grove-topology",
                                "preferredTopologyLevel": "kubernetes.io/hostname",
                            },
                        },
                    ],
                },
                {
                    "llama-disagg-0-prefill-h7k2m": "llama-disagg-0-prefill",
                    "llama-disagg-0-decode-0-decode-worker-f4b1r": "llama-disagg-0-decode-0-decode-worker",
                },
            ),
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_workload_gets_its_podgroup(kube: Kube, controller: PodGrouperController, namespace: str, case: Case) -> None:
    created = create_tree(kube, case.objects(), namespace)

    for expected in case.podgroups:
        owner = created[expected.owner]
        name = expected.name.format(uid=owner["metadata"]["uid"])
        for pod_name, subgroup in expected.pods.items():
            pod = grouped_pod(kube, namespace, pod_name)
            meta = pod["metadata"]
            warnings = warnings_on(kube, namespace, pod_name)
            assert meta["annotations"][keys.POD_GROUP_ANNOTATION] == name, (pod_name, warnings)
            assert (meta.get("labels") or {}).get(keys.SUBGROUP_LABEL) == subgroup, pod_name
        group = wait_for(f"PodGroup {name}", lambda name=name: podgroup(kube, namespace, name))
        assert group["spec"] == expected.spec
        assert [(r["kind"], r["name"], r["uid"]) for r in group["metadata"]["ownerReferences"]] == [
            (owner["kind"], owner["metadata"]["name"], owner["metadata"]["uid"])
        ]
    for pod_name in (n for e in case.podgroups for n in e.pods):
        assert warnings_on(kube, namespace, pod_name) == []
