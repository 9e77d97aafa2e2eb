"""The live scheduler's incremental snapshot decides exactly what a snapshot built from scratch decides.

The cache's stores are fed a series of watch events (each change a new object dict, as the reflector
delivers them); after each step the real loop (`Scheduler.run_once`) runs on the incremental
snapshot (conversions kept between cycles), and the same objects, copied into a cache that sees
them for the first time, are viewed and built from scratch and run through the offline core.
Views, snapshots, problems and decisions must be equal; only the objects that changed are
converted again, and a cycle with nothing changed converts nothing.
The status updater, which keeps pod group usage between cycles, still writes exactly on change.
"""

from __future__ import annotations

import copy
from typing import Any

from kai.api.timeutil import parse_time
from kai.cluster.cache import SCHEDULER_KINDS, ClusterCache
from kai.cluster.kube import (
    BIND_REQUESTS,
    DRA_KINDS,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    QUEUES,
    STORAGE_CLASSES,
)
from kai.cluster.scheduler import Scheduler
from kai.cluster.status import StatusUpdater
from kai.cycle import run_cycle
from kai.framework.config import SchedulerConfig
from tests.cluster.ports import Ports
from tests.scenario import NOW, node, pod, podgroup, queue

KINDS = {r.kind: r for r in (NODES, PODS, QUEUES, PODGROUPS, PRIORITY_CLASSES, BIND_REQUESTS, PVCS, STORAGE_CLASSES)}


# No API server to ask whether it serves resource.k8s.io: the scheduler's kinds without DRA's.
KINDS = [k for k in SCHEDULER_KINDS if k not in DRA_KINDS]

class Cluster:
    """A ClusterCache whose reflectors are not started: the test delivers the watch events."""

    def __init__(self) -> None:
        self.cache = ClusterCache(None, KINDS)  # type: ignore[arg-type]  # never started: no API server
        self.version = 0
        self.now = parse_time(NOW)
        self.ports = Ports()
        self.scheduler = Scheduler(
            self.cache,
            SchedulerConfig(),
            bind_requests=self.ports,
            evictor=self.ports,
            status=self.ports,
            events=self.ports,  # type: ignore[arg-type]
            clock=lambda: self.now,
        )

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """ADDED or MODIFIED: a new dict with the next resourceVersion."""
        obj = copy.deepcopy(obj)
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        self.cache.stores[obj["kind"]].put(obj)
        return obj

    def get(self, kind: str, key: str) -> dict[str, Any]:
        obj = self.cache.stores[kind].get(key)
        assert obj is not None, key
        return copy.deepcopy(obj)

    def delete(self, kind: str, key: str) -> None:
        self.cache.stores[kind].remove(self.get(kind, key))

    def cycle_matches_a_build_from_scratch(self) -> Any:
        """One live cycle, checked against the offline core on copies of the very objects it saw."""
        report = self.scheduler.run_once()
        view = self.cache.view()  # nothing changed since the cycle: the view it used
        fresh = ClusterCache(None, KINDS)  # type: ignore[arg-type]  # sees the same objects for the first time
        for kind, store in self.cache.stores.items():
            for obj in store.list():
                fresh.stores[kind].put(copy.deepcopy(obj))
        for key, body in self.cache.in_flight.items():  # requests the writer is creating
            fresh.in_flight[key] = copy.deepcopy(body)
        first_sight = fresh.view()
        assert first_sight.objects == view.objects
        assert first_sight.binding == view.binding
        assert [(b["metadata"]["name"], why) for b, why in first_sight.stale_bind_requests] == [
            (b["metadata"]["name"], why) for b, why in view.stale_bind_requests
        ]
        # The same loop on that cache: nothing converted before, the builder sees every object afresh.
        ports = Ports()
        scratch = Scheduler(
            fresh,
            SchedulerConfig(),
            bind_requests=ports,
            evictor=ports,
            status=ports,
            events=ports,  # type: ignore[arg-type]
            clock=lambda: self.now,
        )
        from_scratch = scratch.run_once()
        assert scratch.memo.reused == 0
        assert scratch.last_snapshot is not None and self.scheduler.last_snapshot == scratch.last_snapshot
        assert report.problems == from_scratch.problems
        assert report.decisions == from_scratch.decisions
        assert report.decisions == run_cycle(scratch.last_snapshot, SchedulerConfig())  # the offline core
        return report


def bind_request(name: str, node_name: str, uid: str, failed: bool = False) -> dict[str, Any]:
    br: dict[str, Any] = {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [{"kind": "Pod", "uid": uid}]},
        "spec": {"podName": name, "selectedNode": node_name},
    }
    if failed:
        br["status"] = {"phase": "Failed", "reason": "node is full"}
    return br


def with_claim(obj: dict[str, Any], claim: str) -> dict[str, Any]:
    obj["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return obj


def pvc(name: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class},
    }


