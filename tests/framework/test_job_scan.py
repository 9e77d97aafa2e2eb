"""The pass over every job that stale-gang eviction and the session's close share (kai.framework.jobscan):
`scan_jobs` reads the jobs no statement touched from the session's pod table, a column per job at once,
and only the others job by job; what it finds is what `_scan_plain`, job by job over the pods' counts as
they are, finds. Compared on random clusters (pods of every status, gangs below and above minMember,
jobs without pods, jobs of several sub-groups, jobs with a stale instant), as the session opens and after
statements moved pods (allocate's placements, an eviction, a placement rolled back)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kai.api import keys
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.action import action
from kai.framework.config import SchedulerConfig
from kai.framework.jobscan import JobScan, _scan_plain, scan_jobs
from kai.framework.podtable import SEVERAL_LEAVES, PodTable
from kai.framework.statement import Statement
from kai.model import ACTIVE, PodStatus
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue

NODES = 4
STALE = "2025-12-31T23:00:00Z"


def random_cluster(rng: random.Random) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [node(f"n{i}", gpus=8) for i in range(NODES)]
    objects += [queue("a"), queue("b"), queue("c")]
    for j in range(rng.randint(1, 25)):
        name, q = f"job{j}", rng.choice("abc")
        size = rng.choice([0, 1, 1, 2, 3, 4])
        split = size >= 2 and rng.random() < 0.25  # two leaves
        minimum = rng.randint(1, max(size, 1) + 1)
        if split:
            group = podgroup(
                name, q, min_member=2, subgroups=[{"name": "x", "minMember": 1}, {"name": "y", "minMember": 1}]
            )
        else:
            group = podgroup(name, q, min_member=minimum)
        if rng.random() < 0.2:
            group["metadata"]["annotations"] = {keys.STALE_TIMESTAMP_ANNOTATION: STALE}
        objects.append(group)
        for k in range(size):
            how = rng.choice(["run", "run", "run", "pending", "pending", "done", "failed", "releasing", "gated"])
            labels = {keys.SUBGROUP_LABEL: "xy"[k % 2]} if split else None
            where = f"n{rng.randrange(NODES)}"
            objects.append(
                pod(
                    f"{name}-{k}",
                    group=name,
                    gpus=1,
                    labels=labels,
                    node=where if how in ("run", "releasing") else None,
                    phase={"done": "Succeeded", "failed": "Failed"}.get(how),
                    deleting=how == "releasing",
                    gated=how == "gated",
                )
            )
    for k in range(rng.randint(0, 3)):  # pods that name no PodGroup: each its own job
        objects.append(pod(f"lone{k}", queue=rng.choice("abc"), gpus=1, node="n0" if rng.random() < 0.5 else None))
    return objects


def seen(scan: JobScan) -> tuple[Any, ...]:
    def outcome(o: Any) -> Any:
        return None if o is None else (o.queue, o.status, o.message, o.reason, o.causes)

    return (
        scan.moves,
        [outcome(o) for o in scan.outcomes],
        {q: outcome(o) for q, o in scan.running.items()},
        scan.others,
        scan.to_check,
    )


def same_scans(ssn: Any) -> None:
    fast = seen(scan_jobs(ssn))
    assert fast == seen(_scan_plain(ssn))
    assert fast == seen(scan_jobs(ssn))  # whatever counting the plain pass did on the way


@pytest.mark.parametrize("seed", range(40))
def test_the_scan_finds_what_the_job_by_job_pass_finds(seed: int) -> None:
    rng = random.Random(seed)
    result = build_snapshot(random_cluster(rng), parse_time(NOW))
    assert result.problems == []
    ssn, _ = open_session(result.snapshot, SchedulerConfig())
    try:
        same_scans(ssn)
        run = action("allocate")
        assert run is not None
        run(ssn)
        same_scans(ssn)
        placed = [p for p in ssn.pods if p.status in ACTIVE and p.node]
        if placed:
            stmt = Statement(ssn)
            stmt.evict(rng.choice(placed), "test")
            stmt.commit()
        waiting = [p for p in ssn.pods if p.status is PodStatus.PENDING]
        if waiting:
            stmt = Statement(ssn)
            stmt.allocate_row(rng.choice(waiting), rng.randrange(NODES))
            if rng.random() < 0.5:
                stmt.discard()  # moved, and moved back: still looked at job by job
            else:
                stmt.commit()
        same_scans(ssn)
    finally:
        ssn.restore()


def test_a_session_whose_jobs_are_not_the_tables_is_scanned_job_by_job() -> None:
    rng = random.Random(7)
    result = build_snapshot(random_cluster(rng), parse_time(NOW))
    ssn, _ = open_session(result.snapshot, SchedulerConfig())
    key = next(iter(ssn.jobs))
    ssn.jobs = {k: v for k, v in ssn.jobs.items() if k != key}
    assert key not in scan_jobs(ssn).others + scan_jobs(ssn).to_check
    assert len(scan_jobs(ssn).outcomes) == len(ssn.jobs)


@pytest.mark.parametrize("seed", range(12))
def test_each_jobs_leaf_minimum_read_on_the_way_is_the_plain_one(seed: int) -> None:
    rng = random.Random(seed)
    snapshot = build_snapshot(random_cluster(rng), parse_time(NOW)).snapshot
    ssn, _ = open_session(snapshot, SchedulerConfig())
    want = [job.leaves[0].min_member if len(job.leaves) == 1 else SEVERAL_LEAVES for job in ssn.jobs.values()]
    assert ssn.table.leaf_minimum().tolist() == want
    fresh = PodTable(ssn.table.nodes)  # the same jobs, computed by the job flag alone
    fresh.jobs = ssn.table.jobs
    assert fresh.leaf_minimum().tolist() == want
