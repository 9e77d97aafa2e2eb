"""The snapshot builder's one-pass loops (issue 12, L build): the common pod is read in the pod loop
itself and made slot by slot, and put in its job's sub-group there when that needs none of the loop's
checks; a PodGroup whose spec was kept is read in the PodGroup loop and made slot by slot. Each is
checked by what it must not change: the objects are those the general path makes (every slot set),
and a pod or PodGroup that needs a check (a duplicate, an unknown node, another scheduler, a missing or
non-leaf group, no group at all, a bad timestamp) still gets it, with the same problems and warnings."""

from __future__ import annotations

from typing import Any

import pytest

from kai.model import PodGroupInfo, PodInfo, SubGroupInfo
from kai.snapshot.builder import ConversionMemo, SnapshotBuilder, build_snapshot
from tests.scenario import node, pod, podgroup, queue

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def alike(name: str, **fields: Any) -> dict[str, Any]:
    """A pod written as the warm-up pods (after two of them the pod loop reads it on its common path)."""
    fields.setdefault("group", "g")
    fields.setdefault("gpus", 1)
    return pod(name, queue="q", cpu="1", **fields)


def cluster(*later: dict[str, Any]) -> list[dict[str, Any]]:
    groups = [podgroup("g", "q", min_member=1), podgroup("h", "q"), podgroup("s", "q", subgroups=SUBGROUPS)]
    return [node("n1", gpus=8), node("n2", gpus=8), queue("q"), *groups, alike("w0"), alike("w1"), *later]


SUBGROUPS = [{"name": "top"}, {"name": "leaf", "parent": "top"}]


def unset_slots(obj: object) -> list[str]:
    return [s for s in type(obj).__slots__ if not hasattr(obj, s)]  # type: ignore[attr-defined]


def general(obj: dict[str, Any], job_key: str) -> PodInfo:
    """The pod as `_pod` makes it (a fresh builder has no conversion to reuse, so none is shortened)."""
    made = SnapshotBuilder(NOW)._pod(obj)
    assert made is not None
    made.job_key = job_key
    return made


COMMON = [
    alike("running", node="n1"),
    alike("pending"),
    alike("other-group", group="h"),
    alike("releasing", node="n2", deleting=True),
    alike("deleted", deleting=True),
    alike("done", node="n1", phase="Succeeded"),
    alike("failed", node="n1", phase="Failed"),
    alike("unknown", node="n1", phase="Unknown"),
    alike("created", created="2026-01-01T10:20:30Z"),
    alike("labelled", labels={"runai-gpu-group": "a", "kai.scheduler/task-priority": "3", "x": "y"}),
    alike("no-group", group=None),
]


def test_a_common_pod_is_made_as_the_general_path_makes_it() -> None:
    COMMON[1]["status"]["nominatedNodeName"] = "n2"
    COMMON[2]["metadata"]["uid"] = "uid-other"
    objects = cluster(*COMMON)
    result = build_snapshot(objects, NOW)
    assert result.problems == []
    made = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    assert set(made) == {"w0", "w1", *(o["metadata"]["name"] for o in COMMON)}
    for obj in COMMON:
        one = made[obj["metadata"]["name"]]
        assert unset_slots(one) == []
        assert one == general(obj, one.job_key)
        assert one.raw is obj
    assert made["pending"].nominated_node == "n2"
    assert made["other-group"].job_key == "ns/h" and made["other-group"].uid == "uid-other"
    assert made["no-group"].job_key.startswith("ns/pg-no-group")
    assert (made["labelled"].gpu_groups, made["labelled"].task_priority) == (("a",), 3)
    assert made["w0"].requests is made["running"].requests and made["w0"].gpu is made["running"].gpu


def problems_and_warnings(objects: list[dict[str, Any]], memo: ConversionMemo | None = None) -> list[Any]:
    result = build_snapshot(objects, NOW, memo=memo)
    placed = sorted((g.key, p.name) for g in result.snapshot.podgroups.values() for p in g.pods)
    foreign = [p.name for p in result.snapshot.foreign_pods]
    return [[(p.obj, p.field, p.message) for p in result.problems], result.snapshot.warnings, placed, foreign]