def test_the_incremental_snapshot_decides_as_a_snapshot_built_from_scratch() -> None:
    c = Cluster()
    for i in range(3):
        c.put(node(f"n{i}", gpus=4))
    for obj in (queue("dept"), queue("a", parent="dept"), queue("b", parent="dept")):
        c.put(obj)
    c.put(podgroup("train", "a", min_member=2))
    for i in range(2):
        c.put(pod(f"train-{i}", group="train", gpus=2))
    c.put(pod("solo", queue="b", gpus=1))
    c.put(podgroup("vip", "b", priority_class="urgent"))  # the class comes later: the default priority now
    c.put(pod("vip-0", group="vip", cpu="1"))
    c.put(pod("bad", queue="b", cpu="lots"))  # left out, with a problem
    c.put(pod("other", scheduler="default-scheduler", node="n2", gpus=1))  # another scheduler's pod
    c.put(pod("late", queue="b", gpus=4))
    c.put(with_claim(pod("needs-data", queue="b", gpus=1), "data"))
    first = c.cycle_matches_a_build_from_scratch()
    assert {b.pod for b in first.bound} == {"ns/train-0", "ns/train-1", "ns/solo", "ns/late", "ns/vip-0"}
    assert c.scheduler.last_snapshot is not None and c.scheduler.last_snapshot.podgroups["ns/vip"].priority == 50
    assert "ns/pg-needs-data-uid-needs-data" in first.decisions.jobs
    assert 'persistentvolumeclaim "data" not found' in first.decisions.jobs["ns/pg-needs-data-uid-needs-data"].message

    # The binder binds the gang and vip-0; "solo" is Binding (its BindRequest is in); "late"'s request failed.
    converted = c.scheduler.memo.converted
    for name in ("train-0", "train-1", "vip-0"):
        p = c.get("Pod", f"ns/{name}")
        p["spec"]["nodeName"] = next(b.node for b in first.bound if b.pod == f"ns/{name}")
        p["status"]["phase"] = "Running"
        c.put(p)
    solo = next(b for b in first.bound if b.pod == "ns/solo")
    c.put(bind_request("solo", solo.node, "uid-solo"))
    c.put(bind_request("late", "n0", "uid-late", failed=True))
    second = c.cycle_matches_a_build_from_scratch()
    assert c.scheduler.memo.converted - converted == 4  # the three bound pods and solo's Binding copy
    assert "ns/solo" not in {b.pod for b in second.bound}  # Binding: it holds its node

    # Nothing changes: the same view, nothing converted, the same decisions.
    converted = c.scheduler.memo.converted
    view = c.cache.view()
    again = c.cycle_matches_a_build_from_scratch()
    assert c.cache.view() is view
    assert c.scheduler.memo.converted == converted
    assert again.decisions == second.decisions

    # More events: a node relabelled and one added, a pod deleted, the bad pod fixed, a higher (still
    # preemptible) priority class for a new gang, the claim created (WaitForFirstConsumer: it
    # schedules), the gang grown.
    n1 = c.get("Node", "n1")
    n1["metadata"]["labels"] = {"zone": "b"}
    c.put(n1)
    c.put(node("n3", gpus=8))
    c.delete("Pod", "ns/other")
    c.put(pod("bad", queue="b", cpu="1"))
    c.put({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"}, "value": 90})
    c.put(podgroup("rush", "a", min_member=2, priority_class="urgent"))
    for i in range(2):
        c.put(pod(f"rush-{i}", group="rush", gpus=1))
    c.put(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "late-binding"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    c.put(pvc("data", "late-binding"))
    train = c.get("PodGroup", "ns/train")
    train["spec"]["minMember"] = 3
    c.put(train)
    c.put(pod("train-2", group="train", gpus=2))
    c.now += 60
    third = c.cycle_matches_a_build_from_scratch()
    # 20 GPUs, 5 held (the gang, solo): every request (14 GPUs in all) is granted, the failed one again.
    granted = {"ns/late", "ns/needs-data", "ns/bad", "ns/rush-0", "ns/rush-1", "ns/train-2"}
    assert {b.pod for b in third.bound} == granted
    assert not third.problems
    assert c.scheduler.last_snapshot is not None and c.scheduler.last_snapshot.podgroups["ns/vip"].priority == 90

    # The node solo's request names goes away: the request (unchanged itself) is stale now.
    c.delete("Node", solo.node)
    c.cycle_matches_a_build_from_scratch()
    assert [(b["metadata"]["name"], why) for b, why in c.cache.view().stale_bind_requests] == [
        ("solo", f"node {solo.node!r} is gone"),
        ("late", "binding failed: node is full"),
    ]


class RecordingKube:
    """The status updater's API: records each patch."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def patch(self, path: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.patches.append((path, body))
        return {}


def test_pod_group_status_is_written_when_it_changes_and_only_then() -> None:
    c = Cluster()
    kube = RecordingKube()
    status = StatusUpdater(kube, c.ports, workers=1)  # type: ignore[arg-type]
    c.scheduler.status = status
    c.put(node("n0", gpus=4))
    c.put(queue("q"))
    c.put(podgroup("g", "q"))
    c.put(pod("g-0", group="g", gpus=1, node="n0"))
    group_path = "/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups/g/status"

    def cycle() -> list[dict[str, Any]]:
        """Run a cycle, let its writes finish, and hand each written status back as the watch would."""
        kube.patches.clear()
        c.scheduler.run_once()
        status.pool.submit(lambda: None).result()  # one worker: every earlier write is done
        written = [body["status"] for path, body in kube.patches if path == group_path]
        for body in written:
            obj = c.get("PodGroup", "ns/g")
            obj["status"] = {**obj.get("status", {}), **body}
            c.put(obj)
        return written

    first = cycle()
    assert [(s["phase"], s["running"], s["pending"]) for s in first] == [("Running", 1, 0)]
    assert cycle() == []  # the object now says it
    assert cycle() == []  # nothing changed: nothing written
    c.put(pod("g-1", group="g", gpus=1))  # a second pod, placed by the next cycle
    assert [(s["phase"], s["running"], s["pending"]) for s in cycle()] == [("Running", 2, 0)]
    assert cycle() == []
    status.shutdown()
