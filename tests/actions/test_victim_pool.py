"""The cycle's victim pool and its picker against a straightforward reference written from the rule.

The reference re-derives every pop from scratch: each leaf queue's next victim job is the last one in
job order among the candidates that still have pods to give (a job that gave up an elastic pod is
ranked as it now is), each queue is judged with the pods already picked from its subtree summed again
from the list, and siblings are compared level by level with the session's victim queue order. The
clusters are small versions of the eviction benchmarks (reclaim with victims scattered over the nodes,
two departments of teams; preempt within teams), plus elastic victims and a deeper queue tree. The
pool must also stay what the candidate rule gives after an action has evicted and placed pods.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kai.actions.reclaim import pending_jobs, running_preemptible
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.session import Session
from kai.framework.victimpool import VictimPool, victim_pool
from kai.framework.victims import run_evicting_action
from kai.model import ACTIVE, PodGroupInfo, PodInfo, PodStatus
from kai.snapshot.builder import build_snapshot
from tests.actions.evict_helpers import gq, job
from tests.actions.evict_helpers import status as pod_status
from tests.scenario import NOW, node, run


def scattered_reclaim(seed: int, nodes: int = 12, elastic: bool = False, deep: bool = False) -> list[dict[str, Any]]:
    """M-reclaim-scattered in small: rich teams fill every node but one with 1-4 GPU jobs created in
    shuffled order, two poor teams wait with gangs. `elastic`: some running jobs have extra pods;
    `deep`: the teams sit one level further down."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [node(f"n{i:02d}", gpus=8) for i in range(nodes)]
    leaves = []
    for d in range(2):
        objects.append(gq(f"d{d}", nodes * 2))
        parent = f"d{d}"
        if deep:
            objects.append(gq(f"d{d}-x", nodes * 2, parent=parent))
            parent = f"d{d}-x"
        for t in range(3):
            leaves.append(f"d{d}-t{t}")
            objects.append(gq(leaves[-1], nodes * 2 // 3, parent=parent))
    poor, rich = [leaves[2], leaves[5]], [q for q in leaves if q not in (leaves[2], leaves[5])]
    ages = list(range(nodes * 8))
    rng.shuffle(ages)
    count = 0
    for n in range(nodes - 1):
        left = 8
        while left:
            gpus = min(left, rng.choice((1, 2, 2, 4)))
            size = 2 if elastic and gpus <= left // 2 and rng.random() < 0.4 else 1
            objects += job(
                f"r{count}",
                rng.choice(rich),
                gpus=gpus,
                size=size,
                nodes=f"n{n:02d}",
                min_member=1,
                age=1000 + ages[count],
            )
            left -= gpus * size
            count += 1
    for j in range(6):
        pods, gpus = rng.choice(((1, 1), (1, 4), (2, 4), (1, 8)))
        objects += job(f"w{j}", rng.choice(poor), gpus=gpus, size=pods, age=j)
    return objects


def preempt_in_teams(seed: int, nodes: int = 10) -> list[dict[str, Any]]:
    """M-preempt in small: every team runs train jobs; high-priority build jobs of the same teams wait."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [node(f"n{i:02d}", gpus=8) for i in range(nodes)]
    teams = ["t0", "t1", "t2", "t3"]
    objects += [gq(t, nodes * 2) for t in teams]
    count = 0
    for n in range(nodes):
        left = 8
        while left:
            gpus = min(left, rng.choice((1, 2, 4)))
            objects += job(f"r{count}", teams[n % 4], gpus=gpus, nodes=f"n{n:02d}", age=500 - count)
            left -= gpus
            count += 1
    for j in range(6):
        objects += job(f"b{j}", rng.choice(teams), gpus=rng.choice((2, 4, 8)), priority_class="build", age=j)
    return objects


def session(objects: list[dict[str, Any]]) -> Session:
    built = build_snapshot(objects, now=parse_time(NOW))
    assert not built.problems, built.problems[:3]
    ssn, _ = open_session(built.snapshot, SchedulerConfig())
    return ssn


# -- the reference, from the rule ----------------------------------------------------------------------


def rule_chunk(ssn: Session, job: PodGroupInfo, gone: set[int]) -> list[PodInfo]:
    """One pod above a leaf's minMember (the last in task order, last leaf first), else the whole gang."""
    leaves = sorted(job.leaves, key=ssn.subgroup_key, reverse=True)
    for sub in leaves:
        active = [p for p in sub.pods if p.status in ACTIVE and id(p) not in gone]
        if len(active) > sub.min_member:
            return [max(active, key=ssn.task_key)]
    return [p for sub in leaves for p in sub.pods if p.status in ACTIVE and id(p) not in gone]


def rank(ssn: Session, job: PodGroupInfo, gone: set[int]) -> tuple[Any, ...]:
    """The job's job-order key as it is once the pods in `gone` have left."""
    if not any(id(p) in gone for p in job.pods):
        return ssn.job_key(job)
    copy = job.clone()
    left_keys = {p.key for p in job.pods if id(p) in gone}
    for pod in copy.pods:
        if pod.key in left_keys:
            pod.status = PodStatus.RELEASING
    return ssn.job_key(copy)


def reference_order(
    ssn: Session, preemptor: PodGroupInfo, action: str, queue_ok: Any, job_ok: Any, limit: int
) -> list[tuple[str, list[str]]]:
    candidates = [
        j
        for j in ssn.jobs.values()
        if running_preemptible(ssn, j)
        and queue_ok(j.queue)
        and ssn.victim_queue_allowed(action, preemptor, j.queue)
        and j is not preemptor
        and job_ok(j)
        and ssn.victim_allowed(action, preemptor, j)
    ]
    children: dict[str, list[str]] = {}
    for leaf in sorted({j.queue for j in candidates}):
        parent = ""
        for q in reversed(ssn.queue_path(leaf)):
            kids = children.setdefault(parent, [])
            if q.name not in kids:
                kids.append(q.name)
            parent = q.name
    (order,) = ssn.hooks.victim_queue_order
    gone: set[int] = set()
    picked: dict[str, list[PodInfo]] = {}
    out: list[tuple[str, list[str]]] = []

    def summed(pods: list[PodInfo]) -> list[float]:
        total = [0.0, 0.0, 0.0]
        for pod in pods:
            total = [a + b for a, b in zip(total, order.vector(pod), strict=True)]
        return total

    def leaf_next(leaf: str) -> tuple[PodGroupInfo, list[PodInfo]] | None:
        best: tuple[tuple[Any, ...], PodGroupInfo, list[PodInfo]] | None = None
        for j in candidates:
            if j.queue != leaf:
                continue
            tasks = rule_chunk(ssn, j, gone)
            if tasks and (best is None or rank(ssn, j, gone) > best[0]):
                best = (rank(ssn, j, gone), j, tasks)
        return None if best is None else (best[1], best[2])

    def subtree_next(name: str) -> tuple[PodGroupInfo, list[PodInfo]] | None:
        if name not in children:
            return leaf_next(name)
        options = [(kid, found) for kid in children[name] if (found := subtree_next(kid)) is not None]
        if len(options) <= 1:
            return options[0][1] if options else None

        def key(option: tuple[str, tuple[PodGroupInfo, list[PodInfo]]]) -> Any:
            kid, (_, tasks) = option
            removed = summed(picked.get(kid, [])) if picked.get(kid) else []
            return (order.key(ssn.queues[kid], removed, tuple(summed(tasks))), kid)

        return min(options, key=key)[1]

    while len(out) < limit:
        found = subtree_next("")
        if found is None:
            break
        victim, tasks = found
        gone.update(id(t) for t in tasks)
        for q in ssn.queue_path(victim.queue):
            picked.setdefault(q.name, []).extend(tasks)
        out.append((victim.key, sorted(t.key for t in tasks)))
    return out


def picker_order(
    ssn: Session, preemptor: PodGroupInfo, action: str, queue_ok: Any, job_ok: Any, limit: int
) -> list[tuple[str, list[str]]]:
    picker = victim_pool(ssn, running_preemptible).picker(action, preemptor, queue_ok, job_ok)
    out = []
    while len(out) < limit and (chunk := picker.next_chunk()) is not None:
        out.append((chunk.job.key, sorted(t.key for t in chunk.tasks)))
    return out


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param(scattered_reclaim(1), id="scattered"),
        pytest.param(scattered_reclaim(2, elastic=True), id="scattered-elastic"),
        pytest.param(scattered_reclaim(3, deep=True, elastic=True), id="scattered-deep"),
    ],
)
def test_reclaim_victims_come_in_the_order_of_the_rule(objects: list[dict[str, Any]]) -> None:
    ssn = session(objects)
    preemptors = pending_jobs(ssn)
    assert preemptors
    for preemptor in preemptors:
        queue_ok = lambda name, q=preemptor.queue: name != q  # noqa: E731
        job_ok = lambda victim, q=preemptor.queue: victim.queue != q  # noqa: E731
        expected = reference_order(ssn, preemptor, "reclaim", queue_ok, job_ok, 1000)
        assert len(expected) > 30  # every victim of the cluster, in order
        assert picker_order(ssn, preemptor, "reclaim", queue_ok, job_ok, 1000) == expected


