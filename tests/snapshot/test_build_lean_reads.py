"""The snapshot builder's lean reads (issue 12, L build): a timestamp in the API server's form whose minute
was met before is that minute's epoch plus its seconds; the pod loop reads the parts every common pod has
by subscript and those most lack with `in`, takes a spec of the containers, the scheduler's name and the
node's name alone, or annotations of the PodGroup's name alone, as having nothing rarer without looking
through them, and keeps the requests of the last two kinds of pods it met. Each is checked by what it must
not change: the pods are those the general path makes, the epochs those of the full parser, and a pod
with anything more (or less) than the common pod has still gets it read."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kai.api.timeutil import parse_time_text
from kai.model import NodeInfo, PodInfo, PodStatus, Taint
from kai.snapshot.builder import ConversionMemo, SnapshotBuilder, build_snapshot
from tests.scenario import node, pod, podgroup, queue

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def outcome(text: str) -> float | str:
    try:
        return parse_time_text(text)
    except ValueError:
        return "problem"


def test_podgroup_creation_times_of_known_minutes_are_the_full_parsers() -> None:
    """Texts of minutes met before (other seconds, seconds out of range, other forms of the same
    minute), all in one build, each read as parse_time_text reads it or a problem when it does not."""
    rng = random.Random(7)
    texts = [f"2026-01-01T10:20:{s:02d}Z" for s in range(0, 62)]  # one minute, 60 and 61 are no seconds
    texts += ["2026-01-01T10:20:5Z", "2026-01-01T10:20:05.5Z", "2026-01-01T10:20:05+01:00", "2026-01-01T10:20:05z"]
    texts += ["2026-01-01T10:20:  Z", "2026-01-01T10:20:0٣Z", "2026-01-01T10:20:+1Z", "2026-01-01T10:20:05ZZ"]
    texts += ["2024-02-29T23:59:00Z", "2024-02-29T23:59:59Z", "2025-02-29T23:59:30Z", "2026-01-01T24:00:00Z"]
    for _ in range(2_000):
        minute, second = rng.randrange(0, 3), rng.randrange(0, 61)
        texts.append(f"2026-12-31T23:{minute:02d}:{second:02d}Z")
    objects: list[dict[str, Any]] = [node("n1"), queue("q")]
    for i, text in enumerate(texts):
        objects.append(podgroup(f"g{i}", "q", created=text))
    result = build_snapshot(objects, NOW)
    bad = {p.obj for p in result.problems}
    for i, text in enumerate(texts):
        want = outcome(text)
        if want == "problem":
            assert f"PodGroup ns/g{i}" in bad, text
        else:
            assert result.snapshot.podgroups[f"ns/g{i}"].creation == want, text
    assert len(bad) == sum(outcome(t) == "problem" for t in texts)


def alike(name: str, **fields: Any) -> dict[str, Any]:
    """A pod written as the warm-up pods (after two of them the pod loop reads it on its common path)."""
    fields.setdefault("group", "g")
    fields.setdefault("gpus", 1)
    return pod(name, queue="q", cpu="1", **fields)


def general(obj: dict[str, Any], job_key: str) -> PodInfo:
    """The pod as `_pod` makes it (a fresh builder has no conversion to reuse, so none is shortened)."""
    made = SnapshotBuilder(NOW)._pod(obj)
    assert made is not None
    made.job_key = job_key
    return made


def build(*later: dict[str, Any]) -> dict[str, PodInfo]:
    objects = [
        node("n1", gpus=8),
        node("n2", gpus=8),
        queue("q"),
        podgroup("g", "q", min_member=1),
        alike("w0"),
        alike("w1"),
        *later,
    ]
    result = build_snapshot(objects, NOW)
    assert result.problems == []
    made = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    for obj in later:
        one = made[obj["metadata"]["name"]]
        assert one == general(obj, one.job_key), obj["metadata"]["name"]
    return made


def bare(name: str, **fields: Any) -> dict[str, Any]:
    """alike(), with a spec of the containers and the scheduler's name alone (and the node's, if any)."""
    obj = alike(name, **fields)
    for container in obj["spec"]["containers"]:
        container.pop("image")
    return obj


@pytest.mark.parametrize(
    ("fields", "check"),
    [
        ({"node_selector": {"zone": "a"}}, lambda p: p.node_selector == (("zone", "a"),)),
        ({"tolerations": [{"key": "k", "operator": "Exists"}]}, lambda p: len(p.tolerations) == 1),
        ({"gated": True}, lambda p: p.status is PodStatus.GATED),
        ({"priority_class": "urgent"}, lambda p: p.priority_class_name == "urgent"),
        ({"node": "n1", "node_selector": {"zone": "a"}}, lambda p: p.node_selector == (("zone", "a"),)),
    ],
)
def test_a_spec_of_three_parts_one_of_them_rarer_has_it_read(fields: dict[str, Any], check: Any) -> None:
    """Three parts, but not the node's name (or four with it): looked through, the rarer part read."""
    target = bare("p", **fields)
    made = build(bare("b0"), bare("b1", node="n2"), target)
    assert check(made["p"])


