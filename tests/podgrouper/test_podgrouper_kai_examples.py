"""KAI's own example workloads (shared/kai-examples): the pods their controllers create, and their PodGroups."""

from __future__ import annotations

from typing import Any

import pytest
from podgrouper_fixtures import KAI_EXAMPLES, admitted, kai_example, owner_ref, pod_from_template

from kai.podgrouper import OwnerChain, PodGroupMetadata, group_pod

pytestmark = pytest.mark.skipif(not KAI_EXAMPLES.is_dir(), reason="shared/kai-examples is not beside the repo")


def only(file_name: str) -> dict[str, Any]:
    (obj,) = kai_example(file_name)
    return obj


def test_batch_job_example_is_one_podgroup_of_independent_pods() -> None:
    job = admitted(only("docs__batch__batch-job.yaml"), "0b7c9a10-0000-4000-8000-000000000001")
    template = job["spec"]["template"]
    pods = [
        pod_from_template(
            job,
            template,
            f"batch-job-{suffix}",
            f"0b7c9a10-0000-4000-8000-00000000010{i}",
            {"job-name": "batch-job", "batch.kubernetes.io/job-name": "batch-job"},
        )
        for i, suffix in enumerate(["2xk8f", "m9q4t"])
    ]

    groups = [group_pod(OwnerChain(pod, [job])) for pod in pods]

    for metadata in groups:
        assert metadata.to_manifest()["metadata"]["name"] == "pg-batch-job-0b7c9a10-0000-4000-8000-000000000001"
        assert metadata.to_manifest()["spec"] == {
            "minMember": 1,
            "queue": "default-queue",
            "priorityClassName": "train",
        }
        assert metadata.owner.kind == "Job"


def pytorch_pods(job: dict[str, Any], replica_type: str, count: int, uid_base: str) -> list[dict[str, Any]]:
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


def test_pytorch_job_example_is_a_gang_of_master_and_workers() -> None:
    job = admitted(only("docs__batch__pytorch-job.yaml"), "1c8d0b21-0000-4000-8000-000000000001")
    master = pytorch_pods(job, "Master", 1, "1c8d0b21-0000-4000-8000-00000000020")
    workers = pytorch_pods(job, "Worker", 2, "1c8d0b21-0000-4000-8000-00000000030")

    results = {pod["metadata"]["name"]: group_pod(OwnerChain(pod, [job])) for pod in master + workers}

    expected_spec = {
        "minMember": 3,
        "queue": "default-queue",
        "priorityClassName": "train",
        "subGroups": [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 2}],
    }
    for metadata in results.values():
        manifest = metadata.to_manifest()
        assert manifest["metadata"]["name"] == "pg-pytorch-dist-mnist-nccl-1c8d0b21-0000-4000-8000-000000000001"
        assert manifest["metadata"]["labels"] == {"kai.scheduler/queue": "default-queue"}
        assert manifest["spec"] == expected_spec
    assert results["pytorch-dist-mnist-nccl-master-0"].pod_subgroup == "master"
    assert results["pytorch-dist-mnist-nccl-worker-1"].pod_patch()["metadata"]["labels"] == {
        "kai.scheduler/subgroup-name": "worker"
    }


def test_elastic_pytorch_job_example_needs_only_min_replicas() -> None:
    job = admitted(only("docs__elastic__pytorch-elastic.yaml"), "2d9e1c32-0000-4000-8000-000000000001")
    workers = pytorch_pods(job, "Worker", 2, "2d9e1c32-0000-4000-8000-00000000030")

    for pod in workers:
        metadata = group_pod(OwnerChain(pod, [job]))
        assert metadata.name == "pg-elastic-example-imagenet-2d9e1c32-0000-4000-8000-000000000001"
        assert metadata.min_member == 1
        assert metadata.to_manifest()["spec"]["subGroups"] == [{"name": "worker", "minMember": 1}]
        assert metadata.pod_subgroup == "worker"


