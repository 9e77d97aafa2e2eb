"""The reflector against the real API server: list, watch, re-watch, relist on 410 Gone, backoff."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kai.cluster.kube import CONFIGMAPS, QUEUES, ApiError, Kube, iter_lines
from kai.cluster.reflector import Backoff, Reflector, Store
from kai.devcluster.controlplane import ControlPlane
from kai.devcluster.live import LiveCluster


@pytest.fixture(scope="module")
def kube(live_cluster: LiveCluster) -> Kube:
    return Kube.from_kubeconfig(str(live_cluster.kubeconfig))


def _cm(name: str, value: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        with self.lock:
            self.events.append((kind, obj["metadata"]["name"]))

    def seen(self, kind: str, name: str) -> bool:
        with self.lock:
            return (kind, name) in self.events


def test_list_then_watch_keeps_the_store_equal_to_the_server(
    kube: Kube, live_cluster: LiveCluster, namespace: str
) -> None:
    for i in range(3):
        kube.post(CONFIGMAPS.path(namespace), _cm(f"pre-{i}"))
    rec = Recorder()
    r = Reflector(kube, CONFIGMAPS, namespace=namespace, on_event=rec, page_size=2).start()
    try:
        assert r.wait_synced(10)
        assert sorted(r.store.keys()) == [f"{namespace}/pre-{i}" for i in range(3)]
        assert r.store.get(f"{namespace}/pre-0")["kind"] == "ConfigMap"  # list items get their kind
        kube.post(CONFIGMAPS.path(namespace), _cm("new"))
        kube.patch(CONFIGMAPS.path(namespace, "pre-1"), {"data": {"v": "2"}})
        kube.delete(CONFIGMAPS.path(namespace, "pre-2"))
        live_cluster.wait_for("watch events", lambda: rec.seen("DELETED", "pre-2") and rec.seen("ADDED", "new"))
        assert rec.seen("MODIFIED", "pre-1")
        assert r.store.get(f"{namespace}/pre-1")["data"] == {"v": "2"}
        assert f"{namespace}/pre-2" not in r.store
        assert r.lists == 1 and r.gone == 0
    finally:
        r.stop()


def test_managed_fields_are_left_out_of_the_store_only_when_asked(
    kube: Kube, live_cluster: LiveCluster, namespace: str
) -> None:
    kube.post(CONFIGMAPS.path(namespace), _cm("listed"))
    plain = Reflector(kube, CONFIGMAPS, namespace=namespace).start()
    lean = Reflector(kube, CONFIGMAPS, namespace=namespace, drop_managed_fields=True).start()
    try:
        assert plain.wait_synced(10) and lean.wait_synced(10)
        kube.post(CONFIGMAPS.path(namespace), _cm("watched"))
        for name in ("listed", "watched"):
            key = f"{namespace}/{name}"
            live_cluster.wait_for(name, lambda key=key: key in plain.store and key in lean.store)
            assert plain.store.get(key)["metadata"]["managedFields"]  # the API server keeps them
            assert "managedFields" not in lean.store.get(key)["metadata"]
            assert lean.store.get(key)["data"] == {"v": "1"}
    finally:
        plain.stop()
        lean.stop()


def test_a_watch_the_server_ends_is_resumed_without_a_relist(
    kube: Kube, live_cluster: LiveCluster, namespace: str
) -> None:
    r = Reflector(kube, CONFIGMAPS, namespace=namespace, watch_timeout=1).start()
    try:
        assert r.wait_synced(10)
        live_cluster.wait_for("a second watch", lambda: r.watches >= 3, timeout=15)
        kube.post(CONFIGMAPS.path(namespace), _cm("late"))
        live_cluster.wait_for("the late object", lambda: f"{namespace}/late" in r.store)
        assert r.lists == 1, "a timed-out watch resumes from its resourceVersion"
    finally:
        r.stop()


@pytest.fixture(scope="module")
def etcd_watched(controlplane_binaries: dict[str, Path]) -> Iterator[tuple[ControlPlane, Kube]]:
    """A second control plane whose API server watches ConfigMaps in etcd directly (no watch cache),
    so that compacting etcd makes an old resourceVersion answer 410 Gone, as on a busy cluster."""
    cp = ControlPlane(
        binaries=controlplane_binaries, kwok=False, extra_apiserver_args=["--watch-cache-sizes=configmaps#0"]
    )
    cp.start(timeout=120)
    try:
        yield cp, Kube.from_kubeconfig(str(cp.kubeconfig))
    finally:
        cp.stop()


def _compact_etcd(cp: ControlPlane) -> int:
    def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{cp.etcd_port}{path}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    revision = int(call("/v3/kv/range", {"key": "YQ=="})["header"]["revision"])
    call("/v3/kv/compaction", {"revision": revision, "physical": True})
    return revision


def test_410_gone_relists_and_reports_what_changed_meanwhile(etcd_watched: tuple[ControlPlane, Kube]) -> None:
    cp, kube = etcd_watched
    ns = "gone-test"
    kube.post("/api/v1/namespaces", {"metadata": {"name": ns}})
    kube.post(CONFIGMAPS.path(ns), _cm("stays"))
    kube.post(CONFIGMAPS.path(ns), _cm("goes"))
    rec = Recorder()
    r = Reflector(kube, CONFIGMAPS, namespace=ns, on_event=rec).start()
    assert r.wait_synced(10)
    r.stop()
    stale = r.resource_version
    # While the reflector is away: one object goes, one comes, one changes; then etcd compacts
    # the history, so the reflector's resourceVersion no longer exists.
    kube.delete(CONFIGMAPS.path(ns, "goes"))
    kube.post(CONFIGMAPS.path(ns), _cm("comes"))
    kube.patch(CONFIGMAPS.path(ns, "stays"), {"data": {"v": "9"}})
    assert _compact_etcd(cp) > int(stale)
    with pytest.raises(ApiError) as gone:  # what the server says to a watch from there
        resp = kube.stream(CONFIGMAPS.path(ns), {"watch": "true", "resourceVersion": stale, "timeoutSeconds": 2})
        for line in iter_lines(resp):
            event = json.loads(line)
            if event["type"] == "ERROR":
                raise ApiError(event["object"]["code"], event["object"]["reason"])
    assert gone.value.status == 410
    r.start()
    try:
        deadline = time.monotonic() + 15
        while r.lists < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.lists == 2 and r.gone == 1, r.last_error
        assert sorted(r.store.keys()) == [f"{ns}/comes", f"{ns}/stays"]
        assert r.store.get(f"{ns}/stays")["data"] == {"v": "9"}
        assert rec.seen("DELETED", "goes") and rec.seen("ADDED", "comes") and rec.seen("MODIFIED", "stays")
        kube.post(CONFIGMAPS.path(ns), _cm("after"))
        deadline = time.monotonic() + 10
        while f"{ns}/after" not in r.store and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"{ns}/after" in r.store, "watching again after the relist"
    finally:
        r.stop()


def test_cluster_scoped_custom_resources(kube: Kube, live_cluster: LiveCluster) -> None:
    name = "reflector-test-queue"
    body = {"apiVersion": QUEUES.api_version, "kind": "Queue", "metadata": {"name": name}, "spec": {"resources": {}}}
    r = Reflector(kube, QUEUES, label_selector="reflector-test").start()
    plain = Reflector(kube, QUEUES).start()
    try:
        assert r.wait_synced(10) and plain.wait_synced(10)
        kube.post(QUEUES.path(), {**body, "metadata": {"name": name, "labels": {"reflector-test": "x"}}})
        live_cluster.wait_for("the queue", lambda: name in r.store and name in plain.store)
        kube.delete(QUEUES.path(name=name))
        live_cluster.wait_for("the queue to go", lambda: name not in r.store)
    finally:
        r.stop()
        plain.stop()


def test_an_unreachable_server_is_retried_with_backoff_until_stopped() -> None:
    from kubernetes import client as k8s

    config = k8s.Configuration()
    config.host = "https://127.0.0.1:9"  # nothing listens on the discard port
    kube = Kube(k8s.ApiClient(config), timeout=1)
    r = Reflector(kube, CONFIGMAPS, backoff=Backoff(0.01, 0.05)).start()
    try:
        assert not r.wait_synced(1.0)
        assert r.errors >= 2, "retried several times within a second"
        with pytest.raises(ApiError) as info:
            kube.get("/api/v1/namespaces")
        assert info.value.status == 0
    finally:
        r.stop()
    assert r.stopped


def test_store_replace_reports_the_difference() -> None:
    store = Store()
    a = {"metadata": {"name": "a", "resourceVersion": "1"}}
    b = {"metadata": {"name": "b", "resourceVersion": "1"}}
    assert [e[0] for e in store.replace([a, b])] == ["ADDED", "ADDED"]
    a2 = {"metadata": {"name": "a", "resourceVersion": "2"}}
    events = store.replace([a2])
    assert sorted((e[0], e[1]["metadata"]["name"]) for e in events) == [("DELETED", "b"), ("MODIFIED", "a")]
    assert store.version == 2 and len(store) == 1


def test_bookmarks_advance_the_resource_version_and_error_410_means_relist() -> None:
    """The server sends bookmarks about once a minute; what the reflector does with one, without waiting."""
    from kubernetes import client as k8s

    events: list[str] = []
    r = Reflector(Kube(k8s.ApiClient(k8s.Configuration())), CONFIGMAPS, on_event=lambda k, o, old: events.append(k))
    r.resource_version = "10"
    r._handle({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": "42"}}})
    assert r.resource_version == "42" and len(r.store) == 0 and events == []
    r._handle({"type": "ADDED", "object": {"metadata": {"name": "a", "namespace": "n", "resourceVersion": "43"}}})
    assert r.resource_version == "43" and events == ["ADDED"] and r.store.get("n/a")["kind"] == "ConfigMap"
    with pytest.raises(ApiError) as gone:
        r._handle({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})
    assert gone.value.status == 410
