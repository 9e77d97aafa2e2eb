"""The topology plugin's PlacementPossible hook: before the victim solver simulates a trial, it asks
whether the preemptor's tasks could fit in some allowed domain at all, with the trial's victims' resources
freed. A "no" skips the simulation; it must only ever be given when the simulation would fail too.

The hook's answers are checked on hand-made sessions (rack and block constraints, sub-groups, a mixed
batch), and its soundness on random clusters: every decision with the hook on equals the decision with
the hook bypassed (every trial simulated)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.session import Session
from kai.framework.victims import Solver
from kai.model import PodInfo, PodStatus
from kai.plugins.topology import TopologyPlugin
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue, run
from tests.topology.test_topology import BLOCK, RACK, TOPOLOGY, constraint, topology


def session(objects: list[dict[str, Any]]) -> Session:
    built = build_snapshot(objects, now=parse_time(NOW))
    assert not built.problems, built.problems
    ssn, _ = open_session(built.snapshot, SchedulerConfig())
    return ssn


def full_racks(blocks: int, racks: int, nodes: int) -> list[dict[str, Any]]:
    """Nodes b<b>-r<r>-n<n> of 8 GPUs, each full with one running 8-GPU job `run-<node>` of queue a."""
    objects: list[dict[str, Any]] = [topology(TOPOLOGY, [BLOCK, RACK]), queue("a"), queue("b")]
    for b in range(blocks):
        for r in range(racks):
            for n in range(nodes):
                name = f"b{b}-r{r}-n{n}"
                objects.append(node(name, gpus=8, labels={BLOCK: f"b{b}", RACK: f"r{r}"}))
                objects.append(podgroup(f"run-{name}", "a"))
                objects.append(pod(f"run-{name}", group=f"run-{name}", queue="a", gpus=8, node=name))
    return objects


def gang(name: str, sizes: list[int], topo: dict[str, str]) -> list[dict[str, Any]]:
    group = podgroup(name, "b", len(sizes))
    group["spec"]["topologyConstraint"] = topo
    return [group, *(pod(f"{name}-{i}", group=name, queue="b", gpus=g) for i, g in enumerate(sizes))]


def possible(ssn: Session, job: str, freed_nodes: list[str]) -> bool:
    """The session's answer for the pending pods of `job` once the jobs running on `freed_nodes` are freed."""
    pending = [p for p in ssn.jobs[f"ns/{job}"].pods if p.status is PodStatus.PENDING]
    freed: list[PodInfo] = [p for name in freed_nodes for p in ssn.jobs[f"ns/run-{name}"].pods]
    return ssn.placement_possible(ssn.jobs[f"ns/{job}"], pending, freed)


def test_a_rack_gang_needs_its_room_inside_one_rack() -> None:
    # 1 block x 2 racks x 2 nodes, all full. Two 8-GPU pods required in one rack: freeing one node of
    # each rack frees 16 GPUs, but each rack then holds only 1 of the 2 pods.
    ssn = session([*full_racks(1, 2, 2), *gang("g", [8, 8], constraint(required=RACK))])
    assert not possible(ssn, "g", [])
    assert not possible(ssn, "g", ["b0-r0-n0", "b0-r1-n0"])
    assert possible(ssn, "g", ["b0-r1-n0", "b0-r1-n1"])  # rack r1 holds both


def test_a_preferred_level_alone_lets_the_gang_span_the_topology() -> None:
    # The same room with only a preferred rack: the levels go up to the root, which holds both pods.
    ssn = session([*full_racks(1, 2, 2), *gang("g", [8, 8], constraint(preferred=RACK))])
    assert not possible(ssn, "g", ["b0-r0-n0"])  # 8 GPUs for 16
    assert possible(ssn, "g", ["b0-r0-n0", "b0-r1-n0"])


def test_a_block_gang_counts_whole_pods_per_node() -> None:
    # 2 blocks x 1 rack x 2 nodes. Four 4-GPU pods required in one block: two freed nodes of one block
    # hold 2 pods each; one freed node in each block holds only 2 pods per block.
    ssn = session([*full_racks(2, 1, 2), *gang("g", [4, 4, 4, 4], constraint(required=BLOCK))])
    assert not possible(ssn, "g", ["b0-r0-n0", "b1-r0-n0"])
    assert possible(ssn, "g", ["b1-r0-n0", "b1-r0-n1"])


