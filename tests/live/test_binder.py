"""The binder alone (as `kai binder` runs it) on hand-written BindRequests: it binds what fits, refuses
what does not fit the node at bind time, and never moves a bound pod."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kai.cluster.cache import CacheView, ClusterCache
from kai.cluster.kube import BIND_REQUESTS, PODS, Kube
from kai.devcluster.kwok_stages import COMPLETE_AFTER_ANNOTATION
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import cleanup, create, fresh_nodes, pod, pods, scheduler, wait

OTHER = "someone-else"  # a scheduler name nobody runs: the pods wait for our BindRequests


@pytest.fixture
def kube(live_cluster: LiveCluster) -> Kube:
    return Kube.from_kubeconfig(str(live_cluster.kubeconfig))


@pytest.fixture
def nodes(live_cluster: LiveCluster, kube: Kube, namespace: str) -> Iterator[list[str]]:
    yield fresh_nodes(live_cluster, 2, gpus=4)
    cleanup(kube, namespace)


def bind_request(kube: Kube, namespace: str, pod_name: str, node: str) -> dict[str, Any]:
    p = pods(kube, namespace)[pod_name]
    body = {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {
            "name": pod_name,
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": p["metadata"]["uid"]}],
        },
        "spec": {
            "podName": pod_name,
            "selectedNode": node,
            "receivedResourceType": "Regular",
            "receivedGPU": {"count": 1, "portion": "1.00"},
        },
    }
    return kube.post(BIND_REQUESTS.path(namespace), body)


def phase(kube: Kube, namespace: str, name: str) -> tuple[str, str]:
    status = kube.get(BIND_REQUESTS.path(namespace, name)).get("status") or {}
    return status.get("phase", ""), status.get("reason", "")


def test_binds_what_fits_and_refuses_what_does_not_fit_now(kube: Kube, namespace: str, nodes: list[str]) -> None:
    for i in range(3):
        create(kube, pod(f"p{i}", namespace, OTHER, gpus=2))
    with scheduler(kube, OTHER, scheduler=False, binder=True):
        bind_request(kube, namespace, "p0", nodes[0])
        bind_request(kube, namespace, "p1", nodes[0])
        wait("two binds", lambda: phase(kube, namespace, "p0")[0] == "Succeeded" == phase(kube, namespace, "p1")[0])
        bind_request(kube, namespace, "p2", nodes[0])  # the node's 4 GPUs are taken
        wait("a refusal", lambda: phase(kube, namespace, "p2")[0] == "Failed")
        reason = phase(kube, namespace, "p2")[1]
        assert "does not fit" in reason and "nvidia.com/gpu" in reason, reason
        live = pods(kube, namespace)
        assert live["p0"]["spec"]["nodeName"] == live["p1"]["spec"]["nodeName"] == nodes[0]
        assert not live["p2"]["spec"].get("nodeName")
        failed = kube.get(BIND_REQUESTS.path(namespace, "p2"))
        assert failed["status"]["failedAttempts"] == 1


def test_a_pod_that_finished_on_the_node_no_longer_takes_its_resources(
    kube: Kube, namespace: str, nodes: list[str]
) -> None:
    # p0 runs 5 s, then succeeds (KWOK's stage); p1's bind reads the node while p0 runs; p2 fits only once
    # p0 is done (the node has 4 GPUs, each pod asks 2)
    create(kube, pod("p0", namespace, OTHER, gpus=2, annotations={COMPLETE_AFTER_ANNOTATION: "5s"}))
    for name in ("p1", "p2"):
        create(kube, pod(name, namespace, OTHER, gpus=2))
    with scheduler(kube, OTHER, scheduler=False, binder=True):
        bind_request(kube, namespace, "p0", nodes[0])
        wait("p0's bind", lambda: phase(kube, namespace, "p0")[0] == "Succeeded")
        bind_request(kube, namespace, "p1", nodes[0])
        wait("p1's bind", lambda: phase(kube, namespace, "p1")[0] == "Succeeded")
        assert pods(kube, namespace)["p0"]["status"].get("phase") != "Succeeded", "p0 finished too soon"
        wait("p0 to finish", lambda: pods(kube, namespace)["p0"]["status"].get("phase") == "Succeeded", 30)
        bind_request(kube, namespace, "p2", nodes[0])
        wait("p2's bind", lambda: phase(kube, namespace, "p2")[0] in ("Succeeded", "Failed"))
        assert phase(kube, namespace, "p2") == ("Succeeded", ""), phase(kube, namespace, "p2")
        assert pods(kube, namespace)["p2"]["spec"]["nodeName"] == nodes[0]


def test_a_bound_pod_is_never_moved(kube: Kube, namespace: str, nodes: list[str]) -> None:
    create(kube, pod("p", namespace, OTHER, gpus=1))
    with scheduler(kube, OTHER, scheduler=False, binder=True):
        bind_request(kube, namespace, "p", nodes[0])
        wait("the bind", lambda: phase(kube, namespace, "p")[0] == "Succeeded")
        kube.delete(BIND_REQUESTS.path(namespace, "p"))
        wait("the request to go", lambda: not kube.get(BIND_REQUESTS.path(namespace))["items"])
        bind_request(kube, namespace, "p", nodes[1])  # a second request, to another node
        wait("a refusal", lambda: phase(kube, namespace, "p")[0] == "Failed")
        assert "already bound to " + nodes[0] in phase(kube, namespace, "p")[1]
        assert pods(kube, namespace)["p"]["spec"]["nodeName"] == nodes[0]


def test_a_request_for_a_pod_that_is_gone_fails_and_the_scheduler_would_drop_it(
    kube: Kube, namespace: str, nodes: list[str]
) -> None:
    create(kube, pod("p", namespace, OTHER, gpus=1))
    create(kube, pod("q", namespace, OTHER, gpus=1))
    bind_request(kube, namespace, "p", nodes[0])
    bind_request(kube, namespace, "q", nodes[0])
    kube.delete(PODS.path(namespace, "p"), query={"gracePeriodSeconds": 0})
    cache = ClusterCache(kube).start()
    try:
        assert cache.wait_synced(10)
        view: CacheView = wait("the view", lambda: (v := cache.view()) and f"{namespace}/q" in v.binding and v)
        stale = {
            br["metadata"]["name"]: why
            for br, why in view.stale_bind_requests
            if br["metadata"]["namespace"] == namespace
        }
        assert stale == {"p": "its pod is gone"}
        shown = next(
            o
            for o in view.objects
            if o["kind"] == "Pod" and o["metadata"]["name"] == "q" and o["metadata"]["namespace"] == namespace
        )
        assert shown["spec"]["nodeName"] == nodes[0], "a pod with a live BindRequest is presented as bound"
        assert not pods(kube, namespace)["q"]["spec"].get("nodeName"), "while the object itself is untouched"
    finally:
        cache.stop()
