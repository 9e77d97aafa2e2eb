"""What the live ports write about causes, with a fake API server: the PodGroup's scheduling condition
(KAI's reason codes, details.queueDetails), the pod's PodScheduled condition with the first cause,
QueueDoesNotExist only for this scheduler's PodGroups, and the Evict event naming the rule."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kai.api.timeutil import parse_time
from kai.cluster.status import StatusUpdater
from kai.cluster.writers import Evictor
from kai.cycle import run_cycle
from kai.framework.config import SchedulerConfig
from kai.framework.decisions import Eviction
from kai.snapshot.builder import build_snapshot
from tests.actions.evict_helpers import gq, job
from tests.scenario import NOW, node, pod, podgroup


class FakeKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []
        self.deleted: list[str] = []

    def patch(self, path: str, body: Any, kind: str = "merge") -> dict[str, Any]:
        self.patches.append((path, body))
        return {}

    def delete(self, path: str, body: Any = None, query: Any = None) -> dict[str, Any]:
        self.deleted.append(path)
        return {}


class FakeEvents:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> bool:
        self.events.append((obj["metadata"]["name"], reason, message))
        return True


def with_uids(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, obj in enumerate(objects):
        obj["metadata"]["uid"] = f"uid-{i}"
    return objects


def by_key(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    out = {}
    for obj in objects:
        if obj["kind"] == kind:
            meta = obj["metadata"]
            out[f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]] = obj
    return out


def test_conditions_carry_the_ranked_causes_with_kai_codes() -> None:
    objects = with_uids(
        [
            node("n1", gpus=8),
            gq("a", 4, limit=4),
            *job("over", "a", gpus=6),
            podgroup("lost", "missing"),
            pod("lost-0", group="lost", gpus=1),
            podgroup("theirs", "gone"),
            pod("theirs-0", group="theirs", gpus=1, scheduler="other-scheduler"),
        ]
    )
    result = build_snapshot(objects, parse_time(NOW))
    decisions = run_cycle(result.snapshot, SchedulerConfig())
    kube, events = FakeKube(), FakeEvents()
    updater = StatusUpdater(kube, events, workers=1)  # type: ignore[arg-type]
    pods, groups, queues = by_key(objects, "Pod"), by_key(objects, "PodGroup"), by_key(objects, "Queue")
    updater.update(decisions, result.snapshot, pods, groups, queues)
    updater.shutdown()
    status = {path: body["status"] for path, body in kube.patches if path.endswith("/status")}

    (cond,) = status["/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups/over/status"]["schedulingConditions"]
    assert cond["type"] == "UnschedulableOnNodePool" and cond["reason"] == "Unschedulable"
    first = cond["reasons"][0]
    assert first["reason"] == "OverLimit"
    assert first["details"]["queueDetails"] == {
        "name": "a",
        "queueRequestedResources": {"nvidia.com/gpu": "6", "cpu": "0m", "memory": "0"},
        "queueDeservedResources": {"nvidia.com/gpu": "4"},
        "queueAllocatedResources": {"nvidia.com/gpu": "0", "cpu": "0m", "memory": "0"},
        "queueAllocatedNonPreemptibleResources": {"nvidia.com/gpu": "0", "cpu": "0m", "memory": "0"},
        "queueResourceLimits": {"nvidia.com/gpu": "4"},
        "podGroupRequestedResources": {"nvidia.com/gpu": "6", "cpu": "0m", "memory": "0"},
        "podGroupRequestedNonPreemptibleResources": {"nvidia.com/gpu": "0", "cpu": "0m", "memory": "0"},
    }
    expected = (
        "Queue a would exceed its limit of 4 GPUs: 0 GPUs in use and this job asks for 6 GPUs more. "
        "What would change it: ask for at most 4 GPUs, or wait until queue a's jobs free 2 GPUs."
    )
    assert cond["message"] == expected
    (pod_condition,) = status["/api/v1/namespaces/ns/pods/over/status"]["conditions"]
    assert pod_condition["reason"] == "Unschedulable" and pod_condition["message"] == expected
    assert ("over", "Unschedulable", expected) in events.events

    (missing,) = status["/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups/lost/status"]["schedulingConditions"]
    assert missing["reasons"] == [
        {
            "reason": "QueueDoesNotExist",
            "message": missing["message"],
            "details": {"queueDetails": {"name": "missing"}},
        }
    ]
    assert "/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups/theirs/status" not in status


def test_evict_event_names_the_preemptor_and_the_rule() -> None:
    objects = with_uids([podgroup("victim", "b"), pod("victim-0", group="victim", gpus=1, node="n1")])
    kube, events = FakeKube(), FakeEvents()
    evictor = Evictor(kube, events, ThreadPoolExecutor(1))  # type: ignore[arg-type]
    snapshot = build_snapshot([node("n1"), gq("b", 1), *objects], parse_time(NOW)).snapshot
    done = evictor.evict(
        [Eviction("ns/victim-0", "n1", "reclaim", "ns/want")],
        by_key(objects, "Pod"),
        by_key(objects, "PodGroup"),
        snapshot,
    )
    assert len(done) == 1
    (message,) = [m for name, reason, m in events.events if reason == "Evict"]
    assert message == (
        "1 pod(s) of ns/victim evicted by reclaim to make room for ns/want "
        "(fair share: the preemptor's queue is below its fair share and takes resources back)"
    )
