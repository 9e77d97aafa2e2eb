"""Quiet rounds (kai.cycle.CycleRunner): a cycle after one that changed nothing, on a cluster nobody
else changed, decides what that one decided, and is answered from it; unless time changes the
outcome: a min-runtime protection ending, a stale gang reaching its grace period, new usage figures
for time-based fair share. Each case checks the answer against a cycle run from scratch on the same
snapshot, and the rule's own expectation worked out by hand. NOW is 2026-01-01T00:00:00Z."""

from __future__ import annotations

from typing import Any

from kai.api.timeutil import parse_time
from kai.cycle import CycleRunner, known_actions, run_cycle
from kai.framework.config import SchedulerConfig, parse_config
from kai.framework.decisions import Decisions
from kai.model import GPU, ClusterSnapshot
from kai.snapshot.builder import build_snapshot
from tests.actions.evict_helpers import gq, job
from tests.scenario import NOW, node, run

T = parse_time(NOW)


def snapshot_of(objects: list[dict[str, Any]]) -> ClusterSnapshot:
    result = build_snapshot(objects, now=T)
    assert not result.problems, result.problems
    return result.snapshot


def config_of(config: dict[str, Any] | None = None) -> SchedulerConfig:
    cfg, problems, _ = parse_config(config, known_actions())
    assert not problems, problems
    return cfg


class Counting:
    """The cycle, counting how often it really runs."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, snapshot: ClusterSnapshot, config: SchedulerConfig) -> Decisions:
        self.calls += 1
        return run_cycle(snapshot, config)


def too_big() -> list[dict[str, Any]]:
    """A 2-GPU job on a 1-GPU node: it waits, whatever the round."""
    return [node("n1", gpus=1), gq("q", 4), *job("big", "q", gpus=2)]


def test_a_round_after_a_round_that_changed_nothing_is_answered_from_it() -> None:
    snapshot, cfg, cycle = snapshot_of(too_big()), config_of(), Counting()
    runner = CycleRunner(cfg, cycle)
    first = runner.run(snapshot, changed=False)
    assert first.bindings == [] and first.evictions == []
    for later in (T, T + 3600.0):  # the same instant, and an hour on (nothing here depends on time)
        snapshot.now = later
        assert runner.run(snapshot, changed=False) == run_cycle(snapshot, cfg)
    assert cycle.calls == 1


def test_a_change_by_the_caller_runs_the_cycle() -> None:
    snapshot, cfg, cycle = snapshot_of(too_big()), config_of(), Counting()
    runner = CycleRunner(cfg, cycle)
    runner.run(snapshot)
    runner.run(snapshot, changed=True)
    assert cycle.calls == 2


def test_a_round_that_bound_pods_is_not_reused() -> None:
    objects = [node("n1", gpus=2), gq("q", 4), *job("a", "q"), *job("b", "q", gpus=2)]
    # Round 1 binds a (b does not fit beside it); round 2 sees a running and must run again.
    result = run(objects, rounds=3)
    assert [sorted(e["pod"] for e in r["bound"]) for r in result["rounds"]] == [["ns/a"], [], []]
    assert result["pods"]["ns/b"]["status"] == "Pending"


def test_the_end_of_a_min_runtime_protection_is_not_skipped() -> None:
    # Queue q runs two 2-GPU jobs started 5 minutes ago on a 4-GPU node, protected for 10 minutes from
    # preemption; a higher-priority (build) job of q needs 2 GPUs.
    objects = [node("n1", gpus=4), gq("q", 4)]
    objects[1]["spec"]["preemptMinRuntime"] = "10m"
    objects += job("old", "q", gpus=2, nodes="n1", last_start="2025-12-31T23:55:00Z", age=20)
    objects += job("new", "q", gpus=2, nodes="n1", last_start="2025-12-31T23:55:00Z", age=10)
    objects += job("hi", "q", gpus=2, priority_class="build", age=1)
    snapshot, cfg = snapshot_of(objects), config_of()
    runner = CycleRunner(cfg)
    assert runner.run(snapshot, changed=False).evictions == []  # protected
    snapshot.now = T + 120.0  # 7 minutes after the start: still protected, and the messages say so
    assert runner.run(snapshot, changed=False) == run_cycle(snapshot, cfg)
    snapshot.now = T + 300.0  # exactly 10 minutes: the protection is over, the newest job is preempted
    decisions = runner.run(snapshot, changed=False)
    assert [(e.pod, e.action, e.by) for e in decisions.evictions] == [("ns/new", "preempt", "ns/hi")]


def stale_half() -> list[dict[str, Any]]:
    """Job g (minMember 2) runs one pod on the only GPU of n1 and has been stale since 30 s before NOW."""
    since = "2025-12-31T23:59:30Z"
    return [node("n1", gpus=1), gq("q", 4), *job("g", "q", size=2, nodes=["n1", None], stale_since=since)]  # type: ignore[list-item]


def test_a_stale_gang_is_evicted_when_its_grace_period_ends() -> None:
    snapshot, cfg, cycle = snapshot_of(stale_half()), config_of(), Counting()
    runner = CycleRunner(cfg, cycle)
    assert runner.run(snapshot, changed=False).evictions == []  # 30 s < 60 s of grace
    snapshot.now = T + 29.0  # 59 s: still within the grace period
    assert runner.run(snapshot, changed=False).evictions == []
    assert cycle.calls == 1
    snapshot.now = T + 30.0  # 60 s: the whole job goes
    assert [(e.pod, e.action) for e in runner.run(snapshot, changed=False).evictions] == [
        ("ns/g-0", "stalegangeviction")
    ]


def test_new_usage_figures_run_the_cycle() -> None:
    # Teams a and b of equal weight each wait with a 4-GPU job for a 2-GPU node (nothing ever fits):
    # without history they share the GPUs one each; once team a's usage is the whole cluster,
    # time-based fair share gives b the larger share.
    objects = [node("n1", gpus=2), gq("dept", 0), gq("a", 0, parent="dept"), gq("b", 0, parent="dept")]
    objects += job("ja", "a", gpus=4) + job("jb", "b", gpus=4)
    snapshot, cfg, cycle = snapshot_of(objects), config_of(), Counting()
    runner = CycleRunner(cfg, cycle)
    before = runner.run(snapshot, changed=False)
    assert before.queues["a"].fair_share["gpu"] == before.queues["b"].fair_share["gpu"] == 1.0
    snapshot.queue_usage = {"a": {GPU: 1.0}}
    after = runner.run(snapshot, changed=False)
    assert cycle.calls == 2
    assert after == run_cycle(snapshot, cfg)
    assert after.queues["b"].fair_share["gpu"] > after.queues["a"].fair_share["gpu"]


def test_time_going_back_runs_the_cycle() -> None:
    snapshot, cfg, cycle = snapshot_of(stale_half()), config_of(), Counting()
    runner = CycleRunner(cfg, cycle)
    runner.run(snapshot, changed=False)
    snapshot.now = T - 10.0
    assert runner.run(snapshot, changed=False) == run_cycle(snapshot, cfg)
    assert cycle.calls == 2


def test_many_quiet_rounds_print_what_one_round_prints() -> None:
    one, five = run(too_big(), rounds=1), run(too_big(), rounds=5)
    assert five["rounds"] == [{**one["rounds"][0], "round": n} for n in range(1, 6)]
    assert {k: v for k, v in five.items() if k != "rounds"} == {k: v for k, v in one.items() if k != "rounds"}
