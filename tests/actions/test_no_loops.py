"""No evict/allocate loops: after a few rounds the cluster settles, so that the state after round N
equals the state after round N+3 and the late rounds evict nothing."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.actions import test_budget, test_consolidation, test_preempt, test_reclaim
from tests.actions.evict_helpers import gq, job
from tests.scenario import node, run


def mixed(seed: int) -> list[dict[str, Any]]:
    """Three queues with different quotas, a full cluster of mixed-priority jobs (some elastic),
    and waiting jobs of every kind."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [node(f"n{i}", gpus=8) for i in range(4)]
    objects += [gq("dept", 16), gq("x", 8, parent="dept"), gq("y", 8, parent="dept"), gq("z", 16)]
    free = {f"n{i}": 8 for i in range(4)}
    age = 1000
    for j in range(14):
        q = rng.choice(["x", "y", "z"])
        gpus = rng.choice([1, 1, 2, 4])
        size = rng.choice([1, 1, 2])
        where = [n for n, f in free.items() if f >= gpus * size]
        if not where:
            break
        n = where[0]
        free[n] -= gpus * size
        cls = rng.choice(["train", "train", "build-preemptible", "build"])
        objects += job(f"r{j}", q, gpus=gpus, size=size, nodes=n, priority_class=cls, min_member=1, age=age)
        age -= 10
    for j in range(8):
        q = rng.choice(["x", "y", "z"])
        cls = rng.choice(["train", "build-preemptible", "build", "inference"])
        objects += job(f"w{j}", q, gpus=rng.choice([1, 2, 4, 8]), size=rng.choice([1, 2]), priority_class=cls, age=j)
    return objects


SCENARIOS = {
    "reclaim": test_reclaim.two_queues_full_node,
    "preempt": lambda: test_preempt.full_queue("build"),
    "consolidation": test_consolidation.fragmented,
    "consolidation-two-moves": test_consolidation.three_nodes,
    "budget": test_budget.full_of_a,
    **{f"mixed-{seed}": (lambda seed=seed: mixed(seed)) for seed in range(6)},
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_state_after_round_n_equals_state_after_n_plus_3(name: str) -> None:
    objects = SCENARIOS[name]()
    config = {"schedulerParams": {"maxEvictedGpusPerQueuePerCycle": 2}} if name == "budget" else None
    five = run(objects, rounds=5, config=config)
    eight = run(objects, rounds=8, config=config)
    assert five["pods"] == eight["pods"]
    assert all(r["evicted"] == [] for r in eight["rounds"][5:])
    assert all(r["bound"] == [] for r in eight["rounds"][5:])


def test_a_big_gang_first_in_line_does_not_let_the_victim_queue_win_back_what_reclaim_freed() -> None:
    # With the opt-in `deferOversizedJobs` (KAI lets the gang stand for its queue).
    # 8 GPUs; queue a deserves 6, b deserves 2. a runs eight 1-GPU jobs (two over its share). b waits with an
    # older 3-GPU gang (more than b may reclaim) and a 1-GPU job, which reclaims one GPU from a. Next round the
    # freed GPU must go to b's small job: were b's gang to stand for b in the queue order (3/2 of its share)
    # a's evicted job (8/6) would be ranked first, take the GPU back, and reclaim would start again.
    from tests.scenario import node, pod, podgroup, queue, run

    objects = [
        node("n1", gpus=8),
        queue("a", gpu={"quota": 6, "overQuotaWeight": 1, "limit": -1}),
        queue("b", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}),
    ]
    for i in range(8):
        objects += [
            podgroup(f"a{i}", "a", created="2026-01-01T00:00:00Z"),
            pod(f"a{i}", group=f"a{i}", gpus=1, node="n1"),
        ]
    objects += [podgroup("big", "b", min_member=3, created="2025-12-31T00:00:00Z")]
    objects += [pod(f"big-{i}", group="big", gpus=1) for i in range(3)]
    objects += [podgroup("small", "b", created="2025-12-31T12:00:00Z"), pod("small", group="small", gpus=1)]
    result = run(objects, rounds=6, config={"schedulerParams": {"deferOversizedJobs": True}})
    evictions = [e["pod"] for r in result["rounds"] for e in r["evicted"]]
    assert len(evictions) == 1  # one reclaim, never repeated
    assert result["pods"]["ns/small"]["status"] == "Running"
    assert sum(1 for k, p in result["pods"].items() if k.startswith("ns/a") and p["status"] == "Running") == 7
