"""Kubeflow: PyTorchJob (segments), TFJob, MPIJob v1/v2beta1, XGBoostJob, JAXJob, Notebook."""

from __future__ import annotations

from typing import Any

import pytest
from podgrouper_fixtures import chain_for, find, load, pod_from_template

from kai.podgrouper import GroupingError, OwnerChain, RelatedObjects, group_pod

KUBEFLOW = load("kubeflow")


def job(kind: str, name: str) -> dict[str, Any]:
    return find(KUBEFLOW, kind, name)


def operator_pod(owner: dict[str, Any], key: str, replica_type: str, index: int, **extra_labels: str) -> dict[str, Any]:
    """A pod as the training operator creates it for `replica_type` number `index`."""
    name = owner["metadata"]["name"]
    role = replica_type.lower()
    labels = {
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/replica-type": role,
        "training.kubeflow.org/replica-index": str(index),
        "training.kubeflow.org/job-role": role,
        **extra_labels,
    }
    template = owner["spec"][key][replica_type]["template"]
    uid = f"{owner['metadata']['uid'][:-4]}{role[:1]}{index:03d}"
    return pod_from_template(owner, template, f"{name}-{role}-{index}", uid, labels)


def group_of(owner: dict[str, Any], pod: dict[str, Any], **extra: Any):
    return group_pod(OwnerChain(pod, [owner], **extra))


# ---------------------------------------------------------------------------------------------------------
# PyTorchJob with worker segments


@pytest.mark.parametrize(
    ("replica_type", "index", "subgroup"),
    [("Master", 0, "master"), ("Worker", 0, "worker-0"), ("Worker", 3, "worker-1"), ("Worker", 4, "worker-2")],
)
def test_pytorch_workers_split_into_segments_with_their_topology(replica_type: str, index: int, subgroup: str) -> None:
    pytorch = job("PyTorchJob", "llama-pretrain")
    pod = operator_pod(pytorch, "pytorchReplicaSpecs", replica_type, index)

    metadata = group_of(pytorch, pod)

    segment_topology = {"topology": "dc-topology", "requiredTopologyLevel": "nvidia.com/gpu.clique"}
    assert metadata.to_manifest()["spec"] == {
        "minMember": 6,
        "queue": "research",
        "priorityClassName": "train",
        "topologyConstraint": {"topology": "dc-topology", "preferredTopologyLevel": "topology.kubernetes.io/zone"},
        "subGroups": [
            {"name": "master", "minMember": 1},
            {"name": "worker"},
            {"name": "worker-0", "minMember": 2, "parent": "worker", "topologyConstraint": segment_topology},
            {"name": "worker-1", "minMember": 2, "parent": "worker", "topologyConstraint": segment_topology},
            {"name": "worker-2", "minMember": 1, "parent": "worker", "topologyConstraint": segment_topology},
        ],
    }
    assert metadata.name == "pg-llama-pretrain-d1e2f3a4-0006-4b2c-8d3e-000000000006"
    assert metadata.pod_subgroup == subgroup


