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
