"""The cache's view is kept between cycles and updated only for the keys its stores' change logs name;
after every kind of change it must equal a view taken from scratch of the same objects, and the
scheduler must decide from it what it decides from a fresh build.

Each step below changes the cache the way the watch, the BindRequest writer (in-flight requests)
or the binder (`assume_bound`, request status) do, then checks the live cycle against a cache that
sees the same objects for the first time (`Cluster.cycle_matches_a_build_from_scratch`).
"""

from __future__ import annotations

from kai.cluster.cache import RESERVATION_NAMESPACE
from kai.cluster.reflector import Store
from tests.cluster.test_incremental_snapshot import Cluster, bind_request
from tests.scenario import node, pod, podgroup, queue


def test_a_change_log_names_each_key_changed_since_its_last_take() -> None:
    store = Store()
    store.put({"metadata": {"name": "a"}})
    log = store.changes()
    assert log.take() == {"a"}  # a new log starts with every key
    assert log.take() == set()
    store.put({"metadata": {"name": "b"}})
    store.remove({"metadata": {"name": "a"}})
    items, changed = store.items_and_changes(log)
    assert set(items) == {"b"} and changed == {"a", "b"}
    kept = store.get("b")
    store.replace([kept, {"metadata": {"name": "c"}}])  # a relist: b is the very same object, c is new
    assert log.take() == {"c"}
    store.replace([{"metadata": {"name": "c", "resourceVersion": "2"}}])
    assert log.take() == {"b", "c"}


def test_the_kept_view_follows_requests_pods_and_nodes_as_a_fresh_view_sees_them() -> None:
    c = Cluster()
    for i in range(3):
        c.put(node(f"n{i}", gpus=4))
    c.put(queue("q"))
    c.put(podgroup("g", "q", min_member=2))
    for i in range(2):
        c.put(pod(f"g-{i}", group="g", gpus=1))
    c.put(pod("solo", queue="q", gpus=1))
    c.put(pod("late", queue="q", gpus=1))
    first = c.cycle_matches_a_build_from_scratch()
    placed = {b.pod: b.node for b in first.bound}
    assert set(placed) == {"ns/g-0", "ns/g-1", "ns/solo", "ns/late"}

    # The writer's requests are in flight (no watch event yet): the pods are Binding, nothing is placed again.
    for key in ("ns/g-0", "ns/g-1", "ns/solo"):
        name = key.split("/")[1]
        c.cache.in_flight[key] = bind_request(name, placed[key], f"uid-{name}")
    second = c.cycle_matches_a_build_from_scratch()
    assert set(c.cache.view().binding) == {"ns/g-0", "ns/g-1", "ns/solo"}
    assert {b.pod for b in second.bound} == {"ns/late"}  # late was not in flight: placed again

    # The requests land in the store as the in-flight entries go; g-0 is bound (the binder's assumption),
    # solo's request fails, late's request names a node that goes away.
    for key in ("ns/g-0", "ns/g-1", "ns/solo"):
        name = key.split("/")[1]
        c.put(bind_request(name, placed[key], f"uid-{name}", failed=name == "solo"))
        c.cache.in_flight.pop(key)
    c.put(bind_request("late", "n2", "uid-late"))
    g0 = c.get("Pod", "ns/g-0")
    c.cache.assume_bound(g0, placed["ns/g-0"])
    c.delete("Node", "n2")
    third = c.cycle_matches_a_build_from_scratch()
    view = c.cache.view()
    assert set(view.binding) == {"ns/g-1"}
    assert sorted(b["metadata"]["name"] for b, _ in view.stale_bind_requests) == ["late", "solo"]
    assert {"ns/solo", "ns/late"} <= {b.pod for b in third.bound}  # Pending again: placed anew

    # The node comes back, and nothing else changes: late's request (unchanged itself) is live again.
    c.put(node("n2", gpus=4))
    c.cycle_matches_a_build_from_scratch()
    view = c.cache.view()
    assert view.binding == {"ns/g-1": placed["ns/g-1"], "ns/late": "n2"}
    assert [b["metadata"]["name"] for b, _ in view.stale_bind_requests] == ["solo"]

    # Solo's stale request is deleted, a reservation pod appears (left out of the view), g-1's pod is
    # deleted while Binding, and late's pod is replaced by another of the same name (its request names
    # the old pod's UID): no node changes, so only the requests of the pods that changed are judged again.
    c.delete("BindRequest", "ns/solo")
    c.put(pod("gpu-reservation-n0", node="n0", gpus=1, ns=RESERVATION_NAMESPACE))
    c.delete("Pod", "ns/g-1")
    replaced = pod("late", queue="q", gpus=1)
    replaced["metadata"]["uid"] = "uid-late-2"
    c.put(replaced)
    c.cycle_matches_a_build_from_scratch()
    view = c.cache.view()
    assert set(view.binding) == set()
    # g-1's request: its pod is gone; late's: it was made for the old pod (in the store's order)
    assert [b["metadata"]["name"] for b, _ in view.stale_bind_requests] == ["g-1", "late"]
    assert not any(o["metadata"].get("namespace") == RESERVATION_NAMESPACE for o in view.objects)

    # Two live requests for one pod (one named after another pod): the last in the store's order counts.
    c.delete("BindRequest", "ns/late")
    c.put(bind_request("late", "n0", "uid-late-2"))
    other = bind_request("late-copy", "n1", "uid-late-2")
    other["spec"]["podName"] = "late"
    c.put(other)
    c.cycle_matches_a_build_from_scratch()
    assert c.cache.view().binding == {"ns/late": "n1"}


