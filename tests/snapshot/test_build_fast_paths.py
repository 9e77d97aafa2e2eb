"""The snapshot builder's fast paths of issue 12 (L build), each checked by what it must not change:
timestamps in the API server's own form (`2026-01-01T12:34:56Z`) are read from the epoch of their hour
plus minutes and seconds, and every other text by the full parser, with the same value or the same
problem; the intake sorts the common object by subscripts alone, so a name that is missing or empty is
still a problem; a pod written as earlier pods is read on a short path, so each thing that path checks
(ports, phase, deletion, timestamps, GPU-sharing annotations) still decides as on the general path."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from kai.api.timeutil import parse_time
from kai.model import PodStatus
from kai.snapshot.builder import build_snapshot
from tests.scenario import node, pod, podgroup, queue, run

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def reference(text: str) -> float:
    """What parse_time gave before its short path: datetime's parser on every text."""
    moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return ("value", parse(text))
    except ValueError:
        return ("error", None)


EDGES = [
    "2024-02-29T12:00:00Z",  # a leap day
    "2025-02-29T12:00:00Z",  # no such day
    "1900-02-29T00:00:00Z",
    "2000-02-29T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",  # before the epoch
    "9999-12-31T23:59:59Z",
    "2026-01-01T24:00:00Z",
    "2026-01-01T23:60:00Z",
    "2026-01-01T23:59:60Z",
    "2026-13-01T00:00:00Z",
    "2026-01-32T00:00:00Z",
    "2026-01-01 10:20:30Z",  # the parser takes other separators: same value as with T
    "2026-01-01t10:20:30Z",
    "2026-01-01T10:20:30z",
    "2026-01-01T10:20:30+02:00",
    "2026-01-01T10:20:30.5Z",
    "2026-01-01T10:20:30",
    " 2026-01-01T10:20:30Z",
    "2026-01-01T10:20:30Z ",
    "2026-01-01T10:2٣:30Z",  # a digit that is not ASCII
    "2026-01-01T10:20:٣0Z",
    "２０２６-01-01T10:20:30Z",
    "2026-01-01T10:+1:30Z",
    "2026-01-01T10:20: 1Z",
    "2026-01-01T10:20:1_Z",
    "2026/01/01T10:20:30Z",
    "2026-01-01T10-20-30Z",
    "2026-01-01T10:20:30X",
    "",
    "x" * 20,
]


