"""The snapshot builder (and `PodGroupInfo.clone`) give a job its leaf sub-groups as they make it, instead
of leaving `leaves` to work them out on first use: what they give is what working them out gives, the
very sub-group objects that hold the pods, in sub-group order."""

from __future__ import annotations

from kai.model import PodGroupInfo
from kai.snapshot.builder import build_snapshot
from tests.scenario import node, pod, podgroup, queue

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def worked_out(job: PodGroupInfo) -> list[object]:
    """The leaves as `leaves` finds them when nobody gave them: every sub-group without children."""
    return [s for s in job.subgroups.values() if not s.children]


def jobs() -> dict[str, PodGroupInfo]:
    objects = [
        node("n1", gpus=8),
        queue("q"),
        podgroup("one", "q"),  # a spec of its own
        podgroup("two", "q"),  # the same spec again: converted once, shared
        podgroup("gang", "q", min_member=2),
        podgroup(
            "tree",
            "q",
            min_member=2,
            subgroups=[
                {"name": "root", "minMember": 1},
                {"name": "a", "minMember": 1, "parent": "root"},
                {"name": "b", "minMember": 1, "parent": "root"},
            ],
        ),
        pod("one-0", group="one", gpus=1, node="n1"),
        pod("two-0", group="two", gpus=1),
        pod("gang-0", group="gang", gpus=1),
        pod("gang-1", group="gang", gpus=1),
        pod("tree-a", group="tree", gpus=1, labels={"kai.scheduler/subgroup-name": "a"}),
        pod("tree-b", group="tree", gpus=1, labels={"kai.scheduler/subgroup-name": "b"}),
        pod("alone", queue="q", gpus=1),  # names no PodGroup: its own, made by the builder
    ]
    result = build_snapshot(objects, NOW)
    assert result.problems == []
    return result.snapshot.podgroups


def test_the_builder_gives_each_job_the_leaves_that_hold_its_pods() -> None:
    found = jobs()
    assert set(found) == {"ns/one", "ns/two", "ns/gang", "ns/tree", "ns/pg-alone"}
    for key, job in found.items():
        assert job._leaves is not None, key  # given, not left to work out
        leaves = job.leaves
        want = worked_out(job)
        assert len(leaves) == len(want) and all(a is b for a, b in zip(leaves, want, strict=True)), key
    assert {p.name for p in found["ns/gang"].pods} == {"gang-0", "gang-1"}
    assert [s.name for s in found["ns/tree"].leaves] == ["a", "b"]


def test_a_clone_gets_its_own_leaves() -> None:
    for key, job in jobs().items():
        copy = job.clone()
        want = worked_out(copy)
        assert len(copy.leaves) == len(want) and all(a is b for a, b in zip(copy.leaves, want, strict=True)), key
        assert all(a is not b for a, b in zip(copy.leaves, job.leaves, strict=True)), key
        assert [p.name for p in copy.pods] == [p.name for p in job.pods]