@pytest.mark.parametrize(
    ("odd", "problems", "warnings", "placed"),
    [
        (
            [alike("p"), alike("p")],
            [("Pod ns/p", "metadata.name", "is defined twice")],
            [],
            ["p"],
        ),
        (
            [alike("p", node="elsewhere")],
            [],
            ["Pod ns/p: spec.nodeName 'elsewhere' is not a node of the snapshot"],
            ["p"],
        ),
        ([alike("p", scheduler="default-scheduler")], [], [], []),
        (
            [alike("p", group="nothing")],
            [
                (
                    "Pod ns/p",
                    "metadata.annotations[pod-group-name]",
                    "names PodGroup 'nothing', which does not exist in namespace ns",
                )
            ],
            [],
            [],
        ),
        (
            [alike("p", group="s", labels={"kai.scheduler/subgroup-name": "top"})],
            [],
            ["Pod ns/p: sub-group 'top' is not a leaf of PodGroup ns/s: not scheduled"],
            [],
        ),
        (
            [alike("p", group="s", labels={"kai.scheduler/subgroup-name": "leaf"})],
            [],
            [],
            ["p"],
        ),
        (
            [alike("p", group="g", labels={"kai.scheduler/subgroup-name": "nowhere"})],
            [],
            ["Pod ns/p: sub-group 'nowhere' is not a leaf of PodGroup ns/g: not scheduled"],
            [],
        ),
    ],
)
@pytest.mark.parametrize("with_memo", [False, True])
def test_a_common_pod_that_needs_a_check_gets_it(
    odd: list[dict[str, Any]], problems: list[Any], warnings: list[str], placed: list[str], with_memo: bool
) -> None:
    memo = ConversionMemo() if with_memo else None
    got = problems_and_warnings(cluster(*odd), memo)
    assert got[0] == problems
    assert got[1] == warnings
    assert [name for _, name in got[2] if name not in ("w0", "w1")] == placed
    if odd[0]["spec"]["schedulerName"] != "kai-scheduler":
        assert got[3] == ["p"]
    if with_memo:  # and a second build, from the conversions kept, says the same
        assert problems_and_warnings(cluster(*odd), memo)[:2] == got[:2]


def test_a_common_pod_with_parts_that_are_not_maps_is_read_in_full() -> None:
    """Labels of numbers and a creation timestamp that YAML read as a date go to the general path."""
    numbers = alike("numbers", labels={"n": 1})  # type: ignore[dict-item]
    dated = alike("dated")
    dated["metadata"]["creationTimestamp"] = 5
    result = build_snapshot(cluster(numbers, dated), NOW)
    assert [(p.obj, p.message) for p in result.problems] == [("Pod ns/dated", "is not an RFC 3339 timestamp: 5")]
    made = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    assert made["numbers"].labels == {"n": "1", "kai.scheduler/queue": "q"}


def groups_of(objects: list[dict[str, Any]], memo: ConversionMemo | None) -> tuple[dict[str, PodGroupInfo], list[Any]]:
    result = build_snapshot(objects, NOW, memo=memo)
    return result.snapshot.podgroups, [(p.obj, p.field, p.message) for p in result.problems]


def test_a_podgroup_whose_spec_was_kept_is_made_as_the_general_path_makes_it() -> None:
    """Without the memo the PodGroup loop makes the groups whose spec it knows; with it, _podgroup does."""
    objects: list[dict[str, Any]] = [node("n1"), queue("q"), queue("r")]
    for i in range(8):  # two specs taking turns: from the third on, each is one kept (but not the last)
        group = podgroup(f"g{i}", "q" if i % 2 else "r", min_member=1 + i % 2, created=f"2026-01-01T0{i}:00:00Z")
        if i == 4:
            group["metadata"]["uid"] = "uid-4"
            group["metadata"]["annotations"] = {"kai.scheduler/last-start-timestamp": "2026-01-01T01:02:03Z"}
        if i == 5:
            group["metadata"]["namespace"] = "other"
        objects += [group, pod(f"p{i}", group=f"g{i}", ns=group["metadata"]["namespace"], gpus=1)]
    objects += [podgroup(f"again{i}", "q", min_member=2) for i in range(3)]
    fast, fast_problems = groups_of(objects, None)
    reference, reference_problems = groups_of(objects, ConversionMemo())
    assert fast_problems == reference_problems == []
    assert list(fast) == list(reference)
    for key, group in fast.items():
        assert group == reference[key]
        assert unset_slots(group) == [] and all(unset_slots(s) == [] for s in group.subgroups.values())
        assert group.leaves == [group.subgroups["default"]] and group.memo == {}
        assert type(group.subgroups["default"]) is SubGroupInfo
    assert fast["ns/g4"].last_start == 1_767_229_323.0 and fast["ns/g4"].uid == "uid-4"
    assert fast["other/g5"].uid == "other/g5"


