"""A session opened from the last one's (kai.cycle.SessionReuse) is the session opened from scratch:
on random clusters, round after round of `kai simulate` (the apply step replacing the pod groups the
decisions touched), the pod table, the node arrays, the shared GPUs, the queue sums and fair shares and
the hooks registered are equal; and multi-round `kai simulate` gives the same JSON with and without
the reuse."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.api.timeutil import parse_time
from kai.cycle import SessionReuse, known_actions, open_session, run_cycle
from kai.framework.config import parse_config
from kai.framework.session import Session
from kai.sim.simulate import apply_decisions, pod_owners, simulate, to_json_dict
from kai.snapshot.loader import load_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue, write


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes of 1-8 GPUs (some cordoned), a department with teams, jobs of 1-4 pods asking for whole
    GPUs, half a GPU or CPU only; some already running (some of those being deleted), some gated, and
    a pod of another scheduler."""
    count = draw(st.integers(1, 6))
    names = [f"n{i}" for i in range(count)]
    objects: list[dict[str, Any]] = [
        node(name, gpus=draw(st.sampled_from([1, 2, 4, 8])), cpu="16", unschedulable=draw(st.booleans()) and i > 0)
        for i, name in enumerate(names)
    ]
    objects.append(queue("dept", gpu={"quota": -1, "overQuotaWeight": 1, "limit": -1}))
    teams = ["a", "b", "c"]
    for team in teams:
        quota = draw(st.sampled_from([0, 1, 2, 4]))
        objects.append(queue(team, parent="dept", gpu={"quota": quota, "overQuotaWeight": 1, "limit": -1}))
    for j in range(draw(st.integers(1, 10))):
        size = draw(st.integers(1, 4))
        objects.append(
            podgroup(
                f"j{j}",
                draw(st.sampled_from(teams)),
                min_member=draw(st.integers(1, size)),
                priority_class=draw(st.sampled_from(["train", "build-preemptible", "inference"])),
            )
        )
        shape = draw(st.sampled_from(["whole", "half", "cpu"]))
        state = draw(st.sampled_from(["pending", "pending", "running", "gated"]))
        for p in range(size):
            on = draw(st.sampled_from(names)) if state == "running" else None
            objects.append(
                pod(
                    f"j{j}-{p}",
                    group=f"j{j}",
                    gpus=1 if shape == "whole" else 0,
                    cpu="1",
                    memory="1Gi",
                    node=on,
                    deleting=on is not None and draw(st.integers(0, 4)) == 0,
                    gated=state == "gated",
                    annotations={"gpu-fraction": "0.5"} if shape == "half" else None,
                )
            )
    if draw(st.booleans()):
        objects.append(pod("other", ns="kube-system", cpu="2", node=names[0], scheduler="default-scheduler"))
    return objects


def state_of(ssn: Session) -> dict[str, Any]:
    """Everything a session holds once open, in comparable form."""
    table, nodes, columns = ssn.table, ssn.nodes, ssn.table.columns
    proportion: Any = ssn.accounting
    return {
        "keys": table.keys,
        "jobs": [id(j) for j in table.jobs],
        "starts": table.starts.tolist(),
        "pods": [id(p) for p in table.pods],
        "status": columns.status.tolist(),
        "row": columns.row.tolist(),
        "requests": [id(table.requests.items[r]) for r in columns.req.tolist()],
        "request objects": [id(p.requests) for p in table.pods],
        "gpus": [id(table.gpus.items[g]) for g in columns.gpu.tolist()],
        "queue": table.queue,
        "preemptible": table.preemptible.tolist(),
        "with pending": [j.key for j in ssn.jobs_with_pending()],
        "space": ssn.space.names,
        "allocatable": nodes.allocatable.tolist(),
        "idle": nodes.idle.tolist(),
        "releasing": nodes.releasing.tolist(),
        "usable": nodes.usable.tolist(),
        "has gpu": nodes.has_gpu.tolist(),
        "maybe releasing": nodes.maybe_releasing,
        "index": nodes.index,
        "gpu groups": {
            row: {gid: (g.used, g.releasing, dict(g.pods)) for gid, g in groups.items()}
            for row, groups in ssn.gpus.groups.items()
        },
        "free now": ssn.gpus.free_now.tolist(),
        "free later": ssn.gpus.free_later.tolist(),
        "min gpu memory": ssn.min_gpu_memory_mib,
        "queues": {
            name: (a.allocated.tolist(), a.allocated_np.tolist(), a.request.tolist(), a.fair_share.tolist())
            for name, a in proportion.attrs.items()
        },
        "total": proportion.total.tolist(),
        "report": ssn.decisions.queues,
        "hooks": {name: len(getattr(ssn.hooks, name)) for name in ssn.hooks.__slots__},
        "touched": sorted(ssn._touched),
    }


