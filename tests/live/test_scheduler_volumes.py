"""Volumes, live: the scheduler watches PersistentVolumeClaims, PersistentVolumes and StorageClasses,
so a pod whose claim does not exist stays Pending with the reason (as kube-scheduler and KAI), and
schedules once the claim is there: bound to a volume, or of a WaitForFirstConsumer class (provisioned
where the pod goes). No volume controller runs here: the claims are written as it would leave them."""

from __future__ import annotations

import contextlib
from typing import Any

from kai.cluster.kube import PVCS, PVS, STORAGE_CLASSES, ApiError, Kube
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


def claiming(name: str, namespace: str, scheduler_name: str, queue_name: str, claim: str) -> dict[str, Any]:
    obj = pod(name, namespace, scheduler_name, queue_name=queue_name, gpus=1)
    obj["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return obj


def claim(name: str, namespace: str, *, storage_class: str, volume: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": storage_class,
    }
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def why_pending(kube: Kube, namespace: str, name: str) -> str:
    cond = condition(pods(kube, namespace)[name], "PodScheduled")
    return str(cond.get("message") or "") if cond and cond.get("reason") == "Unschedulable" else ""


def test_a_pod_naming_a_missing_claim_waits_with_the_reason_and_schedules_once_the_claim_exists(
    live_cluster: LiveCluster, namespace: str
) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q, late, fixed, pv = f"q-{name}", f"late-{name}", f"fixed-{name}", f"pv-{name}"
    create(kube, queue(q))
    fresh_nodes(live_cluster, 1, gpus=8)
    create(kube, claiming("waits", namespace, name, q, "late-data"))
    create(kube, claiming("bound", namespace, name, q, "bound-data"))
    create(kube, pod("plain", namespace, name, queue_name=q, gpus=1))
    try:
        with scheduler(kube, name):
            wait("the plain pod to be bound", lambda: "plain" in bound(kube, namespace))
            for pod_name, claim_name in (("waits", "late-data"), ("bound", "bound-data")):
                message = wait(
                    f"{pod_name}'s why-pending condition", lambda p=pod_name: why_pending(kube, namespace, p)
                )
                assert f'persistentvolumeclaim "{claim_name}" not found' in message
            assert not {"waits", "bound"} & set(bound(kube, namespace))

            # A WaitForFirstConsumer class: the claim is provisioned where the pod lands.
            kube.post(
                STORAGE_CLASSES.path(),
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": late},
                    "provisioner": "csi.example.com",
                    "volumeBindingMode": "WaitForFirstConsumer",
                },
            )
            kube.post(PVCS.path(namespace), claim("late-data", namespace, storage_class=late))
            wait("the pod with the late-binding claim to be bound", lambda: "waits" in bound(kube, namespace))

            # A claim bound to a volume any node can reach (an Immediate class: bound before the pod).
            kube.post(
                STORAGE_CLASSES.path(),
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": fixed},
                    "provisioner": "csi.example.com",
                    "volumeBindingMode": "Immediate",
                },
            )
            kube.post(
                PVS.path(),
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": pv},
                    "spec": {
                        "capacity": {"storage": "1Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": fixed,
                        "hostPath": {"path": f"/tmp/{pv}"},
                    },
                },
            )
            kube.post(PVCS.path(namespace), claim("bound-data", namespace, storage_class=fixed, volume=pv))
            wait("the pod with the bound claim to be bound", lambda: "bound" in bound(kube, namespace))
    finally:
        cleanup(kube, namespace, [q])
        with contextlib.suppress(ApiError):
            kube.delete(PVCS.path(namespace), query={"gracePeriodSeconds": 0})
        for path in (PVS.path(name=pv), STORAGE_CLASSES.path(name=late), STORAGE_CLASSES.path(name=fixed)):
            with contextlib.suppress(ApiError):
                kube.delete(path)
