"""The eviction simulation's queue (`SimulationQueue` over `FixedJobs`) hands out the jobs pushed into it
in exactly the order the full `JobQueue` over the pushed jobs followed by every other pending job would
pop them: compared on random clusters (queue trees of one to three levels, both fairness modes, jobs of
several priorities, sizes and ages, some partly running), with jobs left out, jobs the defer predicate
holds true for, and the caller placing each handed-out job before the next pop, as the simulation does."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig, SchedulerParams
from kai.framework.jobqueue import FixedJobs, JobQueue, SimulationQueue
from kai.framework.session import Session
from kai.framework.statement import Statement
from kai.model import PodGroupInfo, PodStatus
from kai.snapshot.builder import build_snapshot
from tests.actions.evict_helpers import gq, job
from tests.scenario import NOW, node

NODES = 6
GPUS = 8


def random_cluster(rng: random.Random) -> list[dict[str, Any]]:
    """Departments with teams, some teams split into sub-teams, one top-level leaf queue; pending jobs in
    every leaf, running ones on the nodes (some jobs partly running: elastic, below or above minMember)."""
    objects: list[dict[str, Any]] = [node(f"n{i}", gpus=GPUS) for i in range(NODES)]
    leaves: list[str] = []
    for d in range(rng.randint(1, 3)):
        objects.append(gq(f"d{d}", rng.randint(0, 16)))
        for t in range(rng.randint(1, 3)):
            team = f"d{d}t{t}"
            objects.append(gq(team, rng.randint(0, 6), parent=f"d{d}"))
            if rng.random() < 0.3:
                for s in range(2):
                    objects.append(gq(f"{team}s{s}", rng.randint(0, 4), parent=team))
                    leaves.append(f"{team}s{s}")
            else:
                leaves.append(team)
    objects.append(gq("solo", rng.randint(0, 4)))  # a top-level leaf (no root when fairness stops at level 2)
    leaves.append("solo")
    free = [GPUS] * NODES
    classes = [None, "build", "train", "inference"]
    for i in range(rng.randint(8, 30)):
        q = rng.choice(leaves)
        gpus, size = rng.choice([1, 1, 2, 4, 8]), rng.randint(1, 4)
        running = rng.choice([0, 0, 0, size, rng.randint(0, size)])
        where: list[str | None] = []
        for _ in range(running):
            row = next((r for r in range(NODES) if free[r] >= gpus), None)
            if row is not None:
                free[row] -= gpus
            where.append(None if row is None else f"n{row}")
        where += [None] * (size - len(where))
        objects += job(
            f"j{i}",
            q,
            gpus=gpus,
            size=size,
            nodes=where,  # type: ignore[arg-type]
            min_member=rng.randint(1, size),
            priority_class=rng.choice(classes),
            age=rng.choice([5, 10, 10, 20, 30, 40]),  # equal ages: the uid breaks the tie
        )
    return objects


def session(objects: list[dict[str, Any]], full: bool) -> Session:
    built = build_snapshot(objects, now=parse_time(NOW))
    assert not built.problems, built.problems[:3]
    config = dataclasses.replace(SchedulerConfig(), params=SchedulerParams(full_hierarchy_fairness=full))
    ssn, _ = open_session(built.snapshot, config)
    return ssn


def place(ssn: Session, stmt: Statement, handed: PodGroupInfo, rng: random.Random) -> None:
    """What the simulation may do after a pop: change the allocation of the handed-out job's queues
    (here: some or all of its pending pods placed, a pod of a job there that waits for nothing evicted)."""
    pending = [p for p in handed.pods if p.status is PodStatus.PENDING]
    for pod in pending[: rng.randint(0, len(pending))]:
        stmt.pipeline(pod, f"n{rng.randrange(NODES)}")
    if rng.random() < 0.5:
        for other in ssn.jobs.values():
            running = [p for p in other.pods if p.status is PodStatus.RUNNING]
            if other.queue == handed.queue and not other.has_pending() and running:
                stmt.evict(running[0], "test")
                break


def full_order(
    ssn: Session, pushed: list[PodGroupInfo], leave_out: set[str], deferred: set[str], act: random.Random
) -> list[str]:
    """The pushed jobs as the full JobQueue over them and every other pending job pops them."""
    ids = {id(j) for j in pushed}
    others = [j for j in ssn.jobs_with_pending() if j.has_pending() and j.key not in leave_out]
    skip = (lambda: lambda j: id(j) not in ids and j.key in deferred) if deferred else None
    queue = JobQueue(ssn, [*pushed, *others], defer_for_pop=skip)
    stmt, out = Statement(ssn), []
    while (popped := queue.pop()) is not None:
        if id(popped) in ids:
            out.append(popped.key)
            place(ssn, stmt, popped, act)
    stmt.discard()
    return out


def lazy_order(
    ssn: Session,
    fixed: FixedJobs,
    pushed: list[PodGroupInfo],
    leave_out: set[str],
    deferred: set[str],
    act: random.Random,
) -> list[str]:
    """The pushed jobs as the SimulationQueue over them and the fixed jobs hands them out."""
    skip = (lambda: lambda j: j.key in deferred) if deferred else None
    queue = SimulationQueue(ssn, fixed, pushed, leave_out=leave_out, defer_for_pop=skip)
    stmt, out = Statement(ssn), []
    while (popped := queue.pop()) is not None:
        out.append(popped.key)
        place(ssn, stmt, popped, act)
    stmt.discard()
    return out


def both_orders(seed: int, full: bool, trials: int = 6) -> list[tuple[list[str], list[str]]]:
    """Per trial (another set of pushed jobs on the same cluster): the pushed jobs in the order of the
    full JobQueue, and in that of the SimulationQueue (the caller acting alike between pops)."""
    rng = random.Random(seed)
    ssn = session(random_cluster(rng), full)
    waiting = [j for j in ssn.jobs_with_pending() if j.has_pending()]
    fixed = FixedJobs(ssn, ssn.jobs_with_pending(), PodGroupInfo.has_pending)
    results = []
    for trial in range(trials):
        pushed = rng.sample(waiting, min(len(waiting), rng.randint(2, 6)))
        leave_out = {j.key for j in pushed} | {j.key for j in waiting if rng.random() < 0.2}
        deferred = {j.key for j in waiting if rng.random() < 0.3} if rng.random() < 0.5 else set()
        fixed.update()  # the previous trial changed pods (and put them back)
        expected = full_order(ssn, pushed, leave_out, deferred, random.Random(trial))
        results.append((expected, lazy_order(ssn, fixed, pushed, leave_out, deferred, random.Random(trial))))
    return results


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("seed", range(40))
def test_pops_in_the_order_of_the_full_queue(seed: int, full: bool) -> None:
    for trial, (expected, got) in enumerate(both_orders(seed, full)):
        assert got == expected, f"trial {trial}"


def test_pushed_jobs_come_out_even_when_other_jobs_rank_first() -> None:
    # One leaf queue: the pushed job p (priority train, 50) behind two fixed jobs of higher priority
    # (build, 100) there; the fixed ones are never handed out, p is.
    objects = [node("n0"), gq("d", 8), gq("t", 8, parent="d")]
    objects += job("hi1", "t", priority_class="build") + job("hi2", "t", priority_class="build", age=5)
    objects += job("p", "t", priority_class="train")
    ssn = session(objects, True)
    fixed = FixedJobs(ssn, ssn.jobs_with_pending(), PodGroupInfo.has_pending)
    assert [e[2].name for e in fixed.leaf("t")] == ["hi2", "hi1", "p"]  # priority, then older first
    queue = SimulationQueue(ssn, fixed, [ssn.jobs["ns/p"]], leave_out={"ns/p"})
    assert queue.pop() is ssn.jobs["ns/p"]
    assert queue.pop() is None


def test_fixed_jobs_follow_their_pods_after_update() -> None:
    # a (older) before b while both wait; once a's only pod is placed, a waits for nothing: after
    # `update` it no longer stands for the queue; once placed back as it was, it is there again.
    objects = [node("n0"), gq("d", 8), gq("t", 8, parent="d")]
    objects += job("a", "t", age=20) + job("b", "t", age=10)
    ssn = session(objects, True)
    fixed = FixedJobs(ssn, ssn.jobs_with_pending(), PodGroupInfo.has_pending)
    assert [e[2].name for e in fixed.leaf("t")] == ["a", "b"]
    stmt = Statement(ssn)
    stmt.allocate(next(iter(ssn.jobs["ns/a"].pods)), "n0")
    assert [e[2].name for e in fixed.leaf("t")] == ["a", "b"]  # not looked at again before `update`
    fixed.update()
    assert [e[2].name for e in fixed.leaf("t")] == ["b"]
    stmt.discard()
    fixed.update()
    assert [e[2].name for e in fixed.leaf("t")] == ["a", "b"]
