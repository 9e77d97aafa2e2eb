"""Time-based fair share in the simulator, on workloads small enough to work out by hand.

The scheduler runs allocate only, so that the outcome depends on the fair-share order alone (reclaim
is tested elsewhere); usage is refreshed every cycle (fetchInterval = cyclePeriod = 10 s), with no
decay, so every usage below is a plain share of GPU time.
"""

from __future__ import annotations

import pytest

from kai.model import GPU, ClusterSnapshot
from kai.plugins.proportion.plugin import ProportionPlugin
from tests.sim_over_time.helpers import scheduler, simulate, starts, team_queues, workload


def oscillation(time_based: bool) -> dict:
    """KAI's two-queue oscillation example, scaled down: one 8-GPU node, three whole-node jobs of 10 minutes
    in each of two teams with no quota and equal weights, all submitted at once."""
    jobs = [
        {"name": f"{team}-job", "queue": team, "count": 3, "gpusPerPod": 8, "duration": "10m"}
        for team in ("team-a", "team-b")
    ]
    return workload(jobs, team_queues("team-a", "team-b"), sched=scheduler(time_based=time_based))


def test_without_usage_history_the_tie_always_goes_to_the_same_team() -> None:
    # Fair shares are 4/4 and the queues tie in every rule, so the older queue (team-a) wins each time:
    # team-b waits until team-a's backlog is gone.
    _, result = simulate(oscillation(time_based=False))
    assert starts(result) == {
        "team-a-job-1": 0.0,
        "team-a-job-2": 600.0,
        "team-a-job-3": 1200.0,
        "team-b-job-1": 1800.0,
        "team-b-job-2": 2400.0,
        "team-b-job-3": 3000.0,
    }
    assert not result.time_based


def test_time_based_fair_share_alternates_between_the_teams() -> None:
    # t=0: no history, tie -> team-a. t=600: usage a = 1, b = 0: a's over-quota weight is
    # max(0, 0.5 + (0.5 - 1)) = 0, so b's fair share is 8 and b runs. t=1200: usage 0.5/0.5, a tie -> a.
    # t=1800: a 1200/1800 = 2/3, b 1/3 -> b. t=2400: 0.5/0.5 -> a. t=3000: a 0.6, b 0.4 -> b.
    _, result = simulate(oscillation(time_based=True))
    assert starts(result) == {
        "team-a-job-1": 0.0,
        "team-b-job-1": 600.0,
        "team-a-job-2": 1200.0,
        "team-b-job-2": 1800.0,
        "team-a-job-3": 2400.0,
        "team-b-job-3": 3000.0,
    }
    assert result.time_based
    by_time = {round(c.time - result.start): c for c in result.cycles}
    assert by_time[600].usage["team-a"] == pytest.approx(1.0)
    assert by_time[600].fair_share["team-b"] == 8.0 and by_time[600].fair_share["team-a"] == 0.0
    assert by_time[1800].usage["team-a"] == pytest.approx(2 / 3, abs=1e-6)


def test_the_queue_that_used_less_gets_the_next_free_gpus() -> None:
    # A 4-GPU node. team-a alone runs four 1-GPU jobs for an hour. Half-way, both teams queue four more
    # 1-GPU jobs. When the GPUs free up at t=3600:
    #  * plain weights: fair shares 2/2, and the dominant-share order alternates a, b, a, b -> 2 each;
    #  * time-based: a used the whole cluster (usage 1), b nothing: a's fair share is 0, b's 4 -> b gets all 4.
    jobs = [
        {"name": "a-first", "queue": "team-a", "count": 4, "gpusPerPod": 1, "duration": "1h"},
        {"name": "a-next", "queue": "team-a", "count": 4, "gpusPerPod": 1, "duration": "1h", "submit": "30m"},
        {"name": "b-next", "queue": "team-b", "count": 4, "gpusPerPod": 1, "duration": "1h", "submit": "30m"},
    ]
    plain = starts(simulate(workload(jobs, team_queues("team-a", "team-b"), gpus=4))[1])
    timed = starts(
        simulate(workload(jobs, team_queues("team-a", "team-b"), gpus=4, sched=scheduler(time_based=True)))[1]
    )
    at_3600 = lambda s, prefix: sorted(k for k, v in s.items() if v == 3600.0 and k.startswith(prefix))  # noqa: E731
    assert len(at_3600(plain, "a-next")) == 2 and len(at_3600(plain, "b-next")) == 2
    assert at_3600(timed, "b-next") == ["b-next-1", "b-next-2", "b-next-3", "b-next-4"]
    assert at_3600(timed, "a-next") == []
    assert all(timed[f"a-next-{i}"] == 7200.0 for i in range(1, 5))


def test_k_value_zero_turns_the_usage_off() -> None:
    raw = oscillation(time_based=True)
    raw["scheduler"] = scheduler(time_based=True, k=0.0)
    _, result = simulate(raw)
    # with k = 0 the share weight is w' whatever the usage: the same order as without history
    assert starts(result)["team-b-job-1"] == 1800.0


def test_proportion_reads_queue_usage_from_the_snapshot() -> None:
    """The core hook: ShareRequest.usage comes from ClusterSnapshot.queue_usage (0 when absent)."""
    from kai.cycle import open_session
    from kai.framework.config import SchedulerConfig
    from kai.sim.workload import initial_snapshot, job_podgroup, parse_workload

    raw = oscillation(time_based=False)
    wl = parse_workload(raw)
    snapshot: ClusterSnapshot = initial_snapshot(wl)
    for spec in wl.jobs:
        pg = job_podgroup(spec, "ns", wl.start)
        snapshot.podgroups[pg.key] = pg
    shares = {}
    for usage in ({}, {"team-a": {GPU: 0.75}, "team-b": {GPU: 0.25}}):
        snapshot.queue_usage = usage
        ssn, _ = open_session(snapshot, SchedulerConfig())
        plugin = ssn.accounting
        assert isinstance(plugin, ProportionPlugin)
        shares[bool(usage)] = (plugin.fair_share("team-a")[GPU], plugin.fair_share("team-b")[GPU])
    assert shares[False] == (4.0, 4.0)
    # w' = 0.5 each; a: 0.5 + (0.5 - 0.75) = 0.25, b: 0.75 -> 8 x 0.25 = 2 and 8 x 0.75 = 6
    assert shares[True] == (2.0, 6.0)
