"""Shortcuts of the actions around allocate, checked against what the long way answers: the ready pending
jobs kept across the evicting actions (kai.actions.reclaim.pending_jobs) while no statement moves a pod."""

from __future__ import annotations

from typing import Any

from kai.actions.reclaim import pending_jobs
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.statement import Statement
from kai.model import PodStatus
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue


def _session(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    result = build_snapshot(objects, now=parse_time(NOW))
    return open_session(result.snapshot, SchedulerConfig())[0]


def test_pending_jobs_follow_the_moves_of_statements() -> None:
    # Three pending jobs; the list is asked for, a statement places one job's pod, and asked again: the
    # placed job is gone (the kept list is for the moves it was found at); undone, it is back.
    objects: list[dict[str, Any]] = [node("n0", gpus=8), queue("q")]
    for i in range(3):
        objects += [podgroup(f"w{i}", "q"), pod(f"w{i}", group=f"w{i}", gpus=1)]
    ssn = _session(objects)
    assert [job.key for job in pending_jobs(ssn)] == ["ns/w0", "ns/w1", "ns/w2"]
    first = pending_jobs(ssn)
    first.clear()  # a caller's own list: the kept one is untouched
    assert [job.key for job in pending_jobs(ssn)] == ["ns/w0", "ns/w1", "ns/w2"]
    stmt = Statement(ssn)
    (task,) = ssn.jobs["ns/w1"].pods
    stmt.allocate(task, "n0")
    assert task.status is PodStatus.ALLOCATED
    assert [job.key for job in pending_jobs(ssn)] == ["ns/w0", "ns/w2"]
    stmt.discard()
    assert [job.key for job in pending_jobs(ssn)] == ["ns/w0", "ns/w1", "ns/w2"]
    ssn.restore()
