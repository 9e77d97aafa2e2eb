"""JobSet (in-order startup or not) and Kubeflow Trainer's TrainJob, grouped through its JobSet."""

from __future__ import annotations

import pytest
from podgrouper_fixtures import chain_for, find, load

from kai.podgrouper import GroupingError, OwnerChain, group_pod

JOBSET = load("jobset")
LLM_UID = "e2f3a4b5-0001-4c3d-9e4f-000000000001"


@pytest.mark.parametrize("pod_name", ["llm-train-workers-1-2-7xk2p", "llm-train-driver-0-0-m4q8z"])
def test_jobset_started_in_any_order_is_one_gang_of_all_replicated_jobs(pod_name: str) -> None:
    metadata = group_pod(chain_for(JOBSET, pod_name))

    # driver: 1 x min(1, 1) + workers: 2 x min(4, 4)
    assert metadata.name == f"pg-llm-train-{LLM_UID}"
    assert metadata.owner.kind == "JobSet"
    assert (metadata.min_member, metadata.queue, metadata.priority_class_name) == (9, "research", "train")


@pytest.mark.parametrize(
    ("pod_name", "name", "min_member"),
    [
        ("llm-train-workers-1-2-7xk2p", f"pg-llm-train-{LLM_UID}-workers", 8),
        ("llm-train-driver-0-0-m4q8z", f"pg-llm-train-{LLM_UID}-driver", 1),
    ],
)
def test_jobset_started_in_order_gets_one_podgroup_per_replicated_job(
    pod_name: str, name: str, min_member: int
) -> None:
    objects = load("jobset")
    jobset = next(o for o in objects if o["kind"] == "JobSet" and o["metadata"]["name"] == "llm-train")
    jobset["spec"]["startupPolicy"]["startupPolicyOrder"] = "InOrder"

    metadata = group_pod(chain_for(objects, pod_name))

    assert (metadata.name, metadata.min_member) == (name, min_member)


def test_jobset_completions_below_parallelism_bound_the_gang() -> None:
    objects = load("jobset")
    jobset = next(o for o in objects if o["kind"] == "JobSet" and o["metadata"]["name"] == "llm-train")
    jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["completions"] = 3

    assert group_pod(chain_for(objects, "llm-train-workers-1-2-7xk2p")).min_member == 1 + 2 * 3


def test_jobset_pod_without_replicated_job_label_is_an_error() -> None:
    pod = find(JOBSET, "Pod", "llm-train-workers-1-2-7xk2p")
    del pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]
    owners = [find(JOBSET, "Job", "llm-train-workers-1"), find(JOBSET, "JobSet", "llm-train")]

    with pytest.raises(GroupingError) as error:
        group_pod(OwnerChain(pod, owners))
    assert error.value.field == "metadata.labels[jobset.sigs.k8s.io/replicatedjob-name]"


def test_trainjob_is_skipped_and_grouped_by_its_jobset_with_the_trainjob_labels() -> None:
    metadata = group_pod(chain_for(JOBSET, "bert-finetune-node-0-1-5hd9c"))

    assert metadata.to_manifest() == {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": "pg-bert-finetune-e2f3a4b5-0011-4c3d-9e4f-000000000011",
            "namespace": "ml",
            "labels": {
                "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
                "kai.scheduler/queue": "nlp",
                "priorityClassName": "build-preemptible",
            },
            "annotations": {
                "kai.scheduler/top-owner-metadata": "name: bert-finetune\nuid: e2f3a4b5-0011-4c3d-9e4f-000000000011\n"
                "group: jobset.x-k8s.io\nversion: v1alpha2\nkind: JobSet\n"
            },
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "bert-finetune",
                    "uid": "e2f3a4b5-0011-4c3d-9e4f-000000000011",
                }
            ],
        },
        "spec": {"minMember": 2, "queue": "nlp", "priorityClassName": "build-preemptible"},
    }
