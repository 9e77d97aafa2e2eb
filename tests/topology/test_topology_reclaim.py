"""Eviction actions respect topology (issue 8, item 4): a reclaimer with a required level is simulated
through the framework's placement, so its victims are looked for inside one domain.

Cluster: 4 blocks x 8 racks x 4 nodes of 8 GPUs (1,024 GPUs), every node full with one 8-GPU job of
queue a. Queue b (quota 64) waits with a gang of 4 x 8 GPUs. Fair shares: deserved a = min(64, 1,024)
= 64, b = min(64, 32) = 32; the 928 GPUs left go to the only queue still asking, a: a = 992, b = 32.
So a may lose exactly 4 jobs (1,024 > 992, 1,016 > 992, 1,008 > 992, 1,000 > 992; then 992 is not above
992): b's gang can start only if its 4 victims free room it can use.

Victim order is newest first. Ages are chosen so that the newest jobs are scattered: the 32 newest are
on node n0 of every rack (b0.r0 newest, then b0.r1, ...), the next 32 on the n1 nodes, and so on.
"""

from __future__ import annotations

from typing import Any

from tests.actions.evict_helpers import evictions, gq, job, placed
from tests.scenario import node, pod, podgroup
from tests.scenario import run as run_scenario
from tests.topology.test_topology import BLOCK, RACK, TOPOLOGY, constraint, topology

ONLY_RECLAIM = {"actions": "allocate, reclaim"}


def full_cluster(quota_a: float = 64) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [topology(TOPOLOGY, [BLOCK, RACK]), gq("a", quota_a), gq("b", 64)]
    for b in range(4):
        for r in range(8):
            for n in range(4):
                name = f"b{b}-r{r}-n{n}"
                objects.append(node(name, gpus=8, labels={BLOCK: f"b{b}", RACK: f"r{r}"}))
                objects += job(f"a-{name}", "a", gpus=8, nodes=name, age=1 + n * 32 + b * 8 + r)
    return objects


def reclaimer(topo: dict[str, str] | None, q: str = "b", priority_class: str | None = None) -> list[dict[str, Any]]:
    group = podgroup("train", q, 4, priority_class=priority_class)
    if topo is not None:
        group["spec"]["topologyConstraint"] = topo
    return [group, *(pod(f"train-{i}", group="train", queue=q, gpus=8) for i in range(4))]


def test_without_a_constraint_reclaim_takes_the_four_newest_jobs_wherever_they_are() -> None:
    # Contrast: the four newest jobs sit on n0 of racks b0.r0 ... b0.r3.
    result = run_scenario([*full_cluster(), *reclaimer(None)], config=ONLY_RECLAIM)
    assert sorted(evictions(result)) == [f"ns/a-b0-r{r}-n0" for r in range(4)]


def test_reclaim_for_a_rack_constrained_gang_evicts_inside_one_rack() -> None:
    # The solver grows the gang one pod at a time. 1 pod: the newest job (b0.r0 n0) is enough.
    # 2 pods: every rack must hold both, so the next victims tried (n0 of b0.r1, b0.r2, ...) do not
    # help; the first that does is b0.r0's n1 (age 33), which frees a second node in the same rack.
    # Likewise n2 (age 65) and n3 (age 97). Four victims, all in b0.r0; the gang is pipelined there.
    result = run_scenario([*full_cluster(), *reclaimer(constraint(required=RACK))], config=ONLY_RECLAIM)
    assert evictions(result) == {f"ns/a-b0-r0-n{n}": ("reclaim", "ns/train") for n in range(4)}
    assert sorted(placed(result).values()) == [f"b0-r0-n{n}" for n in range(4)]
    assert {p["pod"] for p in result["rounds"][0]["pipelined"]} == {f"ns/train-{i}" for i in range(4)}


def test_preempt_for_a_rack_constrained_gang_evicts_inside_one_rack() -> None:
    # Preempt inside queue a (quota 1,024, so fairness plays no part): a build-preemptible (75) gang of
    # 4 x 8 GPUs, required rack, against a's train (50) jobs. Same victim order and the same reasoning
    # as for reclaim: the four victims are the jobs of rack b0.r0.
    objects = [*full_cluster(quota_a=1024), *reclaimer(constraint(required=RACK), "a", "build-preemptible")]
    result = run_scenario(objects, config={"actions": "allocate, preempt"})
    assert evictions(result) == {f"ns/a-b0-r0-n{n}": ("preempt", "ns/train") for n in range(4)}
    assert sorted(placed(result).values()) == [f"b0-r0-n{n}" for n in range(4)]
