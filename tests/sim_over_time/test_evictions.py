"""How the simulator carries out evictions, whatever action decided them: an evicted job restarts from
its last checkpoint (from scratch without one), its pods pending again `restartDelay` (30 s) after the
eviction; a gang that loses a pod restarts whole; and the lost GPU time is counted. Evictions are
injected into the cycle's decisions so that these checks do not depend on when reclaim or preempt
choose to evict."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import kai.sim.trace as trace
from kai.framework.decisions import Eviction
from kai.model import PodStatus
from tests.sim_over_time.helpers import finishes, scheduler, simulate, starts, team_queues, workload


@pytest.fixture
def evict_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[float, list[str]]]:
    """Seconds after start -> pod keys that the cycle at that instant evicts (on top of its own decisions)."""
    plan: dict[float, list[str]] = {}
    real = trace.run_cycle

    def cycle(snapshot, config, **options):  # type: ignore[no-untyped-def]
        decisions = real(snapshot, config, **options)
        for key in plan.get(round(snapshot.now - 1767571200.0), []):
            pod = next(p for pg in snapshot.podgroups.values() for p in pg.pods if p.key == key)
            assert pod.status is PodStatus.RUNNING
            decisions.evictions.append(Eviction(key, pod.node, "reclaim", "workloads/someone"))
        return decisions

    monkeypatch.setattr(trace, "run_cycle", cycle)
    yield plan


def one_job(**extra: object) -> dict:
    job = {"name": "train", "queue": "team-a", "gpusPerPod": 8, "duration": "1h", **extra}
    return workload([job], team_queues("team-a"), sched=scheduler())


def test_an_evicted_job_without_checkpoints_starts_over(evict_at: dict[float, list[str]]) -> None:
    evict_at[1500] = ["workloads/train"]
    _, result = simulate(one_job(), exact=True)
    job = result.jobs[0]
    # evicted at 1500 s after 1500 s of work, all lost; pending again at 1530 and bound then, for a full hour
    assert (job.interruptions, job.evicted_pods) == (1, 1)
    assert job.lost_seconds == 1500.0
    assert job.lost_gpu_seconds == 1500.0 * 8
    assert finishes(result)["train"] == 1530.0 + 3600.0
    assert starts(result)["train"] == 0.0  # the first start is what the wait counts


def test_checkpoints_keep_the_work_done_up_to_the_last_one(evict_at: dict[float, list[str]]) -> None:
    evict_at[1500] = ["workloads/train"]
    _, result = simulate(one_job(checkpointInterval="10m"), exact=True)
    job = result.jobs[0]
    # 1500 s of work: checkpoints at 600 and 1200 -> 1200 kept, 300 lost; 2400 s left after the restart at 1530
    assert job.lost_seconds == 300.0
    assert finishes(result)["train"] == 1530.0 + 2400.0


def test_without_restart_delay_the_next_cycle_binds_it_again(evict_at: dict[float, list[str]]) -> None:
    evict_at[1500] = ["workloads/train"]
    raw = one_job(checkpointInterval="10m")
    raw["simulation"]["restartDelay"] = "0s"
    _, result = simulate(raw, exact=True)
    assert finishes(result)["train"] == 1510.0 + 2400.0


def test_a_gang_that_loses_one_pod_restarts_whole(evict_at: dict[float, list[str]]) -> None:
    evict_at[600] = ["workloads/train-1"]
    raw = one_job(pods=2, gpusPerPod=4)
    _, result = simulate(raw, exact=True)
    job = result.jobs[0]
    assert job.interruptions == 1 and job.evicted_pods == 1
    assert job.lost_gpu_seconds == 600.0 * 8  # both pods' GPUs lost their work
    assert finishes(result)["train"] == 630.0 + 3600.0
    cycle = next(c for c in result.cycles if round(c.time - result.start) == 600)
    assert cycle.allocated["team-a"] == 0.0  # the other pod was released as well
    assert cycle.free_gpus == 8.0


def test_an_elastic_pod_beyond_the_gang_does_not_interrupt_the_job(evict_at: dict[float, list[str]]) -> None:
    evict_at[600] = ["workloads/train-2"]
    _, result = simulate(one_job(pods=3, gangSize=2, gpusPerPod=2), exact=True)
    job = result.jobs[0]
    assert job.interruptions == 0 and job.evicted_pods == 1
    assert finishes(result)["train"] == 3600.0


def test_eviction_metrics_are_reported(evict_at: dict[float, list[str]]) -> None:
    from kai.sim.metrics import compute_metrics

    evict_at[1500] = ["workloads/train"]
    _, result = simulate(one_job(), exact=True)
    metrics = compute_metrics(result)
    assert metrics["evictions"] == {"pods": 1, "jobsInterrupted": 1, "interruptions": 1, "gpuHoursLost": 3.333}
    assert metrics["queues"]["team-a"]["evictedJobs"] == 1
