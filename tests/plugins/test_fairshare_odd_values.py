"""Fair share with the odd values KAI's Queue CRD accepts (any number): negative over-quota weights,
quotas and limits other than -1, a quota above the limit; and MIG slices in the totals.

Expected values are worked out by hand from the division rule (KAI's fair-share division):
over-quota weights are divided by their sum over the sibling queues that still want more, a queue's
slice weight is max(0, w' + k·w') with k = 1 and no usage, i.e. max(0, 2·w'); a level whose weights sum
to zero gives no surplus; only -1 means unlimited, any other number is used as it is.
"""

from __future__ import annotations

import pytest

from kai.plugins.proportion.fairshare import ShareRequest, divide
from tests.scenario import node, pod, queue, run


def q(name: str, request: float, weight: float = 1, deserved: float = 0, limit: float = -1) -> ShareRequest:
    return ShareRequest(name, deserved, limit, weight, 100, request, 0.0)


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        # Sum 0: no normalised weight exists, nobody gets surplus.
        ((-1, 1), (0, 0)),
        # Sum -2: w' = 0.5 each; 8 and 8 (neither sated, nothing left).
        ((-1, -1), (8, 8)),
        # Sum 1: w' = -1 and 2 -> slice weights 0 and 4: b gets all 16 but wants 10 (sated); then a is
        # alone (w' = 1) and gets the 6 left.
        ((-1, 2), (6, 10)),
        ((-0.5, 1), (6, 10)),  # same normalised weights as (-1, 2)
        # Sum -1: w' = 2 and -1: a takes its 10 first, then b alone gets the 6 left.
        ((-2, 1), (10, 6)),
        # Weight 0: a gets nothing in round 1; alone in round 2 its weight sums to 0: still nothing.
        ((0, 1), (0, 10)),
    ],
)
def test_negative_weights_between_two_siblings(weights: tuple[float, float], expected: tuple[float, float]) -> None:
    """16 GPUs, two sibling queues without quota, each wanting 10."""
    shares = divide(16, [q("a", 10, weights[0]), q("b", 10, weights[1])])
    assert (shares["a"], shares["b"]) == expected


def test_a_lone_queue_with_a_negative_weight_gets_the_surplus_but_not_with_weight_zero() -> None:
    # Alone, w' = w / w = 1 whatever the sign; a weight of 0 sums to 0 and gets nothing.
    assert divide(16, [q("a", 10, -1)]) == {"a": 10}
    assert divide(16, [q("a", 10, -3)]) == {"a": 10}
    assert divide(16, [q("a", 10, 0)]) == {"a": 0}


def test_three_siblings_one_negative() -> None:
    # Sum 1: w' = -1, 1, 1 -> slice weights 0, 2, 2: b and c get 8 each, nobody is sated, a gets nothing.
    assert divide(16, [q("a", 10, -1), q("b", 10), q("c", 10)]) == {"a": 0, "b": 8, "c": 8}
    # Sum -1: w' = 1, 1, -1: a and b get 8 each, c nothing.
    assert divide(16, [q("a", 10, -1), q("b", 10, -1), q("c", 10)]) == {"a": 8, "b": 8, "c": 0}


def test_negative_quota_other_than_minus_one_is_a_share_below_zero() -> None:
    # a's share starts at -2, so 18 are left: 9 each; a (wants 12 more) floors to 9 -> 7; b gets 9.
    assert divide(16, [q("a", 10, deserved=-2), q("b", 10)]) == {"a": 7, "b": 9}
    # -3 and 4: 15 left, 7.5 each: a floors to 7 (-> 4), b is sated at 10; a alone gets the last 2 -> 6.
    assert divide(16, [q("a", 10, deserved=-3), q("b", 10, deserved=4)]) == {"a": 6, "b": 10}
    # Without demand there is no share at all, negative or not.
    assert divide(16, [q("a", 0, deserved=-2), q("b", 20)]) == {"a": 0, "b": 16}


def test_negative_limit_other_than_minus_one_caps_below_zero() -> None:
    # a can use min(10, -2) = -2: its share is -2 and b gets 18 of 16 (as KAI computes it).
    assert divide(16, [q("a", 10, limit=-2), q("b", 20)]) == {"a": -2, "b": 18}


def test_quota_above_limit_the_limit_wins() -> None:
    assert divide(16, [q("a", 10, deserved=10, limit=4), q("b", 10)]) == {"a": 4, "b": 10}


