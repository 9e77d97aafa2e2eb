"""Properties of topology-aware scheduling on random clusters, through every default action and several
rounds: whatever allocate, consolidation, reclaim and preempt decide, a job (or sub-group) with a
required level never runs across two domains of that level, and the same input gives the same output.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.scenario import node, pod, podgroup, queue, run
from tests.topology.test_topology import BLOCK, RACK, TOPOLOGY, constraint, topology

BLOCKS, RACKS, NODES = 2, 4, 4


def domain(node_name: str, level: str) -> str:
    block, rack, _ = node_name.split("-")
    return block if level == BLOCK else f"{block}.{rack}"


def random_cluster(seed: int) -> tuple[list[dict[str, Any]], dict[str, tuple[str, list[str]]]]:
    """Objects, and for each pod group and sub-group with a required level: (level, its pod keys)."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [topology(TOPOLOGY, [BLOCK, RACK])]
    for q in ("a", "b"):
        objects.append(queue(q, gpu={"quota": rng.choice((16, 64, 128)), "overQuotaWeight": 1, "limit": -1}))
    names = [f"b{b}-r{r}-n{n}" for b in range(BLOCKS) for r in range(RACKS) for n in range(NODES)]
    free = {}
    for name in names:
        b, r = name.split("-")[:2]
        objects.append(node(name, gpus=8, labels={BLOCK: b, RACK: r}))
        free[name] = 8
    required: dict[str, tuple[str, list[str]]] = {}
    # Running single-pod jobs (no constraint) on random nodes with room.
    for i in range(rng.randrange(40, 160)):
        where = rng.choice(names)
        gpus = rng.choice((1, 2, 4))
        if free[where] < gpus:
            continue
        free[where] -= gpus
        q = rng.choice("ab")
        objects.append(podgroup(f"run-{i}", q, 1, created=f"2025-12-31T20:{i % 60:02d}:00Z"))
        objects.append(pod(f"run-{i}", group=f"run-{i}", queue=q, gpus=gpus, node=where))
    # Pending gangs with random constraints, priorities and sizes.
    for g in range(rng.randrange(4, 14)):
        name, q = f"gang-{g}", rng.choice("ab")
        size, gpus = rng.choice((1, 2, 3, 4, 6)), rng.choice((1, 2, 4, 8))
        group = podgroup(name, q, size, priority_class=rng.choice(("train", "build-preemptible", "build")))
        kind = rng.randrange(4)
        if kind == 3:
            half = max(1, size // 2)
            group["spec"]["subGroups"] = [
                {"name": leaf, "minMember": half, "topologyConstraint": constraint(required=RACK)}
                for leaf in ("prefill", "decode")
            ]
            group["spec"]["topologyConstraint"] = constraint(required=BLOCK)
            objects.append(group)
            keys = []
            for leaf in ("prefill", "decode"):
                leaf_pods = [f"{name}-{leaf}-{i}" for i in range(half)]
                objects += [
                    pod(p, group=name, queue=q, gpus=gpus, labels={"kai.scheduler/subgroup-name": leaf})
                    for p in leaf_pods
                ]
                required[f"{name}/{leaf}"] = (RACK, [f"ns/{p}" for p in leaf_pods])
                keys += leaf_pods
            required[name] = (BLOCK, [f"ns/{p}" for p in keys])
            continue
        topo = [
            constraint(required=RACK),
            constraint(required=BLOCK, preferred=RACK),
            constraint(preferred=BLOCK),
        ][kind]
        group["spec"]["topologyConstraint"] = topo
        objects.append(group)
        pods = [f"{name}-{i}" for i in range(size)]
        objects += [pod(p, group=name, queue=q, gpus=gpus) for p in pods]
        if "requiredTopologyLevel" in topo:
            required[name] = (topo["requiredTopologyLevel"], [f"ns/{p}" for p in pods])
    return objects, required


@pytest.mark.parametrize("seed", range(12))
def test_required_levels_hold_through_every_action_and_round(seed: int) -> None:
    objects, required = random_cluster(seed)
    result = run(objects, rounds=3)
    last = result["rounds"][-1]
    where = {k: v["node"] for k, v in result["pods"].items() if v["status"] == "Running"}
    where.update({p["pod"]: p["node"] for p in last["pipelined"]})
    for owner, (level, keys) in required.items():
        domains = {domain(where[k], level) for k in keys if k in where}
        assert len(domains) <= 1, (owner, level, domains)
    for rnd in result["rounds"]:
        placed_now = {b["pod"]: b["node"] for b in rnd["bound"]} | {p["pod"]: p["node"] for p in rnd["pipelined"]}
        for owner, (level, keys) in required.items():
            assert len({domain(placed_now[k], level) for k in keys if k in placed_now}) <= 1, (owner, rnd)
    assert run(objects, rounds=3) == result
