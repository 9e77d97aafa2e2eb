"""Shortcuts of the session's opening and of the actions around allocate, each checked against what the
long way answers: the one pass over the pods for the attributes plugins ask about (PodTable.pod_flag),
the ready pending jobs kept across the evicting actions (kai.actions.reclaim.pending_jobs)."""

from __future__ import annotations

from typing import Any

import pytest

from kai.actions.reclaim import pending_jobs
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.podtable import USUAL_FLAGS, _truthy
from kai.framework.statement import Statement
from kai.model import PodStatus
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue


def _with(attribute: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The pod given the one attribute (as the snapshot reader reads it)."""
    spec = obj["spec"]
    if attribute == "host_ports":
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    elif attribute == "pod_affinity":
        term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif attribute == "claims":
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    elif attribute == "nominated_node":
        obj["status"]["nominatedNodeName"] = "n1"
    elif attribute == "resource_claims":
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "claim"}]
    return obj


def _cluster(attribute: str | None, size: int = 6) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [node("n0", gpus=8), node("n1", gpus=8), queue("q")]
    for i in range(size):
        objects.append(podgroup(f"j{i}", "q"))
        one = pod(f"p{i}", group=f"j{i}", gpus=1, node="n0" if i % 2 else None)
        objects.append(_with(attribute, one) if attribute is not None and i == size - 2 else one)
    return objects


def _session(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    result = build_snapshot(objects, now=parse_time(NOW))
    return open_session(result.snapshot, SchedulerConfig())[0]


@pytest.mark.parametrize("attribute", [None, *USUAL_FLAGS])
@pytest.mark.parametrize("first", list(USUAL_FLAGS))
def test_one_pass_answers_every_usual_attribute_as_a_pass_each(attribute: str | None, first: str) -> None:
    # One pod of the cluster has `attribute` (None: no pod has any): whichever attribute is asked first,
    # the answers are those of a pass per attribute.
    ssn = _session(_cluster(attribute))
    table = ssn.table
    table._pod_flags.clear()
    table._probed = False
    order = [first, *(a for a in USUAL_FLAGS if a != first)]
    for name in order:
        flag = table.pod_flag(name)
        assert flag.tolist() == _truthy(table.pods, name).tolist(), name
        assert ssn.any_pod(name) == (name == attribute)
    ssn.restore()


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
