"""The builder converts what pods (and PodGroups) share once per distinct content: requests, labels,
tolerations, node selectors, a PodGroup's spec. Each pod still gets its own identity, node, status and
times, and a value that only looks like another (1 and True, 1 and 1.0, "1" and 1) is read as itself,
with its own problem when it is one. Through the builder (the live cache calls it on the API server's
objects, without the file loader's shape checks) and through `kai simulate`."""

from __future__ import annotations

import copy
from typing import Any

from kai.model import PodStatus
from kai.snapshot.builder import build_snapshot
from tests.scenario import node, pod, podgroup, queue, run

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def built(objects: list[dict[str, Any]]):
    return build_snapshot(objects, NOW)


def pods_by_name(result) -> dict[str, Any]:
    return {p.name: p for pg in result.snapshot.podgroups.values() for p in pg.pods}


def twin_pods() -> list[dict[str, Any]]:
    """Two pods of one gang written alike (requests, labels, tolerations, node selector), one running."""
    common: dict[str, Any] = {
        "group": "job",
        "gpus": 2,
        "cpu": "4",
        "memory": "8Gi",
        "labels": {"app": "train"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "node_selector": {"zone": "a"},
    }
    first = pod("job-0", node="n1", created="2025-12-31T10:00:00Z", **common)
    second = pod("job-1", created="2025-12-31T11:00:00Z", **common)
    second["metadata"]["uid"] = "uid-job-1"
    return [first, second]


def test_pods_written_alike_keep_their_own_identity_node_status_and_times() -> None:
    result = built([node("n1", labels={"zone": "a"}), queue("q"), podgroup("job", "q", min_member=2), *twin_pods()])
    assert result.problems == []
    pods = pods_by_name(result)
    first, second = pods["job-0"], pods["job-1"]
    assert (first.node, first.status) == ("n1", PodStatus.RUNNING)
    assert (second.node, second.status) == ("", PodStatus.PENDING)
    assert (first.uid, second.uid) == ("ns/job-0", "uid-job-1")
    assert second.creation - first.creation == 3600.0
    assert first.raw is not second.raw and second.raw["metadata"]["name"] == "job-1"
    for one in (first, second):  # the shared parts, as written
        assert one.requests.amounts == {"cpu": 4000.0, "memory": 8 * 2.0**30, "nvidia.com/gpu": 2.0, "pods": 1.0}
        assert one.gpu.whole == 2
        assert one.labels == {"app": "train"}
        assert [(t.key, t.operator) for t in one.tolerations] == [("gpu", "Exists")]
        assert one.node_selector == (("zone", "a"),)
        assert one.job_key == "ns/job"


def test_pods_written_alike_in_simulate_each_get_their_own_decision() -> None:
    objects = [node("n1", gpus=4, labels={"zone": "a"}), queue("q"), podgroup("job", "q", min_member=2)]
    objects += twin_pods()
    third = copy.deepcopy(objects[-1])
    third["metadata"]["name"], third["metadata"]["uid"] = "job-2", "uid-job-2"
    out = run([*objects, third])
    assert {k: (v["status"], v["node"]) for k, v in out["pods"].items()} == {
        "ns/job-0": ("Running", "n1"),
        "ns/job-1": ("Running", "n1"),  # 2 + 2 of the node's 4 GPUs
        "ns/job-2": ("Pending", None),
    }


def test_pods_differing_in_one_request_get_their_own_requests() -> None:
    a = pod("a", queue="q", gpus=1, cpu="1")
    b = pod("b", queue="q", gpus=1, cpu="2")
    c = pod("c", queue="q", gpus=1, cpu="1", annotations={"gpu-fraction": "0.5"})
    del c["spec"]["containers"][0]["resources"]["limits"]
    result = built([node("n1"), queue("q"), a, b, c])
    pods = pods_by_name(result)
    assert (pods["a"].requests.cpu, pods["b"].requests.cpu, pods["c"].requests.cpu) == (1000.0, 2000.0, 1000.0)
    assert (pods["a"].gpu.whole, pods["a"].gpu.fraction) == (1, 0.0)
    assert (pods["c"].gpu.whole, pods["c"].gpu.fraction) == (0, 0.5)  # the annotation, not a's request


def test_a_number_that_equals_an_accepted_one_is_still_checked() -> None:
    """1 == True == 1.0 in Python: a cache keyed on equality alone would give the second pod the first
    one's conversion. True is no quantity; a PodGroup's minMember of 1.0 or True is no whole number."""
    good = pod("good", queue="q", extra={"example.com/dev": 1})
    bad = pod("bad", queue="q", extra={"example.com/dev": True})
    groups = [podgroup(f"g{i}", "q", min_member=m) for i, m in enumerate((1, True, 1.0))]
    result = built([node("n1"), queue("q"), good, bad, *groups])
    found = {(p.obj, p.field, p.message) for p in result.problems}
    assert found == {
        ("Pod ns/bad", "spec.containers[0].resources.requests.example.com/dev", "is not a quantity: True"),
        ("PodGroup ns/g1", "spec.minMember", "must be a whole number >= 1, got True"),
        ("PodGroup ns/g2", "spec.minMember", "must be a whole number >= 1, got 1.0"),
    }
    assert pods_by_name(result)["good"].requests.get("example.com/dev") == 1.0
    assert set(result.snapshot.podgroups) == {"ns/g0", "ns/pg-good"}


def test_labels_that_only_look_alike_are_read_as_written() -> None:
    pods = [pod(f"p{i}", queue="q", labels={"app": value}) for i, value in enumerate((1, True, "1", 1.0))]
    converted = pods_by_name(built([node("n1"), queue("q"), *pods]))
    assert [converted[f"p{i}"].labels["app"] for i in range(4)] == ["1", "True", "1", "1.0"]


def test_task_priority_and_gpu_groups_come_from_each_pods_labels() -> None:
    a = pod("a", queue="q", labels={"kai.scheduler/task-priority": "5", "runai-gpu-group": "g1"})
    b = pod("b", queue="q", labels={"kai.scheduler/task-priority": "7"})
    c = pod("c", queue="q", labels={"runai-gpu-group/x2": "x2", "runai-gpu-group/x1": "x1"})
    converted = pods_by_name(built([node("n1"), queue("q"), a, b, c]))
    assert (converted["a"].task_priority, converted["a"].gpu_groups) == (5, ("g1",))
    assert (converted["b"].task_priority, converted["b"].gpu_groups) == (7, ())
    assert (converted["c"].task_priority, converted["c"].gpu_groups) == (None, ("x1", "x2"))


def test_tolerations_and_selectors_that_differ_in_one_field_are_their_own() -> None:
    a = pod("a", queue="q", tolerations=[{"key": "gpu", "operator": "Exists"}], node_selector={"zone": "a"})
    b = pod("b", queue="q", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    c = pod("c", queue="q", node_selector={"zone": 1})
    d = pod("d", queue="q", node_selector={"zone": True})
    converted = pods_by_name(built([node("n1"), queue("q"), a, b, c, d]))
    assert [t.effect for t in converted["a"].tolerations] == [""]
    assert [t.effect for t in converted["b"].tolerations] == ["NoSchedule"]
    assert (converted["a"].node_selector, converted["b"].node_selector) == ((("zone", "a"),), ())
    assert (converted["c"].node_selector, converted["d"].node_selector) == ((("zone", "1"),), (("zone", "True"),))


def test_podgroups_written_alike_keep_their_own_names_times_and_pods() -> None:
    groups = [podgroup(f"g{i}", "q", min_member=1, created=f"2025-12-31T0{i}:00:00Z") for i in range(3)]
    groups[2]["metadata"]["annotations"] = {"kai.scheduler/last-start-timestamp": "2025-12-31T05:00:00Z"}
    pods = [pod(f"p{i}", group=f"g{i}", gpus=1) for i in range(3)]
    result = built([node("n1"), queue("q"), *groups, *pods])
    assert result.problems == []
    jobs = result.snapshot.podgroups
    assert [jobs[f"ns/g{i}"].creation - jobs["ns/g0"].creation for i in range(3)] == [0.0, 3600.0, 7200.0]
    assert [jobs[f"ns/g{i}"].last_start for i in range(2)] == [None, None]
    assert jobs["ns/g2"].last_start == jobs["ns/g0"].creation + 5 * 3600.0
    assert [[p.name for p in jobs[f"ns/g{i}"].pods] for i in range(3)] == [["p0"], ["p1"], ["p2"]]
    assert len({id(jobs[f"ns/g{i}"].subgroups["default"]) for i in range(3)}) == 3


def test_a_podgroup_spec_seen_before_still_has_its_own_timestamp_problem() -> None:
    good = podgroup("good", "q", created="2025-12-31T00:00:00Z")
    bad = podgroup("bad", "q", created="yesterday")
    stale = podgroup("stale", "q")
    stale["metadata"]["annotations"] = {"kai.scheduler/stale-podgroup-timestamp": "soon"}
    result = built([node("n1"), queue("q"), good, bad, stale])
    assert [(p.obj, p.field) for p in result.problems] == [
        ("PodGroup ns/bad", "metadata.creationTimestamp"),
        ("PodGroup ns/stale", "metadata.annotations[kai.scheduler/stale-podgroup-timestamp]"),
    ]
    assert set(result.snapshot.podgroups) == {"ns/good"}


def test_a_queue_that_gains_a_child_is_no_longer_taken_for_a_leaf() -> None:
    """KAI's default queues come in with the first job that names default-queue: a snapshot's own
    default-parent-queue, a leaf until then, is then a parent, and jobs naming it after that are refused."""
    before = podgroup("before", "default-parent-queue")
    default = podgroup("default", "default-queue")
    after = podgroup("after", "default-parent-queue")
    bare = pod("bare", queue="default-parent-queue")
    result = built([node("n1"), queue("default-parent-queue"), before, default, after, bare])
    refused = [(p.obj, p.message) for p in result.problems]
    parent = "names queue 'default-parent-queue', which has child queues (only leaf queues run jobs)"
    assert refused == [("PodGroup ns/after", parent), ("Pod ns/bare", parent)]
    assert set(result.snapshot.podgroups) == {"ns/before", "ns/default"}
