"""The shared rules every kind follows: queue, priority class, preemptibility, labels, annotations."""

from __future__ import annotations

from typing import Any

import pytest
from podgrouper_fixtures import owner_ref

from kai.podgrouper import (
    GroupingError,
    GroupingOptions,
    OwnerChain,
    WorkloadDefaults,
    group_pod,
    parse_default_priorities,
)


def job_chain(
    job_labels: dict[str, str] | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
    pod_annotations: dict[str, str] | None = None,
    cronjob_labels: dict[str, str] | None = None,
    **chain_fields: Any,
) -> OwnerChain:
    """A CronJob -> Job -> Pod chain (or Job -> Pod without cronjob labels) with the given labels."""
    owners: list[dict[str, Any]] = []
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "f9a0b1c2-0001", "labels": job_labels or {}},
    }
    if cronjob_labels is not None:
        cronjob = {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "team-a", "uid": "f9a0b1c2-0000", "labels": cronjob_labels},
        }
        job["metadata"]["ownerReferences"] = [owner_ref(cronjob)]
        owners = [job, cronjob]
    else:
        owners = [job]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-x2k9d",
            "namespace": "team-a",
            "uid": "f9a0b1c2-0002",
            "labels": pod_labels or {},
            "annotations": pod_annotations or {},
            "ownerReferences": [owner_ref(job)],
        },
        "spec": {"schedulerName": "kai-scheduler", **(pod_spec or {})},
    }
    return OwnerChain(pod, owners, **chain_fields)


# ---------------------------------------------------------------------------------------------------------
# Queue


@pytest.mark.parametrize(
    ("chain", "queue"),
    [
        (job_chain({"kai.scheduler/queue": "owner-q"}, {"kai.scheduler/queue": "pod-q"}), "owner-q"),
        (job_chain({}, {"kai.scheduler/queue": "pod-q", "project": "proj"}), "pod-q"),
        (job_chain({"project": "proj"}, {"kai.scheduler/queue": "pod-q"}), "pod-q"),
        (job_chain({}, {}, cronjob_labels={"kai.scheduler/queue": "cron-q"}), "cron-q"),
        (job_chain({"project": "proj"}, {}), "proj"),
        (job_chain({}, {"project": "proj", "kai.scheduler/node-pool": "h100"}), "proj-h100"),
        (job_chain({}, {}, namespace_labels={"kai.scheduler/queue": "ns-q"}), "ns-q"),
        (job_chain({"project": "proj"}, {}, namespace_labels={"kai.scheduler/queue": "ns-q"}), "proj"),
        (job_chain({}, {}), "default-queue"),
    ],
)
def test_queue_precedence(chain: OwnerChain, queue: str) -> None:
    assert group_pod(chain).queue == queue


def test_queue_label_key_and_default_queue_are_configurable() -> None:
    options = GroupingOptions(queue_label_key="runai/queue", default_queue="fallback")

    assert group_pod(job_chain({}, {"runai/queue": "team-a"}), options).queue == "team-a"
    assert group_pod(job_chain({}, {"kai.scheduler/queue": "ignored"}), options).queue == "fallback"


# ---------------------------------------------------------------------------------------------------------
# Priority class and preemptibility


@pytest.mark.parametrize(
    ("chain", "priority"),
    [
        (job_chain({"priorityClassName": "inference"}, {"priorityClassName": "build"}), "inference"),
        (job_chain({}, {"priorityClassName": "build"}, {"priorityClassName": "inference"}), "build"),
        (job_chain({}, {}, {"priorityClassName": "build-preemptible"}), "build-preemptible"),
        (job_chain({}, {}, cronjob_labels={"priorityClassName": "build"}), "build"),
        (job_chain({}, {}), "train"),
    ],
)
def test_priority_class_precedence(chain: OwnerChain, priority: str) -> None:
    assert group_pod(chain).priority_class_name == priority


