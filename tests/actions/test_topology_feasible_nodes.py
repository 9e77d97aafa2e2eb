"""Eviction simulations offer the job only KAI's feasible nodes, and a topology search starts from the
lowest domain holding them (checked with KAI's code on each scenario below).

KAI's victim solver places the preemptor (and moves its victims) only on its feasible nodes: for a job
whose pods all need GPUs, the nodes with idle or releasing GPUs when its search starts, and the nodes of
the victims the scenario evicts. The topology plugin then starts its search from the lowest domain
holding those nodes (never below the preferred level): a required level above that domain is not
considered, and the scenario fails.
"""

from __future__ import annotations

from typing import Any

from tests.scenario import bound, node, pod, podgroup, queue, run
from tests.topology.test_topology import BLOCK, RACK, TOPOLOGY, constraint, gang, topology


def full_cluster(level: str) -> list[dict[str, Any]]:
    # Three racks of two 8-GPU nodes (b0.r0, b0.r1, b1.r2), every node full with one single-pod job of
    # queue qv (no quota; created one second apart: v5 on b1-r2-n1 is the newest, the first victim).
    # Queue qr (quota 16) wants one 8-GPU pod with a required `level`.
    objects: list[dict[str, Any]] = [
        topology(TOPOLOGY, [BLOCK, RACK]),
        queue("qv", gpu={"quota": 0, "overQuotaWeight": 1, "limit": -1}),
        queue("qr", gpu={"quota": 16, "overQuotaWeight": 1, "limit": -1}),
    ]
    i = 0
    for block, rack in (("b0", "r0"), ("b0", "r1"), ("b1", "r2")):
        for n in range(2):
            host = f"{block}-{rack}-n{n}"
            objects.append(node(host, gpus=8, labels={BLOCK: block, RACK: rack}))
            objects.append(podgroup(f"v{i}", "qv", 1, created=f"2026-01-01T00:00:{10 + i:02d}Z"))
            objects.append(pod(f"v{i}-0", group=f"v{i}", queue="qv", gpus=8, node=host))
            i += 1
    job = gang("g", 1, topo=constraint(required=level))
    job[0]["spec"]["queue"] = "qr"
    return objects + job


def test_a_victim_alone_on_its_node_cannot_make_room_for_a_required_block() -> None:
    # No node has an idle GPU, so each scenario's feasible nodes are the node of its one victim; the
    # search starts from that node's rack, below the required block: no scenario places the job, and
    # nothing is evicted (KAI's quirk, kept for parity).
    result = run(full_cluster(BLOCK))
    assert result["rounds"][0]["evicted"] == []
    assert result["pods"]["ns/g-0"]["status"] == "Pending"


def test_a_required_rack_is_the_victims_own_rack() -> None:
    # The same with a required rack: the first victim, v5 (the newest), frees b1-r2-n1 and the rack
    # b1.r2 is the lowest domain of the scenario's node: the job is pipelined there.
    result = run(full_cluster(RACK))
    assert [e["pod"] for e in result["rounds"][0]["evicted"]] == ["ns/v5-0"]
    assert {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]} == {"ns/g-0": "b1-r2-n1"}
    assert bound(result) == {}
