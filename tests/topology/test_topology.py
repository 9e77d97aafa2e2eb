"""Topology-aware scheduling and hierarchical pod groups (issue 8), through the snapshot contract.

The cluster: 4 blocks x 8 racks x 4 nodes of 8 GPUs (128 nodes). Node `b2-r5-n1` is node 1 of rack
5 of block 2; its labels are `topo/block=b2`, `topo/rack=r5` (rack values repeat across blocks, so
the rack domain's ID is `b2.r5`). Every expectation below is worked out by hand in its comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.scenario import bound, cli_json, node, pod, podgroup, queue, run, running_on, write

BLOCK, RACK = "topo/block", "topo/rack"
TOPOLOGY = "dc"


def topology(name: str, levels: list[str]) -> dict[str, Any]:
    """A `kai.scheduler/v1alpha1 Topology`, levels from the highest to the lowest."""
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def cluster(blocks: int = 4, racks: int = 8, nodes: int = 4) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [topology(TOPOLOGY, [BLOCK, RACK]), queue("q")]
    for b in range(blocks):
        for r in range(racks):
            for n in range(nodes):
                objects.append(node(f"b{b}-r{r}-n{n}", gpus=8, labels={BLOCK: f"b{b}", RACK: f"r{r}"}))
    return objects


def constraint(required: str = "", preferred: str = "", name: str = TOPOLOGY) -> dict[str, str]:
    out = {"topology": name}
    if required:
        out["requiredTopologyLevel"] = required
    if preferred:
        out["preferredTopologyLevel"] = preferred
    return out


def gang(
    name: str, size: int, gpus: int = 8, min_member: int | None = None, topo: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    group = podgroup(name, "q", min_member if min_member is not None else size)
    if topo is not None:
        group["spec"]["topologyConstraint"] = topo
    return [group, *(pod(f"{name}-{i}", group=name, gpus=gpus) for i in range(size))]


def load(name: str, on: str, gpus: int) -> dict[str, Any]:
    """A running pod of another scheduler that takes GPUs on a node."""
    return pod(name, node=on, gpus=gpus, scheduler="default-scheduler")


def rack_of(node_name: str) -> str:
    return node_name.rsplit("-", 1)[0]


def block_of(node_name: str) -> str:
    return node_name.split("-", 1)[0]


# -- required level ---------------------------------------------------------------------------------


def test_required_rack_places_the_gang_inside_the_fullest_rack_that_fits() -> None:
    # Rack b2.r5 already has 4 of its 32 GPUs taken (on n0). A gang of 3 x 8 GPUs fits in every rack;
    # the fullest that fits is b2.r5 (request/free = 24/28 against 24/32 elsewhere). Inside it the 8-GPU
    # pods cannot use n0 (4 free), so they take n1, n2, n3.
    result = run([*cluster(), load("busy", "b2-r5-n0", 4), *gang("train", 3, topo=constraint(required=RACK))])
    assert sorted(bound(result).values()) == ["b2-r5-n1", "b2-r5-n2", "b2-r5-n3"]
    assert result["podGroups"]["ns/train"]["status"] == "Running"


def test_without_a_constraint_the_same_gang_is_not_kept_in_one_rack() -> None:
    # Contrast: 4-GPU pods bin-pack onto the half-full nodes first, one per block here.
    objects = [*cluster(), *(load(f"busy-{b}", f"b{b}-r{b}-n0", 4) for b in range(4)), *gang("train", 4, gpus=4)]
    assert sorted(bound(run(objects)).values()) == ["b0-r0-n0", "b1-r1-n0", "b2-r2-n0", "b3-r3-n0"]


def test_gang_larger_than_any_rack_stays_pending_and_names_the_topology() -> None:
    # 5 pods x 8 GPUs; a rack has 4 nodes of 8 GPUs: no rack can hold it, so nothing is bound, although
    # the cluster has 128 free nodes.
    result = run([*cluster(), *gang("big", 5, topo=constraint(required=RACK))])
    assert result["rounds"][0]["bound"] == []
    pg = result["podGroups"]["ns/big"]
    assert pg["status"] == "Pending"
    assert pg["message"] == (
        "topology dc, requirement topo/rack couldn't be satisfied for job ns/big: not enough resources in root "
        "to allocate the job. No domain of level topo/rack has room for the 5 pods; node-group b0.r0 can "
        "allocate only 4 of 5 required pods."
    )


def test_required_rack_counts_releasing_resources_and_pipelines_into_them() -> None:
    # Every rack but b3.r7 is full; in b3.r7, n0 and n1 are free and n2, n3 run pods being deleted.
    # A gang of 4 x 8 GPUs fits b3.r7 only counting the releasing GPUs: 2 pods bound, 2 pipelined... and
    # since the gang's minimum is not truly allocated, all 4 are pipelined (nothing is bound yet).
    objects = cluster()
    for b in range(4):
        for r in range(8):
            for n in range(4):
                if (b, r) != (3, 7):
                    objects.append(load(f"full-{b}-{r}-{n}", f"b{b}-r{r}-n{n}", 8))
    objects += [pod("old-2", node="b3-r7-n2", gpus=8, deleting=True, scheduler="default-scheduler")]
    objects += [pod("old-3", node="b3-r7-n3", gpus=8, deleting=True, scheduler="default-scheduler")]
    result = run([*objects, *gang("train", 4, topo=constraint(required=RACK))])
    pipelined = {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]}
    assert result["rounds"][0]["bound"] == []
    assert sorted(pipelined.values()) == ["b3-r7-n0", "b3-r7-n1", "b3-r7-n2", "b3-r7-n3"]


def test_missing_topology_is_a_clear_error() -> None:
    result = run([*cluster(1, 1, 2), *gang("train", 2, topo=constraint(required=RACK, name="nope"))])
    assert result["rounds"][0]["bound"] == []
    assert result["podGroups"]["ns/train"]["message"] == "Requested topology nope does not exist (job ns/train)."


def test_unknown_level_is_a_clear_error() -> None:
    result = run([*cluster(1, 1, 2), *gang("train", 2, topo=constraint(required="topo/row"))])
    assert result["rounds"][0]["bound"] == []
    assert "Topology dc has no level topo/row" in result["podGroups"]["ns/train"]["message"]


def test_nodes_without_the_level_labels_are_outside_the_topology() -> None:
    # Two unlabelled nodes with room; the only labelled rack is full: a rack-constrained gang waits.
    objects = [
        topology(TOPOLOGY, [BLOCK, RACK]),
        queue("q"),
        node("plain-1"),
        node("plain-2"),
        node("b0-r0-n0", labels={BLOCK: "b0", RACK: "r0"}),
        load("busy", "b0-r0-n0", 8),
        *gang("train", 2, topo=constraint(required=RACK)),
    ]
    result = run(objects)
    assert result["rounds"][0]["bound"] == []
    assert "node-group b0.r0 can allocate only 0 of 2" in result["podGroups"]["ns/train"]["message"]


# -- preferred level --------------------------------------------------------------------------------


def test_preferred_block_keeps_a_gang_in_one_block_when_one_can_hold_it() -> None:
    # The same four half-full nodes as in the contrast test above, one per block. With a preferred
    # block the 4 x 4-GPU gang goes to one block: all blocks fit and are equally full, so b0 (by ID);
    # inside b0 bin-packing fills the half-full node b0-r0-n0 first, then a fresh node takes 2 pods,
    # and one more pod goes to the next fresh node (b0-r0-n1 holds 2, b0-r0-n2 holds 1).
    objects = [*cluster(), *(load(f"busy-{b}", f"b{b}-r{b}-n0", 4) for b in range(4))]
    result = run([*objects, *gang("train", 4, gpus=4, topo=constraint(preferred=BLOCK))])
    placed = sorted(bound(result).values())
    assert {block_of(n) for n in placed} == {"b0"}
    assert placed == ["b0-r0-n0", "b0-r0-n1", "b0-r0-n1", "b0-r0-n2"]


def test_preferred_block_spans_as_few_blocks_as_possible_when_none_is_big_enough() -> None:
    # 40 pods x 8 GPUs; a block has 32 nodes. Block b0 has 8 nodes taken, b1 16, b2 and b3 none: no
    # block can hold 40, so the candidate is the root and nodes are scored by their block's rank, the
    # roomiest block highest. Fullest first: b1 (16 free), b0 (24), b2, b3 (32 each, by ID): scores
    # 20,000 / 50,000 / 70,000 / 100,000. The gang fills b3 (32 pods), then 8 pods go to b2: 2 blocks.
    objects = cluster()
    objects += [load(f"b0-{i}", f"b0-r{i // 4}-n{i % 4}", 8) for i in range(8)]
    objects += [load(f"b1-{i}", f"b1-r{i // 4}-n{i % 4}", 8) for i in range(16)]
    result = run([*objects, *gang("wide", 40, topo=constraint(preferred=BLOCK))])
    placed = list(bound(result).values())
    assert len(placed) == 40
    by_block = {b: sum(1 for n in placed if block_of(n) == b) for b in ("b0", "b1", "b2", "b3")}
    assert by_block == {"b0": 0, "b1": 0, "b2": 8, "b3": 32}
    # The 8 in b2 bin-pack by node name from the first rack: b2.r0 and b2.r1.
    assert sorted({rack_of(n) for n in placed if block_of(n) == "b2"}) == ["b2-r0", "b2-r1"]


def test_preferred_rack_required_block() -> None:
    # Preferred rack, required block: a 6 x 8-GPU gang is bigger than a rack (4 nodes), so the
    # candidates are blocks. All blocks are empty but b1, where rack b1.r3 has one node taken:
    # b1 is the fullest block and is chosen. The node scores rank every rack of the cluster (the
    # lowest domain holding all nodes is the root), in the domain order: b1 first (the fullest block),
    # inside it b1.r3 (the fullest rack), then b1.r0-r2, r4-r7 by ID; then b0, b2, b3. With 32 racks
    # rack i scores floor(10 * (i + 1) / 32) steps: b1.r6 (i = 6) and b1.r7 (i = 7) both score 2, the
    # highest in b1. Between equal nodes the first by name wins, so 4 pods fill b1.r6 and 2 go to b1.r7.
    objects = [*cluster(), load("busy", "b1-r3-n0", 8)]
    result = run([*objects, *gang("train", 6, topo=constraint(required=BLOCK, preferred=RACK))])
    placed = sorted(bound(result).values())
    assert len(placed) == 6
    assert [rack_of(n) for n in placed] == ["b1-r6"] * 4 + ["b1-r7"] * 2


# -- sub-groups ---------------------------------------------------------------------------------------


def _two_subgroups(size: int, job_topo: dict[str, str] | None, sub_topo: dict[str, str] | None) -> list[dict]:
    subgroups = []
    for name in ("prefill", "decode"):
        sub: dict[str, Any] = {"name": name, "minMember": size}
        if sub_topo is not None:
            sub["topologyConstraint"] = sub_topo
        subgroups.append(sub)
    group = podgroup("serve", "q", subgroups=subgroups)
    if job_topo is not None:
        group["spec"]["topologyConstraint"] = job_topo
    objects: list[dict[str, Any]] = [group]
    for name in ("prefill", "decode"):
        objects += [
            pod(f"{name}-{i}", group="serve", gpus=8, labels={"kai.scheduler/subgroup-name": name})
            for i in range(size)
        ]
    return objects


def test_two_subgroups_each_within_its_own_rack_inside_one_block() -> None:
    # Job: required block; each sub-group of 3 x 8 GPUs: required rack. The job's 6 pods fit every
    # block: b0 by ID. Leaves go in sub-group order (both below their minimum, ratio 0, then by name):
    # decode first, in the first rack of b0 that fits (all equal: b0.r0, nodes n0-n2). Then prefill:
    # b0.r0 has one free node left, too few for 3 pods, so the fullest rack that fits is b0.r1 (n0-n2).
    result = run([*cluster(), *_two_subgroups(3, constraint(required=BLOCK), constraint(required=RACK))])
    placed = bound(result)
    assert sorted(placed[f"ns/decode-{i}"] for i in range(3)) == ["b0-r0-n0", "b0-r0-n1", "b0-r0-n2"]
    assert sorted(placed[f"ns/prefill-{i}"] for i in range(3)) == ["b0-r1-n0", "b0-r1-n1", "b0-r1-n2"]
    assert result["podGroups"]["ns/serve"]["status"] == "Running"


def test_subgroups_share_a_rack_when_the_fullest_rack_still_fits() -> None:
    # Sub-groups of 2 pods: decode takes b0-r0-n0/n1; b0.r0 (2 free nodes) is then the fullest rack that
    # fits prefill, so prefill packs next to it (n2, n3): rack domains are bin-packed.
    result = run([*cluster(1, 8, 4), *_two_subgroups(2, None, constraint(required=RACK))])
    assert sorted(bound(result).values()) == ["b0-r0-n0", "b0-r0-n1", "b0-r0-n2", "b0-r0-n3"]


def test_subgroup_that_fits_no_rack_keeps_the_whole_job_pending() -> None:
    # Each sub-group needs 5 x 8 GPUs in one rack (4 nodes): no leaf can start, so no pod is bound,
    # and the message names the sub-group.
    result = run([*cluster(1, 2, 4), *_two_subgroups(5, None, constraint(required=RACK))])
    assert result["rounds"][0]["bound"] == []
    message = result["podGroups"]["ns/serve"]["message"]
    assert "couldn't be satisfied for job ns/serve, subgroup decode" in message
    assert "can allocate only 4 of 5 required pods" in message


def test_job_starts_only_when_every_leaf_gets_its_minimum_in_one_transaction() -> None:
    # Block b0 only, 2 racks of 4 nodes; rack b0.r1 has 3 nodes taken. decode (3 pods, required rack)
    # takes b0.r0 n0-n2 first, then prefill (3 pods) finds no rack: b0.r0 has 1 node left, b0.r1 has 1.
    # The transaction is discarded: decode is not bound either.
    objects = [*cluster(1, 2, 4), *(load(f"busy-{n}", f"b0-r1-n{n}", 8) for n in range(3))]
    result = run([*objects, *_two_subgroups(3, None, constraint(required=RACK))])
    assert result["rounds"][0]["bound"] == []
    assert "subgroup prefill" in result["podGroups"]["ns/serve"]["message"]


def test_nested_subgroup_sets_apply_their_constraints_inside_the_parent_domain() -> None:
    # Tree: root -> "workers" (set, required block) -> leaves w-a and w-b (each required rack, 2 pods);
    # leaf "leader" (1 pod) sits directly under the root, unconstrained. Block b1 is the only block
    # with room (b0 is full). Sets are placed before leaves: workers inside b1, w-a in b1.r0 (n0, n1),
    # w-b in the fullest rack that still fits: b1.r0 again (n2, n3). Then the leader: anywhere, the
    # bin-packing order gives the first free node by name in b1 (b1-r1-n0).
    objects = cluster(2, 2, 4)
    objects += [load(f"full-{r}-{n}", f"b0-r{r}-n{n}", 8) for r in range(2) for n in range(4)]
    subgroups = [
        {"name": "workers", "minMember": 1, "topologyConstraint": constraint(required=BLOCK)},
        {"name": "w-a", "minMember": 2, "parent": "workers", "topologyConstraint": constraint(required=RACK)},
        {"name": "w-b", "minMember": 2, "parent": "workers", "topologyConstraint": constraint(required=RACK)},
        {"name": "leader", "minMember": 1},
    ]
    objects.append(podgroup("nest", "q", subgroups=subgroups))
    for leaf, count in (("w-a", 2), ("w-b", 2), ("leader", 1)):
        objects += [
            pod(f"{leaf}-{i}", group="nest", gpus=8, labels={"kai.scheduler/subgroup-name": leaf})
            for i in range(count)
        ]
    placed = bound(run(objects))
    assert sorted(placed[f"ns/w-a-{i}"] for i in range(2)) == ["b1-r0-n0", "b1-r0-n1"]
    assert sorted(placed[f"ns/w-b-{i}"] for i in range(2)) == ["b1-r0-n2", "b1-r0-n3"]
    assert placed["ns/leader-0"] == "b1-r1-n0"


# -- elastic extras ----------------------------------------------------------------------------------


def test_elastic_extras_join_the_rack_of_the_running_pods_one_at_a_time() -> None:
    # minMember 2 of 4; pods 0 and 1 run in b1.r2 (n0, n1). n3 of that rack is taken by another load.
    # The extras come one per attempt: pod 2 takes n2; pod 3 finds no room in b1.r2 and waits, although
    # every other rack is empty (the required rack is the one the job already runs in).
    objects = [*cluster(), load("busy", "b1-r2-n3", 8)]
    group = podgroup("el", "q", 2)
    group["spec"]["topologyConstraint"] = constraint(required=RACK)
    objects += [group, *(pod(f"el-{i}", group="el", gpus=8, node=f"b1-r2-n{i}") for i in range(2))]
    objects += [pod("el-2", group="el", gpus=8), pod("el-3", group="el", gpus=8)]
    result = run(objects)
    placed = bound(result)
    assert list(placed.values()) == ["b1-r2-n2"]
    assert running_on(result)["ns/el-2"] == "b1-r2-n2"
    assert result["pods"]["ns/el-3"]["status"] == "Pending"
    assert "node-group b1.r2 can allocate only 0 of 1" in result["podGroups"]["ns/el"]["message"]


# -- the real command -----------------------------------------------------------------------------


def test_kai_simulate_reads_topologies_and_constraints(tmp_path: Path) -> None:
    # The same case as the first test, through `kai simulate` in a subprocess: Topology, the PodGroup's
    # topologyConstraint and the node labels all come from the YAML files.
    objects = [*cluster(1, 8, 4), load("busy", "b0-r5-n0", 4), *gang("train", 3, topo=constraint(required=RACK))]
    result = cli_json([write(objects, tmp_path)])
    assert sorted(bound(result).values()) == ["b0-r5-n1", "b0-r5-n2", "b0-r5-n3"]
