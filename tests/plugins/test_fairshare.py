"""Fair-share division, worked out by hand from KAI's division rules."""

from __future__ import annotations

import pytest

from kai.plugins.proportion.fairshare import ShareRequest, divide
from tests.scenario import node, pod, podgroup, queue, run


def q(
    name: str,
    request: float,
    deserved: float = 0,
    limit: float = -1,
    weight: float = 1,
    priority: int = 100,
    creation: float = 0.0,
) -> ShareRequest:
    return ShareRequest(name, deserved, limit, weight, priority, request, creation)


def test_deserved_first_then_weights_then_flooring_remainder() -> None:
    # 10 GPUs; both queues deserve 2 and want 10. Surplus 6 split 1:3 -> 1.5 and 4.5, floored to 1 and 4;
    # the 1 GPU left over goes to the larger leftover (tie 0.5/0.5 -> older, then name: a).
    shares = divide(10, [q("a", 10, deserved=2, weight=1), q("b", 10, deserved=2, weight=3)])
    assert shares == {"a": 4, "b": 6}


def test_equal_weights_split_whole_gpus_and_the_remainder_goes_by_name() -> None:
    assert divide(10, [q("c", 10), q("a", 10), q("b", 10)]) == {"a": 4, "b": 3, "c": 3}


def test_older_queue_wins_the_remainder_tie() -> None:
    shares = divide(10, [q("a", 10, creation=200), q("b", 10, creation=100), q("c", 10, creation=300)])
    assert shares == {"a": 3, "b": 4, "c": 3}


def test_higher_priority_level_is_served_strictly_first() -> None:
    # Priority 200 takes all it wants (6); priority 100 only gets what is left (2), despite equal weights.
    assert divide(8, [q("hi", 6, priority=200), q("lo", 8, priority=100)]) == {"hi": 6, "lo": 2}


def test_a_capped_queue_returns_its_slice_to_the_others() -> None:
    # Round 1: 6 each, but 'a' can use only 3 (limit). Round 2: 'b' gets the 3 'a' left.
    assert divide(12, [q("a", 10, limit=3), q("b", 10)]) == {"a": 3, "b": 9}


def test_demand_caps_the_deserved_quota_and_idle_quota_is_lent() -> None:
    # 'a' deserves 6 but wants 2: it gets 2, and 'b' (no quota) gets the 6 that would sit idle.
    assert divide(8, [q("a", 2, deserved=6), q("b", 10)]) == {"a": 2, "b": 6}


def test_zero_weight_gets_no_surplus() -> None:
    assert divide(8, [q("a", 8, deserved=1, weight=0), q("b", 8, weight=1)]) == {"a": 1, "b": 7}


def test_unlimited_quota_takes_the_whole_level() -> None:
    assert divide(8, [q("a", 5, deserved=-1), q("b", 5)]) == {"a": 5, "b": 3}


def test_no_demand_no_share() -> None:
    assert divide(8, [q("a", 0, deserved=4), q("b", 0)]) == {"a": 0, "b": 0}


def test_time_based_usage_shifts_the_surplus_to_the_queue_that_used_less() -> None:
    # Normalised weights 0.5 each; usage 0.8 vs 0.2 with k=1: 0.5+(0.5-0.8)=0.2, 0.5+(0.5-0.2)=0.8.
    heavy = ShareRequest("heavy", 0, -1, 1, 100, 10, usage=0.8)
    light = ShareRequest("light", 0, -1, 1, 100, 10, usage=0.2)
    assert divide(10, [heavy, light], k_value=1.0) == {"heavy": 2, "light": 8}


def _hierarchy() -> list[dict]:
    objects = [
        node("n1", gpus=8),
        node("n2", gpus=8),
        queue("dept1", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1}),
        queue("dept2", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}),
        queue("t1", "dept1", gpu={"quota": 4, "overQuotaWeight": 1, "limit": -1}),
        queue("t2", "dept1", gpu={"quota": 0, "overQuotaWeight": 2, "limit": -1}),
        queue("t3", "dept2", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}),
    ]
    for team, count in (("t1", 10), ("t2", 10), ("t3", 4)):
        for i in range(count):
            objects += [podgroup(f"{team}-{i}", team), pod(f"{team}-{i}", group=f"{team}-{i}", gpus=1)]
    return objects


def test_two_level_hierarchy_through_simulate() -> None:
    # Top: dept1 deserves 8, dept2 0; surplus 8 split 4/4, dept2 only wants 4 -> dept1 12, dept2 4.
    # dept1's 12: t1 deserves 4; surplus 8 split 1:2 -> 2.67 / 5.33, floored 2 / 5, remainder 1 to t1.
    result = run(_hierarchy())
    share = {name: q["fairShare"]["gpu"] for name, q in result["queues"].items()}
    assert share == {"dept1": 12, "dept2": 4, "t1": 7, "t2": 5, "t3": 4}
    # Allocate follows the fair order: every queue ends with its fair share of the 16 GPUs.
    running: dict[str, int] = {}
    for key, p in result["pods"].items():
        if p["status"] == "Running":
            team = key.split("/")[1].split("-")[0]
            running[team] = running.get(team, 0) + 1
    assert running == {"t1": 7, "t2": 5, "t3": 4}


def test_queue_units_in_the_report() -> None:
    objects = [
        node("n1", gpus=2, cpu="8", memory="16G"),
        queue(
            "q",
            gpu={"quota": 1, "limit": -1, "overQuotaWeight": 1},
            cpu={"quota": 1500, "limit": -1, "overQuotaWeight": 1},
            memory={"quota": 2000, "limit": -1, "overQuotaWeight": 1},
        ),
        podgroup("pg", "q"),
        pod("p", group="pg", gpus=1, cpu="500m", memory="1G"),
    ]
    report = run(objects, rounds=2)["queues"]["q"]  # as the second session opened: the pod runs
    assert report["allocated"] == {"gpu": 1.0, "cpu": 500.0, "memory": 1000.0}  # GPUs, millicores, MB
    assert report["fairShare"] == {"gpu": 1.0, "cpu": 500.0, "memory": 1000.0}


@pytest.mark.parametrize("full", [True, False])
def test_full_hierarchy_fairness_switch(full: bool) -> None:
    # Two departments of unequal quota, one team each. With full hierarchy fairness the department
    # quotas decide (6/2); without it the teams compete directly under one unlimited parent (4/4).
    objects = [
        node("n1", gpus=8),
        queue("d1", gpu={"quota": 6, "overQuotaWeight": 1, "limit": -1}),
        queue("d2", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}),
        queue("a", "d1", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}),
        queue("b", "d2", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}),
    ]
    for team in ("a", "b"):
        for i in range(8):
            objects += [podgroup(f"{team}{i}", team), pod(f"{team}{i}", group=f"{team}{i}", gpus=1)]
    config = {"schedulerParams": {"fullHierarchyFairness": full}}
    share = {n: q["fairShare"]["gpu"] for n, q in run(objects, config=config)["queues"].items()}
    assert (share["a"], share["b"]) == ((6, 2) if full else (4, 4))
