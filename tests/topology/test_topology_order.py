"""The order in which a constrained gang tries topology domains, and the preferred-level node scores,
as KAI decides them (checked with KAI's own code on each scenario below).

KAI sorts the topology tree from the top: the children of each domain fullest first (the largest, over
the batch's resources, of request / free room), ties by domain ID. A level's candidates are tried in
that tree's order, so a rack of the fullest block comes before a fuller rack of a roomier block. The
free room of a domain is that of all its nodes, whether the pods may use them or not. The preferred
level's node scores rank every preferred-level domain inside the lowest domain holding the nodes the
gang may use (not only those of the candidate), in the same order.

Racks have 4 nodes of 8 GPUs here; `busy(rack, used)` loads the rack's nodes with other schedulers'
pods, `used[i]` GPUs on node i.
"""

from __future__ import annotations

from typing import Any

from tests.scenario import bound, node, queue, run
from tests.topology.test_topology import BLOCK, RACK, TOPOLOGY, constraint, gang, load, rack_of, topology


def racks(used: dict[str, list[int]]) -> list[dict[str, Any]]:
    """Racks named 'b.r' with one node per entry of `used` and that many GPUs taken on it."""
    objects: list[dict[str, Any]] = [topology(TOPOLOGY, [BLOCK, RACK]), queue("q")]
    for rack, gpus in used.items():
        block, name = rack.split(".")
        for i, taken in enumerate(gpus):
            host = f"{block}-{name}-n{i}"
            objects.append(node(host, gpus=8, labels={BLOCK: block, RACK: name}))
            if taken:
                objects.append(load(f"busy-{host}", host, taken))
    return objects


def fullest_block_first() -> list[dict[str, Any]]:
    # A gang of 2 x 4 GPUs (8 GPUs) that must sit in one rack. Free GPUs: b0.r0 8 (4 + 4), b0.r1 32,
    # b1.r0 12 (4 + 4 + 4 + 0), b1.r1 4. Fitting racks: b0.r0 (ratio 8/8 = 1), b0.r1 (8/32), b1.r0
    # (8/12). Blocks: b0 has 40 free (8/40 = 0.2), b1 16 (8/16 = 0.5): b1 is the fuller block, so its
    # only fitting rack b1.r0 is tried first, although b0.r0 is the fullest rack.
    return [*racks({"b0.r0": [4, 4, 8, 8], "b0.r1": [0, 0, 0, 0], "b1.r0": [4, 4, 4, 8], "b1.r1": [8, 8, 8, 4]}),
            *gang("g", 2, gpus=4, topo=constraint(required=RACK))]


def test_a_rack_of_the_fullest_block_is_tried_before_a_fuller_rack_of_a_roomier_block() -> None:
    assert sorted(bound(run(fullest_block_first())).values()) == ["b1-r0-n0", "b1-r0-n1"]


def cordoned_room(how: str) -> list[dict[str, Any]]:
    # A gang of 2 x 4 GPUs in one rack. b0.r0: n0 free 8, n1 free 4 (12 free: ratio 8/12). b0.r1:
    # n0 and n1 free 4 each, and n2 with 8 free GPUs that the pods cannot use (cordoned, or outside
    # their node affinity). Counting only usable nodes b0.r1 would be the fuller rack (8/8); KAI counts
    # n2 too (16 free: 8/16), so b0.r0 is the fuller rack and takes the gang: the 4-GPU pod bin-packs
    # onto n1 (4 free), the other onto n0.
    objects = racks({"b0.r0": [0, 4], "b0.r1": [4, 4, 0]})
    for obj in objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "b0-r1-n2":
            if how == "cordoned":
                obj["spec"]["unschedulable"] = True
            else:
                obj["metadata"]["labels"]["pool"] = "other"
    objects += gang("g", 2, gpus=4, topo=constraint(required=RACK))
    if how == "affinity":
        term = {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}
        for obj in objects:
            if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("g-"):
                obj["spec"]["affinity"] = {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
                }
    return objects


