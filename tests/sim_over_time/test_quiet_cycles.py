"""Quiet cycles in the simulator: a cycle with no event since the last one, which changed nothing, is
answered from that one (kai.cycle.CycleRunner) unless time changes its outcome. The simulation must
come out exactly as when every cycle runs in full; and the rule that waits for time (here a
min-runtime protection ending, and time-based usage moving on) still fires."""

from __future__ import annotations

from typing import Any

import pytest

import kai.sim.trace as trace
from kai.cycle import CycleRunner
from kai.framework.config import DEFAULT_PLUGINS
from tests.sim_over_time.helpers import simulate, starts, team_queues, workload


class FullCycles(CycleRunner):
    """A runner that runs every cycle in full (what the simulation must match)."""

    def _reusable(self, snapshot: Any) -> bool:
        return False


def protected_reclaim(time_based: bool) -> dict[str, Any]:
    """One 8-GPU node. team-a's gang of 8 one-GPU pods starts at 0 for 2 hours; team-b's gang of 4
    arrives at 60 s and could reclaim half the node from team-a (equal weights, no quota), but every
    job is protected from reclaim for its first 5 minutes; team-a's gang must be evicted whole."""
    plugins: list[dict[str, Any]] = [
        {"name": n, "arguments": {"defaultReclaimMinRuntime": "5m"}} if n == "minruntime" else {"name": n}
        for n in DEFAULT_PLUGINS
    ]
    sched: dict[str, Any] = {"actions": "allocate, reclaim", "tiers": [{"plugins": plugins}]}
    if time_based:
        usage = {"windowSize": "1h", "windowType": "sliding", "fetchInterval": "30m"}
        sched["usageDBConfig"] = {"clientType": "prometheus", "usageParams": usage}
    jobs = [
        {"name": "a-train", "queue": "team-a", "pods": 8, "gpusPerPod": 1, "duration": "2h"},
        {"name": "b-train", "queue": "team-b", "pods": 4, "gpusPerPod": 1, "duration": "1h", "submit": "60s"},
    ]
    return workload(jobs, team_queues("team-a", "team-b"), sched=sched, until="6h")


@pytest.mark.parametrize("time_based", [False, True])
def test_quiet_cycles_answered_from_the_last_one_change_nothing(
    monkeypatch: pytest.MonkeyPatch, time_based: bool
) -> None:
    runners: list[CycleRunner] = []

    class Recording(CycleRunner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            runners.append(self)

    monkeypatch.setattr(trace, "CycleRunner", Recording)
    _, quick = simulate(protected_reclaim(time_based))
    monkeypatch.setattr(trace, "CycleRunner", FullCycles)
    _, full = simulate(protected_reclaim(time_based))
    assert quick == full
    assert runners and runners[0].skipped > 0  # some quiet cycles were answered from the last one
    # team-b's arrival at 60 s runs a cycle (reclaim blocked: team-a's gang is protected until 300 s);
    # then quiet cycles at 120, 240 and 480 s (the interval doubles from 60 s while nothing happens).
    # At 480 s the protection is over: reclaim evicts team-a's gang whole, team-b's gang binds at 490 s.
    assert starts(quick) == {"a-train": 0.0, "b-train": 490.0}
    evicted_at = [round(c.time - quick.start) for c in quick.cycles if c.evicted]
    assert evicted_at == [480]
    assert sum(j.interruptions for j in quick.jobs if j.key.endswith("a-train")) == 1