def load(objects: list[dict[str, Any]]) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        return load_snapshot([write(objects, Path(tmp))], parse_time(NOW), "kai-scheduler")


CONFIG = parse_config(None, known_actions())[0]


@settings(max_examples=40, deadline=None)
@given(clusters())
def test_a_session_opened_from_the_last_one_equals_one_opened_from_scratch(objects: list[dict[str, Any]]) -> None:
    state = load(objects)
    owners = pod_owners(state)
    reuse = SessionReuse()
    last: dict[str, Any] = {}
    for number in range(4):
        reused, _ = open_session(state, CONFIG, reuse=reuse)
        got = state_of(reused)
        reused.restore()
        fresh, _ = open_session(state, CONFIG)
        want = state_of(fresh)
        fresh.restore()
        assert got == want, f"round {number + 1}"
        # Every pod group that is the same object as in the last round was copied, the others read.
        assert reused.table.reused == sum(1 for key, job in state.podgroups.items() if last.get(key) is job)
        last = dict(state.podgroups)
        state = apply_decisions(state, run_cycle(state, CONFIG), owners)
    assert reuse.opened == 4


def test_only_the_pod_groups_the_decisions_replaced_are_read_again() -> None:
    team = queue("a", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1})
    objects: list[dict[str, Any]] = [node("n0", gpus=8), team]
    for j in range(5):
        objects += [podgroup(f"run{j}", "a"), pod(f"run{j}-0", group=f"run{j}", gpus=1, node="n0")]
    objects += [podgroup("wait", "a"), pod("wait-0", group="wait", gpus=1)]
    state = load(objects)
    reuse = SessionReuse()
    first = run_cycle(state, CONFIG, reuse=reuse)
    assert [b.pod for b in first.bindings] == ["ns/wait-0"]
    assert reuse.last is not None and reuse.last.table.reused == 0  # the first session read everything
    state = apply_decisions(state, first)
    ssn, _ = open_session(state, CONFIG, reuse=reuse)
    ssn.restore()
    # Five running jobs copied; the one the binding replaced read again, and now running (6 GPUs used).
    assert ssn.table.reused == 5
    assert ssn.nodes.idle[0, ssn.space.index("nvidia.com/gpu")] == 2
    assert ssn.jobs_with_pending() == []


def test_in_place_changes_named_by_the_caller_are_read_again() -> None:
    objects = [node("n0", gpus=4), queue("a"), podgroup("j", "a"), pod("j-0", group="j", gpus=1, node="n0")]
    state = load(objects)
    reuse = SessionReuse()
    ssn, _ = open_session(state, CONFIG, reuse=reuse)
    ssn.restore()
    job = state.podgroups["ns/j"]
    for p in job.pods:  # the caller moves the pod back to pending in place
        p.status, p.node = p.status.PENDING, ""
    for sub in job.leaves:
        sub.recount()
    reuse.changed.add("ns/j")
    ssn, _ = open_session(state, CONFIG, reuse=reuse)
    ssn.restore()
    assert ssn.table.reused == 0
    assert ssn.nodes.idle[0, ssn.space.index("nvidia.com/gpu")] == 4
    assert [j.key for j in ssn.jobs_with_pending()] == ["ns/j"]


@settings(max_examples=25, deadline=None)
@given(clusters(), st.integers(2, 4))
def test_multi_round_simulate_gives_the_same_json_with_and_without_reuse(
    objects: list[dict[str, Any]], rounds: int
) -> None:
    with_reuse = json.dumps(to_json_dict(simulate(load(objects), CONFIG, rounds, reuse=True)), sort_keys=True)
    without = json.dumps(to_json_dict(simulate(load(objects), CONFIG, rounds, reuse=False)), sort_keys=True)
    assert with_reuse == without
