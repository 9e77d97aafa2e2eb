"""The victim solver grows a gang one task at a time ("partial jobs"), as KAI does: for every partial
job the victim queue is walked again from its first victim, with the victims recorded for the
earlier tasks evicted up front and left out of the walk; a victim counts as recorded when it does not
end the scenario back where it was (evicted for good, or placed again on another node).

Every expected result is worked out by hand from those rules in the comments. Queue a (quota 2) waits
with a gang; queue b (quota 0, so fair share 0) runs the 1-GPU victims, newest first in victim order.
"""

from __future__ import annotations

from typing import Any

from tests.actions.evict_helpers import evictions, gq, job, stamp, status
from tests.scenario import node, pod, podgroup, run


def gang(name: str, selectors: list[dict[str, str]]) -> list[dict[str, Any]]:
    """A gang of queue a, one 1-GPU pod per node selector; the first pod is the oldest (first in task
    order)."""
    objects: list[dict[str, Any]] = [podgroup(name, "a", len(selectors), created=stamp(1))]
    for i, selector in enumerate(selectors):
        objects.append(
            pod(f"{name}-{i}", group=name, queue="a", gpus=1, node_selector=selector, created=stamp(len(selectors) - i))
        )
    return objects


def test_a_victim_passed_over_for_the_first_task_is_offered_again_for_the_next() -> None:
    # n1 (slot one) runs vx, n2 (slot two) runs vy; both 1 GPU. Gang p: p-0 may only use n2, p-1 only n1.
    # Victim order in b: vx (newer), then vy.
    # Task 1 (p-0): vx alone frees n1, where p-0 may not go: rejected. vy frees n2: p-0 goes there, vy
    #   finds no other place (n1 is full): solved, vy recorded.
    # Task 2 (p-0, p-1): vy alone is not enough (p-1 needs n1). The walk starts again from the first
    #   victim: vx, with vy evicted too, frees n1 and n2: p-0 on n2, p-1 on n1; neither victim finds a
    #   place. b (2 GPUs, fair share 0) is above its share before each chunk: the reclaim is fair.
    # A walk that went on from where task 1 stopped would find nothing after vy, and p would wait.
    objects = [node("n1", gpus=1, labels={"slot": "one"}), node("n2", gpus=1, labels={"slot": "two"})]
    objects += [gq("a", 2), gq("b", 0)]
    objects += job("vy", "b", nodes="n2", age=60) + job("vx", "b", nodes="n1", age=30)
    objects += gang("p", [{"slot": "two"}, {"slot": "one"}])
    result = run(objects, rounds=2)
    assert evictions(result) == {"ns/vx": ("reclaim", "ns/p"), "ns/vy": ("reclaim", "ns/p")}
    assert {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]} == {"ns/p-0": "n2", "ns/p-1": "n1"}
    assert [status(result, f"ns/p-{i}") for i in (0, 1)] == ["Running", "Running"]
    assert [status(result, "ns/vx"), status(result, "ns/vy")] == ["Pending", "Pending"]


def test_a_victim_moved_for_the_first_task_stays_a_victim_for_the_next() -> None:
    # n1 runs vm (newer), n2 runs vw (older); n3 (pool q) is free. The gang's two pods may only use pool p
    # (n1, n2). Consolidation cannot help: moving both victims needs two free nodes, there is one.
    # Reclaim, task 1 (p-0): vm goes first: evicted, p-0 on n1 (queue a is below its share, so it is
    #   placed before b's jobs), vm placed again on n3: solved. vm moved, so it is recorded.
    # Task 2: vm alone: p-1 finds no room. The walk again: vm's job holds recorded victims and has
    #   nothing else to give; vw (with vm evicted up front) frees n2: p-0 on n1, p-1 on n2. Then b's
    #   jobs in job order: vw (older) takes n3, vm finds no place and is evicted for good. Reclaim
    #   counts only vm (vw was placed again): b is above its share of 0 before it.
    # Had the moved vm not been recorded, vm and vw would never be evicted together and p would wait.
    objects = [
        node("n1", gpus=1, labels={"pool": "p"}),
        node("n2", gpus=1, labels={"pool": "p"}),
        node("n3", gpus=1, labels={"pool": "q"}),
    ]
    objects += [gq("a", 2), gq("b", 0)]
    objects += job("vw", "b", nodes="n2", age=60) + job("vm", "b", nodes="n1", age=30)
    objects += gang("p", [{"pool": "p"}, {"pool": "p"}])
    result = run(objects, rounds=2)
    assert evictions(result) == {"ns/vm": ("reclaim", "ns/p"), "ns/vw": ("reclaim", "ns/p")}
    pipelined = {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]}
    assert pipelined == {"ns/p-0": "n1", "ns/p-1": "n2", "ns/vw": "n3"}
    assert [status(result, "ns/p-0"), status(result, "ns/p-1"), status(result, "ns/vw")] == ["Running"] * 3
    assert status(result, "ns/vm") == "Pending"
