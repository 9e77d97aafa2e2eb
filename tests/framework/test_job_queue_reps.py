"""allocate's job queue (stable keys, nothing deferred) keeps the job standing for each queue, and its key,
until a push or a pop below the queue changes it; it pops the jobs in exactly the order of the same queue
comparing every queue anew at each pop. Compared on random clusters (queue trees of one to three levels,
both fairness modes, with and without a depth cap), the caller placing part of each popped job (and
evicting in its queue) and pushing it back or not between pops, as allocate does."""

from __future__ import annotations

import random

import pytest

from kai.framework.jobqueue import JobQueue
from kai.framework.statement import Statement
from tests.framework.test_simulation_queue import place, random_cluster, session


class Plain(JobQueue):
    reuse_reps = False


def pops(cls: type[JobQueue], seed: int, full: bool, depth: int | None) -> list[str]:
    rng = random.Random(seed)
    ssn = session(random_cluster(rng), full)
    act = random.Random(seed + 1)
    waiting = [j for j in ssn.jobs_with_pending() if j.has_pending()]
    later = waiting[::3]  # pushed while the queue is in use, between pops
    queue = cls(ssn, [j for j in waiting if j not in later], depth, stable_keys=True)
    assert (queue.reps is not None) is cls.reuse_reps
    stmt, out = Statement(ssn), []
    while (job := queue.pop()) is not None or later:
        if job is not None:
            out.append(job.key)
            place(ssn, stmt, job, act)
            if job.has_pending() and act.random() < 0.7:
                queue.push(job)
        if later and (job is None or act.random() < 0.3):
            queue.push(later.pop())
        assert len(out) < 500
    stmt.discard()
    ssn.restore()
    return out


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("full", [False, True])
def test_kept_standing_jobs_pop_in_the_order_of_comparing_anew(seed: int, full: bool) -> None:
    depth = random.Random(seed).choice([None, None, 1, 2, 3])
    want = pops(Plain, seed, full, depth)
    assert pops(JobQueue, seed, full, depth) == want
    assert want or seed % 7 == 0  # a cluster with nothing pending is rare


class OneByOne(JobQueue):
    """Pushes the jobs given at construction one at a time (a subclass's own push is always used)."""

    def push(self, job) -> None:  # type: ignore[no-untyped-def]
        super().push(job)


@pytest.mark.parametrize("seed", range(12))
def test_jobs_given_at_construction_pop_as_if_pushed_one_by_one(seed: int) -> None:
    # With no depth cap the queue heaps the jobs it is given in one go (JobQueue._push_all).
    rng = random.Random(seed)
    ssn = session(random_cluster(rng), seed % 2 == 0)
    waiting = [j for j in ssn.jobs_with_pending() if j.has_pending()]
    rng.shuffle(waiting)  # not in job order: heaping them must order them

    def popped(cls: type[JobQueue]) -> list[str]:
        queue, out = cls(ssn, waiting, None, stable_keys=True), []
        while (job := queue.pop()) is not None:
            out.append(job.key)
        return out

    want = popped(OneByOne)
    assert popped(JobQueue) == want
    assert len(want) > 1 or seed % 7 == 0
