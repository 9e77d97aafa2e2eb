"""KWOK on the real control plane: fake GPU nodes become Ready, bound pods run, complete, fail and go away."""

from __future__ import annotations

import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from kai.devcluster.kwok_stages import COMPLETE_AFTER_ANNOTATION, FAIL_AFTER_ANNOTATION
from kai.devcluster.live import LiveCluster


def _pod(name: str, annotations: dict[str, str] | None = None, gpus: int = 1) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "1Gi"}
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "schedulerName": "kai-scheduler",  # nobody schedules it: the test binds it itself
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": resources, "limits": {**resources, **limits}}}],
        },
    }


def _bind(cluster: LiveCluster, namespace: str, pod: str, node: str) -> None:
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    # The response is a Status, which the generated client cannot read as a V1Binding.
    cluster.core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)


def _phase(cluster: LiveCluster, namespace: str, pod: str) -> str:
    return str(cluster.core.read_namespaced_pod(pod, namespace).status.phase)


def test_one_hundred_gpu_nodes_become_ready_with_their_allocatable(live_cluster: LiveCluster) -> None:
    started = time.monotonic()
    names = live_cluster.create_gpu_nodes(
        100, gpus=8, gpu_memory_mib=81920, gpu_product="NVIDIA-H100-80GB-HBM3", cpu="96", memory="1Ti",
        labels={"topology/rack": "r1"}, taints=[{"key": "dedicated", "value": "ai", "effect": "NoSchedule"}],
        name_prefix="h100", timeout=90,
    )
    elapsed = time.monotonic() - started
    try:
        listed = live_cluster.core.list_node(label_selector="topology/rack=r1").items
        nodes = {n.metadata.name: n for n in listed}
        assert sorted(nodes) == sorted(names) and len(names) == 100
        for node in nodes.values():
            ready = {c.type: c.status for c in node.status.conditions}
            assert ready["Ready"] == "True"
            assert node.status.allocatable["nvidia.com/gpu"] == "8"
            assert node.status.allocatable["cpu"] == "96"
            assert node.status.allocatable["memory"] == "1Ti"
            assert node.status.capacity["nvidia.com/gpu"] == "8"
            assert node.metadata.labels["nvidia.com/gpu.count"] == "8"
            assert node.metadata.labels["nvidia.com/gpu.memory"] == "81920"
            assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
            taints = [(t.key, t.value, t.effect) for t in node.spec.taints]
            assert taints == [("dedicated", "ai", "NoSchedule")]
        assert elapsed < 60, f"100 nodes took {elapsed:.1f}s to become Ready"
    finally:
        live_cluster.delete_nodes(names)


def test_node_without_the_kwok_annotation_is_left_alone(live_cluster: LiveCluster) -> None:
    labels = {"kai.scheduler/fake-node": "x"}
    live_cluster.core.create_node({"metadata": {"name": "not-kwok", "labels": labels}})
    try:
        managed = live_cluster.create_gpu_nodes(1, name_prefix="managed")  # KWOK is up and working
        time.sleep(1)
        node = live_cluster.core.read_node("not-kwok")
        assert not node.status.conditions, "kwok must only manage nodes carrying its annotation"
    finally:
        live_cluster.delete_nodes(["not-kwok", *managed])


def test_pod_bound_through_the_binding_subresource_becomes_running(
    live_cluster: LiveCluster, namespace: str
) -> None:
    [node] = live_cluster.create_gpu_nodes(1, name_prefix="bind")
    live_cluster.core.create_namespaced_pod(namespace, _pod("trainer"))
    time.sleep(0.5)
    assert _phase(live_cluster, namespace, "trainer") == "Pending", "an unbound pod must stay Pending"
    _bind(live_cluster, namespace, "trainer", node)

    def running() -> Any:
        pod = live_cluster.core.read_namespaced_pod("trainer", namespace)
        return pod if pod.status.phase == "Running" else None

    pod = live_cluster.wait_for("the bound pod to run", running, timeout=20)
    assert pod.spec.node_name == node
    conditions = {c.type: c.status for c in pod.status.conditions}
    assert conditions["Ready"] == "True"
    assert conditions["PodScheduled"] == "True"
    assert pod.status.pod_ip and pod.status.start_time
    assert pod.status.container_statuses[0].state.running is not None
    live_cluster.delete_nodes([node])


def test_pod_with_a_duration_annotation_succeeds_after_it(live_cluster: LiveCluster, namespace: str) -> None:
    [node] = live_cluster.create_gpu_nodes(1, name_prefix="complete")
    live_cluster.core.create_namespaced_pod(namespace, _pod("short-job", {COMPLETE_AFTER_ANNOTATION: "2s"}))
    _bind(live_cluster, namespace, "short-job", node)
    phase = lambda: _phase(live_cluster, namespace, "short-job")  # noqa: E731
    live_cluster.wait_for("Running", lambda: phase() == "Running", 20)
    running_at = time.monotonic()
    live_cluster.wait_for("Succeeded", lambda: phase() == "Succeeded", 20)
    assert time.monotonic() - running_at >= 1.5, "completed before its duration"
    pod = live_cluster.core.read_namespaced_pod("short-job", namespace)
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 0 and terminated.reason == "Completed"
    live_cluster.delete_nodes([node])


def test_pod_with_a_fail_annotation_fails(live_cluster: LiveCluster, namespace: str) -> None:
    [node] = live_cluster.create_gpu_nodes(1, name_prefix="fail")
    pod = _pod("crasher", {FAIL_AFTER_ANNOTATION: "100ms"}, gpus=0)
    live_cluster.core.create_namespaced_pod(namespace, pod)
    _bind(live_cluster, namespace, "crasher", node)
    live_cluster.wait_for("Failed", lambda: _phase(live_cluster, namespace, "crasher") == "Failed", 20)
    read = live_cluster.core.read_namespaced_pod("crasher", namespace)
    assert read.status.container_statuses[0].state.terminated.exit_code == 1
    live_cluster.delete_nodes([node])


def test_pod_without_annotation_keeps_running_and_deleting_it_removes_it(
    live_cluster: LiveCluster, namespace: str
) -> None:
    [node] = live_cluster.create_gpu_nodes(1, name_prefix="delete")
    live_cluster.core.create_namespaced_pod(namespace, _pod("server"))
    _bind(live_cluster, namespace, "server", node)
    live_cluster.wait_for("Running", lambda: _phase(live_cluster, namespace, "server") == "Running", 20)
    time.sleep(1.5)
    assert _phase(live_cluster, namespace, "server") == "Running"
    live_cluster.core.delete_namespaced_pod("server", namespace)  # graceful: only KWOK can finish it

    def gone() -> bool:
        try:
            live_cluster.core.read_namespaced_pod("server", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    live_cluster.wait_for("the deleted pod to disappear", gone, timeout=20)
    live_cluster.delete_nodes([node])