def test_a_domain_is_as_full_as_all_its_nodes_say_usable_or_not() -> None:
    for how in ("cordoned", "affinity"):
        assert sorted(bound(run(cordoned_room(how))).values()) == ["b0-r0-n0", "b0-r0-n1"], how


def preferred_ranks(affinity: bool) -> list[dict[str, Any]]:
    # 3 blocks of 4 racks of 2 nodes; a gang of 5 x 4 GPUs preferring one rack. A rack holds at most 4
    # such pods, so the candidates are blocks: bA has room for 2 pods only; bB for 10 (1 + 2 + 3 + 4);
    # bC for 16. bB (ratio 20/40) is fuller than bC (20/64): the gang goes to bB.
    # Node scores rank all 12 racks under the root in the domain order: bA first (the fullest block,
    # 20/8), then bB's racks fullest first: bB.r0 (4 free), bB.r1 (8), bB.r2 (14), bB.r3 (16), then bC.
    # Rack i scores floor(10 * (i + 1) / 12): bB.r0..r3 (i = 4..7) score 4, 5, 5, 6 steps. The first 4
    # pods fill bB.r3 (2 per node); the fifth ties between bB.r1 and bB.r2 and bin-packing takes the
    # node with the least room: bB-r1-n0 (4 free, as bB-r1-n1; first by name), not bB-r2-n1 (6 free).
    # (Ranking only bB's 4 racks would score bB.r2 above bB.r1.) The same when the pods may only use
    # block bB (node affinity): the ranking still spans every rack under the root.
    objects = racks({
        "bA.r0": [8, 8], "bA.r1": [8, 8], "bA.r2": [8, 8], "bA.r3": [8, 0],
        "bB.r0": [8, 4], "bB.r1": [4, 4], "bB.r2": [0, 2], "bB.r3": [0, 0],
        "bC.r0": [0, 0], "bC.r1": [0, 0], "bC.r2": [0, 0], "bC.r3": [0, 0],
    })
    objects += gang("g", 5, gpus=4, topo=constraint(preferred=RACK))
    if affinity:
        term = {"matchExpressions": [{"key": BLOCK, "operator": "In", "values": ["bB"]}]}
        for obj in objects:
            if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("g-"):
                obj["spec"]["affinity"] = {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
                }
    return objects


def test_preferred_scores_rank_every_preferred_domain_under_the_common_domain() -> None:
    for affinity in (False, True):
        placed = sorted(bound(run(preferred_ranks(affinity))).values())
        assert placed == ["bB-r1-n0", "bB-r3-n0", "bB-r3-n0", "bB-r3-n1", "bB-r3-n1"], affinity
        assert {rack_of(n) for n in placed} == {"bB-r1", "bB-r3"}




def one_rack(constraint_: dict[str, str]) -> list[dict[str, Any]]:
    # The whole topology is one rack (b0.r0) of two empty 8-GPU nodes; a gang of 2 x 8 GPUs.
    return [*racks({"b0.r0": [0, 0]}), *gang("g", 2, topo=constraint_)]


def test_the_search_starts_from_the_lowest_domain_holding_the_nodes() -> None:
    # KAI looks for domains from the lowest domain holding every node the job may be placed on, going
    # no lower than the preferred level: with only a required block, that is the rack b0.r0, and the
    # block above it is never considered; the gang stays pending although its block has room (a quirk
    # of KAI's, kept for parity). A required rack (the rack itself) or a preferred block (the search
    # stops at the block) places it.
    result = run(one_rack(constraint(required=BLOCK)))
    assert result["rounds"][0]["bound"] == []
    assert result["podGroups"]["ns/g"]["message"] == (
        "topology dc, requirement topo/block couldn't be satisfied for job ns/g: every node the pods may be "
        "placed on is in b0.r0, below level topo/block; as KAI, the search starts from b0.r0, so no domain "
        "of level topo/block is considered."
    )
    for other in (constraint(required=RACK), constraint(preferred=BLOCK)):
        assert sorted(bound(run(one_rack(other))).values()) == ["b0-r0-n0", "b0-r0-n1"], other