def test_pytorch_scheduling_policy_min_available_wins_and_workers_need_the_rest() -> None:
    pytorch = job("PyTorchJob", "llama-pretrain")
    del pytorch["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]
    pytorch["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 4}
    pytorch["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 5}

    metadata = group_of(pytorch, operator_pod(pytorch, "pytorchReplicaSpecs", "Worker", 1))

    assert metadata.min_member == 4
    assert [sg.to_manifest() for sg in metadata.sub_groups] == [
        {"name": "master", "minMember": 1},
        {"name": "worker", "minMember": 3},
    ]
    assert metadata.pod_subgroup == "worker"


def test_pytorch_worker_without_replica_index_cannot_be_placed_in_a_segment() -> None:
    pytorch = job("PyTorchJob", "llama-pretrain")
    pod = operator_pod(pytorch, "pytorchReplicaSpecs", "Worker", 2)
    del pod["metadata"]["labels"]["training.kubeflow.org/replica-index"]

    with pytest.raises(GroupingError) as error:
        group_of(pytorch, pod)
    assert error.value.kind == "Pod"
    assert error.value.field == "metadata.labels[training.kubeflow.org/replica-index]"


# ---------------------------------------------------------------------------------------------------------
# TFJob, XGBoostJob, JAXJob


def test_tfjob_gang_is_the_sum_of_its_replicas() -> None:
    tfjob = job("TFJob", "mnist-tf")

    for replica_type, index in [("PS", 0), ("Worker", 1)]:
        metadata = group_of(tfjob, operator_pod(tfjob, "tfReplicaSpecs", replica_type, index))
        assert metadata.name == "pg-mnist-tf-d1e2f3a4-0001-4b2c-8d3e-000000000001"
        assert (metadata.min_member, metadata.queue, metadata.sub_groups) == (3, "research", ())
        assert metadata.pod_patch() == {"metadata": {"annotations": {"pod-group-name": metadata.name}}}


def test_tfjob_with_zero_replicas_is_an_error_naming_the_field() -> None:
    tfjob = job("TFJob", "mnist-tf")
    pod = operator_pod(tfjob, "tfReplicaSpecs", "PS", 0)
    tfjob["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 0

    with pytest.raises(GroupingError) as error:
        group_of(tfjob, pod)
    assert (error.value.kind, error.value.namespace, error.value.name) == ("TFJob", "ml", "mnist-tf")
    assert error.value.field == "spec.tfReplicaSpecs.Worker.replicas"
    assert "0" in error.value.problem


def test_xgboostjob_needs_master_and_worker() -> None:
    xgb = job("XGBoostJob", "xgboost-iris")
    assert group_of(xgb, operator_pod(xgb, "xgbReplicaSpecs", "Worker", 2)).min_member == 4

    pod = operator_pod(xgb, "xgbReplicaSpecs", "Worker", 0)
    del xgb["spec"]["xgbReplicaSpecs"]["Master"]
    with pytest.raises(GroupingError, match=r"XGBoostJob ml/xgboost-iris: spec\.xgbReplicaSpecs\.Master: is required"):
        group_of(xgb, pod)


def test_jaxjob_uses_scheduling_policy_and_the_owner_priority_label() -> None:
    jax = job("JAXJob", "jax-simple")

    metadata = group_of(jax, operator_pod(jax, "jaxReplicaSpecs", "Worker", 3))

    assert (metadata.min_member, metadata.priority_class_name) == (2, "build")


# ---------------------------------------------------------------------------------------------------------
# MPIJob


def test_mpijob_v2beta1_waiting_for_workers_does_not_count_the_launcher_yet() -> None:
    mpijob = job("MPIJob", "pi")
    worker = operator_pod(mpijob, "mpiReplicaSpecs", "Worker", 0)

    metadata = group_of(mpijob, worker)

    assert metadata.name == "pg-pi-d1e2f3a4-0002-4b2c-8d3e-000000000002"
    assert metadata.min_member == 4


def test_mpijob_counts_the_launcher_once_it_exists() -> None:
    mpijob = job("MPIJob", "pi")
    worker = operator_pod(mpijob, "mpiReplicaSpecs", "Worker", 0)
    launcher = operator_pod(mpijob, "mpiReplicaSpecs", "Launcher", 0)

    assert group_of(mpijob, worker, related=RelatedObjects(mpi_launcher_pods=[launcher])).min_member == 5
    assert group_of(mpijob, launcher).min_member == 5  # the launcher pod itself is live
    launcher["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert group_of(mpijob, worker, related=RelatedObjects(mpi_launcher_pods=[launcher])).min_member == 4


def test_mpijob_with_launcher_at_creation_counts_every_replica() -> None:
    mpijob = job("MPIJob", "pi")
    mpijob["spec"]["launcherCreationPolicy"] = "AtStartup"

    assert group_of(mpijob, operator_pod(mpijob, "mpiReplicaSpecs", "Worker", 1)).min_member == 5


def test_mpijob_v1_without_launcher_is_an_error() -> None:
    mpijob = job("MPIJob", "horovod-broken")

    with pytest.raises(GroupingError) as error:
        group_of(mpijob, operator_pod(mpijob, "mpiReplicaSpecs", "Worker", 0))
    assert error.value.field == "spec.mpiReplicaSpecs.Launcher"


# ---------------------------------------------------------------------------------------------------------
# Notebook


def test_notebook_is_grouped_with_build_priority() -> None:
    metadata = group_pod(chain_for(KUBEFLOW, "jupyter-ada-0"))

    assert metadata.name == "pg-jupyter-ada-d1e2f3a4-0010-4b2c-8d3e-000000000010"
    assert metadata.owner.kind == "Notebook"
    assert (metadata.min_member, metadata.priority_class_name, metadata.queue) == (1, "build", "default-queue")
    assert metadata.labels == {"app": "jupyter-ada"}
