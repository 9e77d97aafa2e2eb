"""allocate's rules beyond the queue order, as KAI applies them: job order, task order, the next batch
of a job, readiness, pipelining of a job that cannot truly start, the job queue's depth, no nodes; and
kai's opt-in deferral of jobs bigger than what is free (`deferOversizedJobs`)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kai.api.timeutil import parse_time
from kai.cycle import known_actions
from kai.framework.config import parse_config
from kai.sim.simulate import simulate, to_json_dict
from kai.snapshot.loader import load_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue, run, write

ALLOCATE = {"actions": "allocate"}
DAYS = [f"2025-12-0{i}T00:00:00Z" for i in range(1, 10)]
QUOTA = {"quota": 16, "overQuotaWeight": 1, "limit": -1}


def gpu(quota: float) -> dict[str, float]:
    return {"quota": quota, "overQuotaWeight": 1, "limit": -1}


def job(
    name: str, q: str, size: int = 1, min_member: int | None = None, running: int = 0, on: str = "n0", **kw: Any
) -> list[dict]:
    """`size` one-GPU pods; the first `running` of them run on node `on`."""
    objects = [podgroup(name, q, min_member if min_member is not None else size, **kw)]
    objects += [pod(f"{name}-{i}", group=name, gpus=1, node=on if i < running else None) for i in range(size)]
    return objects


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {k.split("/")[1]: v["status"] for k, v in result["pods"].items()}


def running(result: dict[str, Any]) -> list[str]:
    return sorted(name for name, status in statuses(result).items() if status == "Running")


# -- job order within a queue ---------------------------------------------------------------------------


def one_free_gpu(busy: int, *objects: dict) -> list[dict]:
    """n0 exactly full with the running pods, n1 one free GPU, queue a."""
    nodes = [node("n0", gpus=busy)] if busy else []
    return [*nodes, node("n1", gpus=1), queue("a", gpu=gpu(8)), *objects]


def test_a_job_below_its_minimum_goes_before_an_older_running_one() -> None:
    objects = one_free_gpu(
        1, *job("e", "a", size=2, min_member=1, running=1, created=DAYS[0]), *job("f", "a", created=DAYS[1])
    )
    assert running(run(objects, config=ALLOCATE)) == ["e-0", "f-0"]


def test_a_job_at_its_minimum_goes_before_an_older_one_above_it() -> None:
    objects = one_free_gpu(
        3,
        *job("e", "a", size=3, min_member=1, running=2, created=DAYS[0]),
        *job("f", "a", size=2, min_member=1, running=1, created=DAYS[1]),
    )
    assert running(run(objects, config=ALLOCATE)) == ["e-0", "e-1", "f-0", "f-1"]


def test_priority_class_before_the_elastic_rank() -> None:
    objects = one_free_gpu(
        2,
        *job("e", "a", size=3, min_member=1, running=2, priority_class="build-preemptible", created=DAYS[1]),
        *job("f", "a", priority_class="train", created=DAYS[0]),
    )
    assert running(run(objects, config=ALLOCATE)) == ["e-0", "e-1", "e-2"]


# -- task order and the next batch ----------------------------------------------------------------------


def pods_of_one_job(*pods: dict) -> list[dict]:
    """One free GPU, one elastic job (minMember 1) whose pods compete for it."""
    return [node("n1", gpus=1), queue("a", gpu=QUOTA), podgroup("j", "a", min_member=1), *pods]


PRIORITY = "kai.scheduler/task-priority"


@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [
        ({}, {}, "p1"),  # the older pod
        ({PRIORITY: "5"}, {PRIORITY: "9"}, "p2"),  # higher task priority
        ({}, {PRIORITY: "-3"}, "p2"),  # any number before no label
        ({}, {PRIORITY: "x"}, "p2"),  # a label that is not a number still before no label ...
        ({PRIORITY: "x"}, {PRIORITY: "-5"}, "p2"),  # ... but after every number
        ({PRIORITY: "9"}, {"training.kubeflow.org/job-role": "master"}, "p2"),  # kubeflow master first
        ({}, {"ray.io/node-type": "head"}, "p2"),  # Ray head first
        ({"ray.io/node-type": "head"}, {"training.kubeflow.org/job-role": "launcher"}, "p2"),
    ],
)
def test_task_order(first: dict[str, str], second: dict[str, str], winner: str) -> None:
    objects = pods_of_one_job(
        pod("p1", group="j", gpus=1, created=DAYS[0], labels=first),
        pod("p2", group="j", gpus=1, created=DAYS[1], labels=second),
    )
    assert running(run(objects, config=ALLOCATE)) == [winner]


def subgroup_pod(name: str, sub: str, gpus: int = 1, on: str | None = None) -> dict:
    return pod(name, group="j", gpus=gpus, node=on, labels={"kai.scheduler/subgroup-name": sub})


def two_leaves(*pods: dict, busy: int, free: int = 1) -> list[dict]:
    subgroups = [{"name": "B", "minMember": 2}, {"name": "A", "minMember": 1}]
    nodes = [node("n0", gpus=busy)] if busy else []
    return [*nodes, node("n1", gpus=free), queue("a", gpu=QUOTA), podgroup("j", "a", subgroups=subgroups), *pods]


def test_an_extra_pod_goes_to_the_leaf_least_filled_relative_to_its_minimum() -> None:
    # A runs 2 of minimum 1 (ratio 2), B runs 2 of minimum 2 (ratio 1): B gets the free GPU.
    objects = two_leaves(
        subgroup_pod("a0", "A", on="n0"),
        subgroup_pod("a1", "A", on="n0"),
        subgroup_pod("a2", "A"),
        subgroup_pod("b0", "B", on="n0"),
        subgroup_pod("b1", "B", on="n0"),
        subgroup_pod("b2", "B"),
        busy=4,
    )
    assert statuses(run(objects, config=ALLOCATE))["b2"] == "Running"


def test_equally_filled_leaves_give_the_extra_pod_by_name() -> None:
    objects = two_leaves(
        subgroup_pod("a0", "A", on="n0"),
        subgroup_pod("a1", "A"),
        subgroup_pod("b0", "B", on="n0"),
        subgroup_pod("b1", "B", on="n0"),
        subgroup_pod("b2", "B"),
        busy=3,
    )
    result = statuses(run(objects, config=ALLOCATE))
    assert (result["a1"], result["b2"]) == ("Running", "Pending")


def test_a_gang_brings_each_leaf_to_its_minimum_and_no_further_in_one_batch() -> None:
    # A needs one 2-GPU pod, B two 1-GPU pods: 4 GPUs hold exactly that batch; the extras wait.
    objects = two_leaves(
        subgroup_pod("a0", "A", gpus=2),
        subgroup_pod("a1", "A", gpus=2),
        subgroup_pod("b0", "B"),
        subgroup_pod("b1", "B"),
        subgroup_pod("b2", "B"),
        busy=0,
        free=4,
    )
    assert running(run(objects, config=ALLOCATE)) == ["a0", "b0", "b1"]


def test_a_leaf_that_cannot_reach_its_minimum_keeps_the_whole_gang_out() -> None:
    objects = two_leaves(
        subgroup_pod("a0", "A", gpus=4), subgroup_pod("b0", "B"), subgroup_pod("b1", "B", gpus=2), busy=0, free=5
    )
    assert running(run(objects, config=ALLOCATE)) == []


# -- readiness -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "expect"),
    [
        ({"node": "n1", "deleting": True}, "Pending"),  # a releasing pod does not count toward minMember
        ({"node": "n1", "phase": "Succeeded"}, "Pending"),  # nor does a finished one
        ({"node": "n1"}, "Running"),  # a running pod does
        ({"gated": True}, "Pending"),  # a gated pod does not
    ],
)
def test_a_gang_is_tried_only_when_enough_of_its_pods_can_run(first: dict[str, Any], expect: str) -> None:
    objects = [
        node("n1", gpus=8),
        queue("a", gpu=QUOTA),
        podgroup("j", "a", min_member=2),
        pod("j0", group="j", gpus=1, **first),
        pod("j1", group="j", gpus=1),
    ]
    assert statuses(run(objects, config=ALLOCATE))["j1"] == expect


# -- pipelining ------------------------------------------------------------------------------------------


def releasing_node(*objects: dict) -> list[dict]:
    """n1: 4 GPUs held by a pod being deleted; n2: 2 idle GPUs."""
    old = [podgroup("old", "a"), pod("old", group="old", gpus=4, node="n1", deleting=True)]
    return [node("n1", gpus=4), node("n2", gpus=2), queue("a", gpu=QUOTA), *old, *objects]


def placements(result: dict[str, Any]) -> tuple[list[str], list[str]]:
    first = result["rounds"][0]
    return sorted(b["pod"] for b in first["bound"]), sorted(p["pod"] for p in first["pipelined"])


def test_a_leaf_short_of_really_allocated_pods_pipelines_the_whole_job() -> None:
    # A's pod fits the idle n2, B's only the releasing n1: B cannot start now, so neither is bound.
    subgroups = [{"name": "A", "minMember": 1}, {"name": "B", "minMember": 1}]
    objects = releasing_node(
        podgroup("j", "a", subgroups=subgroups), subgroup_pod("a0", "A", gpus=2), subgroup_pod("b0", "B", gpus=4)
    )
    assert placements(run(objects, config=ALLOCATE)) == ([], ["ns/a0", "ns/b0"])


def test_an_elastic_extra_on_releasing_resources_leaves_the_started_pods_bound() -> None:
    objects = releasing_node(
        podgroup("j", "a", min_member=1), pod("j0", group="j", gpus=2), pod("j1", group="j", gpus=4)
    )
    assert placements(run(objects, config=ALLOCATE)) == (["ns/j0"], ["ns/j1"])


# -- queueDepthPerAction -------------------------------------------------------------------------------


def run_with_depth(objects: list[dict], depth: int) -> dict[str, Any]:
    """Like `run`, with queueDepthPerAction.allocate set on the parsed configuration (whatever the reader
    makes of a value, the job queue's meaning of it is what is tested here)."""
    cfg, problems, _ = parse_config(ALLOCATE, known_actions())
    assert not problems
    cfg = dataclasses.replace(cfg, queue_depth_per_action={"allocate": depth})
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = load_snapshot([write(objects, Path(tmp))], parse_time(NOW), cfg.params.scheduler_name)
    return to_json_dict(simulate(snapshot, cfg, 1))


def three_and_one() -> list[dict]:
    return [
        node("n1", gpus=8),
        queue("a", gpu=gpu(4)),
        queue("b", gpu=gpu(4)),
        *job("a1", "a", created=DAYS[0]),
        *job("a2", "a", created=DAYS[1]),
        *job("a3", "a", created=DAYS[2]),
        *job("b1", "b", created=DAYS[0]),
    ]


@pytest.mark.parametrize(
    ("depth", "expect"),
    [
        (1, ["a1-0", "b1-0"]),  # each queue holds its first job only
        (2, ["a1-0", "a2-0", "b1-0"]),
        (3, ["a1-0", "a2-0", "a3-0", "b1-0"]),
        (-1, ["a1-0", "a2-0", "a3-0", "b1-0"]),  # -1: no cap
        (0, []),  # a queue that holds no job: allocate tries none (KAI's action fails outright)
    ],
)
def test_queue_depth_caps_the_jobs_each_queue_offers(depth: int, expect: list[str]) -> None:
    assert running(run_with_depth(three_and_one(), depth)) == expect


def test_queue_depth_read_from_the_configuration_applies_to_its_action_only() -> None:
    objects = three_and_one()
    assert running(run(objects, config={**ALLOCATE, "queueDepthPerAction": {"allocate": 1}})) == ["a1-0", "b1-0"]
    assert len(running(run(objects, config={"queueDepthPerAction": {"reclaim": 1}}))) == 4


# -- no nodes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [None, ALLOCATE, {**ALLOCATE, "schedulerParams": {"deferOversizedJobs": True}}])
def test_a_cluster_without_nodes_leaves_every_job_pending_and_says_why(config: dict | None) -> None:
    objects = [
        queue("a"),
        queue("b", gpu=gpu(2)),
        *job("j", "a", size=2),
        podgroup("k", "b"),
        pod("k", group="k", cpu="1"),
    ]
    result = run(objects, config=config)
    assert set(statuses(result).values()) == {"Pending"}
    assert "no nodes" in result["podGroups"]["ns/k"]["message"]
    assert result["queues"]["b"]["fairShare"] == {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}


# -- deferOversizedJobs (kai's opt-in) -------------------------------------------------------------------


def big_gang_first_in_line() -> list[dict]:
    # 2 GPUs, one used by c. a and b each deserve 1. a's first job asks for 2 GPUs (it cannot start), its
    # second for 1; b's only job for 1. a is the older queue.
    return [
        node("n1", gpus=2),
        queue("a", gpu=gpu(1), created=DAYS[0]),
        queue("b", gpu=gpu(1), created=DAYS[1]),
        queue("c", gpu=gpu(0), created=DAYS[0]),
        *job("c-run", "c", running=1, on="n1"),
        podgroup("a-big", "a", created=DAYS[0]),
        pod("a-big", group="a-big", gpus=2),
        *job("a-small", "a", created=DAYS[1]),
        *job("b-small", "b", created=DAYS[0]),
    ]


def test_by_default_a_job_too_big_to_start_still_stands_for_its_queue() -> None:
    # As KAI: a's 2-GPU job is a's next job in the queue order, a with it would go over its quota, b with
    # its own would not: b is first and takes the free GPU; a's small job finds none.
    result = run(big_gang_first_in_line(), config=ALLOCATE)
    assert running(result) == ["b-small-0", "c-run-0"]


def test_defer_oversized_jobs_lets_the_next_job_stand_for_the_queue() -> None:
    # With the opt-in, a's 2-GPU job (more than the 1 GPU free) is set aside: a's small job stands for a,
    # both queues stay within quota with their jobs, and the older queue a goes first. The big job still
    # gets its attempt, last, and says why it waits.
    config = {**ALLOCATE, "schedulerParams": {"deferOversizedJobs": True}}
    result = run(big_gang_first_in_line(), config=config)
    assert running(result) == ["a-small-0", "c-run-0"]
    assert "insufficient nvidia.com/gpu" in result["podGroups"]["ns/a-big"]["message"]
