"""Kubernetes' own workloads: bare Pod, Spark, batch Job, CronJob, Deployment, StatefulSet, ReplicaSet, unknown kinds.

Expected PodGroups are written out from KAI's podgrouper rules (kai/podgrouper/NOTES.md for where kai differs).
"""

from __future__ import annotations

import pytest
from podgrouper_fixtures import chain_for, find, load

from kai.podgrouper import GroupingError, OwnerChain, group_pod

CORE = load("core")
BATCH = load("batch")


def test_cronjob_pods_are_grouped_per_job_run() -> None:
    metadata = group_pod(chain_for(CORE, "nightly-eval-29383200-x7k2p"))

    assert metadata.to_manifest() == {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": "pg-nightly-eval-29383200-6f1c0b2e-0002-4c3a-9f00-000000000002",
            "namespace": "team-a",
            "labels": {"app": "nightly-eval"},
            "annotations": {
                "kai.scheduler/top-owner-metadata": "name: nightly-eval-29383200\n"
                "uid: 6f1c0b2e-0002-4c3a-9f00-000000000002\ngroup: batch\nversion: v1\nkind: Job\n",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "nightly-eval-29383200",
                    "uid": "6f1c0b2e-0002-4c3a-9f00-000000000002",
                }
            ],
        },
        # The queue label sits on the CronJob only: kai still finds it (KAI would use default-queue).
        "spec": {"minMember": 1, "queue": "team-a", "priorityClassName": "train"},
    }
    assert metadata.pod_patch() == {
        "metadata": {"annotations": {"pod-group-name": "pg-nightly-eval-29383200-6f1c0b2e-0002-4c3a-9f00-000000000002"}}
    }


@pytest.mark.parametrize(
    ("pod_name", "pod_uid"),
    [
        ("vllm-5d8f7c9b6d-4xq9z", "7a2d1c3e-0003-4d4b-8e11-000000000003"),
        ("vllm-5d8f7c9b6d-b7hnm", "7a2d1c3e-0004-4d4b-8e11-000000000004"),
    ],
)
def test_each_deployment_pod_is_its_own_inference_podgroup(pod_name: str, pod_uid: str) -> None:
    manifest = group_pod(chain_for(CORE, pod_name)).to_manifest()

    assert manifest["metadata"] == {
        "name": f"pg-{pod_name}-{pod_uid}",
        "namespace": "serving",
        "labels": {"app": "vllm", "kai.scheduler/queue": "inference-queue"},
        "annotations": {
            "kai.scheduler/top-owner-metadata": "name: vllm\nuid: 7a2d1c3e-0001-4d4b-8e11-000000000001\n"
            "group: apps\nversion: v1\nkind: Deployment\n",
            "deployment.kubernetes.io/revision": "1",
        },
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}],
    }
    assert manifest["spec"] == {"minMember": 1, "queue": "inference-queue", "priorityClassName": "inference"}


def test_statefulset_pods_share_one_podgroup() -> None:
    metadata = group_pod(chain_for(CORE, "etcd-bench-2"))

    assert metadata.name == "pg-etcd-bench-8b3e2d4f-0001-4e5c-9f22-000000000001"
    assert metadata.owner.kind == "StatefulSet"
    assert metadata.labels == {"app": "etcd-bench"}
    assert (metadata.min_member, metadata.queue, metadata.priority_class_name) == (1, "team-b", "train")


def test_bare_replicaset_uses_the_default_grouper() -> None:
    metadata = group_pod(chain_for(CORE, "workers-8kq2d"))

    assert metadata.name == "pg-workers-8b3e2d4f-0010-4e5c-9f22-000000000010"
    assert (metadata.min_member, metadata.queue, metadata.priority_class_name) == (1, "default-queue", "train")


@pytest.mark.parametrize("pod_name", ["spark-pi-driver", "spark-pi-4c1e2a8f0b-exec-1"])
def test_spark_driver_and_executors_form_one_podgroup_named_by_the_app_selector(pod_name: str) -> None:
    metadata = group_pod(chain_for(CORE, pod_name))

    assert metadata.name == "spark-3b9a1c0e5f2d4a7b8c6d"
    assert metadata.owner.name == "spark-pi-driver"
    assert metadata.queue == "analytics"
    assert metadata.min_member == 1


def test_unknown_kind_gets_the_default_podgroup_with_topology_from_annotations() -> None:
    manifest = group_pod(chain_for(CORE, "gadget-0")).to_manifest()

    assert manifest["metadata"]["name"] == "pg-gadget-a1b2c3d4-0001-4a5b-9c6d-000000000001"
    assert manifest["metadata"]["ownerReferences"][0]["kind"] == "Widget"
    assert manifest["metadata"]["annotations"]["kai.scheduler/topology"] == "cluster-topology"
    assert manifest["spec"] == {
        "minMember": 1,
        "queue": "team-c",
        "priorityClassName": "train",
        "topologyConstraint": {
            "topology": "cluster-topology",
            "requiredTopologyLevel": "topology.kubernetes.io/zone",
        },
    }


# ---------------------------------------------------------------------------------------------------------
# batch/v1 Job


@pytest.mark.parametrize("pod_name", ["resnet-sweep-0-4kx7q", "resnet-sweep-1-h2m8d", "resnet-sweep-2-pq6zt"])
def test_all_pods_of_a_job_share_one_podgroup(pod_name: str) -> None:
    metadata = group_pod(chain_for(BATCH, pod_name))

    assert metadata.name == "pg-resnet-sweep-c1d2e3f4-0001-4a1b-8c2d-000000000001"
    assert metadata.owner.kind == "Job"
    assert metadata.min_member == 1
    assert metadata.queue == "research"
    assert metadata.priority_class_name == "build-preemptible"
    assert metadata.preemptibility == "preemptible"
    assert metadata.labels == {"team": "research", "kai.scheduler/queue": "research", "user": "ada"}


def test_job_min_member_override_annotation() -> None:
    metadata = group_pod(chain_for(BATCH, "allreduce-check-0-zz9xk"))

    assert metadata.name == "pg-allreduce-check-c1d2e3f4-0010-4a1b-8c2d-000000000010"
    assert metadata.min_member == 4


def test_job_keeps_a_per_pod_podgroup_made_by_an_older_podgrouper() -> None:
    legacy = "pg-resnet-sweep-1-h2m8d-c1d2e3f4-0001-4a1b-8c2d-000000000001"
    chain = chain_for(BATCH, "resnet-sweep-1-h2m8d", existing_podgroups={legacy: {"kind": "PodGroup"}})

    assert group_pod(chain).name == legacy
    other = chain_for(BATCH, "resnet-sweep-0-4kx7q", existing_podgroups={legacy: {"kind": "PodGroup"}})
    assert group_pod(other).name == "pg-resnet-sweep-c1d2e3f4-0001-4a1b-8c2d-000000000001"


def test_job_with_an_invalid_min_member_annotation_names_the_annotation() -> None:
    objects = load("batch")
    job = find(objects, "Job", "allreduce-check")
    job["metadata"]["annotations"]["kai.scheduler/batch-min-member"] = "four"
    pod = find(objects, "Pod", "allreduce-check-0-zz9xk")

    with pytest.raises(GroupingError) as error:
        group_pod(OwnerChain(pod, [job]))
    assert error.value.kind == "Job"
    assert error.value.name == "allreduce-check"
    assert error.value.field == "metadata.annotations[kai.scheduler/batch-min-member]"
    assert str(error.value).startswith("Job ml/allreduce-check: metadata.annotations[kai.scheduler/batch-min-member]:")
