"""consolidation: move preemptible running pods so that a pending job fits, only when every moved pod
is placed again in the same cycle."""

from __future__ import annotations

from tests.actions.evict_helpers import evictions, gq, job, placed, status
from tests.scenario import node, run

ONLY_CONSOLIDATION = {"actions": "allocate, consolidation"}


def fragmented() -> list[dict]:
    """n1 (4 GPUs): x1 (2 GPUs) and x2 (1 GPU), 1 free. n2 (4 GPUs): y (1 GPU), 3 free.
    p waits for one 4-GPU pod: 4 GPUs are free in total, but on no single node."""
    objects = [node("n1", gpus=4), node("n2", gpus=4), gq("q", 8)]
    objects += job("x1", "q", gpus=2, nodes="n1", age=30) + job("x2", "q", nodes="n1", age=20)
    objects += job("y", "q", nodes="n2", age=10)
    return objects + job("p", "q", gpus=4, age=1)


def test_moves_a_pod_so_that_the_job_fits() -> None:
    # Moving y (1 GPU) from n2 onto n1's free GPU leaves n2 empty for p: y is evicted and placed again
    # on n1 (pipelined), p is pipelined on n2. Nothing else moves.
    result = run(fragmented(), rounds=3)
    assert evictions(result) == {"ns/y": ("consolidation", "ns/p")}
    assert placed(result) == {"ns/y": "n1", "ns/p": "n2"}
    # Round 2: y (older) is placed first, bin-packing puts it on n1 (1 free) rather than n2 (4 free);
    # p takes n2. Round 3 changes nothing: no loop.
    assert result["rounds"][1]["evicted"] == [] and result["rounds"][2]["evicted"] == []
    assert result["pods"]["ns/y"]["node"] == "n1" and result["pods"]["ns/p"]["node"] == "n2"
    assert status(result, "ns/p") == "Running"
    message = run(fragmented())["podGroups"]["ns/y"]["message"]
    assert message.startswith("consolidation moved 1 pod(s) to other nodes to make room for ns/p of queue q")


def test_no_consolidation_that_would_leave_a_pod_homeless() -> None:
    # n1: x1 (2) + x2 (1), 1 free. n2: y (2), 2 free. p needs 4 on one node.
    # Clear n2: y (2 GPUs) must go to n1, which has 1 free -> homeless. Clear n1: x1 (2) fits n2's 2
    # free, but x2 (1) then has nowhere to go (n1's freed room is p's). No move is made.
    objects = [node("n1", gpus=4), node("n2", gpus=4), gq("q", 8)]
    objects += job("x1", "q", gpus=2, nodes="n1", age=30) + job("x2", "q", nodes="n1", age=20)
    objects += job("y", "q", gpus=2, nodes="n2", age=10)
    result = run([*objects, *job("p", "q", gpus=4, age=1)], config=ONLY_CONSOLIDATION)
    assert result["rounds"][0]["evicted"] == []
    assert result["podGroups"]["ns/p"]["status"] == "Pending"


def three_nodes() -> list[dict]:
    """n1: y1, y2 (1 GPU each, the newest jobs), 2 free. n2: x (3 GPUs), 1 free. n3: w (3), 1 free.
    p needs 4 on one node: the only way is to move y1 to n2 and y2 to n3 (two victim jobs)."""
    objects = [node("n1", gpus=4), node("n2", gpus=4), node("n3", gpus=4), gq("q", 12)]
    objects += job("x", "q", gpus=3, nodes="n2", age=50) + job("w", "q", gpus=3, nodes="n3", age=40)
    objects += job("y1", "q", nodes="n1", age=20) + job("y2", "q", nodes="n1", age=10)
    return objects + job("p", "q", gpus=4, age=1)


def test_moves_several_pods_within_the_preemptee_limit() -> None:
    result = run(three_nodes(), config=ONLY_CONSOLIDATION)
    assert evictions(result) == {"ns/y1": ("consolidation", "ns/p"), "ns/y2": ("consolidation", "ns/p")}
    moved = placed(result)
    assert moved["ns/p"] == "n1" and {moved["ns/y1"], moved["ns/y2"]} == {"n2", "n3"}