def test_timestamps_read_as_the_full_parser_reads_them() -> None:
    rng = random.Random(12)
    texts = list(EDGES)
    for _ in range(20_000):
        year = rng.choice([1, 1899, 1900, 1970, 2000, 2024, 2025, 2026, 9999, rng.randrange(1, 10_000)])
        month, day = rng.randrange(0, 14), rng.randrange(0, 33)
        hour, minute, second = rng.randrange(0, 26), rng.randrange(0, 62), rng.randrange(0, 62)
        texts.append(f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z")
    texts += [f"2026-03-01T{h:02d}:{m:02d}:{s:02d}Z" for h in range(24) for m in range(60) for s in (0, 59)]
    for text in texts:
        expected = outcome(reference, text)
        assert outcome(parse_time, text) == expected, text
        assert outcome(parse_time, text) == expected, text  # once more, from what the first read kept


def test_creation_seconds_minutes_and_days_order_jobs() -> None:
    """One GPU; jobs of one queue go oldest first: the one a second, a minute, an hour or a day older."""
    for older, younger in [
        ("2026-01-01T10:00:31Z", "2026-01-01T10:00:59Z"),
        ("2026-01-01T10:00:59Z", "2026-01-01T10:01:00Z"),
        ("2026-01-01T09:59:59Z", "2026-01-01T10:00:00Z"),
        ("2024-02-28T23:59:59Z", "2024-02-29T00:00:00Z"),
        ("2024-02-29T23:59:59Z", "2024-03-01T00:00:00Z"),
        ("2025-12-31T23:59:59Z", "2026-01-01T00:00:00Z"),
        ("2025-12-31T23:59:58Z", "2025-12-31T23:59:59.5Z"),
        ("2026-01-01T10:00:00+01:00", "2026-01-01T09:30:00Z"),
    ]:
        for first, second in ((older, younger), (younger, older)):  # names sort the other way too
            objects = [
                node("n1", gpus=1),
                queue("q"),
                podgroup("a", "q", created=first),
                podgroup("b", "q", created=second),
                pod("a-0", group="a", gpus=1),
                pod("b-0", group="b", gpus=1),
            ]
            out = run(objects)["pods"]
            winner = "ns/a-0" if first == older else "ns/b-0"
            assert out[winner]["status"] == "Running", (first, second)


def test_pods_of_their_own_go_oldest_first_by_their_creation_timestamp() -> None:
    pods = [pod(f"p{i}", queue="q", gpus=1, cpu="1", created=f"2026-01-01T08:{59 - i:02d}:{i:02d}Z") for i in range(6)]
    out = run([node("n1", gpus=1), queue("q"), *pods])["pods"]
    assert [k for k, v in out.items() if v["status"] == "Running"] == ["ns/p5"]  # 08:54:05, the oldest


@pytest.mark.parametrize("kind", ["PodGroup", "Pod"])
def test_timestamps_that_are_no_time_are_still_problems(kind: str) -> None:
    bad = ["2025-02-29T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:60Z", "2026-01-01T0٣:00:00Z"]
    objects: list[dict[str, Any]] = [node("n1"), queue("q")]
    for i, text in enumerate(["2024-02-29T00:00:00Z", *bad]):
        if kind == "PodGroup":
            objects += [podgroup(f"g{i}", "q", created=text), pod(f"p{i}", group=f"g{i}")]
        else:
            objects += [pod(f"p{i}", queue="q", created=text)]
    result = build_snapshot(objects, NOW)
    prefix = "ns/g" if kind == "PodGroup" else "ns/p"
    assert [(p.obj, p.field, p.message) for p in result.problems if p.obj.startswith(kind)] == [
        (f"{kind} {prefix}{i}", "metadata.creationTimestamp", f"is not an RFC 3339 timestamp: {text!r}")
        for i, text in enumerate(bad, start=1)
    ]
    creation = {p.name: p.creation for g in result.snapshot.podgroups.values() for p in g.pods}
    if kind == "Pod":
        assert creation == {"p0": 1_709_164_800.0}


def test_an_object_of_a_kind_already_seen_without_a_name_is_still_a_problem() -> None:
    nameless = node("x")
    nameless["metadata"]["name"] = ""
    unnamed = node("y")
    del unnamed["metadata"]["name"]
    bare = node("z")
    bare["metadata"] = None
    result = build_snapshot([node("n1"), nameless, unnamed, bare, node("n2")], NOW)
    assert [(p.obj, p.field, p.message) for p in result.problems] == [
        ("Node <unnamed>", "metadata.name", "is missing"),
        ("Node <unnamed>", "metadata.name", "is missing"),
        ("Node <unnamed>", "metadata.name", "is missing"),
    ]
    assert [n.name for n in result.snapshot.nodes] == ["n1", "n2"]


def alike(name: str, **fields: Any) -> dict[str, Any]:
    """A pod written as the warm-up pods of `written_alike` (after them it takes the short path)."""
    return pod(name, queue="q", gpus=1, cpu="1", **fields)


def written_alike(*later: dict[str, Any]) -> list[dict[str, Any]]:
    return [node("n1", gpus=4), node("n2", gpus=4), queue("q"), alike("w0"), alike("w1"), alike("w2"), *later]


def test_a_pod_written_as_others_is_read_as_the_others() -> None:
    result = build_snapshot(written_alike(alike("p", node="n2")), NOW)
    assert result.problems == []
    pods = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    first, later = pods["w0"], pods["p"]
    assert later.requests is first.requests and later.gpu is first.gpu
    assert (later.status, later.node, later.uid, later.job_key) == (PodStatus.RUNNING, "n2", "ns/p", "ns/pg-p")
    assert (later.scheduler_name, later.labels, later.subgroup) == (
        "kai-scheduler",
        {"kai.scheduler/queue": "q"},
        "default",
    )


def test_a_pod_written_as_others_with_a_host_port_has_it_read() -> None:
    ported = [alike(f"port{i}") for i in range(2)]
    for one in ported:
        one["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    out = run([*written_alike(*ported)])["pods"]
    assert sorted(out[f"ns/port{i}"]["node"] for i in range(2)) == ["n1", "n2"]  # one port 8080 per node


def test_a_pod_written_as_others_with_a_bad_host_port_is_a_problem() -> None:
    bad = alike("bad")
    bad["spec"]["containers"][0]["ports"] = [{"hostPort": 70000}]
    result = build_snapshot(written_alike(bad), NOW)
    assert [(p.obj, p.message) for p in result.problems] == [
        ("Pod ns/bad", "must be a port number from 1 to 65535, got 70000")
    ]


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"node": "n1"}, PodStatus.RUNNING),
        ({"node": "n1", "deleting": True}, PodStatus.RELEASING),
        ({"deleting": True}, PodStatus.SUCCEEDED),
        ({"phase": "Succeeded", "node": "n1"}, PodStatus.SUCCEEDED),
        ({"phase": "Failed", "node": "n1"}, PodStatus.FAILED),
        ({"phase": "Unknown", "node": "n1"}, PodStatus.RUNNING),
        ({}, PodStatus.PENDING),
    ],
)
def test_a_pod_written_as_others_has_its_own_status(fields: dict[str, Any], status: PodStatus) -> None:
    result = build_snapshot(written_alike(alike("p", **fields)), NOW)
    assert result.problems == []
    pods = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    assert pods["p"].status is status


