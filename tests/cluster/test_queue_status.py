"""Queue status as KAI's queue controller writes it: child queues, and the pod groups' requested /
allocated / allocatedNonPreemptible resources summed up the queue tree, after the cycle's decisions."""

from __future__ import annotations

from kai.cluster.status import _with_removals, quantities, queue_usage
from kai.framework.decisions import Binding, Decisions
from kai.snapshot.builder import build_snapshot
from tests.scenario import node, pod, podgroup, queue

GPU = "nvidia.com/gpu"


def test_queue_resources_roll_up_the_tree() -> None:
    objects = [
        node("n1", gpus=8),
        queue("parent"),
        queue("a", parent="parent"),
        queue("b", parent="parent"),
        queue("lonely"),
        podgroup("a1", "a", preemptibility="non-preemptible"),
        pod("a1-0", group="a1", gpus=2, cpu="500m", node="n1"),
        podgroup("b1", "b"),
        pod("b1-0", group="b1", gpus=1, cpu="250m"),  # bound by this cycle
        podgroup("b2", "b"),
        pod("b2-0", group="b2", gpus=1, cpu="250m"),  # still pending
    ]
    result = build_snapshot(objects, 0.0)
    assert not result.problems
    decisions = Decisions(bindings=[Binding("ns/b1-0", "n1")])
    usage = queue_usage(result.snapshot, decisions)

    def status(name: str) -> tuple[list[str], dict[str, str], dict[str, str], dict[str, str]]:
        u = usage[name]
        return (
            u.children,
            {k: v for k, v in quantities(u.requested).items() if k in (GPU, "cpu")},
            {k: v for k, v in quantities(u.allocated).items() if k in (GPU, "cpu")},
            {k: v for k, v in quantities(u.allocated_non_preemptible).items() if k in (GPU, "cpu")},
        )

    assert status("a") == ([], {GPU: "2", "cpu": "500m"}, {GPU: "2", "cpu": "500m"}, {GPU: "2", "cpu": "500m"})
    assert status("b") == ([], {GPU: "2", "cpu": "500m"}, {GPU: "1", "cpu": "250m"}, {})
    assert status("parent") == (
        ["a", "b"],
        {GPU: "4", "cpu": "1000m"},
        {GPU: "3", "cpu": "750m"},
        {GPU: "2", "cpu": "500m"},
    )
    assert status("lonely") == ([], {}, {}, {})


def test_a_status_map_that_lost_keys_is_patched_with_nulls() -> None:
    current = {"allocated": {GPU: "16", "cpu": "1"}, "conditions": [{"type": "X"}]}
    desired = {"allocated": {"cpu": "2"}, "childQueues": []}
    assert _with_removals(current, desired) == {"allocated": {"cpu": "2", GPU: None}, "childQueues": []}
