"""GPU sharing live: a fractional pod gets a BindRequest of type Fraction, a reservation pod and its GPU wiring."""

from __future__ import annotations

from kai.cluster.binder import RESERVE_UUID_ANNOTATION
from kai.cluster.cache import RESERVATION_NAMESPACE
from kai.cluster.kube import BIND_REQUESTS, CONFIGMAPS, PODS, Kube
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    create,
    fresh_nodes,
    pod,
    pods,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)


def test_a_fractional_pod_and_its_reservation_pod(live_cluster: LiveCluster, namespace: str) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q))
    (node,) = fresh_nodes(live_cluster, 1, gpus=2)
    try:
        with scheduler(kube, name):
            create(kube, pod("half-a", namespace, name, queue_name=q, annotations={"gpu-fraction": "0.5"}))
            wait("the first fractional pod to be bound", lambda: "half-a" in bound(kube, namespace))
            create(kube, pod("half-b", namespace, name, queue_name=q, annotations={"gpu-fraction": "0.5"}))
            create(kube, pod("whole", namespace, name, queue_name=q, gpus=1))
            placed = wait("all three bound", lambda: len(bound(kube, namespace)) == 3 and bound(kube, namespace))
            assert set(placed.values()) == {node}
            brs = {b["metadata"]["name"]: b for b in kube.get(BIND_REQUESTS.path(namespace))["items"]}
            a, b = brs["half-a"]["spec"], brs["half-b"]["spec"]
            assert a["receivedResourceType"] == "Fraction" and a["receivedGPU"] == {"count": 1, "portion": "0.50"}
            assert len(a["selectedGPUGroups"]) == 1
            assert b["selectedGPUGroups"] == a["selectedGPUGroups"], "gpupack: the second half shares the GPU"
            assert brs["whole"]["spec"]["receivedResourceType"] == "Regular"
            group = a["selectedGPUGroups"][0]
            live = pods(kube, namespace)
            for pname in ("half-a", "half-b"):
                meta = live[pname]["metadata"]
                assert meta["labels"]["runai-gpu-group"] == group
                assert meta["annotations"]["received-resource-type"] == "Fraction"
            reservations = kube.get(PODS.path(RESERVATION_NAMESPACE))["items"]
            mine = [r for r in reservations if r["spec"].get("nodeName") == node]
            assert len(mine) == 1, "one reservation pod per shared GPU"
            reservation = mine[0]
            assert reservation["metadata"]["labels"]["runai-gpu-group"] == group
            assert reservation["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
            gpu_uuid = reservation["metadata"]["annotations"][RESERVE_UUID_ANNOTATION]
            cm = kube.get(CONFIGMAPS.path(namespace, "half-a-shared-gpu-0"))
            assert cm["data"]["NVIDIA_VISIBLE_DEVICES"] == gpu_uuid and cm["data"]["GPU_PORTION"] == "0.50"
            # The node has 2 GPUs: one shared by the halves (held by the reservation pod), one whole.
            create(kube, pod("one-more", namespace, name, queue_name=q, gpus=1))
            wait(
                "the extra whole-GPU pod to be explained, not bound",
                lambda: any(
                    c.get("reason") == "Unschedulable"
                    for c in (pods(kube, namespace)["one-more"].get("status") or {}).get("conditions") or []
                ),
            )
            assert "one-more" not in bound(kube, namespace)
    finally:
        cleanup(kube, namespace, [q])
        kube.delete(PODS.path(RESERVATION_NAMESPACE), query={"gracePeriodSeconds": 0})
