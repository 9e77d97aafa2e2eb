"""Property: over random clusters (flat, or two leaves under one parent), one cycle never reclaims from
a leaf queue that was below its deserved quota when the cycle began (a victim queue must
stay above its allocatable share, which is at least its deserved quota, or above its deserved quota
itself; with the opt-in `reclaimSparesQueuesWithinQuota` a queue that started the cycle within its
quota is kept whole for that cycle, even when its parent is over its share — KAI compares the queues
where their paths meet and may take such a leaf's pods, see test_reclaim.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api.timeutil import parse_time
from kai.cycle import known_actions, run_cycle
from kai.framework.config import parse_config
from kai.snapshot.builder import build_snapshot
from tests.actions.evict_helpers import gq, job
from tests.scenario import NOW, node

QUEUES = ("a", "b", "c")


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    nodes = draw(st.integers(1, 3))
    objects: list[dict[str, Any]] = [node(f"n{i}", gpus=8) for i in range(nodes)]
    nested = draw(st.booleans())  # a and b under one parent, or three top-level queues
    if nested:
        objects.append(gq("p", draw(st.sampled_from([0, 2, 4, 8])), weight=draw(st.sampled_from([0, 1, 2]))))
    for name in QUEUES:
        parent = "p" if nested and name != "c" else ""
        quota = draw(st.sampled_from([0, 1, 2, 4, 6, 8]))
        objects.append(gq(name, quota, parent=parent, weight=draw(st.sampled_from([0, 1, 2]))))
    free = [8] * nodes
    for j in range(draw(st.integers(2, 16))):
        gpus = draw(st.sampled_from([1, 1, 2, 4]))
        size = draw(st.sampled_from([1, 1, 2]))
        fits = [i for i, f in enumerate(free) if f >= gpus * size]
        if not fits:
            break
        where = draw(st.sampled_from(fits))
        free[where] -= gpus * size
        cls = draw(st.sampled_from(["train", "train", "build"]))
        q = draw(st.sampled_from(QUEUES))
        objects += job(f"r{j}", q, gpus=gpus, size=size, nodes=f"n{where}", priority_class=cls, age=500 - j)
    for j in range(draw(st.integers(1, 6))):
        q = draw(st.sampled_from(QUEUES))
        cls = draw(st.sampled_from(["train", "build"]))
        objects += job(
            f"w{j}",
            q,
            gpus=draw(st.sampled_from([1, 2, 4, 8])),
            size=draw(st.sampled_from([1, 2])),
            priority_class=cls,
            age=j,
        )
    return objects


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_queue_below_its_deserved_quota_never_loses_pods_to_reclaim(objects: list[dict[str, Any]]) -> None:
    cfg, problems, _ = parse_config({"schedulerParams": {"reclaimSparesQueuesWithinQuota": True}}, known_actions())
    assert not problems
    built = build_snapshot(objects, now=parse_time(NOW))
    assert not built.problems, built.problems
    snapshot = built.snapshot
    decisions = run_cycle(snapshot, cfg)
    queue_of = {p.key: pg.queue for pg in snapshot.podgroups.values() for p in pg.pods}
    for queue, report in decisions.queues.items():  # as the session opened: before this cycle's actions
        if snapshot.queues[queue].children:
            continue
        if report.allocated["gpu"] < report.deserved["gpu"]:
            lost = [e.pod for e in decisions.evictions if e.action == "reclaim" and queue_of[e.pod] == queue]
            assert lost == [], (queue, report, lost)
