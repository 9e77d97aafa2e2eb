"""The session's order keys (job, task, queue) come from key functions made once for the hooks they call,
with the calls written out: each gives the tuple the plain definition gives (every hook's key in hook
order, then the object's creation and uid, or a queue's creation and name), for any number of hooks,
and follows the hooks when a plugin adds, removes or replaces one after the first key was asked for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.session import _order_key, _queue_order_key
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue


def hooks(count: int) -> list[Any]:
    return [lambda x, i=i: (i, x.name[: i + 1]) for i in range(count)]


@pytest.mark.parametrize("count", range(6))
def test_the_written_out_keys_are_the_plain_keys(count: int) -> None:
    fns = hooks(count)
    for thing in (SimpleNamespace(name="abc", creation=2.0, uid="u1"), SimpleNamespace(name="x", creation=0.0, uid="")):
        assert _order_key(fns)(thing) == (*(fn(thing) for fn in fns), thing.creation, thing.uid)
        two = [lambda q, j, i=i: (i, q.name, j.uid) for i in range(count)]
        assert _queue_order_key(two)(thing, thing) == (*(fn(thing, thing) for fn in two), thing.creation, thing.name)


def test_the_session_keys_follow_the_hooks() -> None:
    objects = [node("n1"), queue("q"), podgroup("job", "q"), pod("job-0", group="job", gpus=1)]
    ssn, _ = open_session(build_snapshot(objects, parse_time(NOW)).snapshot, SchedulerConfig())
    job = ssn.jobs["ns/job"]
    task = next(iter(job.pods))
    queue_info = ssn.queues["q"]

    def plain() -> tuple[Any, ...]:
        h = ssn.hooks
        return (
            (*(fn(job) for fn in h.job_order), job.creation, job.uid),
            (*(fn(task) for fn in h.task_order), task.creation, task.uid),
            (*(fn(queue_info, job) for fn in h.queue_order), queue_info.creation, queue_info.name),
        )

    def keys() -> tuple[Any, ...]:
        return ssn.job_key(job), ssn.task_key(task), ssn.queue_key(queue_info, job)

    assert keys() == plain()
    ssn.hooks.task_order.append(lambda t: ("late", t.name))
    ssn.hooks.job_order.insert(0, lambda j: ("first", j.name))
    ssn.hooks.queue_order.append(lambda q, j: ("more", q.name))
    assert keys() == plain()
    assert ssn.task_order_key()(task) == plain()[1] and ssn.job_order_key()(job) == plain()[0]
    ssn.hooks.task_order[0] = lambda t: ("replaced",)
    del ssn.hooks.job_order[1:]
    ssn.hooks.queue_order = []
    assert keys() == plain()