def test_a_patched_snapshot_equals_a_build_from_scratch_after_each_kind_of_delta() -> None:
    c = Cluster()
    for i in range(4):
        c.put(node(f"n{i}", gpus=4))
    c.put(queue("q"))
    for g in ("a", "b", "c"):
        c.put(podgroup(g, "q", min_member=2))
        for i in range(2):
            c.put(pod(f"{g}-{i}", group=g, gpus=1))
    c.put(pod("lone", queue="q", cpu="1"))  # no PodGroup: an implicit group of its own
    first = c.cycle_matches_a_build_from_scratch()
    placed = {b.pod: b.node for b in first.bound}
    assert len(placed) == 7
    incremental = c.scheduler.incremental

    def patched_step() -> object:
        before = incremental.patched
        report = c.cycle_matches_a_build_from_scratch()
        assert incremental.patched == before + 1, "built from scratch"
        return report

    # The binder binds a's pods (the pods run), b's are Binding (requests in), c's request is in flight.
    for name in ("a-0", "a-1"):
        p = c.get("Pod", f"ns/{name}")
        p["spec"]["nodeName"] = placed[f"ns/{name}"]
        p["status"]["phase"] = "Running"
        c.put(p)
    for name in ("b-0", "b-1"):
        c.put(bind_request(name, placed[f"ns/{name}"], f"uid-{name}"))
    c.cache.in_flight["ns/c-0"] = bind_request("c-0", placed["ns/c-0"], "uid-c-0")
    second = patched_step()
    assert {b.pod for b in second.bound} == {"ns/c-1", "ns/lone"}  # placed again: no request for them

    # A node's heartbeat (same name), a PodGroup's status, the lone pod changes, a new pod joins b.
    n0 = c.get("Node", "n0")
    n0["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:01:00Z"
    c.put(n0)
    a = c.get("PodGroup", "ns/a")
    a["status"] = {"phase": "Running", "running": 2}
    c.put(a)
    lone = c.get("Pod", "ns/lone")
    lone["metadata"]["labels"]["team"] = "x"
    c.put(lone)
    c.put(pod("b-2", group="b", gpus=1))
    third = patched_step()
    assert "ns/b-2" in {b.pod for b in third.bound}

    # Two pods leave a and b for c (their annotation changes), a pod of b is deleted, c's request lands.
    for name in ("a-1", "b-2"):
        moved = c.get("Pod", f"ns/{name}")
        moved["metadata"]["annotations"]["pod-group-name"] = "c"
        c.put(moved)
    c.delete("Pod", "ns/b-0")
    c.cache.in_flight.pop("ns/c-0")
    c.put(bind_request("c-0", placed["ns/c-0"], "uid-c-0"))
    patched_step()
    assert c.scheduler.last_snapshot is not None
    # (in the cache's order, as a build from scratch attaches them: a-1 was created first, b-2 last)
    in_c = [p.key for p in c.scheduler.last_snapshot.podgroups["ns/c"].pods]
    assert in_c == ["ns/a-1", "ns/c-0", "ns/c-1", "ns/b-2"]

    # Nothing changes but the time: the same snapshot again, at the new time.
    c.now += 30
    again = c.cycle_matches_a_build_from_scratch()
    assert again.now == c.now

    # A node alone changes (a label, an allocatable): the nodes come from the small build.
    n3 = c.get("Node", "n3")
    n3["metadata"]["labels"] = {"zone": "b"}
    n3["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    c.put(n3)
    patched_step()
    assert c.scheduler.last_snapshot is not None
    assert next(n for n in c.scheduler.last_snapshot.nodes if n.name == "n3").labels == {"zone": "b"}

    # The queue's status is written (as the status updater does): the queues read the same, patched.
    q = c.get("Queue", "q")
    q["status"] = {"allocated": {"nvidia.com/gpu": "5"}}
    c.put(q)
    c.put(pod("a-2", group="a", gpus=1))
    patched_step()

    # A queue changes: built from scratch (a pod group's conversion reads its queue).
    before = incremental.full
    c.put(queue("q", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1}))
    c.cycle_matches_a_build_from_scratch()
    assert incremental.full == before + 1


def test_a_cycle_with_nothing_changed_after_one_that_decided_nothing_is_not_run_again() -> None:
    c = Cluster()
    c.put(node("n0", gpus=4))
    c.put(queue("q"))
    c.put(podgroup("g", "q"))
    c.put(pod("g-0", group="g", gpus=1, node="n0"))  # running: nothing to decide
    c.put(pod("big", queue="q", gpus=8))  # fits nowhere: pending, nothing bound
    first = c.cycle_matches_a_build_from_scratch()
    assert not first.bound
    runner = c.scheduler.runner
    ran = runner.ran
    c.now += 5
    again = c.cycle_matches_a_build_from_scratch()  # the same view: answered from the last cycle
    assert (runner.ran, runner.skipped) == (ran, 1)
    assert again.decisions == first.decisions
    c.put(node("n1", gpus=8))  # a change: the cycle runs, and the big pod fits now
    third = c.cycle_matches_a_build_from_scratch()
    assert runner.ran == ran + 1
    assert {b.pod for b in third.bound} == {"ns/big"}


def test_a_binding_copy_is_kept_for_a_request_to_the_same_place_and_made_again_for_another() -> None:
    c = Cluster()
    for i in range(2):
        c.put(node(f"n{i}", gpus=4))
    c.put(queue("q"))
    c.put(pod("p", queue="q", gpus=1))
    c.put(pod("other", queue="q", gpus=1))
    c.cycle_matches_a_build_from_scratch()
    # The writer's request is in flight, then stored (the in-flight entry goes): the same place.
    c.cache.in_flight["ns/p"] = bind_request("p", "n0", "uid-p")
    c.cycle_matches_a_build_from_scratch()
    copy = c.cache.view().copies["ns/p"]
    c.put(bind_request("p", "n0", "uid-p"))
    c.cache.in_flight.pop("ns/p")
    c.cycle_matches_a_build_from_scratch()
    view = c.cache.view()
    assert view.copies["ns/p"] is copy and "ns/p" not in (view.changed_pods or ())
    # A request of the same pod to another node (the first deleted): the copy follows it.
    c.delete("BindRequest", "ns/p")
    c.put(bind_request("p", "n1", "uid-p"))
    c.cycle_matches_a_build_from_scratch()
    assert c.cache.view().copies["ns/p"]["spec"]["nodeName"] == "n1"


def test_a_podgroup_changed_in_its_status_alone_keeps_its_group_and_any_other_change_rebuilds_it() -> None:
    c = Cluster()
    c.put(node("n0", gpus=4))
    c.put(queue("q"))
    c.put(podgroup("g", "q", min_member=1))
    c.put(pod("g-0", group="g", gpus=1, node="n0"))
    c.cycle_matches_a_build_from_scratch()
    group = c.scheduler.last_snapshot.podgroups["ns/g"]  # type: ignore[union-attr]
    written = c.get("PodGroup", "ns/g")
    written["status"] = {"phase": "Running", "running": 1}  # the status updater's write comes back
    c.put(written)
    c.cycle_matches_a_build_from_scratch()
    assert c.scheduler.last_snapshot.podgroups["ns/g"] is group  # type: ignore[union-attr]
    for change in ("annotation", "spec"):
        obj = c.get("PodGroup", "ns/g")
        if change == "annotation":
            obj["metadata"].setdefault("annotations", {})["kai.scheduler/last-start-timestamp"] = "2025-12-31T00:00:00Z"
        else:
            obj["spec"]["minMember"] = 2
        c.put(obj)
        c.cycle_matches_a_build_from_scratch()
        rebuilt = c.scheduler.last_snapshot.podgroups["ns/g"]  # type: ignore[union-attr]
        assert rebuilt is not group
        group = rebuilt


def test_a_cycle_on_a_snapshot_that_reads_as_the_last_one_is_answered_from_it_and_any_real_change_runs() -> None:
    c = Cluster()
    for i in range(2):
        c.put(node(f"n{i}", gpus=1))
    c.put(queue("q"))
    for name in ("a", "b", "c"):
        c.put(pod(name, queue="q", gpus=1))
    c.now += 1
    first = c.cycle_matches_a_build_from_scratch()
    placed = {b.pod: b.node for b in first.bound}
    assert len(placed) == 2  # two GPUs for three pods
    (waiting,) = {"ns/a", "ns/b", "ns/c"} - placed.keys()
    for key, node_name in placed.items():  # the requests land: both pods Binding; nothing else fits
        name = key.split("/")[1]
        c.put(bind_request(name, node_name, f"uid-{name}"))
    c.now += 1
    assert not c.cycle_matches_a_build_from_scratch().bound
    runner, incremental = c.scheduler.runner, c.scheduler.incremental
    ran, skipped = runner.ran, runner.skipped

    # The binder binds each pod where its request said, the pods start, the requests succeed: the
    # snapshot reads as the last one (the pods' objects differ), so the last cycle's decisions stand.
    for key, node_name in placed.items():
        name = key.split("/")[1]
        bound = c.get("Pod", key)
        bound["spec"]["nodeName"] = node_name
        bound["status"]["phase"] = "Running"
        c.put(bound)
        done = c.get("BindRequest", key)
        done["status"] = {"phase": "Succeeded"}
        c.put(done)
        beat = c.get("Node", node_name)  # the node's heartbeat: nothing the builder reads
        beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:02:00Z"
        c.put(beat)
        c.now += 1
        nodes = c.scheduler.last_snapshot.nodes  # type: ignore[union-attr]
        assert not c.cycle_matches_a_build_from_scratch().bound
        assert incremental.unchanged and (runner.ran, runner.skipped) == (ran, skipped + 1)
        assert c.scheduler.last_snapshot.nodes is nodes  # type: ignore[union-attr]  # the very list, kept
        skipped += 1

    # A node cordoned: the cycle runs (nothing fits either way).
    key, node_name = next(iter(placed.items()))
    (other,) = set(placed.values()) - {node_name}
    cordoned = c.get("Node", other)
    cordoned["spec"]["unschedulable"] = True
    c.put(cordoned)
    c.now += 1
    assert not c.cycle_matches_a_build_from_scratch().bound
    assert not incremental.unchanged and runner.ran == ran + 1
    ran += 1

    # A pod that finishes frees its GPU: the cycle runs, and the waiting pod is placed on that node.
    finished = c.get("Pod", key)
    finished["status"]["phase"] = "Succeeded"
    c.put(finished)
    c.now += 1
    report = c.cycle_matches_a_build_from_scratch()
    assert not incremental.unchanged and runner.ran == ran + 1
    assert [(b.pod, b.node) for b in report.bound] == [(waiting, node_name)]