def test_a_podgroup_whose_spec_was_kept_still_has_its_metadata_checked() -> None:
    late = podgroup("late", "q", created="2026-01-01T00:00:61Z")
    twice = podgroup("twice", "q")
    stamped = podgroup("stamped", "q")
    stamped["metadata"]["annotations"] = {"kai.scheduler/stale-podgroup-timestamp": "yesterday"}
    objects = [node("n1"), queue("q"), podgroup("first", "q"), late, twice, podgroup("twice", "q"), stamped]
    groups, problems = groups_of(objects, None)
    assert problems == [
        ("PodGroup ns/late", "metadata.creationTimestamp", "is not an RFC 3339 timestamp: '2026-01-01T00:00:61Z'"),
        ("PodGroup ns/twice", "metadata.name", "is defined twice"),
        (
            "PodGroup ns/stamped",
            "metadata.annotations[kai.scheduler/stale-podgroup-timestamp]",
            "is not an RFC 3339 timestamp: 'yesterday'",
        ),
    ]
    assert problems == groups_of(objects, ConversionMemo())[1]
    assert set(groups) == {"ns/first", "ns/twice"}


def test_a_podgroup_spec_is_not_taken_as_kept_once_the_default_queues_cleared_what_was_kept() -> None:
    """The PodGroup loop keeps the last spec it found kept; a PodGroup naming KAI's default queue (read
    by _podgroup) adds the default queues, which makes a leaf queue of that name a parent: what was kept
    is forgotten, the loop's last spec too, and a later PodGroup of that queue is a problem."""
    objects = [node("n1"), queue("default-parent-queue")]
    objects += [podgroup(f"before{i}", "default-parent-queue") for i in range(2)]
    default = podgroup("default", "default-queue")
    objects += [default, podgroup("after", "default-parent-queue")]
    groups, problems = groups_of(objects, None)
    assert problems == [
        (
            "PodGroup ns/after",
            "spec.queue",
            "names queue 'default-parent-queue', which has child queues (only leaf queues run jobs)",
        )
    ]
    assert set(groups) == {"ns/before0", "ns/before1", "ns/default"}


def test_pods_one_after_another_with_other_requests_or_labels_have_their_own() -> None:
    """The pod loop takes a pod's requests and labels as the last pod's when they are equal maps: pods
    written alike one after another share them, and a pod that differs in one value has its own."""
    later = [
        *(alike(f"a{i}") for i in range(3)),
        alike("more-cpu"),
        alike("b0", labels={"kai.scheduler/subgroup-name": "leaf"}, group="s"),
        alike("b1", labels={"kai.scheduler/subgroup-name": "leaf"}, group="s"),
        alike("c0"),
        alike("two-gpus", gpus=2),
        alike("c1"),
    ]
    later[3]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    result = build_snapshot(cluster(*later), NOW)
    assert result.problems == []
    made = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    for obj in later:
        one = made[obj["metadata"]["name"]]
        assert one == general(obj, one.job_key)
    assert made["a1"].requests is made["a0"].requests and made["b1"].labels is made["b0"].labels
    assert made["more-cpu"].requests.get("cpu") == 2000 and made["two-gpus"].gpu.whole == 2
    assert (made["b1"].subgroup, made["c0"].subgroup) == ("leaf", "default")
