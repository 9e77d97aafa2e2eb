"""The KAI-format example workloads (examples/kai/): the pods their controllers create, and their PodGroups."""

from __future__ import annotations

from typing import Any

import pytest
from podgrouper_fixtures import (
    admitted,
    kai_example,
    owner_ref,
    pod_from_template,
    pytorch_pods,
    ray_cluster_of,
    ray_pods,
)

from kai.podgrouper import OwnerChain, PodGroupMetadata, group_pod


def only(file_name: str) -> dict[str, Any]:
    (obj,) = kai_example(file_name)
    return obj


def test_batch_job_example_is_one_podgroup_of_independent_pods() -> None:
    job = admitted(only("batch/job.yaml"), "0b7c9a10-0000-4000-8000-000000000001")
    template = job["spec"]["template"]
    pods = [
        pod_from_template(
            job,
            template,
            f"nightly-eval-{suffix}",
            f"0b7c9a10-0000-4000-8000-00000000010{i}",
            {"job-name": "nightly-eval", "batch.kubernetes.io/job-name": "nightly-eval"},
        )
        for i, suffix in enumerate(["2xk8f", "m9q4t", "p7w3z"])
    ]

    groups = [group_pod(OwnerChain(pod, [job])) for pod in pods]

    for metadata in groups:
        assert metadata.to_manifest()["metadata"]["name"] == "pg-nightly-eval-0b7c9a10-0000-4000-8000-000000000001"
        assert metadata.to_manifest()["spec"] == {
            "minMember": 1,
            "queue": "default-queue",
            "priorityClassName": "train",
        }
        assert metadata.owner.kind == "Job"


def test_pytorch_job_example_is_a_gang_of_master_and_workers() -> None:
    job = admitted(only("batch/pytorch-job.yaml"), "1c8d0b21-0000-4000-8000-000000000001")
    master = pytorch_pods(job, "Master", 1, "1c8d0b21-0000-4000-8000-00000000020")
    workers = pytorch_pods(job, "Worker", 3, "1c8d0b21-0000-4000-8000-00000000030")

    results = {pod["metadata"]["name"]: group_pod(OwnerChain(pod, [job])) for pod in master + workers}

    expected_spec = {
        "minMember": 4,
        "queue": "default-queue",
        "priorityClassName": "train",
        "subGroups": [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 3}],
    }
    for metadata in results.values():
        manifest = metadata.to_manifest()
        assert manifest["metadata"]["name"] == "pg-mnist-ddp-1c8d0b21-0000-4000-8000-000000000001"
        assert manifest["metadata"]["labels"] == {"kai.scheduler/queue": "default-queue"}
        assert manifest["spec"] == expected_spec
    assert results["mnist-ddp-master-0"].pod_subgroup == "master"
    assert results["mnist-ddp-worker-2"].pod_patch()["metadata"]["labels"] == {"kai.scheduler/subgroup-name": "worker"}


def test_elastic_pytorch_job_example_needs_only_min_replicas() -> None:
    job = admitted(only("elastic/pytorch-elastic.yaml"), "2d9e1c32-0000-4000-8000-000000000001")
    workers = pytorch_pods(job, "Worker", 3, "2d9e1c32-0000-4000-8000-00000000030")

    for pod in workers:
        metadata = group_pod(OwnerChain(pod, [job]))
        assert metadata.name == "pg-elastic-resnet-2d9e1c32-0000-4000-8000-000000000001"
        assert metadata.min_member == 2  # elasticPolicy.minReplicas, not the 3 replicas
        assert metadata.to_manifest()["spec"]["subGroups"] == [{"name": "worker", "minMember": 2}]
        assert metadata.pod_subgroup == "worker"


def test_ray_job_example_gangs_the_head_and_min_replicas_workers() -> None:
    ray_job = admitted(only("ray/ray-job.yaml"), "3e0f2d43-0000-4000-8000-000000000001")
    cluster = ray_cluster_of(ray_job, "ray-tune-x8m2k", "3e0f2d43-0000-4000-8000-000000000002")
    pods = ray_pods(cluster, "3e0f2d43-0000-4000-8000-00000000010")
    assert [pod["metadata"]["name"] for pod in pods] == [
        "ray-tune-x8m2k-head",
        "ray-tune-x8m2k-gpu-group-worker-0",
        "ray-tune-x8m2k-gpu-group-worker-1",
        "ray-tune-x8m2k-gpu-group-worker-2",
    ]

    results: dict[str, PodGroupMetadata] = {}
    for pod in pods:
        results[pod["metadata"]["name"]] = group_pod(OwnerChain(pod, [cluster, ray_job]))

    for metadata in results.values():
        manifest = metadata.to_manifest()
        assert manifest["metadata"]["name"] == "pg-ray-tune-3e0f2d43-0000-4000-8000-000000000001"
        assert manifest["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
        assert manifest["spec"] == {
            "minMember": 3,  # the head + minReplicas (2) of the 3 workers
            "queue": "default-queue",
            "priorityClassName": "train",
            "subGroups": [{"name": "headgroup", "minMember": 1}, {"name": "gpu-group", "minMember": 2}],
        }
    assert results["ray-tune-x8m2k-head"].pod_subgroup == "headgroup"
    assert results["ray-tune-x8m2k-gpu-group-worker-1"].pod_subgroup == "gpu-group"


@pytest.mark.parametrize(
    ("file_name", "priority_class", "queue"),
    [
        ("quickstart/cpu-pod.yaml", "train", "default-queue"),
        ("quickstart/gpu-pod.yaml", "train", "default-queue"),
        ("priority/build-pod.yaml", "build", "team"),
        ("priority/train-pod.yaml", "train", "team"),
        ("gpu-sharing/gpu-fraction.yaml", "train", "default-queue"),
        ("gpu-sharing/gpu-memory.yaml", "train", "default-queue"),
        ("gpu-sharing/gpu-fraction-init-container.yaml", "train", "default-queue"),
        ("gpu-sharing/gpu-fraction-named-container.yaml", "train", "default-queue"),
        ("gpu-sharing/gpu-fraction-mps.yaml", "train", "default-queue"),
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
    pods = kai_example("time-based-fairshare/jobs.yaml")
    queues = {}
    for index, pod in enumerate(pods):
        pod = admitted(pod, f"5a2b4f65-0000-4000-8000-00000000000{index}", namespace="workloads")
        queues[pod["metadata"]["name"]] = group_pod(OwnerChain(pod)).queue

    assert queues == {"team-x-sweep": "team-x", "team-y-sweep": "team-y"}


def test_deployment_built_from_the_gpu_pod_example_groups_each_replica() -> None:
    gpu_pod = only("quickstart/gpu-pod.yaml")
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