def test_ray_job_example_gangs_the_head_and_min_replicas_workers() -> None:
    ray_job = admitted(only("examples__ray__ray-job.yaml"), "3e0f2d43-0000-4000-8000-000000000001")
    cluster_name = "rayjob-sample-x8m2k"
    ray_job["status"] = {"rayClusterName": cluster_name, "jobDeploymentStatus": "Initializing"}
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": cluster_name,
            "namespace": "default",
            "uid": "3e0f2d43-0000-4000-8000-000000000002",
            "labels": {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "rayjob-sample"},
            "ownerReferences": [owner_ref(ray_job)],
        },
        "spec": ray_job["spec"]["rayClusterSpec"],
    }
    head = pod_from_template(
        cluster,
        cluster["spec"]["headGroupSpec"]["template"],
        f"{cluster_name}-head",
        "3e0f2d43-0000-4000-8000-000000000003",
        {"ray.io/cluster": cluster_name, "ray.io/group": "headgroup", "ray.io/node-type": "head"},
    )
    worker = pod_from_template(
        cluster,
        cluster["spec"]["workerGroupSpecs"][0]["template"],
        f"{cluster_name}-gpu-workers-worker-7v2lq",
        "3e0f2d43-0000-4000-8000-000000000004",
        {"ray.io/cluster": cluster_name, "ray.io/group": "gpu-workers", "ray.io/node-type": "worker"},
    )

    results: dict[str, PodGroupMetadata] = {}
    for pod in (head, worker):
        results[pod["metadata"]["name"]] = group_pod(OwnerChain(pod, [cluster, ray_job]))

    for metadata in results.values():
        manifest = metadata.to_manifest()
        assert manifest["metadata"]["name"] == "pg-rayjob-sample-3e0f2d43-0000-4000-8000-000000000001"
        assert manifest["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
        assert manifest["spec"] == {
            "minMember": 2,
            "queue": "default-queue",
            "priorityClassName": "train",
            "subGroups": [{"name": "headgroup", "minMember": 1}, {"name": "gpu-workers", "minMember": 1}],
        }
    assert results[f"{cluster_name}-head"].pod_subgroup == "headgroup"
    assert results[f"{cluster_name}-gpu-workers-worker-7v2lq"].pod_subgroup == "gpu-workers"


@pytest.mark.parametrize(
    ("file_name", "priority_class", "queue"),
    [
        ("docs__quickstart__pods__cpu-only-pod.yaml", "train", "default-queue"),
        ("docs__quickstart__pods__gpu-pod.yaml", "train", "default-queue"),
        ("docs__priority__example__build-priority-pod.yaml", "build", "default-queue"),
        ("docs__priority__example__train-priority-pod.yaml", "train", "default-queue"),
        ("docs__gpu-sharing__gpu-sharing.yaml", "train", "default-queue"),
        ("docs__gpu-sharing__gpu-memory.yaml", "train", "default-queue"),
        ("docs__gpu-sharing__gpu-sharing-init-container.yaml", "train", "default-queue"),
        ("docs__gpu-sharing__gpu-sharing-non-default-container.yaml", "train", "default-queue"),
    ],
)
def test_bare_pod_examples_get_a_podgroup_each(file_name: str, priority_class: str, queue: str) -> None:
    pod = admitted(only(file_name), "4f1a3e54-0000-4000-8000-000000000001")
    name = pod["metadata"]["name"]

    manifest = group_pod(OwnerChain(pod)).to_manifest()

    assert manifest["metadata"]["name"] == f"pg-{name}-4f1a3e54-0000-4000-8000-000000000001"
    assert manifest["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": "4f1a3e54-0000-4000-8000-000000000001"}
    ]
    assert manifest["spec"] == {"minMember": 1, "queue": queue, "priorityClassName": priority_class}


def test_time_based_fairshare_example_pods_go_to_their_team_queues() -> None:
    pods = kai_example("examples__time-based-fairshare__two-queue-oscillation__jobs.yaml")
    queues = {}
    for index, pod in enumerate(pods):
        pod = admitted(pod, f"5a2b4f65-0000-4000-8000-00000000000{index}", namespace="workloads")
        queues[pod["metadata"]["name"]] = group_pod(OwnerChain(pod)).queue

    assert set(queues.values()) == {"team-a", "team-b"}
    assert all(queue == name.split("-training")[0] for name, queue in queues.items())


def test_deployment_built_from_the_gpu_pod_example_groups_each_replica() -> None:
    gpu_pod = only("docs__quickstart__pods__gpu-pod.yaml")
    deployment = admitted(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "gpu-service", "labels": {"kai.scheduler/queue": "default-queue"}},
            "spec": {"replicas": 2, "template": {"metadata": gpu_pod["metadata"], "spec": gpu_pod["spec"]}},
        },
        "6b3c5076-0000-4000-8000-000000000001",
    )
    replica_set = admitted(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "gpu-service-7f9c", "ownerReferences": [owner_ref(deployment)]},
            "spec": deployment["spec"],
        },
        "6b3c5076-0000-4000-8000-000000000002",
    )
    pod = pod_from_template(
        replica_set, deployment["spec"]["template"], "gpu-service-7f9c-abcde", "6b3c5076-0000-4000-8000-000000000003"
    )

    metadata = group_pod(OwnerChain(pod, [replica_set, deployment]))

    assert metadata.name == "pg-gpu-service-7f9c-abcde-6b3c5076-0000-4000-8000-000000000003"
    assert metadata.priority_class_name == "inference"
    assert metadata.queue == "default-queue"
