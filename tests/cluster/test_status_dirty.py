"""The status updater works out only the dirty pod groups: a group that needed nothing last cycle is left
alone while it is the same snapshot group, with the same PodGroup object, an equal outcome, no pod of it
bound or evicted now and no annotation decided; the queue roll-up is reused while every changed group
holds an equal share; the capacity gauge is summed again only for other node objects. Each test changes
one of those inputs and checks that the status (or gauge) still follows (and that what did not change is
not written again)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from kai.cluster.status import StatusUpdater
from kai.framework.decisions import Binding, Decisions, JobOutcome
from kai.snapshot.builder import build_snapshot
from tests.cluster.test_incremental_snapshot import Cluster, RecordingKube
from tests.scenario import node, pod, podgroup, queue

GROUP = "/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups/{}/status"
QUEUE = "/apis/scheduling.run.ai/v2/queues/q/status"


class Live:
    """The live loop with the real status updater; each write comes back as the watch delivers it."""

    def __init__(self) -> None:
        self.c = Cluster()
        self.kube = RecordingKube()
        self.status = StatusUpdater(self.kube, self.c.ports, workers=1)  # type: ignore[arg-type]
        self.c.scheduler.status = self.status

    def cycle(self) -> dict[str, dict[str, Any]]:
        """One cycle; its status writes by path, each delivered back into the cache."""
        self.kube.patches.clear()
        self.c.scheduler.run_once()
        self.status.pool.submit(lambda: None).result()  # one worker: every earlier write is done
        written: dict[str, dict[str, Any]] = {}
        for path, body in self.kube.patches:
            if not path.endswith("/status"):
                continue
            written[path] = body["status"]
            parts = path.strip("/").split("/")
            kind, key = ("PodGroup", f"ns/{parts[-2]}") if "podgroups" in parts else ("Queue", parts[-2])
            obj = self.c.get(kind, key)
            obj["status"] = {**obj.get("status", {}), **body["status"]}
            self.c.put(obj)
        return written


def two_running_groups() -> Live:
    live = Live()
    live.c.put(node("n0", gpus=8))
    live.c.put(queue("top"))
    live.c.put(queue("q", parent="top"))
    for g in ("a", "b"):
        live.c.put(podgroup(g, "q"))  # minMember 1: one running pod keeps the group Running
        for i in range(2):
            live.c.put(pod(f"{g}-{i}", group=g, gpus=1, node="n0"))
    first = live.cycle()
    assert {GROUP.format("a"), GROUP.format("b")} <= set(first)
    assert live.cycle() == {}  # the objects say it now
    assert live.cycle() == {}
    assert live.status.steady_skipped == 2  # both groups left alone
    return live


def test_a_group_whose_pod_changed_phase_gets_its_status_and_the_other_is_not_rewritten() -> None:
    live = two_running_groups()
    done = live.c.get("Pod", "ns/a-1")
    done["status"]["phase"] = "Succeeded"
    live.c.put(done)
    written = live.cycle()
    assert (written[GROUP.format("a")]["running"], written[GROUP.format("a")]["succeeded"]) == (1, 1)
    assert GROUP.format("b") not in written
    # The queue's roll-up follows: a succeeded pod is no longer requested.
    assert written[QUEUE]["requested"]["nvidia.com/gpu"] == "3"
    assert live.cycle() == {}


def test_a_podgroup_status_changed_by_someone_else_is_written_back() -> None:
    live = two_running_groups()
    other = live.c.get("PodGroup", "ns/b")
    other["status"] = {**other["status"], "running": 0}
    live.c.put(other)
    written = live.cycle()
    assert set(written) == {GROUP.format("b")}
    assert written[GROUP.format("b")]["running"] == 2


class Direct:
    """The status updater alone on a fixed snapshot, with decisions made by hand."""

    def __init__(self) -> None:
        objects = [
            node("n0", gpus=8),
            queue("q"),
            podgroup("a", "q"),
            pod("a-0", group="a", gpus=1, node="n0"),
            pod("a-1", group="a", gpus=1),  # pending: a binding of it changes the group's figures
        ]
        result = build_snapshot(objects, 0.0)
        assert not result.problems
        self.snapshot = result.snapshot
        self.kube = RecordingKube()
        self.status = StatusUpdater(self.kube, _NoEvents(), workers=1)  # type: ignore[arg-type]
        self.raw: dict[str, dict[str, Any]] = {f"ns/{o['metadata']['name']}": o for o in objects}

    def update(self, decisions: Decisions) -> dict[str, dict[str, Any]]:
        self.kube.patches.clear()
        pods = {k: o for k, o in self.raw.items() if o["kind"] == "Pod"}
        groups = {k: o for k, o in self.raw.items() if o["kind"] == "PodGroup"}
        queues = {"q": next(o for o in self.raw.values() if o["kind"] == "Queue")}
        self.status.update(decisions, self.snapshot, pods, groups, queues)
        self.status.pool.submit(lambda: None).result()
        out = {}
        for path, body in self.kube.patches:
            out[path] = body
            parts = path.strip("/").split("/")
            if "podgroups" in parts and parts[-1] == "status":  # delivered back as a new object
                key = f"ns/{parts[-2]}"
                obj = copy.deepcopy(self.raw[key])
                obj["status"] = {**obj.get("status", {}), **body["status"]}
                self.raw[key] = obj
        return out

    def settle(self) -> None:
        self.update(plain())
        assert self.update(plain()) == {}  # the PodGroup says it now (a new object: worked out)
        assert self.update(plain()) == {}
        assert self.status.steady_skipped == 1


class _NoEvents:
    def record(self, *args: Any) -> bool:
        return True


def plain() -> Decisions:
    return Decisions(jobs={"ns/a": JobOutcome("q", "Running")})


def test_a_pod_bound_now_in_a_steady_group_gets_its_status() -> None:
    d = Direct()
    d.settle()
    decisions = plain()
    decisions.bindings = [Binding("ns/a-1", "n0")]
    written = d.update(decisions)
    assert written[GROUP.format("a")]["status"]["running"] == 2


def test_an_annotation_decided_for_a_steady_group_is_written() -> None:
    d = Direct()
    d.settle()
    decisions = plain()
    decisions.last_start = {"ns/a": 3600.0}
    written = d.update(decisions)
    path = GROUP.format("a").removesuffix("/status")
    assert written[path]["metadata"]["annotations"] == {"kai.scheduler/last-start-timestamp": "1970-01-01T01:00:00Z"}


def test_a_changed_outcome_of_a_steady_group_is_written() -> None:
    d = Direct()
    d.settle()
    decisions = Decisions(jobs={"ns/a": JobOutcome("q", "Running", "No node has room.", "Unschedulable")})
    written = d.update(decisions)
    (condition,) = written[GROUP.format("a")]["status"]["schedulingConditions"]
    assert condition["message"] == "No node has room."
    assert "/api/v1/namespaces/ns/pods/a-1/status" in written  # the pending pod's condition


def test_a_podgroup_changed_by_someone_else_under_the_same_snapshot_group_is_written_back() -> None:
    d = Direct()
    d.settle()
    reset = copy.deepcopy(d.raw["ns/a"])
    reset["status"]["phase"] = "Pending"
    d.raw["ns/a"] = reset
    assert d.update(plain())[GROUP.format("a")]["status"]["phase"] == "Running"


def test_a_pod_bound_now_in_a_group_that_was_rebuilt_since_the_first_cycle_gets_its_status() -> None:
    d = Direct()
    d.settle()
    # Another snapshot in which only group b is new (with a pending pod): a is the very same object.
    objects = [
        node("n0", gpus=8),
        queue("q"),
        podgroup("a", "q"),
        podgroup("b", "q"),
        pod("a-0", group="a", gpus=1, node="n0"),
        pod("b-0", group="b", gpus=1, node="n0"),
        pod("b-1", group="b", gpus=1),
    ]
    later = build_snapshot(objects, 0.0).snapshot
    groups = dict(d.snapshot.podgroups)
    groups["ns/b"] = later.podgroups["ns/b"]
    d.snapshot = dataclasses.replace(later, podgroups=groups)
    d.raw.update({f"ns/{o['metadata']['name']}": o for o in objects if o["metadata"]["name"].startswith("b")})

    def plain_ab() -> Decisions:
        return Decisions(jobs={k: JobOutcome("q", "Running") for k in ("ns/a", "ns/b")})

    d.update(plain_ab())
    d.update(plain_ab())
    assert d.update(plain_ab()) == {} and d.status.steady_skipped == 2
    decisions = plain_ab()
    decisions.bindings = [Binding("ns/b-1", "n0")]
    written = d.update(decisions)
    assert written[GROUP.format("b")]["status"]["running"] == 2


def test_a_new_child_queue_is_written_into_its_parents_status() -> None:
    live = two_running_groups()
    live.c.put(queue("q2", parent="top"))
    written = live.cycle()
    assert written[QUEUE.replace("/q/", "/top/")]["childQueues"] == ["q", "q2"]


def test_the_capacity_gauge_follows_a_node_that_changed() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from kai.cluster.metrics import Metrics

    c = Cluster()
    c.scheduler.metrics = Metrics()
    for name in ("n0", "n1"):
        c.put(node(name, gpus=4))
    c.put(queue("q"))

    def gpus() -> float:
        text = c.scheduler.metrics.render().decode()  # type: ignore[union-attr]
        return next(
            s.value
            for f in text_string_to_metric_families(text)
            if f.name == "kai_cluster_capacity"
            for s in f.samples
            if s.labels.get("resource") == "nvidia_com_gpu"
        )

    c.scheduler.run_once()
    assert gpus() == 8
    c.put(node("n1", gpus=8))  # the same node, more GPUs: patched, its NodeInfo a new object
    c.scheduler.run_once()
    assert gpus() == 12
    c.scheduler.run_once()  # nothing changed: the same nodes
    assert gpus() == 12
