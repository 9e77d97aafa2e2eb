"""The controller's pure parts: the PodGroup update patch, the pod patch, event filtering, the work queue."""

from __future__ import annotations

import threading
from typing import Any

from kai.api import keys
from kai.podgrouper import GroupingOptions, OwnerReference, PodGroupMetadata
from kai.podgrouper.controller import _grouping_inputs_changed, pod_update, podgroup_update
from kai.podgrouper.controller_queue import WorkQueue

OPTIONS = GroupingOptions()


def desired(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "pg", "labels": {"kai.scheduler/queue": "research", "app": "x"},
                     "annotations": {keys.TOP_OWNER_METADATA_ANNOTATION: "name: j"},
                     "ownerReferences": [{"kind": "Job", "name": "j", "uid": "1"}]},
        "spec": {"minMember": 3, "queue": "research", "priorityClassName": "train", **spec},
    }


def test_update_keeps_user_fields_and_changes_the_workload_fields() -> None:
    current = {
        "metadata": {"name": "pg", "resourceVersion": "7",
                     "labels": {"kai.scheduler/queue": "by-hand", "kai.scheduler/node-pool": "a", "team": "t"},
                     "annotations": {keys.STALE_TIMESTAMP_ANNOTATION: "2026-01-01T00:00:00Z"},
                     "ownerReferences": [{"kind": "Job", "name": "j", "uid": "1"}]},
        "spec": {"minMember": 1, "queue": "by-hand", "priorityClassName": "train", "markUnschedulable": False,
                 "schedulingBackoff": 1, "preemptibility": "preemptible", "subGroups": [{"name": "a"}]},
    }
    want = desired()
    want["metadata"]["labels"]["kai.scheduler/node-pool"] = "b"
    assert podgroup_update(current, want, OPTIONS) == {
        "spec": {"minMember": 3, "preemptibility": None, "subGroups": None},
        "metadata": {"labels": {"app": "x"}, "annotations": {keys.TOP_OWNER_METADATA_ANNOTATION: "name: j"},
                     "resourceVersion": "7"},
    }


def test_update_fills_an_empty_queue_and_a_missing_owner() -> None:
    current = {"metadata": {"name": "pg", "resourceVersion": "3"}, "spec": {"minMember": 3}}
    patch = podgroup_update(current, desired(), OPTIONS)
    assert patch["spec"] == {"queue": "research", "priorityClassName": "train"}
    assert patch["metadata"]["ownerReferences"] == [{"kind": "Job", "name": "j", "uid": "1"}]


def test_no_patch_when_nothing_differs() -> None:
    want = desired()
    current = {**want, "metadata": {**want["metadata"], "resourceVersion": "9"}}
    assert podgroup_update(current, want, OPTIONS) == {}


def metadata(subgroup: str | None = None) -> PodGroupMetadata:
    return PodGroupMetadata("pg-a", "ml", OwnerReference("batch/v1", "Job", "a", "1"), 1, "q", "train",
                            pod_subgroup=subgroup)


def test_pod_patch_only_when_needed() -> None:
    pod: dict[str, Any] = {"metadata": {"annotations": {keys.POD_GROUP_ANNOTATION: "pg-a"}, "labels": {}}}
    assert pod_update(pod, metadata()) == {}
    assert pod_update(pod, metadata("workers")) == {"metadata": {
        "annotations": {keys.POD_GROUP_ANNOTATION: "pg-a"}, "labels": {keys.SUBGROUP_LABEL: "workers"}}}
    assert pod_update({"metadata": {}}, metadata())["metadata"]["annotations"] == {keys.POD_GROUP_ANNOTATION: "pg-a"}


def test_only_updates_that_matter_requeue_a_pod() -> None:
    grouped = {"metadata": {"annotations": {keys.POD_GROUP_ANNOTATION: "pg"}, "labels": {keys.SUBGROUP_LABEL: "w"}},
               "spec": {}}
    fresh = {"metadata": {"annotations": {}, "labels": {}}, "spec": {}}
    status_only = {**grouped, "status": {"phase": "Running"}}
    relabelled = {"metadata": {**grouped["metadata"], "labels": {keys.SUBGROUP_LABEL: "w", "a": "b"}}, "spec": {}}
    unlabelled = {"metadata": {"annotations": grouped["metadata"]["annotations"], "labels": {}}, "spec": {}}
    assert not _grouping_inputs_changed(fresh, grouped)  # our own patch
    assert not _grouping_inputs_changed(grouped, status_only)
    assert _grouping_inputs_changed(grouped, relabelled)
    assert _grouping_inputs_changed(grouped, unlabelled)  # someone removed the sub-group label
    assert _grouping_inputs_changed(grouped, fresh)  # someone removed the annotation


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_queue_deduplicates_and_never_hands_one_key_to_two_workers() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert queue.get(0) == "a"
    queue.add("a")  # while processing: held back until done
    assert queue.get(0) == "b"
    assert queue.get(0.01) is None
    queue.done("a")
    assert queue.get(0) == "a"


def test_queue_backoff_grows_per_key_and_resets_on_forget() -> None:
    clock = Clock()
    queue = WorkQueue(base=1.0, cap=8.0, clock=clock)
    assert [queue.when("k") for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert queue.when("other") == 1.0
    queue.forget("k")
    assert queue.when("k") == 1.0


def test_queue_bucket_limits_a_storm_of_retries() -> None:
    clock = Clock()
    queue = WorkQueue(base=0.0, qps=10.0, burst=2, clock=clock)
    delays = [queue.when(f"k{i}") for i in range(4)]
    assert delays[:2] == [0.0, 0.0] and delays[2] > 0 and delays[3] > delays[2]


def test_delayed_adds_arrive_and_shutdown_wakes_workers() -> None:
    queue = WorkQueue()
    queue.add_after("late", 0.05)
    assert queue.get(1.0) == "late"
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(queue.get()))
    worker.start()
    queue.shutdown()
    worker.join(1.0)
    assert results == [None]
