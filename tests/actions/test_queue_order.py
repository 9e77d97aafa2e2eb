"""Queue order in allocate (which queue's next job is tried first), rule by rule, as KAI orders queues:

1. a queue not over its fair share in every resource before one that is;
2. a queue that stays within its deserved quota with its next job before one that does not;
3. higher queue priority;
4. a queue that would use a resource of which its allocatable share is 0 last;
5. smaller dominant share with the next job;  6. smaller dominant share without it;
7. smaller allocatable share (at most the other's in every resource, smaller in one);
8. older queue; then (kai's choice, KAI leaves it to chance) the name.

The allocatable share is max(deserved, fair share), capped by the limit only (a quota larger than the
cluster is not cut down to it); -1 deserved means the limit, or the whole cluster with no limit either.
Every scenario has room for one of two jobs only, so the pod that runs names the queue that went first.
Only allocate runs: no evicting action changes the outcome.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.scenario import node, pod, podgroup, queue, run

ALLOCATE = {"actions": "allocate"}
OLD, NEW = "2025-12-01T00:00:00Z", "2025-12-02T00:00:00Z"
NO_SHARE = {"quota": 0, "overQuotaWeight": 0, "limit": -1}


def gpu(quota: float, limit: float = -1, weight: float = 1) -> dict[str, float]:
    return {"quota": quota, "overQuotaWeight": weight, "limit": limit}


def job(name: str, q: str, gpus: int = 1, on: str | None = None, size: int = 1, **pod_kw: Any) -> list[dict]:
    objects = [podgroup(name, q, min_member=1)]
    objects += [pod(f"{name}-{i}", group=name, gpus=gpus, node=on, **pod_kw) for i in range(size)]
    return objects


def winner(objects: list[dict], config: dict | None = None) -> list[str]:
    result = run(objects, config=config or ALLOCATE)
    return sorted(b["pod"].split("/")[1] for b in result["rounds"][0]["bound"])


# -- scenarios (module level, so that each can be replayed elsewhere) ------------------------------------


def over_used(pods_ask_cpu: bool) -> list[dict]:
    # n0 is cordoned: a's two running pods count for a but n0's GPUs are not in the cluster total (1 GPU),
    # so a (priority 10) has a fair share of 1 GPU and 2 allocated. b (priority 0) has nothing.
    kw: dict[str, Any] = {"cpu": "1", "memory": "1Gi"} if pods_ask_cpu else {}
    shares: dict[str, Any] = {"cpu": NO_SHARE, "memory": NO_SHARE} if pods_ask_cpu else {}
    return [
        node("n0", gpus=2, unschedulable=True),
        node("n1", gpus=1),
        queue("a", priority=10, gpu=gpu(0), created=OLD, **shares),
        queue("b", priority=0, gpu=gpu(0), created=NEW, **shares),
        *job("a-running", "a", on="n0", size=2, **kw),
        *job("a-next", "a", **kw),
        *job("b-next", "b", **kw),
    ]


def within_deserved() -> list[dict]:
    # b (priority 0) deserves 1 GPU and asks for 1; a (priority 10) deserves nothing.
    return [
        node("n1", gpus=1),
        queue("a", priority=10, gpu=gpu(0), created=OLD),
        queue("b", priority=0, gpu=gpu(1), created=NEW),
        *job("a-next", "a"),
        *job("b-next", "b"),
    ]


def priority_over_share() -> list[dict]:
    # a (priority 200) asks for both GPUs, b (priority 100) for one: priority before dominant share.
    return [
        node("n1", gpus=2),
        queue("a", priority=200, gpu=gpu(0), created=NEW),
        queue("b", priority=100, gpu=gpu(0), created=OLD),
        *job("a-next", "a", gpus=2),
        *job("b-next", "b", gpus=1),
    ]


def zero_share() -> list[dict]:
    # a may get no GPUs at all (quota 0, weight 0: allocatable 0) and asks for one: its dominant share
    # counts the GPU a thousandfold (1000). b's share of CPU is 1 millicore and its job asks for 2 CPUs
    # (2000): rule 5 would pick a, rule 4 (a uses a resource it has no share of) puts it last.
    return [
        node("n1", gpus=1),
        queue("a", gpu=gpu(0, weight=0), created=OLD),
        queue("b", gpu=gpu(1), cpu=gpu(1, weight=0), created=NEW),
        *job("a-next", "a"),
        *job("b-next", "b", cpu="2"),
    ]


def share_with_job() -> list[dict]:
    # Both have a fair share of 1 GPU; a's job (2 GPUs) would give it twice b's dominant share.
    return [
        node("n1", gpus=2),
        queue("a", gpu=gpu(0), created=OLD),
        queue("b", gpu=gpu(0), created=NEW),
        *job("a-next", "a", gpus=2),
        *job("b-next", "b", gpus=1),
    ]


def share_without_job() -> list[dict]:
    # Both deserve 4 (allocatable 4). a runs 1 and asks for 2 (3/4 with the job, 1/4 without); b runs
    # nothing and asks for 3 (3/4 with, 0 without): b first, although a is older. 3 GPUs are free.
    return [
        node("n0", gpus=1),
        node("n1", gpus=3),
        queue("a", gpu=gpu(4), created=OLD),
        queue("b", gpu=gpu(4), created=NEW),
        *job("a-running", "a", on="n0"),
        *job("a-next", "a", gpus=2),
        *job("b-next", "b", gpus=3),
    ]


def smaller_allocatable(cpu_against: bool) -> list[dict]:
    # 4 GPUs, 2 free. a deserves 2 and asks for 1, b deserves 4 and asks for 2: dominant share 1/2 both
    # ways, with and without the job. a's allocatable share is smaller (rule 7) but a is newer (rule 8).
    # With cpu_against, a's CPU share is larger than b's: the shares do not compare, the older b wins.
    cpu_a = {"cpu": gpu(4000)} if cpu_against else {}
    cpu_b = {"cpu": gpu(2000)} if cpu_against else {}
    return [
        node("n1", gpus=2, cpu="8"),
        node("n2", gpus=2, cpu="8"),
        queue("a", gpu=gpu(2), created=NEW, **cpu_a),
        queue("b", gpu=gpu(4), created=OLD, **cpu_b),
        queue("c", gpu=gpu(0), created=OLD),
        *job("c-running", "c", gpus=2, on="n2"),
        *job("a-next", "a", gpus=1, cpu="2" if cpu_against else None),
        *job("b-next", "b", gpus=2, cpu="1" if cpu_against else None),
    ]


def unbounded_share() -> list[dict]:
    # 8 GPUs, 5 free. a has no quota and no limit (allocatable: the whole cluster, 8), b deserves 10.
    # a asks for 4 (4/8), b for 5 (5/10): equal dominant shares; rule 7 ranks the unbounded share above
    # any number, so b goes first although a is older (were a's share counted as 8, a would win).
    return [
        node("n1", gpus=5),
        node("n2", gpus=3),
        queue("a", gpu=gpu(-1), created=OLD),
        queue("b", gpu=gpu(10), created=NEW),
        queue("c", gpu=gpu(0), created=OLD),
        *job("c-running", "c", gpus=3, on="n2"),
        *job("a-next", "a", gpus=4),
        *job("b-next", "b", gpus=5),
    ]


def quota_above_cluster() -> list[dict]:
    # 2 GPUs. a deserves 2 and asks for 1 (1/2); b deserves 8 and asks for 2: 2/8, not 2/2 - the quota is
    # not cut down to the cluster's size. b first.
    return [
        node("n1", gpus=2),
        queue("a", gpu=gpu(2), created=OLD),
        queue("b", gpu=gpu(8), created=NEW),
        *job("a-next", "a", gpus=1),
        *job("b-next", "b", gpus=2),
    ]


def equal_queues(a_created: str, b_created: str) -> list[dict]:
    return [
        node("n1", gpus=1),
        queue("b", gpu=gpu(1), created=b_created),
        queue("a", gpu=gpu(1), created=a_created),
        *job("a-next", "a"),
        *job("b-next", "b"),
    ]


def departments() -> list[dict]:
    # Queues are compared level by level. d1 deserves 2 and runs 2 (team tx); d2 deserves 2 and runs
    # nothing. Leaf tx deserves 4, leaf ty nothing: compared as leaves, tx (3 of 4 with its job) would win
    # over ty (1 over a quota of 0); at the top, d2 stays within its quota with ty's job and d1 does not.
    return [
        node("n0", gpus=2),
        node("n1", gpus=1),
        queue("d1", gpu=gpu(2), created=OLD),
        queue("d2", gpu=gpu(2), created=NEW),
        queue("tx", "d1", gpu=gpu(4), created=OLD),
        queue("ty", "d2", gpu=gpu(0), created=NEW),
        *job("x-running", "tx", on="n0", size=2),
        *job("x-next", "tx"),
        *job("y-next", "ty"),
    ]


def department_ranked_by_its_last_team() -> list[dict]:
    # 10 GPUs, 2 free (c in d2 runs 8 and may get nothing: weight 0). d1's fair share is 9, d0's 1 (all
    # it asks for). In d1, team tx (quota 2) has a 1-GPU job and then a 16-GPU one, team ty (quota 0) a
    # 1-GPU job; d0's team tw a 1-GPU job. First tx's small job (d1 at 1 of 9 with it). Then d1 is ranked
    # by the team it last ran a job from, tx, whose next job (16 GPUs) puts d1 at 17 of 9: d0 (1 of 1)
    # goes first. Were d1 ranked by its best team now (ty: 2 of 9), ty's job would take the second GPU.
    return [
        node("n1", gpus=10),
        queue("d0", gpu=gpu(0), created=OLD),
        queue("d1", gpu=gpu(0), created=OLD),
        queue("d2", gpu=gpu(0, weight=0), created=OLD),
        queue("tw", "d0", gpu=gpu(0), created=OLD),
        queue("tx", "d1", gpu=gpu(2), created=OLD),
        queue("ty", "d1", gpu=gpu(0), created=OLD),
        queue("tc", "d2", gpu=gpu(0, weight=0), created=OLD),
        *job("c-running", "tc", on="n1", size=8),
        podgroup("x-small", "tx", created=OLD),
        pod("x-small", group="x-small", gpus=1),
        podgroup("x-big", "tx", created=NEW),
        pod("x-big", group="x-big", gpus=16),
        *job("y-next", "ty"),
        *job("w-next", "tw"),
    ]


def elastic_requeued() -> list[dict]:
    # Elastic e (min 1, 3 pods) in a, single f in b, 2 GPUs, equal shares of 1: e gets one pod, goes back
    # into the queue, and b is then ahead (a: 2 of 1 with its next pod; b: 1 of 1).
    return [
        node("n1", gpus=2),
        queue("a", gpu=gpu(0), created=OLD),
        queue("b", gpu=gpu(0), created=NEW),
        podgroup("e", "a", min_member=1),
        *[pod(f"e-{i}", group="e", gpus=1) for i in range(3)],
        *job("f", "b"),
    ]


def unlimited_quota(limit: float) -> list[dict]:
    # As quota_above_cluster, but b has no quota (-1): its allocatable share is its limit, or with no
    # limit the whole cluster (2 GPUs).
    objects = quota_above_cluster()
    objects[2] = queue("b", gpu=gpu(-1, limit=limit), created=NEW)
    return objects


SCENARIOS = {
    "over-used-cpu": lambda: over_used(True),
    "over-used-gpu-only": lambda: over_used(False),
    "within-deserved": within_deserved,
    "priority": priority_over_share,
    "zero-share": zero_share,
    "share-with-job": share_with_job,
    "share-without-job": share_without_job,
    "smaller-allocatable": lambda: smaller_allocatable(False),
    "allocatable-incomparable": lambda: smaller_allocatable(True),
    "unbounded-share": unbounded_share,
    "quota-above-cluster": quota_above_cluster,
    "no-quota-limit": lambda: unlimited_quota(8),
    "no-quota-no-limit": lambda: unlimited_quota(-1),
    "older-b": lambda: equal_queues(NEW, OLD),
    "older-a": lambda: equal_queues(OLD, NEW),
    "same-age": lambda: equal_queues(OLD, OLD),
    "departments": departments,
    "department-last-team": department_ranked_by_its_last_team,
    "elastic-requeued": elastic_requeued,
}

EXPECTED = {
    # rule 1: a is over its share in GPUs, CPU and memory: b first, despite a's priority
    "over-used-cpu": ["b-next-0"],
    # a's pods ask for no CPU or memory, so a is not over its share in every resource: priority decides
    "over-used-gpu-only": ["a-next-0"],
    "within-deserved": ["b-next-0"],  # rule 2 before priority
    "priority": ["a-next-0"],  # rule 3 before dominant share
    "zero-share": ["b-next-0"],  # rule 4 before dominant share
    "share-with-job": ["b-next-0"],  # rule 5
    "share-without-job": ["b-next-0"],  # rule 6 before age
    "smaller-allocatable": ["a-next-0"],  # rule 7 before age
    "allocatable-incomparable": ["b-next-0"],  # rule 7 undecided: age
    "unbounded-share": ["b-next-0"],
    "quota-above-cluster": ["b-next-0"],
    "no-quota-limit": ["b-next-0"],  # 2 of its limit 8 against a's 1 of 2
    "no-quota-no-limit": ["a-next-0"],  # 2 of the cluster's 2 against 1 of 2
    "older-b": ["b-next-0"],  # rule 8
    "older-a": ["a-next-0"],
    "same-age": ["a-next-0"],  # kai: by name (KAI: either)
    "departments": ["y-next-0"],
    "department-last-team": ["w-next-0", "x-small"],
    "elastic-requeued": ["e-0", "f-0"],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_queue_order(name: str) -> None:
    assert winner(SCENARIOS[name]()) == EXPECTED[name]


def test_without_full_hierarchy_fairness_second_level_queues_are_compared_as_siblings() -> None:
    # The departments scenario with fullHierarchyFairness off: the teams are compared directly, and tx
    # (within its quota of 4 with its job) goes before ty (over its quota of 0).
    config = {**ALLOCATE, "schedulerParams": {"fullHierarchyFairness": False}}
    assert winner(departments(), config) == ["x-next-0"]


def test_without_full_hierarchy_fairness_a_top_level_queue_schedules_nothing() -> None:
    objects = [node("n1", gpus=4), queue("solo", gpu=gpu(2)), queue("d", gpu=gpu(2)), queue("t", "d", gpu=gpu(2))]
    objects += [*job("js", "solo"), *job("jt", "t")]
    config = {**ALLOCATE, "schedulerParams": {"fullHierarchyFairness": False}}
    assert winner(objects, config) == ["jt-0"]