def test_priority_class_that_does_not_exist_is_skipped_with_a_warning() -> None:
    known = frozenset({"train", "build", "inference", "build-preemptible"})
    chain = job_chain({"priorityClassName": "urgent"}, {"priorityClassName": "build"}, priority_classes=known)

    metadata = group_pod(chain)

    assert metadata.priority_class_name == "build"
    assert metadata.warnings == ("Job train: priority class 'urgent' does not exist, ignored",)


def test_default_priorities_table_by_group_and_kind_then_by_kind() -> None:
    table = parse_default_priorities(
        '[{"typeName": "Job", "group": "batch", "priorityName": "build", "preemptibility": "Non-Preemptible"},'
        ' {"typeName": "Job", "priorityName": "inference"}]'
    )

    metadata = group_pod(job_chain(default_priorities=table))

    assert (metadata.priority_class_name, metadata.preemptibility) == ("build", "non-preemptible")
    by_kind_only = [WorkloadDefaults("Job", "", "inference")]
    assert group_pod(job_chain(default_priorities=by_kind_only)).priority_class_name == "inference"
    # An explicit label wins over the table.
    assert group_pod(job_chain({"priorityClassName": "train"}, default_priorities=table)).priority_class_name == "train"


def test_default_priorities_table_naming_a_missing_class_falls_back_to_the_kind_default() -> None:
    table = [WorkloadDefaults("Job", "batch", "gold")]

    assert (
        group_pod(job_chain(default_priorities=table, priority_classes=frozenset({"train"}))).priority_class_name
        == "train"
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", "data.types"),
        ('{"typeName": "Job"}', "data.types"),
        ('[{"group": "batch"}]', "data.types[0].typeName"),
    ],
)
def test_default_priorities_that_cannot_be_parsed_name_the_field(text: str, field: str) -> None:
    with pytest.raises(GroupingError) as error:
        parse_default_priorities(text)
    assert (error.value.kind, error.value.field) == ("ConfigMap", field)


def test_preemptibility_from_owner_then_pod_and_invalid_values_are_reported() -> None:
    assert group_pod(job_chain({"kai.scheduler/preemptibility": "non-preemptible"})).preemptibility == "non-preemptible"
    assert group_pod(job_chain({}, {"kai.scheduler/preemptibility": "preemptible"})).preemptibility == "preemptible"

    metadata = group_pod(
        job_chain({"kai.scheduler/preemptibility": "never"}, {"kai.scheduler/preemptibility": "preemptible"})
    )

    assert metadata.preemptibility == "preemptible"
    assert "never" in metadata.warnings[0]
    assert group_pod(job_chain()).to_manifest()["spec"].get("preemptibility") is None


# ---------------------------------------------------------------------------------------------------------
# Labels and annotations


def test_user_and_node_pool_come_from_the_pod_unless_the_owner_has_them() -> None:
    chain = job_chain(
        {"team": "a"}, {"user": "ada", "kai.scheduler/node-pool": "h100"}, pod_annotations={"user": "ada@example.com"}
    )

    metadata = group_pod(chain)

    assert metadata.labels == {"team": "a", "user": "ada", "kai.scheduler/node-pool": "h100"}
    assert metadata.annotations["user"] == "ada@example.com"
    owned = group_pod(
        job_chain(
            {"user": "bob", "kai.scheduler/node-pool": "a100"}, {"user": "ada", "kai.scheduler/node-pool": "h100"}
        )
    )
    assert (owned.labels["user"], owned.labels["kai.scheduler/node-pool"]) == ("bob", "a100")


def test_top_owner_metadata_quotes_values_yaml_would_misread() -> None:
    chain = job_chain()
    chain.owners[0]["metadata"]["uid"] = "12345"
    chain.owners[0]["metadata"]["name"] = "true"
    chain.pod["metadata"]["ownerReferences"][0]["uid"] = "12345"

    annotation = group_pod(chain).annotations["kai.scheduler/top-owner-metadata"]

    assert annotation == 'name: "true"\nuid: "12345"\ngroup: batch\nversion: v1\nkind: Job\n'