def _departments(weights: tuple[float, float], wants: int = 10) -> list[dict]:
    objects = [node("n1", gpus=8), node("n2", gpus=8)]
    for name, weight in zip(("d1", "d2"), weights, strict=True):
        objects.append(queue(name, gpu={"quota": 0, "overQuotaWeight": weight, "limit": -1}))
        objects.append(queue(f"{name}-team", parent=name))
        objects += [pod(f"{name}-p{i}", queue=f"{name}-team", gpus=1) for i in range(wants)]
    return objects


@pytest.mark.parametrize(
    ("weights", "fair", "running"),
    [
        ((-1, 1), (0, 0), (8, 8)),  # no fair share anywhere; allocate still fills the cluster evenly
        ((-1, -1), (8, 8), (8, 8)),
        ((-1, 2), (6, 10), (6, 10)),
        ((0, 1), (0, 10), (6, 10)),  # the weight-0 department runs on what is left over
    ],
)
def test_departments_with_negative_weights_through_simulate(
    weights: tuple[float, float], fair: tuple[float, float], running: tuple[int, int]
) -> None:
    """16 GPUs, two departments each with one team wanting 10 single-GPU pods."""
    out = run(_departments(weights))
    assert (out["queues"]["d1"]["fairShare"]["gpu"], out["queues"]["d2"]["fairShare"]["gpu"]) == fair
    assert (out["queues"]["d1-team"]["fairShare"]["gpu"], out["queues"]["d2-team"]["fairShare"]["gpu"]) == fair
    counts = [
        sum(1 for k, v in out["pods"].items() if k.startswith(f"ns/{d}-") and v["status"] == "Running")
        for d in ("d1", "d2")
    ]
    assert tuple(counts) == running


def test_negative_limit_refuses_what_asks_for_the_resource_and_lets_the_rest_run() -> None:
    cpu_pod = pod("cpu", queue="team", cpu="1")
    out = run(
        [
            node("n1"),
            queue("team", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -2}),
            cpu_pod,
            pod("gpu", queue="team", gpus=1),
        ]
    )
    assert out["pods"]["ns/cpu"]["status"] == "Running"
    assert out["pods"]["ns/gpu"]["status"] == "Pending"
    assert "limit" in out["podGroups"]["ns/pg-gpu"]["message"]


def test_negative_quota_orders_the_queue_as_its_literal_share() -> None:
    """d1's quota of -2 is no guarantee (it is not -1): d1 gets 7, d2 9, as the division says, and
    allocate follows the fair shares."""
    objects = [node("n1", gpus=8), node("n2", gpus=8)]
    objects.append(queue("d1", gpu={"quota": -2, "overQuotaWeight": 1, "limit": -1}))
    objects.append(queue("d2", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}))
    for d in ("d1", "d2"):
        objects.append(queue(f"{d}-team", parent=d))
        objects += [pod(f"{d}-p{i}", queue=f"{d}-team", gpus=1) for i in range(10)]
    out = run(objects)
    assert out["queues"]["d1"]["fairShare"]["gpu"] == 7
    assert out["queues"]["d2"]["fairShare"]["gpu"] == 9
    running = [
        sum(1 for k, v in out["pods"].items() if k.startswith(f"ns/{d}-") and v["status"] == "Running")
        for d in ("d1", "d2")
    ]
    assert running == [7, 9]


def test_mig_slices_count_in_the_cluster_total_by_compute_size() -> None:
    """A MIG node with 7 x 1g.5gb and 2 x 3g.20gb slices holds 7·1 + 2·3 = 13 GPUs of compute. The only
    queue asks for six 3g slices (18 GPUs): its fair share is the whole 13."""
    mig_node = node(
        "mig",
        gpus=0,
        labels={"node-role.kubernetes.io/mig-enabled": "true", "nvidia.com/mig.strategy": "mixed"},
        extra={"nvidia.com/mig-1g.5gb": "7", "nvidia.com/mig-3g.20gb": "2"},
    )
    pods = [pod(f"p{i}", queue="team", extra={"nvidia.com/mig-3g.20gb": "1"}) for i in range(6)]
    out = run([mig_node, queue("team"), *pods])
    assert out["queues"]["team"]["fairShare"]["gpu"] == 13
    assert sum(1 for v in out["pods"].values() if v["status"] == "Running") == 2  # two 3g slices exist


def test_mig_and_whole_gpus_add_up() -> None:
    mixed = node("n", gpus=2, extra={"nvidia.com/mig-1g.5gb": "7", "nvidia.com/mig-3g.20gb": "2"})
    pods = [pod(f"p{i}", queue="team", gpus=1) for i in range(20)]
    out = run([mixed, queue("team"), *pods])
    assert out["queues"]["team"]["fairShare"]["gpu"] == 15
