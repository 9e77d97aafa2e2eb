"""The live scheduler on gangs and on the why-pending explanation, against the real API server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kai.cluster.kube import BIND_REQUESTS, EVENTS, PODGROUPS, Kube
from kai.cluster.scheduler import CycleReport
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    condition,
    create,
    pod,
    podgroup,
    pods,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)
from tests.live.scheduler_helpers import fresh_nodes as make_nodes


@pytest.fixture
def kube(live_cluster: LiveCluster) -> Kube:
    return Kube.from_kubeconfig(str(live_cluster.kubeconfig))


@pytest.fixture
def setup(live_cluster: LiveCluster, kube: Kube, namespace: str) -> Iterator[tuple[str, str, list[str]]]:
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q))
    nodes = make_nodes(live_cluster, 2, gpus=8)
    yield name, q, nodes
    cleanup(kube, namespace, [q])


def test_a_gang_of_8_binds_together(kube: Kube, namespace: str, setup: tuple[str, str, list[str]]) -> None:
    name, q, nodes = setup
    cycles: list[CycleReport] = []
    create(kube, podgroup("gang", namespace, q, min_member=8))
    with scheduler(kube, name) as process:
        assert process.scheduler is not None
        process.scheduler.on_cycle = cycles.append
        time.sleep(0.6)  # the scheduler sees a gang with no pods yet: nothing to do
        for i in range(8):
            create(kube, pod(f"w{i}", namespace, name, group="gang", gpus=2))
        placed = wait("the gang to be bound", lambda: len(bound(kube, namespace)) == 8 and bound(kube, namespace))
    assert set(placed.values()) <= set(nodes)
    # Together: one cycle made all eight BindRequests, and no cycle made only some of them.
    sizes = [len(c.bound) for c in cycles if c.bound]
    assert sizes == [8], sizes
    brs = kube.get(BIND_REQUESTS.path(namespace))["items"]
    assert sorted(b["metadata"]["name"] for b in brs) == [f"w{i}" for i in range(8)]
    assert {b["status"]["phase"] for b in brs} == {"Succeeded"}
    assert all(b["spec"]["receivedResourceType"] == "Regular" and b["spec"]["receivedGPU"]["count"] == 2 for b in brs)
    pg = kube.get(PODGROUPS.path(namespace, "gang"))
    assert pg["status"]["phase"] == "Running"
    assert pg["status"]["resourcesStatus"]["allocated"]["nvidia.com/gpu"] == "16"


def test_a_gang_that_does_not_fit_binds_nothing_and_says_why(
    kube: Kube, namespace: str, setup: tuple[str, str, list[str]]
) -> None:
    name, q, _ = setup
    create(kube, podgroup("too-big", namespace, q, min_member=8))
    for i in range(8):
        create(kube, pod(f"w{i}", namespace, name, group="too-big", gpus=3))  # 24 GPUs on 16
    with scheduler(kube, name) as process:
        explained = wait(
            "a why-pending condition on every pod",
            lambda: (
                all(
                    (c := condition(p, "PodScheduled")) and c["reason"] == "Unschedulable"
                    for p in pods(kube, namespace).values()
                )
                and pods(kube, namespace)
            ),
        )
        time.sleep(1.0)  # several more cycles
        assert process.scheduler is not None and process.scheduler.cycles >= 5
    assert bound(kube, namespace) == {}
    assert kube.get(BIND_REQUESTS.path(namespace))["items"] == []
    message = condition(explained["w0"], "PodScheduled")["message"]
    assert "gang" in message.lower() or "8" in message, message
    pg = kube.get(PODGROUPS.path(namespace, "too-big"))
    (cond,) = pg["status"]["schedulingConditions"]
    assert cond["type"] == "UnschedulableOnNodePool" and cond["status"] == "True" and cond["message"] == message
    events = kube.get(EVENTS.path(namespace))["items"]
    assert any(e["reason"] == "Unschedulable" and e["involvedObject"]["name"] == "w0" for e in events)


def test_an_impossible_pod_shows_why_and_status_is_written_only_on_change(
    kube: Kube, namespace: str, setup: tuple[str, str, list[str]]
) -> None:
    name, q, _ = setup
    create(kube, pod("huge", namespace, name, queue_name=q, gpus=16))
    create(kube, pod("fine", namespace, name, queue_name=q, gpus=1))
    with scheduler(kube, name) as process:
        wait("the small pod to be bound", lambda: "fine" in bound(kube, namespace))
        huge = wait(
            "the why-pending condition",
            lambda: (
                condition(p := pods(kube, namespace)["huge"], "PodScheduled")
                and condition(p, "PodScheduled")["reason"] == "Unschedulable"
                and p
            ),
        )
        cond = condition(huge, "PodScheduled")
        assert cond["status"] == "False"
        assert "16" in cond["message"] and "GPU" in cond["message"], cond["message"]
        time.sleep(0.5)  # let the writes of the change settle
        version = pods(kube, namespace)["huge"]["metadata"]["resourceVersion"]
        assert process.scheduler is not None
        cycles = process.scheduler.cycles
        writes = process.status.writes
        time.sleep(2.0)  # ~10 more cycles that decide the same thing
        assert process.scheduler.cycles >= cycles + 5
        assert pods(kube, namespace)["huge"]["metadata"]["resourceVersion"] == version, "no hot loop on the pod"
        assert process.status.writes == writes, "nothing changed, nothing written"
    unschedulable = [
        e
        for e in kube.get(EVENTS.path(namespace))["items"]
        if e["reason"] == "Unschedulable" and e["involvedObject"]["name"] == "huge"
    ]
    assert len(unschedulable) == 1, "one event per message, not one per cycle"
