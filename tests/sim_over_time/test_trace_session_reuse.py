"""The simulator over time opens each cycle's session from the last one's (kai.cycle.SessionReuse):
jobs arriving, finishing, being evicted and restarting change the pod groups between cycles, and the
simulation comes out the same as with every session opened from scratch."""

from __future__ import annotations

from kai.sim.trace import TraceParams, TraceSimulator
from kai.sim.workload import initial_snapshot, parse_workload, sim_jobs
from tests.sim_over_time.helpers import config_of, scheduler, team_queues, workload


def test_a_week_of_jobs_comes_out_the_same_with_and_without_reuse() -> None:
    raw = workload(
        [],
        team_queues("team-a", "team-b", "team-c"),
        gpus=8,
        nodes=3,
        sched=scheduler(actions="allocate, reclaim, preempt"),
        until="1d",
    )
    raw["synthetic"] = {
        "jobs": 80,
        "span": "12h",
        "seed": 3,
        "queues": {"team-a": 2, "team-b": 1, "team-c": 1},
        "sizes": {1: 0.6, 2: 0.2, 4: 0.1, 8: 0.1},
        "duration": {"median": "30m", "max": "4h"},
    }
    wl = parse_workload(raw)
    config = config_of(raw)
    params = TraceParams(cycle_period=wl.simulation.cycle_period, until=wl.start + 86400.0)
    results = []
    for reuse in (True, False):
        sim = TraceSimulator(initial_snapshot(wl), sim_jobs(wl), config, params, reuse=reuse)
        results.append((sim.run(), sim.runner.reuse))
    (with_reuse, kept), (without, none) = results
    assert none is None and kept is not None
    assert kept.reused > 0  # most cycles started from the last one
    assert with_reuse.evicted_pods > 0  # the run saw evictions and restarts, not just arrivals
    assert repr(with_reuse.jobs) == repr(without.jobs)
    assert repr(with_reuse.cycles) == repr(without.cycles)
    assert (with_reuse.alloc_times, with_reuse.alloc_total) == (without.alloc_times, without.alloc_total)