def test_each_sub_group_needs_its_own_domain() -> None:
    # 1 block x 3 racks x 2 nodes. Root: required block; prefill (2 x 8 GPUs) and decode (1 x 8 GPUs),
    # each required in one rack. One freed node in each rack: the block holds all 3 pods, but no rack
    # holds prefill's 2.
    group = podgroup("g", "b", 3)
    group["spec"]["topologyConstraint"] = constraint(required=BLOCK)
    group["spec"]["subGroups"] = [
        {"name": "prefill", "minMember": 2, "topologyConstraint": constraint(required=RACK)},
        {"name": "decode", "minMember": 1, "topologyConstraint": constraint(required=RACK)},
    ]
    pods = [
        pod(f"g-{leaf}-{i}", group="g", queue="b", gpus=8, labels={"kai.scheduler/subgroup-name": leaf})
        for leaf, count in (("prefill", 2), ("decode", 1))
        for i in range(count)
    ]
    ssn = session([*full_racks(1, 3, 2), group, *pods])
    assert not possible(ssn, "g", ["b0-r0-n0", "b0-r1-n0", "b0-r2-n0"])
    assert possible(ssn, "g", ["b0-r0-n0", "b0-r1-n0", "b0-r1-n1"])  # prefill in r1, decode in r0


def test_a_mixed_batch_also_needs_the_summed_request_in_one_domain() -> None:
    # 1 block x 2 racks x 2 nodes. An 8-GPU and a 4-GPU pod in one rack (12 GPUs). Per node, copies of
    # the smaller pod are counted; the rack's free sum must also reach 12.
    objects = full_racks(1, 2, 2)
    # Replace the job on b0-r0-n1 by a 4-GPU one: that node has 4 GPUs idle.
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "run-b0-r0-n1":
            obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    ssn = session([*objects, *gang("g", [8, 4], constraint(required=RACK))])
    assert not possible(ssn, "g", [])  # r0: 4 free
    assert possible(ssn, "g", ["b0-r0-n0"])  # r0: 8 + 4 free
    assert not possible(ssn, "g", ["b0-r1-n0"])  # r1: 8 free, 12 needed; r0: 4 free


def test_jobs_without_a_constraint_get_no_opinion() -> None:
    objects = [*full_racks(1, 1, 1), podgroup("free", "b", 1), pod("free-0", group="free", queue="b", gpus=8)]
    objects += gang("g", [8], constraint(required=RACK))  # a constrained job, so the plugin is on
    ssn = session(objects)
    assert possible(ssn, "free", [])  # no room anywhere, but no topology rule to judge it by
    assert not possible(ssn, "g", [])


# -- soundness on random clusters -------------------------------------------------------------------

BLOCKS, RACKS, NODES = 2, 3, 3


