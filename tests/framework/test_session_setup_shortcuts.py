"""Shortcuts of the session's opening and of allocate's per-cycle set-up, each checked against the long
way and on the decisions it feeds: the elastic rank of a job of one sub-group read from its counters, the
ready pending jobs of allocate, the status and preemptibility columns packed as bytes, node usability read
from its two fields, and the nodes' GPU memory worked out as one column."""

from __future__ import annotations

from typing import Any

import numpy as np

from kai.actions.allocate import _candidates
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.gpushare import _node_gpu_memory, node_gpu_memory
from kai.framework.podtable import CODE, _small_column
from kai.model import NodeInfo, PodStatus, Resources
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, bound, node, pod, podgroup, queue, run


def _session(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    result = build_snapshot(objects, now=parse_time(NOW))
    return open_session(result.snapshot, SchedulerConfig())[0]


def test_elastic_rank_orders_a_job_below_its_minimum_before_an_older_one_at_it() -> None:
    # Two free GPUs. "grow" (older) runs its minimum and waits for two more pods: rank 1. "fresh" runs
    # nothing, below its minMember of 2: rank 0, so it goes first and takes both GPUs.
    objects: list[dict[str, Any]] = [
        node("n0", gpus=3),
        queue("q"),
        podgroup("grow", "q", min_member=1, created="2025-12-01T00:00:00Z"),
        pod("grow-0", group="grow", gpus=1, node="n0", created="2025-12-01T00:00:00Z"),
        pod("grow-1", group="grow", gpus=1, created="2025-12-01T00:00:00Z"),
        pod("grow-2", group="grow", gpus=1, created="2025-12-01T00:00:00Z"),
        podgroup("fresh", "q", min_member=2, created="2025-12-02T00:00:00Z"),
        pod("fresh-0", group="fresh", gpus=1, created="2025-12-02T00:00:00Z"),
        pod("fresh-1", group="fresh", gpus=1, created="2025-12-02T00:00:00Z"),
    ]
    assert set(bound(run(objects))) == {"ns/fresh-0", "ns/fresh-1"}


def _elastic_rank_by_leaves(job: Any) -> int:
    """The rank by its definition: some leaf below minMember, every leaf at it, or above."""
    if any(sub.active() < sub.min_member for sub in job.leaves):
        return 0
    return 1 if all(sub.active() == sub.min_member for sub in job.leaves) else 2


def test_elastic_rank_is_the_jobs_own() -> None:
    # Below, at and above minMember, with pods of every active status, and a job of two sub-groups.
    subgroups = [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 2}]
    objects: list[dict[str, Any]] = [node("n0", gpus=8), node("n1", gpus=8), queue("q")]
    objects += [podgroup("below", "q", min_member=3)]
    objects += [pod(f"below-{i}", group="below", gpus=1, node="n0" if i < 2 else None) for i in range(3)]
    objects += [podgroup("at", "q", min_member=2)]
    objects += [pod(f"at-{i}", group="at", gpus=1, node="n0" if i < 2 else None) for i in range(3)]
    objects += [podgroup("above", "q", min_member=1)]
    objects += [pod(f"above-{i}", group="above", gpus=1, node="n1") for i in range(3)]
    objects += [podgroup("split", "q", min_member=3, subgroups=subgroups)]
    for i, sub in enumerate("abb"):
        objects.append(pod(f"split-{i}", group="split", gpus=1, node="n1", labels={"kai.scheduler/subgroup-name": sub}))
    ssn = _session(objects)
    jobs = ssn.jobs
    jobs["ns/above"].leaves[0].pods[1].status = PodStatus.PIPELINED
    jobs["ns/above"].leaves[0].recount()
    ranks = {key: job.elastic_rank() for key, job in jobs.items()}
    assert ranks == {key: _elastic_rank_by_leaves(job) for key, job in jobs.items()}
    assert [ranks[f"ns/{name}"] for name in ("below", "at", "above")] == [0, 1, 2]
    ssn.restore()