def test_preempt_victims_come_in_the_order_of_the_rule() -> None:
    ssn = session(preempt_in_teams(4))
    for preemptor in pending_jobs(ssn):
        queue_ok = lambda name, q=preemptor.queue: name == q  # noqa: E731
        job_ok = lambda victim, p=preemptor: victim.queue == p.queue and victim.priority < p.priority  # noqa: E731
        expected = reference_order(ssn, preemptor, "preempt", queue_ok, job_ok, 1000)
        assert expected
        assert picker_order(ssn, preemptor, "preempt", queue_ok, job_ok, 1000) == expected


def test_the_pool_follows_the_candidate_rule_after_an_action() -> None:
    """After reclaim has evicted and placed pods, the shared pool holds, per leaf queue in job order,
    exactly the jobs the candidate rule picks, and its per-node GPU bound is what they hold."""
    ssn = session(scattered_reclaim(5))
    pool = victim_pool(ssn, running_preemptible)
    before = sum(len(jobs) for jobs in pool.jobs.values())
    run_evicting_action(
        ssn,
        "reclaim",
        pending_jobs(ssn),
        running_preemptible,
        queues=lambda j: lambda name: name != j.queue,
        jobs=lambda j: lambda victim: victim.queue != j.queue,
        message=lambda task, preemptor: "",
    )
    assert ssn.decisions.evictions  # something changed
    pool = victim_pool(ssn, running_preemptible, new_action=True)
    expected: dict[str, list[str]] = {}
    for j in sorted((j for j in ssn.jobs.values() if running_preemptible(ssn, j)), key=ssn.job_key):
        expected.setdefault(j.queue, []).append(j.key)
    assert {q: [j.key for j in jobs] for q, jobs in pool.jobs.items() if jobs} == expected
    assert sum(len(jobs) for jobs in pool.jobs.values()) < before
    held = [0.0] * len(ssn.nodes)
    for j in ssn.jobs.values():
        if running_preemptible(ssn, j):
            for p in j.pods:
                if p.status in ACTIVE and p.node in ssn.nodes.index:
                    held[ssn.nodes.index[p.node]] += p.requests.get("nvidia.com/gpu")
    assert [round(x, 6) for x in pool.evictable_gpu.tolist()] == held
    assert isinstance(pool, VictimPool)


