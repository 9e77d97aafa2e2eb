"""Skipped top owners (Argo Workflow, Run:ai workloads), vendor kinds, and kinds KAI groups by default."""

from __future__ import annotations

import pytest
from podgrouper_fixtures import chain_for, load, owner_ref

from kai.podgrouper import OwnerChain, WorkloadDefaults, group_pod

WRAPPERS = load("wrappers")
ARGO_POD = "preprocess-xk2v9-main-1528437621"


def test_argo_workflow_is_skipped_and_its_pod_grouped_alone_with_the_workflow_labels() -> None:
    metadata = group_pod(chain_for(WRAPPERS, ARGO_POD))

    assert metadata.to_manifest()["metadata"] == {
        "name": f"pg-{ARGO_POD}-d7e8f9a0-0002-4b92-8ca3-000000000002",
        "namespace": "pipelines",
        "labels": {
            "workflows.argoproj.io/completed": "false",
            "workflows.argoproj.io/workflow": "preprocess-xk2v9",
            "kai.scheduler/queue": "pipelines",
            "team": "data",
        },
        "annotations": {
            "kai.scheduler/top-owner-metadata": f"name: {ARGO_POD}\nuid: d7e8f9a0-0002-4b92-8ca3-000000000002\n"
            'group: ""\nversion: v1\nkind: Pod\n',
            "workflows.argoproj.io/node-id": "preprocess-xk2v9",
            "workflows.argoproj.io/node-name": "preprocess-xk2v9",
            "workflows.argoproj.io/pod-name-format": "v2",
        },
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": ARGO_POD, "uid": "d7e8f9a0-0002-4b92-8ca3-000000000002"}
        ],
    }
    assert metadata.to_manifest()["spec"] == {"minMember": 1, "queue": "pipelines", "priorityClassName": "train"}


def test_runai_training_workload_is_skipped_for_its_runaijob() -> None:
    defaults = [WorkloadDefaults("TrainingWorkload", "run.ai", "build", "non-preemptible")]

    metadata = group_pod(chain_for(WRAPPERS, "train-ws-0-0", default_priorities=defaults))

    assert metadata.name == "pg-train-ws-0-d7e8f9a0-0011-4b92-8ca3-000000000011"
    assert metadata.owner.kind == "RunaiJob"
    # project label of the skipped workload + the pod's node pool; its kind's defaults apply.
    assert metadata.queue == "team-a-a100"
    assert (metadata.priority_class_name, metadata.preemptibility) == ("build", "non-preemptible")
    assert metadata.labels == {
        "project": "team-a",
        "priorityClassName": "build",
        "kai.scheduler/preemptibility": "non-preemptible",
        "kai.scheduler/node-pool": "a100",
    }


def test_runaijob_keeps_its_legacy_podgroup() -> None:
    legacy = "pg-train-ws-d7e8f9a0-0011-4b92-8ca3-000000000011"

    chain = chain_for(WRAPPERS, "train-ws-0-0", existing_podgroups={legacy: {"kind": "PodGroup"}})

    assert group_pod(chain).name == legacy


def test_amljob_min_member_is_the_node_count() -> None:
    metadata = group_pod(chain_for(WRAPPERS, "aml-train-worker-2"))

    assert (metadata.name, metadata.min_member) == ("pg-aml-train-d7e8f9a0-0020-4b92-8ca3-000000000020", 4)


def test_spotrequest_is_inference() -> None:
    metadata = group_pod(chain_for(WRAPPERS, "triton-0"))

    assert (metadata.name, metadata.priority_class_name) == (
        "pg-triton-d7e8f9a0-0030-4b92-8ca3-000000000030",
        "inference",
    )


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("machinelearning.seldon.io/v1", "SeldonDeployment"),
        ("machinelearning.seldon.io/v1alpha2", "SeldonDeployment"),
        ("kubevirt.io/v1", "VirtualMachineInstance"),
        ("workspace.devfile.io/v1alpha2", "DevWorkspace"),
        ("kubeflow.org/v1alpha1", "ScheduledWorkflow"),
        ("tekton.dev/v1", "TaskRun"),
    ],
)
def test_kinds_grouped_by_the_default_grouper(api_version: str, kind: str) -> None:
    owner = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "e8f9a0b1-0001-4ca3-9db4-000000000001",
            "labels": {"app": "w"},
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "w-0", "namespace": "ns", "uid": "e8f9a0b1-0002", "ownerReferences": [owner_ref(owner)]},
        "spec": {"schedulerName": "kai-scheduler"},
    }

    metadata = group_pod(OwnerChain(pod, [owner]))

    assert metadata.name == "pg-w-e8f9a0b1-0001-4ca3-9db4-000000000001"
    assert (metadata.min_member, metadata.priority_class_name, metadata.labels) == (1, "train", {"app": "w"})


def test_tekton_pipelinerun_groups_all_its_taskruns() -> None:
    run = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "build-and-test", "namespace": "ci", "uid": "e8f9a0b1-0010"},
    }
    task_run = {
        "apiVersion": "tekton.dev/v1",
        "kind": "TaskRun",
        "metadata": {
            "name": "build-and-test-unit",
            "namespace": "ci",
            "uid": "e8f9a0b1-0011",
            "ownerReferences": [owner_ref(run)],
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "build-and-test-unit-pod",
            "namespace": "ci",
            "uid": "e8f9a0b1-0012",
            "ownerReferences": [owner_ref(task_run)],
        },
        "spec": {"schedulerName": "kai-scheduler"},
    }

    assert group_pod(OwnerChain(pod, [task_run, run])).name == "pg-build-and-test-e8f9a0b1-0010"
