"""Pieces behind KAI's flags, without a cluster: the partition a scheduler sees, the queue label key,
the pod condition written before an eviction, and the client-side rate limit."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kai.cluster import partition
from kai.cluster.kube import RateLimiter
from kai.cluster.writers import Evictor
from kai.framework.decisions import Eviction
from kai.model import ClusterSnapshot
from kai.snapshot.builder import build_snapshot

POOL = "kai.scheduler/node-pool"


def node(name: str, pool: str | None) -> dict[str, Any]:
    labels = {POOL: pool} if pool else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def podgroup(name: str, pool: str | None) -> dict[str, Any]:
    labels = {POOL: pool} if pool else {}
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"minMember": 1, "queue": "q"},
    }


def pod(name: str, *, node_name: str = "", group: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": labels or {},
            "annotations": {"pod-group-name": group} if group else {},
        },
        "spec": {"nodeName": node_name} if node_name else {},
    }


def names(objects: list[dict[str, Any]]) -> set[str]:
    return {f"{o['kind']}/{o['metadata']['name']}" for o in objects}


def queue(name: str, pool: str | None) -> dict[str, Any]:
    labels = {POOL: pool} if pool else {}
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name, "labels": labels}}


def test_a_partition_sees_its_nodes_queues_pod_groups_and_the_pods_on_its_nodes() -> None:
    objects = [
        node("a1", "a"),
        node("b1", "b"),
        node("plain", None),
        podgroup("ga", "a"),
        podgroup("gb", "b"),
        podgroup("g-plain", None),
        pod("running-on-a", node_name="a1", group="gb"),  # holds a1's resources whatever its group
        pod("running-on-b", node_name="b1", group="ga"),
        pod("pending-a", group="ga"),
        pod("pending-b", group="gb"),
        pod("pending-plain", group="g-plain"),
        pod("lone-a", labels={POOL: "a"}),
        pod("lone", labels={}),
        queue("qa", "a"),
        queue("q-plain", None),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "train"}, "value": 50},
    ]
    assert names(partition.select(objects, POOL, "a")) == {
        "Node/a1",
        "PodGroup/ga",
        "Pod/running-on-a",
        "Pod/pending-a",
        "Pod/lone-a",
        "Queue/qa",
        "PriorityClass/train",  # shared by every partition
    }
    # The empty value is KAI's default shard: whatever carries no node-pool label.
    assert names(partition.select(objects, POOL, "")) == {
        "Node/plain",
        "PodGroup/g-plain",
        "Pod/pending-plain",
        "Pod/lone",
        "Queue/q-plain",
        "PriorityClass/train",
    }
    assert partition.select(objects, "", "") == objects  # no node-pool label key: the whole cluster


def test_the_queue_label_key_names_a_lone_pod_s_queue() -> None:
    queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "team"},
        "spec": {"resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}},
    }
    lone = pod("p", labels={"example.com/team": "team", "kai.scheduler/queue": "missing"})
    lone["spec"] = {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}
    custom = build_snapshot([queue, lone], 0.0, "kai-scheduler", queue_label_key="example.com/team")
    assert not custom.problems
    assert [pg.queue for pg in custom.snapshot.podgroups.values()] == ["team"]
    default = build_snapshot([queue, lone], 0.0, "kai-scheduler")
    assert [p.field for p in default.problems] == ["metadata.labels[kai.scheduler/queue]"]


class RecordingKube:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def patch(self, path: str, body: Any, kind: str = "merge") -> dict[str, Any]:
        self.calls.append(("PATCH " + kind, path, body))
        return {}

    def delete(self, path: str, body: Any = None, query: Any = None) -> dict[str, Any]:
        self.calls.append(("DELETE", path, body))
        return {}


class NoEvents:
    def record(self, *args: Any) -> bool:
        return True


def test_update_pod_eviction_condition_marks_the_pod_before_deleting_it() -> None:
    victim = {"metadata": {"name": "v", "namespace": "ns", "uid": "u1"}, "status": {}}
    for update, expected in ((True, ["PATCH strategic", "DELETE"]), (False, ["DELETE"])):
        kube = RecordingKube()
        with ThreadPoolExecutor(1) as pool:
            evictor = Evictor(kube, NoEvents(), pool, update_condition=update)  # type: ignore[arg-type]
            done = evictor.evict(
                [Eviction("ns/v", "n1", "reclaim", "ns/other")], {"ns/v": victim}, {}, ClusterSnapshot(0.0)
            )
        assert [c[0] for c in kube.calls] == expected
        assert len(done) == 1
        if update:
            (condition,) = kube.calls[0][2]["status"]["conditions"]
            assert kube.calls[0][1] == "/api/v1/namespaces/ns/pods/v/status"
            assert (condition["type"], condition["status"], condition["reason"]) == (
                "DisruptionTarget",
                "True",
                "PreemptionByScheduler",
            )


def test_the_rate_limiter_lets_a_burst_through_then_waits(monkeypatch: Any) -> None:
    clock = [100.0]
    slept: list[float] = []
    monkeypatch.setattr("kai.cluster.kube.time.monotonic", lambda: clock[0])
    monkeypatch.setattr("kai.cluster.kube.time.sleep", slept.append)
    limiter = RateLimiter(qps=10, burst=3)
    for _ in range(3):
        limiter.take()
    assert slept == []  # the burst
    limiter.take()
    limiter.take()
    assert slept == [0.1, 0.2]  # one token per 1/qps seconds, each waiter in turn


def test_a_pod_group_naming_another_pool_s_queue_is_told_so() -> None:
    objects = [node("a1", "a"), podgroup("ga", "a"), queue("q", "b")]  # the PodGroup's queue is pool b's
    seen = partition.select(objects, POOL, "a")
    result = build_snapshot(seen, 0.0, "kai-scheduler")
    queues = {"q": queue("q", "b")}
    (problem,) = [p for p in partition.explain(result.problems, queues, POOL, "a") if p.field == "spec.queue"]
    assert problem.obj == "PodGroup ns/ga"
    assert problem.message == (
        "names queue 'q', of another node pool (kai.scheduler/node-pool=b; this scheduler's: kai.scheduler/node-pool=a)"
    )
    # A queue that exists nowhere keeps the builder's message.
    assert partition.explain(result.problems, {}, POOL, "a") == result.problems