def test_allocate_candidates_are_the_ready_jobs_with_pending_pods() -> None:
    # "whole": as many pending pods as its minMember (ready at once). "topped": one running, one pending,
    # minMember 2 (ready only with the running pod counted). "gated": two pending and one gated of 3 (not
    # ready). "done": nothing pending.
    objects: list[dict[str, Any]] = [node("n0", gpus=8), queue("q")]
    objects += [podgroup("whole", "q", min_member=2)]
    objects += [pod(f"whole-{i}", group="whole", gpus=1) for i in range(2)]
    objects += [podgroup("topped", "q", min_member=2)]
    objects += [pod("topped-0", group="topped", gpus=1, node="n0"), pod("topped-1", group="topped", gpus=1)]
    objects += [podgroup("gated", "q", min_member=3)]
    objects += [pod(f"gated-{i}", group="gated", gpus=1, gated=i == 2) for i in range(3)]
    objects += [podgroup("done", "q"), pod("done-0", group="done", gpus=1, node="n0")]
    ssn = _session(objects)
    found = [job.key for job in _candidates(ssn)]
    assert found == [
        job.key for job in ssn.jobs_with_pending() if job.has_pending() and job.is_ready()
    ]
    assert found == ["ns/topped", "ns/whole"] or found == ["ns/whole", "ns/topped"]
    ssn.restore()
    assert set(bound(run(objects))) == {"ns/whole-0", "ns/whole-1", "ns/topped-1"}


def test_status_and_preemptible_columns_are_the_objects() -> None:
    objects: list[dict[str, Any]] = [node("n0", gpus=8), queue("q")]
    objects += [podgroup("run", "q", preemptibility="non-preemptible"), pod("run-0", group="run", gpus=1, node="n0")]
    objects += [podgroup("wait", "q", min_member=2)]
    objects += [pod("wait-0", group="wait", gpus=1), pod("wait-1", group="wait", gpus=1, gated=True)]
    objects += [podgroup("gone", "q"), pod("gone-0", group="gone", gpus=1, node="n0", deleting=True)]
    ssn = _session(objects)
    table = ssn.table
    assert table.columns.status.tolist() == [CODE[p.status] for p in table.pods]
    assert table.columns.status.dtype == np.int8 and table.columns.status.flags.writeable
    assert table.preemptible.tolist() == [job.preemptible for job in table.jobs]
    assert table.preemptible.dtype == np.bool_
    assert not all(table.preemptible.tolist()) and any(table.preemptible.tolist())
    ssn.restore()


def test_small_columns_take_the_long_way_for_other_values() -> None:
    assert _small_column(lambda: iter([0, 3, 7]), np.int8, 3).tolist() == [0, 3, 7]
    assert _small_column(lambda: iter([True, False]), np.bool_, 2).tolist() == [True, False]
    assert _small_column(lambda: iter([None, 2.0]), np.bool_, 2).tolist() == [False, True]
    assert _small_column(lambda: iter([-1, 300]), np.int64, 2).tolist() == [-1, 300]


def test_only_usable_nodes_take_pods() -> None:
    # n0 is cordoned and n1 not ready: the pod can only go to n2 (last in name order).
    objects: list[dict[str, Any]] = [
        node("n0", gpus=8, unschedulable=True),
        node("n1", gpus=8, ready=False),
        node("n2", gpus=8),
        queue("q"),
        podgroup("w", "q"),
        pod("w-0", group="w", gpus=1),
    ]
    assert bound(run(objects)) == {"ns/w-0": "n2"}
    ssn = _session(objects)
    assert ssn.nodes.usable.tolist() == [n.usable for n in ssn.nodes.infos] == [False, False, True]
    ssn.restore()


def test_node_gpu_memory_column_is_each_nodes() -> None:
    values: list[Any] = [0, 81920, 40960, 1, 99, 150, 80 * 1024**3, 1024 * 1024, 1024 * 1024 - 1, 2**40, -150]
    nodes = [NodeInfo(f"n{i}", Resources({}), gpu_memory_mib=v) for i, v in enumerate(values)]
    assert node_gpu_memory(nodes).tolist() == [_node_gpu_memory(v) for v in values]
    assert node_gpu_memory(nodes).dtype == np.float64
    odd = [NodeInfo("a", Resources({}), gpu_memory_mib=2**70), NodeInfo("b", Resources({}), gpu_memory_mib=150)]
    assert node_gpu_memory(odd).tolist() == [_node_gpu_memory(2**70), 100.0]
    assert node_gpu_memory([]).tolist() == []


def test_node_rows_are_read_once_for_the_session_and_its_node_arrays() -> None:
    from kai.framework.session import _named

    objects: list[dict[str, Any]] = [node("b", gpus=8), node("a", gpus=8), queue("q"), podgroup("w", "q")]
    objects.append(pod("w-0", group="w", gpus=1))
    ssn = _session(objects)
    names = [n.name for n in ssn.nodes.infos]
    assert ssn.nodes.names == names
    assert ssn.nodes.index == {name: i for i, name in enumerate(names)} == ssn.gpus.index
    ssn.restore()
    twice = [NodeInfo(name, Resources({})) for name in ("x", "y", "x")]
    assert _named(twice) == (["x", "y", "x"], {name.name: i for i, name in enumerate(twice)})
