"""The shortcuts for a gang's pods placed in a row (kai.framework.placement, placementcache, statement):

- the placement cache reuses the key it worked out for the pod before when the next pod is of the same
  kind (`same_kind`: every spec field a filter, a signature or the request vector may read);
- a batch's allocations tell the on_allocate hooks once, after the batch (`BatchHook`: proportion's queue
  accounting), adding a run of equal queue vectors one by one as the per-pod hook would.

Each test fails when its shortcut is broken: a pod of another kind answered from the pod before, a sum
added in one step instead of one pod at a time, a failed gang whose deferred allocations were never
counted before the rollback took them away again."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import kai.framework.statement as statement
from kai.actions.allocate import allocate
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.placementcache import placement_cache, same_kind
from kai.model import GpuRequest, PodInfo, Resources, Toleration
from kai.snapshot.builder import build_snapshot
from tests.actions.placing import gang, used
from tests.scenario import NOW, bound, node, pod, podgroup, queue, run


def test_pods_of_one_gang_with_different_selectors_each_go_where_their_own_selector_allows() -> None:
    # Gang x: x-0 asks for zone a, x-1 for zone b, the same request otherwise. Bin-packing would put x-1
    # on node a too (the fullest) if it were answered from x-0's key.
    objects = [
        node("a", gpus=8, labels={"zone": "a"}),
        node("b", gpus=8, labels={"zone": "b"}),
        queue("q"),
        *used("ra", "a", 4),
        podgroup("x", "q", 2, created="2026-01-01T00:00:01Z"),
        pod("x-0", group="x", gpus=1, node_selector={"zone": "a"}, created="2026-01-01T00:00:01Z"),
        pod("x-1", group="x", gpus=1, node_selector={"zone": "b"}, created="2026-01-01T00:00:01Z"),
    ]
    assert bound(run(objects)) == {"ns/x-0": "a", "ns/x-1": "b"}


def _pod(**changes: Any) -> PodInfo:
    base = PodInfo("ns", "p-0", "uid-0", 1.0, Resources({"cpu": 1000.0}), job_key="ns/x")
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(
    "changes",
    [
        {"requests": Resources({"cpu": 1000.0})},  # equal, but another object: not known to be the same
        {"gpu": GpuRequest(fraction=0.5)},
        {"namespace": "other"},
        {"job_key": "ns/y"},
        {"subgroup": "workers"},
        {"labels": {"app": "web"}},
        {"node_selector": (("zone", "a"),)},
        {"tolerations": (Toleration("gpu", "Exists"),)},
        {"claims": ("data",)},
        {"nominated_node": "a"},
        {"task_priority": 3},
        {"priority_class_name": "high"},
        {"scheduler_name": "other"},
    ],
)
def test_pods_that_differ_in_a_spec_field_are_not_of_the_same_kind(changes: dict[str, Any]) -> None:
    first = _pod()
    assert same_kind(first, dataclasses.replace(first, name="p-1", uid="uid-1", creation=2.0))
    assert not same_kind(first, _other(first, changes))


def _other(first: PodInfo, changes: dict[str, Any]) -> PodInfo:
    return dataclasses.replace(first, name="p-1", uid="uid-1", **changes)


def _allocated(objects: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Every queue's allocation (floats as the accounting holds them) after one allocate."""
    built = build_snapshot(objects, now=parse_time(NOW))
    ssn, _ = open_session(built.snapshot, SchedulerConfig())
    allocate(ssn)
    return {name: attrs.allocated.tolist() for name, attrs in ssn.accounting.attrs.items()}


def test_a_gang_of_fractional_pods_is_counted_one_pod_at_a_time(monkeypatch) -> None:
    # Ten pods of a tenth of a GPU each: 0.1 added ten times is 0.9999999999999999, ten times 0.1 is 1.0.
    objects = [
        node("a", gpus=8),
        queue("q"),
        podgroup("x", "q", 10, created="2026-01-01T00:00:01Z"),
        *[
            pod(f"x-{i}", group="x", cpu="100m", annotations={"gpu-fraction": "0.1"}, created="2026-01-01T00:00:01Z")
            for i in range(10)
        ],
    ]
    batched = _allocated(objects)
    monkeypatch.setattr(statement.Statement, "defers", lambda self: False)
    assert batched == _allocated(objects)
    total = 0.0
    for _ in range(10):
        total += 0.1
    assert batched["q"][0] == total


def test_a_gang_that_fails_halfway_leaves_its_queue_as_it_was(monkeypatch) -> None:
    # Free GPUs: a 4, b 4, c 2. Gang x needs 3 pods of 4 GPUs: two are placed (a, b: their accounting
    # deferred), the third fails and the statement rolls the two back. Gang y (2 x 2 GPUs) comes after
    # it; the queue's allocation is then the running pods' 14 GPUs and y's 4.
    objects = [
        node("a", gpus=8),
        node("b", gpus=8),
        node("c", gpus=8),
        queue("q"),
        *used("ra", "a", 4),
        *used("rb", "b", 4),
        *used("rc", "c", 6),
        *gang("x", 3, 4, "2026-01-01T00:00:01Z"),
        *gang("y", 2, 2, "2026-01-01T00:00:02Z"),
    ]
    batched = _allocated(objects)
    assert batched["q"][0] == 14.0 + 4.0
    monkeypatch.setattr(statement.Statement, "defers", lambda self: False)
    assert batched == _allocated(objects)
    assert sorted(bound(run(objects))) == ["ns/y-0", "ns/y-1"]


def test_the_entry_held_for_a_kind_is_the_one_of_its_pipelining_flag() -> None:
    # a: 1 GPU idle, 4 being released; b: 2 idle. A pod of 3 GPUs fits nowhere now, and on a once the
    # release is done: x-1, of x-0's kind, asked with pipelining must not get x-0's answer without it.
    objects = [
        node("a", gpus=5),
        node("b", gpus=2),
        queue("q"),
        *used("rd", "a", 4, deleting=True),
        *gang("x", 2, 3, "2026-01-01T00:00:01Z"),
    ]
    built = build_snapshot(objects, now=parse_time(NOW))
    ssn, _ = open_session(built.snapshot, SchedulerConfig())
    pods = {p.name: p for p in ssn.pods}
    with placement_cache(ssn) as cache:
        assert cache.find(pods["x-0"], False) is None
        assert cache.find(pods["x-1"], True) == (ssn.nodes.index["a"], False)
        assert cache.find(pods["x-0"], False) is None


def test_a_parent_queue_limit_is_read_from_the_parent() -> None:
    # Queue d may use 4 GPUs, its child t has no limit of its own: a gang of t asking for 6 does not start.
    # (The capacity check keeps every queue's caps as floats, per queue.)
    objects = [
        node("a", gpus=8),
        queue("d", gpu={"quota": 0, "overQuotaWeight": 1, "limit": 4}),
        queue("t", parent="d"),
        podgroup("x", "t", 6, created="2026-01-01T00:00:01Z"),
        *[pod(f"x-{i}", group="x", gpus=1, created="2026-01-01T00:00:01Z") for i in range(6)],
        podgroup("y", "t", 3, created="2026-01-01T00:00:02Z"),
        *[pod(f"y-{i}", group="y", gpus=1, created="2026-01-01T00:00:02Z") for i in range(3)],
    ]
    assert sorted(bound(run(objects))) == ["ns/y-0", "ns/y-1", "ns/y-2"]