def random_cluster(seed: int) -> list[dict[str, Any]]:
    """A fairly full cluster: running single pods and rack-bound gangs of three queues, pending gangs
    with every kind of constraint (sub-groups, mixed requests, priorities that preempt)."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [topology(TOPOLOGY, [BLOCK, RACK])]
    for q in ("a", "b", "c"):
        objects.append(queue(q, gpu={"quota": rng.choice((0, 16, 48)), "overQuotaWeight": 1, "limit": -1}))
    names = [f"b{b}-r{r}-n{n}" for b in range(BLOCKS) for r in range(RACKS) for n in range(NODES)]
    free = {}
    for name in names:
        b, r = name.split("-")[:2]
        objects.append(node(name, gpus=8, labels={BLOCK: b, RACK: r}, unschedulable=rng.random() < 0.05))
        free[name] = 8
    objects.append(node("outside", gpus=8))  # no topology labels
    free["outside"] = 8
    classes = ("train", "build-preemptible", "build")
    minute = 0
    for i in range(rng.randrange(20, 60)):
        minute += 1
        q = rng.choice("abc")
        created = f"2025-12-31T{10 + minute // 60:02d}:{minute % 60:02d}:00Z"
        if rng.random() < 0.3:  # a running gang, all in one rack
            rack = rng.choice(names).rsplit("-", 1)[0]
            size, gpus = rng.choice((2, 3)), rng.choice((1, 2, 4))
            spots = [n for n in names if n.startswith(rack + "-") and free[n] >= gpus]
            if len(spots) < size:
                continue
            group = podgroup(f"run-{i}", q, size, priority_class=rng.choice(classes), created=created)
            group["spec"]["topologyConstraint"] = constraint(required=RACK)
            objects.append(group)
            for p, where in enumerate(rng.sample(spots, size)):
                free[where] -= gpus
                objects.append(pod(f"run-{i}-{p}", group=f"run-{i}", queue=q, gpus=gpus, node=where))
            continue
        where, gpus = rng.choice([*names, "outside"]), rng.choice((1, 2, 4, 8))
        if free[where] < gpus:
            continue
        free[where] -= gpus
        objects.append(podgroup(f"run-{i}", q, 1, priority_class=rng.choice(classes), created=created))
        objects.append(pod(f"run-{i}", group=f"run-{i}", queue=q, gpus=gpus, node=where))
    for g in range(rng.randrange(4, 12)):
        name, q = f"gang-{g}", rng.choice("abc")
        size = rng.choice((1, 2, 3, 4, 6))
        sizes = [rng.choice((1, 2, 4, 8))] * size
        if rng.random() < 0.2:
            sizes = [rng.choice((1, 2, 4, 8)) for _ in range(size)]  # a mixed batch
        group = podgroup(name, q, size, priority_class=rng.choice(classes))
        kind = rng.randrange(5)
        if kind == 4:
            half = max(1, size // 2)
            group["spec"]["minMember"] = 2 * half
            group["spec"]["subGroups"] = [
                {"name": leaf, "minMember": half, "topologyConstraint": constraint(required=RACK)}
                for leaf in ("prefill", "decode")
            ]
            group["spec"]["topologyConstraint"] = constraint(required=BLOCK)
            objects.append(group)
            for leaf in ("prefill", "decode"):
                objects += [
                    pod(
                        f"{name}-{leaf}-{i}",
                        group=name,
                        queue=q,
                        gpus=sizes[i % size],
                        labels={"kai.scheduler/subgroup-name": leaf},
                    )
                    for i in range(half)
                ]
            continue
        group["spec"]["topologyConstraint"] = [
            constraint(required=RACK),
            constraint(required=BLOCK, preferred=RACK),
            constraint(preferred=BLOCK),
            constraint(required=BLOCK),
        ][kind]
        objects.append(group)
        objects += [pod(f"{name}-{i}", group=name, queue=q, gpus=sizes[i]) for i in range(size)]
    return objects


@pytest.fixture
def rejections(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the hook's "no" answers (the trials the solver skips)."""
    count = [0]
    original = TopologyPlugin.placement_possible

    def counted(self: TopologyPlugin, *args: Any) -> bool:
        answer = original(self, *args)
        count[0] += not answer
        return answer

    monkeypatch.setattr(TopologyPlugin, "placement_possible", counted)
    return count


def test_the_pre_check_never_changes_a_decision(rejections: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    skipped = 0
    for seed in range(16):
        objects = random_cluster(seed)
        before = rejections[0]
        checked = run(objects, rounds=2)
        skipped += rejections[0] - before
        with monkeypatch.context() as m:
            m.setattr(TopologyPlugin, "placement_possible", lambda self, *args: True)  # simulate every trial
            simulated = run(objects, rounds=2)
        assert checked == simulated, f"seed {seed}"
    assert skipped > 0  # the clusters are full enough that trials are skipped


def test_a_simulation_stopped_once_the_job_has_no_room_decides_as_the_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A simulation places the victims whose queues come before the job; once the hook sees no room for
    # the job's tasks it stops (that room only shrinks until the job's turn). On random clusters the
    # decisions equal those of simulations always run to the job's own turn.
    inside, stopped = [False], [0]
    simulate, possible = Solver._simulate, TopologyPlugin.placement_possible

    def simulating(self: Solver, *args: Any) -> Any:
        inside[0] = True
        try:
            return simulate(self, *args)
        finally:
            inside[0] = False

    def counted(self: TopologyPlugin, *args: Any) -> bool:
        answer = possible(self, *args)
        stopped[0] += inside[0] and not answer  # only the shortcut asks the hook inside a simulation
        return answer

    monkeypatch.setattr(Solver, "_simulate", simulating)
    monkeypatch.setattr(TopologyPlugin, "placement_possible", counted)
    for seed in range(16):
        objects = random_cluster(seed)
        shortcut = run(objects, rounds=2)
        with monkeypatch.context() as m:
            m.setattr(Solver, "stop_when_job_cannot_fit", False)
            full = run(objects, rounds=2)
        assert shortcut == full, f"seed {seed}"
    assert stopped[0] > 0  # the clusters are full enough that simulations stop early