def test_a_victim_moved_for_one_preemptor_may_be_a_victim_of_the_next() -> None:
    """Worked by hand (KAI does the same): n1 holds u and v, n2 holds w (queue a, 4 GPUs each, quota
    0); p1 and p2 (queue b, quota 16) need 8 GPUs each. For p1, reclaim takes v (newest) then u on n1;
    u is placed again on n2's free half. For p2 only n2 can be freed: w and the moved u both go.
    u, evicted twice in the cycle, is listed once, as its first eviction (by p1), as KAI lists it."""
    objects = [node("n1", gpus=8), node("n2", gpus=8), gq("a", 0), gq("b", 16)]
    objects += job("w", "a", gpus=4, nodes="n2", age=30)
    objects += job("u", "a", gpus=4, nodes="n1", age=20)
    objects += job("v", "a", gpus=4, nodes="n1", age=10)
    objects += job("p1", "b", gpus=8, age=5) + job("p2", "b", gpus=8, age=4)
    result = run(objects)
    round_one = result["rounds"][0]
    assert {(e["pod"], e["node"]) for e in round_one["pipelined"]} >= {("ns/p1", "n1"), ("ns/p2", "n2")}
    evicted = {(e["pod"], e["by"]) for e in round_one["evicted"]}
    assert {("ns/v", "ns/p1"), ("ns/u", "ns/p1"), ("ns/w", "ns/p2")} == evicted
    assert len(round_one["evicted"]) == 3
    assert pod_status(result, "ns/u") == "Pending"