def test_a_spec_with_a_node_name_of_null_and_a_rarer_part_has_it_read() -> None:
    target = bare("p", node_selector={"zone": "a"})
    target["spec"]["nodeName"] = None
    target["spec"].pop("schedulerName")
    target["spec"]["schedulerName"] = "kai-scheduler"
    made = build(bare("b0"), target)
    assert made["p"].node_selector == (("zone", "a"),) and made["p"].node == ""


@pytest.mark.parametrize(
    "annotations",
    [
        {"gpu-fraction": "0.5"},  # one annotation, not the PodGroup's name
        {"pod-group-name": "g", "gpu-fraction": "0.5"},
        {"pod-group-name": "g", "gpu-memory": "2000"},
    ],
)
def test_annotations_beside_or_instead_of_the_podgroups_name_are_looked_through(annotations: dict[str, str]) -> None:
    target = alike("p", gpus=0, group=None)
    target["metadata"]["annotations"] = dict(annotations)
    made = build(alike("c0", gpus=0), alike("c1", gpus=0), target)
    assert made["p"].gpu.is_shared


def test_two_kinds_of_pods_taking_turns_each_have_their_own_requests() -> None:
    """Kinds a, b, a, b, then c, a, c, b: each pod has its kind's requests, shared with its kind's."""
    kinds = {"a": {"gpus": 1}, "b": {"gpus": 0}, "c": {"gpus": 2}}
    order = ["a", "b", "a", "b", "a", "c", "a", "c", "b", "b", "a"]
    later = [alike(f"{kind}{i}", **kinds[kind]) for i, kind in enumerate(order)]
    for obj in later:  # the first of each kind has an earlier pod of the same requests
        obj["metadata"]["labels"]["kind"] = obj["metadata"]["name"][0]
    twins = [alike(f"twin-{kind}", **kinds[kind]) for kind in kinds]
    made = build(*twins, *later)
    for i, kind in enumerate(order):
        one = made[f"{kind}{i}"]
        assert one.requests is made[f"twin-{kind}"].requests
        assert one.gpu.whole == kinds[kind]["gpus"]


def test_a_pod_of_two_containers_or_none_has_its_requests_summed() -> None:
    two = alike("two")
    two["spec"]["containers"].append({"name": "side", "resources": {"requests": {"cpu": "3"}}})
    none = alike("none")
    none["spec"]["containers"] = []
    made = build(two, none)
    assert made["two"].requests.get("cpu") == 4000 and made["none"].requests.get("cpu") == 0


def test_a_pod_lacking_a_part_the_common_pod_has_is_read_in_full() -> None:
    """No namespace, no status phase, a phase of null, no scheduler name: as the general path reads them."""
    no_namespace = alike("no-namespace", group=None)  # (its own job, in the default namespace)
    no_namespace["metadata"].pop("namespace")
    no_phase = alike("no-phase")
    no_phase["status"] = {}
    null_phase = alike("null-phase")
    null_phase["status"]["phase"] = None
    made = build(no_namespace, no_phase, null_phase)
    assert made["no-namespace"].namespace == "default"
    assert made["no-phase"].status is PodStatus.PENDING and made["null-phase"].status is PodStatus.PENDING
    foreign = alike("foreign")
    foreign["spec"].pop("schedulerName")
    result = build_snapshot([node("n1"), queue("q"), podgroup("g", "q"), alike("w0"), alike("w1"), foreign], NOW)
    assert [p.scheduler_name for p in result.snapshot.foreign_pods] == ["default-scheduler"]