def test_max_consolidation_preemptees_bounds_the_victims() -> None:
    config = {**ONLY_CONSOLIDATION, "schedulerParams": {"maxNumberConsolidationPreemptees": 1}}
    result = run(three_nodes(), config=config)
    assert result["rounds"][0]["evicted"] == []


def test_zero_preemptees_turns_consolidation_off() -> None:
    config = {**ONLY_CONSOLIDATION, "schedulerParams": {"maxNumberConsolidationPreemptees": 0}}
    assert run(fragmented(), config=config)["rounds"][0]["evicted"] == []


def test_spread_placement_turns_consolidation_off() -> None:
    config = {
        **ONLY_CONSOLIDATION,
        "tiers": [
            {
                "plugins": [
                    {"name": "predicates"},
                    {"name": "proportion"},
                    {"name": "nodeplacement", "arguments": {"gpu": "spread"}},
                ]
            }
        ],
    }
    assert run(fragmented(), config=config)["rounds"][0]["evicted"] == []


def test_non_preemptible_pods_are_not_moved_and_do_not_move_others() -> None:
    # n1: x (3 GPUs, non-preemptible), 1 free; n2: y (1 GPU), 3 free; p needs 4 on one node.
    # With y preemptible, y moves to n1 and p takes n2. With y non-preemptible too, nothing can move.
    def objects(y_class: str) -> list[dict]:
        objs = [node("n1", gpus=4), node("n2", gpus=4), gq("q", 8)]
        objs += job("x", "q", gpus=3, nodes="n1", priority_class="build", age=30)
        objs += job("y", "q", nodes="n2", priority_class=y_class, age=10)
        return [*objs, *job("p", "q", gpus=4, age=1)]

    assert evictions(run(objects("train"), config=ONLY_CONSOLIDATION)) == {"ns/y": ("consolidation", "ns/p")}
    assert run(objects("build"), config=ONLY_CONSOLIDATION)["rounds"][0]["evicted"] == []
    # A non-preemptible waiting job is no consolidation preemptor either.
    result = run([*fragmented()[:-2], *job("p", "q", gpus=4, priority_class="build")], config=ONLY_CONSOLIDATION)
    assert result["rounds"][0]["evicted"] == []


def test_a_pod_moved_by_consolidation_may_be_reclaimed_from_its_new_node_and_is_listed_once() -> None:
    # n1 (4 GPUs): V (1) and W (2), 1 free; n2 (4 GPUs): Z (2) and Q (1), 1 free: all queue a's (quota 0).
    # b (quota 2) waits with P (2 GPUs), c (quota 4) with R (4 GPUs). Fair shares of 8: b 2, c 4, a the
    # remaining 2; a holds 6. No node has 2 free: consolidation moves a's newest job Q onto n1's free GPU
    # and P goes on n2. Reclaim for R (0 + 4 <= c's 4): only n1 can be emptied of a's pods, and Q, moved
    # there (pipelined), is one of them, as V and W are: all three are evicted, R is pipelined on n1.
    # Q is evicted twice in the cycle but listed once, as its first eviction (consolidation, from n2).
    objects = [node("n1", gpus=4), node("n2", gpus=4), gq("a", 0), gq("b", 2), gq("c", 4)]
    objects += job("V", "a", nodes="n1", age=300) + job("W", "a", gpus=2, nodes="n1", age=250)
    objects += job("Z", "a", gpus=2, nodes="n2", age=200) + job("Q", "a", nodes="n2", age=100)
    objects += job("P", "b", gpus=2, age=20) + job("R", "c", gpus=4, age=10)
    result = run(objects, rounds=1)
    assert result["rounds"][0]["evicted"] == [
        {"pod": "ns/Q", "node": "n2", "action": "consolidation", "by": "ns/P"},
        {"pod": "ns/V", "node": "n1", "action": "reclaim", "by": "ns/R"},
        {"pod": "ns/W", "node": "n1", "action": "reclaim", "by": "ns/R"},
    ]
    pipelined = {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]}
    assert pipelined == {"ns/P": "n2", "ns/Q": "n1", "ns/R": "n1"}
    assert status(result, "ns/Z") == "Running"
