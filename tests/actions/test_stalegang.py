"""stalegangeviction: a running job below its minMember for longer than the grace period is evicted
whole. Time is the snapshot's `now`; the stale instant is the PodGroup annotation
`kai.scheduler/stale-podgroup-timestamp`, which the cycle writes back."""

from __future__ import annotations

import json
from typing import Any

from kai.api.timeutil import parse_time
from kai.cycle import known_actions, run_cycle
from kai.framework.config import parse_config
from kai.framework.decisions import Decisions
from kai.snapshot.builder import build_snapshot
from tests.actions.evict_helpers import evictions, gq, job
from tests.scenario import NOW, cli_json, node, pod, podgroup, run, write

T = parse_time(NOW)


def half_running(stale_since: str | None = None, phases: list[str] | None = None) -> list[dict]:
    """Job g (minMember 2): pod g-0 runs on the only GPU of n1, g-1 waits and cannot fit."""
    objects = [node("n1", gpus=1), gq("q", 4)]
    objects += job("g", "q", size=2, nodes=["n1", None], stale_since=stale_since, phases=phases)  # type: ignore[list-item]
    return objects


def cycle(objects: list[dict[str, Any]], config: dict[str, Any] | None = None) -> Decisions:
    cfg, problems, _ = parse_config(config, known_actions())
    assert not problems
    result = build_snapshot(objects, now=T)
    assert not result.problems, result.problems
    return run_cycle(result.snapshot, cfg)


def test_first_detection_only_records_the_instant() -> None:
    decisions = cycle(half_running())
    assert decisions.stale_since == {"ns/g": T}
    assert decisions.evictions == []


def test_within_the_grace_period_nothing_happens() -> None:
    decisions = cycle(half_running(stale_since="2025-12-31T23:59:30Z"))  # 30 s < 60 s
    assert decisions.evictions == [] and "ns/g" not in decisions.stale_since


def test_past_the_grace_period_the_whole_job_is_evicted() -> None:
    result = run(half_running(stale_since="2025-12-31T23:58:59Z"))  # 61 s >= 60 s
    assert evictions(result) == {"ns/g-0": ("stalegangeviction", "")}
    assert result["pods"]["ns/g-0"]["status"] == "Pending"
    message = result["podGroups"]["ns/g"]["message"]
    assert "1 active pods, minMember is 2" in message and "61s" in message


def test_exactly_the_grace_period_is_enough() -> None:
    decisions = cycle(half_running(stale_since="2025-12-31T23:59:00Z"))
    assert [e.pod for e in decisions.evictions] == ["ns/g-0"]
    assert decisions.stale_since == {"ns/g": None}


def test_grace_period_comes_from_the_config() -> None:
    short = {"schedulerParams": {"globalDefaultStalenessGracePeriod": "10s"}}
    assert [e.pod for e in cycle(half_running(stale_since="2025-12-31T23:59:40Z"), short).evictions] == ["ns/g-0"]
    never = {"schedulerParams": {"globalDefaultStalenessGracePeriod": "-1s"}}
    assert cycle(half_running(stale_since="2025-12-30T00:00:00Z"), never).evictions == []


def test_a_job_back_at_its_minimum_has_its_stale_mark_cleared() -> None:
    objects = [node("n1", gpus=2), gq("q", 4)]
    objects += job("g", "q", size=2, nodes="n1", stale_since="2025-12-31T23:00:00Z")
    decisions = cycle(objects)
    assert decisions.stale_since == {"ns/g": None} and decisions.evictions == []


def test_allocate_completing_the_gang_in_the_same_cycle_saves_it() -> None:
    # Room for the waiting pod: allocate places it before stale-gang eviction looks.
    objects = [node("n1", gpus=2), gq("q", 4)]
    objects += job("g", "q", size=2, nodes=["n1", None], stale_since="2025-12-31T23:00:00Z")  # type: ignore[list-item]
    decisions = cycle(objects)
    assert decisions.evictions == [] and [b.pod for b in decisions.bindings] == ["ns/g-1"]


def test_a_job_with_a_succeeded_pod_is_not_stale() -> None:
    decisions = cycle(half_running(stale_since="2025-12-31T00:00:00Z", phases=["Running", "Succeeded"]))
    assert decisions.evictions == []


def test_a_sub_group_below_its_minimum_makes_the_job_stale() -> None:
    subgroups = [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 2}]
    group = podgroup("pt", "q", subgroups=subgroups)
    group["metadata"]["annotations"] = {"kai.scheduler/stale-podgroup-timestamp": "2025-12-31T23:00:00Z"}

    def member(name: str, role: str, where: str | None) -> dict:
        return pod(name, group="pt", gpus=1, node=where, labels={"kai.scheduler/subgroup-name": role})

    objects = [node("n1", gpus=2), gq("q", 4), group, member("m", "master", "n1"), member("w0", "worker", "n1")]
    objects.append(member("w1", "worker", None))
    result = run(objects)
    assert evictions(result) == {"ns/m": ("stalegangeviction", ""), "ns/w0": ("stalegangeviction", "")}
    assert "sub-group worker has 1 active pods, minMember is 2" in result["podGroups"]["ns/pt"]["message"]


def test_rounds_at_one_instant_never_reach_the_grace_period() -> None:
    from kai.sim.simulate import simulate

    snapshot = build_snapshot(half_running(), now=T).snapshot
    cfg, _, _ = parse_config(None, known_actions())
    result = simulate(snapshot, cfg, rounds=3)
    assert all(r.decisions.evictions == [] for r in result.rounds)
    assert result.final is not None and result.final.podgroups["ns/g"].stale_since == T


def test_stale_gang_eviction_through_the_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    snapshot = write(half_running(stale_since="2025-12-31T23:59:50Z"), tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"schedulerParams": {"globalDefaultStalenessGracePeriod": "5s"}}))
    result = cli_json([snapshot], "--config", str(config))
    assert result["rounds"][0]["evicted"] == [{"pod": "ns/g-0", "node": "n1", "action": "stalegangeviction", "by": ""}]