def test_a_pod_with_a_port_or_a_nominated_node_or_a_deletion_has_it_read() -> None:
    ported = alike("ported")
    ported["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    unported = alike("unported")
    unported["spec"]["containers"][0]["ports"] = []
    nominated = alike("nominated")
    nominated["status"]["nominatedNodeName"] = "n2"
    nulled = alike("nulled")
    nulled["status"]["nominatedNodeName"] = None
    undeleted = alike("undeleted", node="n1")
    undeleted["metadata"]["deletionTimestamp"] = None
    made = build(ported, unported, nominated, nulled, undeleted, alike("deleting", node="n1", deleting=True))
    assert [p.port for p in made["ported"].host_ports] == [8080] and made["unported"].host_ports == ()
    assert (made["nominated"].nominated_node, made["nulled"].nominated_node) == ("n2", "")
    assert (made["undeleted"].status, made["deleting"].status) == (PodStatus.RUNNING, PodStatus.RELEASING)


@pytest.mark.parametrize("metadata", [None, {"name": ""}, {}, [], ""])
def test_an_object_whose_metadata_is_not_a_map_with_a_name_is_a_problem(metadata: Any) -> None:
    """After a pod and a node of the kind seen (the intake's subscript path), one whose metadata is no
    map with a name is still a problem, in its place."""
    odd = alike("odd")
    odd["metadata"] = metadata
    result = build_snapshot([node("n1"), queue("q"), podgroup("g", "q"), alike("w0"), odd, alike("w1")], NOW)
    assert [(p.field, p.message) for p in result.problems] == [("metadata.name", "is missing")]
    assert sorted(p.name for g in result.snapshot.podgroups.values() for p in g.pods) == ["w0", "w1"]


def test_a_node_is_made_as_its_class_would_make_it() -> None:
    """Every slot set, the values its fields' reading gives."""
    plain = node("n1", gpus=8)
    odd = node("n2", gpus=4)
    odd["metadata"]["labels"] = {"nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.product": "A100", "rack": 7}
    odd["spec"] = {"unschedulable": True, "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}
    odd["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    result = build_snapshot([plain, odd], NOW)
    assert result.problems == []
    one, two = result.snapshot.nodes
    for made in (one, two, SnapshotBuilder(NOW)._node(plain)):  # (the build's DRA reader sets dra_gpus again)
        assert [s for s in type(made).__slots__ if not hasattr(made, s)] == []
    assert one == NodeInfo("n1", one.allocatable, dict(one.labels), (), False, True, 0, "", 0)
    assert two == NodeInfo(
        "n2",
        two.allocatable,
        {"nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.product": "A100", "rack": "7"},
        (Taint("k", "v", "NoExecute"),),
        True,
        False,
        40960,
        "A100",
        0,
    )
    assert two.allocatable.get("nvidia.com/gpu") == 4


def test_a_pod_without_labels_or_annotations_is_read_in_full() -> None:
    unlabelled = alike("unlabelled", group=None)
    unlabelled["metadata"].pop("labels")
    unannotated = alike("unannotated", group=None)
    unannotated["metadata"].pop("annotations")
    made = build(unlabelled, unannotated)
    assert made["unlabelled"].labels == {} and made["unannotated"].job_key.startswith("ns/pg-unannotated")


def test_a_pod_on_a_node_not_in_the_snapshot_keeps_its_name_as_text() -> None:
    away = alike("away", node="gone")
    numbered = alike("numbered", group=None)
    numbered["spec"]["nodeName"] = 7
    result = build_snapshot([node("n1"), queue("q"), podgroup("g", "q"), alike("w0"), alike("w1"), away, numbered], NOW)
    made = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    assert (made["away"].node, made["numbered"].node) == ("gone", "7")


def test_podgroups_lacking_a_part_or_with_annotations_after_a_kept_spec_are_read_as_written() -> None:
    """After a kept spec: one without a namespace, without minMember, with timestamps in its annotations
    (of a known minute and not), and one of the epoch itself; as the general path (the memo's) reads them."""
    objects: list[dict[str, Any]] = [node("n1"), queue("q")]
    objects += [podgroup(f"first{i}", "q", min_member=1, created="2026-01-01T10:00:00Z") for i in range(3)]
    no_namespace = podgroup("no-namespace", "q", min_member=1, created="2026-01-01T10:00:01Z")
    no_namespace["metadata"].pop("namespace")
    no_min = podgroup("no-min", "q", created="2026-01-01T10:00:02Z")
    no_min["spec"].pop("minMember", None)
    stamped = podgroup("stamped", "q", min_member=1, created="2026-01-01T10:00:03Z")
    stamped["metadata"]["annotations"] = {
        "kai.scheduler/last-start-timestamp": "2026-01-01T10:00:04Z",
        "kai.scheduler/stale-podgroup-timestamp": "2026-01-01T11:00:05Z",
    }
    epoch = podgroup("epoch", "q", min_member=1, created="1970-01-01T00:00:00Z")
    objects += [no_namespace, no_min, stamped, epoch]
    fast = build_snapshot(objects, NOW)
    reference = build_snapshot(objects, NOW, memo=ConversionMemo())
    assert fast.problems == reference.problems == []
    assert fast.snapshot.podgroups == reference.snapshot.podgroups
    groups = fast.snapshot.podgroups
    assert "default/no-namespace" in groups and groups["ns/no-min"].min_member == 1
    assert (groups["ns/stamped"].last_start, groups["ns/stamped"].stale_since) == (NOW + 36_004, NOW + 39_605)
    assert groups["ns/stamped"].creation == NOW + 36_003 and groups["ns/epoch"].creation == 0.0


def test_the_pods_and_podgroups_written_as_these_tests_write_them_take_the_common_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """So that the tests above check the common paths: after the first of their kind (whose requests and
    spec are kept), such pods and PodGroups go to neither _pod nor _podgroup."""
    called: list[str] = []
    real_pod, real_podgroup = SnapshotBuilder._pod, SnapshotBuilder._podgroup

    def spy_pod(self: SnapshotBuilder, obj: dict[str, Any]) -> Any:
        called.append(obj["metadata"]["name"])
        return real_pod(self, obj)

    def spy_podgroup(self: SnapshotBuilder, obj: dict[str, Any], queues: Any) -> Any:
        called.append(obj["metadata"]["name"])
        return real_podgroup(self, obj, queues)

    monkeypatch.setattr(SnapshotBuilder, "_pod", spy_pod)
    monkeypatch.setattr(SnapshotBuilder, "_podgroup", spy_podgroup)
    groups = [podgroup(f"g{i}", "q", min_member=1, created=f"2026-01-01T10:00:0{i}Z") for i in range(3)]
    warm = [alike("w0", group="g0"), alike("w1", group="g0")]
    warm += [alike("c0", gpus=0, group="g0"), alike("c1", gpus=0, group="g0")]
    later = [
        bare("bare", group="g1"),
        bare("bare-running", node="n2", group="g2"),
        alike("pending", group="g1"),
        alike("running", node="n1", group="g2"),
        alike("cpu", gpus=0, group="g1"),
        alike("cpu-running", gpus=0, node="n1", group="g2"),
    ]
    objects = [node("n1", gpus=8), node("n2", gpus=8), queue("q"), *groups, *warm, *later]
    result = build_snapshot(objects, NOW)
    assert result.problems == []
    assert called == ["g0", "w0", "w1", "c0", "c1"]
    assert sum(len(list(g.pods)) for g in result.snapshot.podgroups.values()) == len(warm) + len(later)


def test_a_pod_of_another_scheduler_has_its_scheduler_name_as_text() -> None:
    numbered = alike("numbered")
    numbered["spec"]["schedulerName"] = 5
    empty = alike("empty")
    empty["spec"]["schedulerName"] = ""
    objects = [node("n1"), queue("q"), podgroup("g", "q"), alike("w0"), alike("w1"), numbered, empty]
    result = build_snapshot(objects, NOW)
    assert [p.scheduler_name for p in result.snapshot.foreign_pods] == ["5", "default-scheduler"]
    assert {p.scheduler_name for g in result.snapshot.podgroups.values() for p in g.pods} == {"kai-scheduler"}
