"""Pieces of the victim solver that the scenario tests do not show: scheduling signatures, the
cheap GPU filter, and which pods of a victim job go first."""

from __future__ import annotations

import numpy as np

from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.victims import Signatures, _gpu_feasible, tasks_to_evict
from kai.snapshot.builder import build_snapshot
from tests.actions.evict_helpers import gq, job
from tests.scenario import NOW, node


def snapshot_jobs(objects: list[dict]):  # type: ignore[no-untyped-def]
    built = build_snapshot(objects, now=parse_time(NOW))
    assert not built.problems
    return built.snapshot


def test_signature_skips_look_alikes_unless_easier() -> None:
    objects = [node("n1"), gq("q", 1)]
    objects += job("big", "q", gpus=4, size=2) + job("same", "q", gpus=4, size=2)
    objects += job("fewer", "q", gpus=4, size=1) + job("smaller", "q", gpus=2, size=2)
    picky = job("picky", "q", gpus=4, size=2)
    for obj in picky[1:]:
        obj["spec"]["nodeSelector"] = {"zone": "a"}
    snap = snapshot_jobs(objects + picky)
    jobs = snap.podgroups
    sigs = Signatures()
    sigs.record("q", jobs["ns/big"])
    assert sigs.skip("q", jobs["ns/same"])  # same signature, not easier
    assert not sigs.skip("q", jobs["ns/fewer"])  # fewer pending pods
    assert not sigs.skip("q", jobs["ns/smaller"])  # a smaller request
    assert not sigs.skip("q", jobs["ns/picky"])  # another node selector: another signature
    assert not sigs.skip("other-queue", jobs["ns/same"])  # signatures are per queue


def test_gpu_filter() -> None:
    free = np.array([3.0, 3.0, 2.0])
    assert _gpu_feasible(free, [3.0, 3.0])
    assert not _gpu_feasible(free, [4.0])  # no node has 4
    assert not _gpu_feasible(free, [3.0, 3.0, 3.0])  # 9 > 8 in all
    assert not _gpu_feasible(free, [2.0, 2.0, 2.0, 2.0])  # floor(3/2) + floor(3/2) + 1 = 3 < 4
    assert _gpu_feasible(free, [0.0, 0.0])  # no GPUs asked


def test_elastic_victims_lose_extras_one_at_a_time_then_the_whole_gang() -> None:
    objects = [node("n1"), gq("q", 8)]
    objects += job("e", "q", size=4, min_member=2, nodes="n1")
    ssn, _ = open_session(snapshot_jobs(objects), SchedulerConfig())
    victim = ssn.jobs["ns/e"]
    gone: set[int] = set()
    chunks = []
    for _ in range(3):
        tasks, extra = tasks_to_evict(ssn, victim, gone)
        chunks.append((sorted(t.name for t in tasks), extra))
        gone.update(id(t) for t in tasks)
    assert chunks == [(["e-3"], True), (["e-2"], True), (["e-0", "e-1"], False)]
    assert tasks_to_evict(ssn, victim, gone) == ([], False)


def elastic_beside_a_gang() -> list[dict]:
    """n1 (8 GPUs), queues a and b (quota 4 each). a runs three non-preemptible 1-GPU jobs, an elastic
    job e (build-preemptible, priority 75, minMember 1, three 1-GPU pods) and a gang g (train, priority 50,
    two 1-GPU pods). b waits for 1 GPU. Fair shares: b 1, a 7; a holds 8."""
    objects = [node("n1", gpus=8), gq("a", 4), gq("b", 4)]
    for i in range(3):
        objects += job(f"o{i}", "a", nodes="n1", priority_class="build", age=300 - i)
    objects += job("e", "a", size=3, min_member=1, nodes="n1", priority_class="build-preemptible", age=200)
    return objects + job("g", "a", size=2, nodes="n1", age=100) + job("want", "b", age=1)


def test_victims_go_lowest_priority_first_even_if_that_breaks_a_gang() -> None:
    # Reverse job order: the lower priority (g, 50) before e's extras (75): the whole gang goes.
    from tests.actions.evict_helpers import evictions
    from tests.scenario import run

    result = run(elastic_beside_a_gang(), config={"actions": "allocate, reclaim"})
    assert set(evictions(result)) == {"ns/g-0", "ns/g-1"}


def test_opt_in_elastic_extras_go_before_any_gang_is_broken() -> None:
    # evictElasticExtrasFirst: e's newest extra pod is enough for b's 1 GPU; g keeps running.
    from tests.actions.evict_helpers import evictions
    from tests.scenario import run

    config = {"actions": "allocate, reclaim", "schedulerParams": {"evictElasticExtrasFirst": True}}
    assert set(evictions(run(elastic_beside_a_gang(), config=config))) == {"ns/e-2"}


def test_a_gang_spread_over_two_nodes_counts_where_it_shares_a_node() -> None:
    # n1: s1 (3 GPUs, queue a) and g-0 (1 GPU); n2: g-1 (1 GPU) and x (3 GPUs, queue c, non-preemptible).
    # b wants one 4-GPU pod. Victim order in a is newest first: the gang g, then s1. g alone frees 1 GPU
    # on each node (not enough anywhere); with s1 popped, n1 has g-0's GPU and s1's 3: the job fits there.
    # Neither victim finds another place (n2 has 1 GPU free), so both stay evicted.
    from tests.actions.evict_helpers import evictions
    from tests.scenario import run

    objects = [node("n1", gpus=4), node("n2", gpus=4), gq("a", 0), gq("b", 4), gq("c", 3)]
    objects += job("s1", "a", gpus=3, nodes="n1", age=20)
    objects += job("g", "a", gpus=1, size=2, nodes=["n1", "n2"], age=10)
    objects += job("x", "c", gpus=3, nodes="n2", priority_class="build", age=30)
    objects += job("want", "b", gpus=4, age=1)
    result = run(objects, config={"actions": "allocate, reclaim"})
    assert set(evictions(result)) == {"ns/g-0", "ns/g-1", "ns/s1"}
    assert result["rounds"][0]["pipelined"] == [{"pod": "ns/want", "node": "n1"}]


def test_victims_of_the_first_task_are_kept_while_the_next_one_looks() -> None:
    # n1 runs four 2-GPU pods of queue a (a1 oldest .. a4 newest); n2 is full with x (queue c, not
    # preemptible). b's gang wants two 4-GPU pods. a4 + a3 make room for the first pod on n1; the second
    # needs a2 and a1 as well: a2 alone leaves n1 with 6 GPUs, room for one pod only.
    from tests.actions.evict_helpers import evictions
    from tests.scenario import run

    objects = [node("n1", gpus=8), node("n2", gpus=8), gq("a", 0), gq("b", 8), gq("c", 8)]
    for i, age in enumerate((40, 30, 20, 10), start=1):
        objects += job(f"a{i}", "a", gpus=2, nodes="n1", age=age)
    objects += job("x", "c", gpus=8, nodes="n2", priority_class="build", age=50)
    objects += job("want", "b", gpus=4, size=2, age=1)
    result = run(objects, config={"actions": "allocate, reclaim"})
    assert set(evictions(result)) == {"ns/a1", "ns/a2", "ns/a3", "ns/a4"}
    placed = sorted((p["pod"], p["node"]) for p in result["rounds"][0]["pipelined"])
    assert placed == [("ns/want-0", "n1"), ("ns/want-1", "n1")]
