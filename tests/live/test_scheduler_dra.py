"""Dynamic Resource Allocation against the real API server (resource.k8s.io/v1, served by
kube-apiserver 1.34) with KWOK nodes and hand-made ResourceSlices: the scheduler places a pod with a
claim on the node whose devices fit, the binder writes the claim's `status.allocation` and
`reservedFor` and then binds; a pod of a template gets its own claim (made by the binder, as no
resource-claim controller runs here); a pod whose claim does not exist stays Pending, its why-pending
condition naming the claim."""

from __future__ import annotations

import contextlib
from typing import Any

from kai.cluster.kube import (
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    ApiError,
    Kube,
)
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    condition,
    create,
    fresh_nodes,
    pod,
    pods,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)

DRIVER = "gpu.nvidia.com"


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def resource_slice(node: str, count: int) -> dict[str, Any]:
    devices = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"}}, "capacity": {"memory": {"value": "80Gi"}}}
        for i in range(count)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim_spec(count: int = 1) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": count}}
    return {"devices": {"requests": [request]}}


def claiming(name: str, namespace: str, scheduler_name: str, q: str, **entry: str) -> dict[str, Any]:
    obj = pod(name, namespace, scheduler_name, queue_name=q)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", **entry}]
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return obj


def test_the_binder_allocates_the_claim_and_binds_where_the_devices_are(
    live_cluster: LiveCluster, namespace: str
) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    kube.get("/apis/resource.k8s.io/v1")  # the dev control plane serves the DRA API
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q))
    plain, gpu_node = fresh_nodes(live_cluster, 2, gpus=0)
    made: list[tuple[Any, str | None, str]] = []

    def make(resource: Any, obj: dict[str, Any]) -> dict[str, Any]:
        ns = obj["metadata"].get("namespace")
        created = kube.post(resource.path(ns), obj)
        made.append((resource, ns, obj["metadata"]["name"]))
        return created

    try:
        with contextlib.suppress(ApiError):
            make(DEVICE_CLASSES, device_class())
        make(RESOURCE_SLICES, resource_slice(gpu_node, 2))
        shared = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": namespace, "labels": {"kai.scheduler/queue": q}},
            "spec": claim_spec(),
        }
        make(RESOURCE_CLAIMS, shared)
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": namespace},
            "spec": {"spec": claim_spec()},
        }
        make(RESOURCE_CLAIM_TEMPLATES, template)
        create(kube, claiming("a", namespace, name, q, resourceClaimName="shared"))
        create(kube, claiming("b", namespace, name, q, resourceClaimName="shared"))
        create(kube, claiming("t", namespace, name, q, resourceClaimTemplateName="one-gpu"))
        create(kube, claiming("lost", namespace, name, q, resourceClaimName="nowhere"))
        with scheduler(kube, name):
            wait("three pods bound", lambda: {"a", "b", "t"} <= set(bound(kube, namespace)), timeout=60)
            placed = bound(kube, namespace)
            assert placed["a"] == placed["b"] == placed["t"] == gpu_node != plain
            claim = kube.get(RESOURCE_CLAIMS.path(namespace, "shared"))
            results = claim["status"]["allocation"]["devices"]["results"]
            assert len(results) == 1 and results[0]["driver"] == DRIVER and results[0]["pool"] == gpu_node
            assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["a", "b"]
            terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
            assert terms[0]["matchFields"][0]["values"] == [gpu_node]
            mine = kube.get(RESOURCE_CLAIMS.path(namespace, "t-gpu"))  # made from the template for pod t
            assert [r["name"] for r in mine["status"]["reservedFor"]] == ["t"]
            devices = {r["device"] for r in mine["status"]["allocation"]["devices"]["results"]}
            assert devices and devices.isdisjoint({results[0]["device"]})  # the node's other GPU
            assert pods(kube, namespace)["t"]["status"]["resourceClaimStatuses"] == [
                {"name": "gpu", "resourceClaimName": "t-gpu"}
            ]
            pending = wait(
                "the why-pending condition",
                lambda: condition(p := pods(kube, namespace)["lost"], "PodScheduled") and p,
            )
            assert 'resourceclaim "nowhere" not found' in condition(pending, "PodScheduled")["message"]  # type: ignore[index]
            assert "lost" not in bound(kube, namespace)
    finally:
        cleanup(kube, namespace, [q])
        for resource, ns, obj_name in reversed(made):
            with contextlib.suppress(ApiError):
                kube.delete(resource.path(ns, obj_name))
        with contextlib.suppress(ApiError):
            kube.delete(RESOURCE_CLAIMS.path(namespace), query={"gracePeriodSeconds": 0})