def test_a_pod_written_as_others_with_an_unknown_phase_or_no_status_is_read_in_full() -> None:
    odd = alike("odd", phase="Lost")
    bare = alike("bare")
    del bare["status"]
    result = build_snapshot(written_alike(odd, bare), NOW)
    assert [(p.obj, p.field, p.message) for p in result.problems] == [
        ("Pod ns/odd", "status.phase", "is not a pod phase: 'Lost'")
    ]
    pods = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    assert pods["bare"].status is PodStatus.PENDING


def test_a_pod_written_as_others_but_sharing_a_gpu_is_read_in_full() -> None:
    half = alike("half", annotations={"gpu-fraction": "0.5"})
    half["spec"]["containers"][0]["resources"].pop("limits")
    whole = alike("whole", annotations={"gpu-fraction": "0.5"})  # a fraction beside a whole GPU: a problem
    result = build_snapshot(written_alike(half, whole), NOW)
    assert [p.obj for p in result.problems] == ["Pod ns/whole"]
    pods = {p.name: p for g in result.snapshot.podgroups.values() for p in g.pods}
    assert (pods["half"].gpu.whole, pods["half"].gpu.fraction) == (0, 0.5)


def test_a_podgroup_spec_equal_to_the_last_but_for_the_type_of_min_member_is_read_as_written() -> None:
    """Specs equal to the one before are that one's, but minMember True equals 1 and is no number."""
    first, boolean, again = podgroup("first", "q"), podgroup("boolean", "q"), podgroup("again", "q")
    boolean["spec"]["minMember"] = True
    result = build_snapshot([node("n1"), queue("q"), first, boolean, again], NOW)
    assert [(p.obj, p.field, p.message) for p in result.problems] == [
        ("PodGroup ns/boolean", "spec.minMember", "must be a whole number >= 1, got True")
    ]
    assert set(result.snapshot.podgroups) == {"ns/again", "ns/first"}


def test_a_podgroup_spec_equal_to_the_last_is_checked_again_once_the_default_queues_are_added() -> None:
    """A leaf queue named as KAI's default parent queue runs jobs until a job names the default queue,
    which makes it that queue's parent: a spec equal to the last one kept is then checked again (the
    job naming the default queue has a problem of its own, so its spec is not kept in its place)."""
    before, default, after = (podgroup(n, "default-parent-queue") for n in ("before", "default", "after"))
    default["spec"]["queue"] = "default-queue"
    default["spec"]["preemptibility"] = "sometimes"
    result = build_snapshot([node("n1"), queue("default-parent-queue"), before, default, after], NOW)
    assert [(p.obj, p.message) for p in result.problems] == [
        ("PodGroup ns/default", "must be preemptible or non-preemptible, got 'sometimes'"),
        ("PodGroup ns/after", "names queue 'default-parent-queue', which has child queues (only leaf queues run jobs)"),
    ]
    assert set(result.snapshot.podgroups) == {"ns/before"}
