"""The dev cluster as a KAI user works in it: kube-controller-manager turns a batch Job into pods, kai's
admission lets the GPU pods through (the ``nvidia`` RuntimeClass is there), the podgrouper groups them
under KAI's ``train`` PriorityClass, kai schedules them onto KWOK nodes; a Deployment's pods are
garbage-collected with it; a namespace delete completes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kai.admission.cli import delete_webhook_configurations
from kai.api import keys
from kai.cluster.kube import NAMESPACES, PODGROUPS, PODS, QUEUES, ApiError, Kube
from kai.devcluster import build
from kai.devcluster.controlplane import ControlPlane, free_port
from kai.devcluster.live import LiveCluster
from tests.live.conftest import require_binaries
from tests.live.podgrouper_support import running_controller
from tests.live.scheduler_helpers import scheduler, wait

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "kai" / "batch" / "job.yaml"


@pytest.fixture(scope="module")
def dev_cluster() -> Iterator[LiveCluster]:
    """A control plane as `kai dev-cluster up` starts it (without Prometheus): controllers and KAI's defaults."""
    bins = require_binaries((*build.CORE, "kube-controller-manager"))
    cp = ControlPlane(binaries=bins, controller_manager=True, kai_defaults=True)
    cp.start(timeout=120)
    try:
        live = LiveCluster(control_plane=cp, api=cp.api_client())
        live.create_gpu_nodes(2, gpus=8)
        yield live
    finally:
        cp.stop()


def new_namespace(kube: Kube, labels: dict[str, str] | None = None) -> str:
    name = f"dev-{uuid.uuid4().hex[:8]}"
    kube.post(NAMESPACES.path(), {"metadata": {"name": name, "labels": labels or {}}})
    return name


def listed(kube: Kube, path: str) -> list[dict]:
    return list(kube.get(path).get("items") or [])


def namespace_gone(kube: Kube, name: str) -> bool:
    try:
        kube.get(NAMESPACES.path(None, name))
    except ApiError as err:
        return err.status == 404
    return False


def test_kais_priority_classes_default_queues_and_gpu_runtime_class_are_there(dev_cluster: LiveCluster) -> None:
    kube = Kube(dev_cluster.api)
    classes = {pc["metadata"]["name"]: pc for pc in listed(kube, "/apis/scheduling.k8s.io/v1/priorityclasses")}
    assert {name: classes[name]["value"] for name in ("train", "build-preemptible", "build", "inference")} == {
        "train": 50, "build-preemptible": 75, "build": 100, "inference": 125,
    }
    assert not any(classes[name].get("globalDefault") for name in ("train", "build-preemptible", "build", "inference"))
    child = kube.get(QUEUES.path(name="default-queue"))
    assert child["spec"]["parentQueue"] == "default-parent-queue"
    assert kube.get(QUEUES.path(name="default-parent-queue"))["spec"]["resources"]["gpu"]["limit"] == -1
    assert kube.get("/apis/node.k8s.io/v1/runtimeclasses/nvidia")["handler"] == "nvidia"


@pytest.fixture
def admission(dev_cluster: LiveCluster, tmp_path: Path) -> Iterator[str]:
    """`kai admission --register` as the dev cluster's user runs it; yields the namespace label that selects it."""
    kube = Kube(dev_cluster.api)
    marker = uuid.uuid4().hex[:8]
    name = f"kai-admission-{marker}"
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "kai.cli", "admission", "--kubeconfig", str(dev_cluster.kubeconfig),
         "--host", "127.0.0.1", "--port", str(port), "--cert-dir", str(tmp_path / "certs"),
         "--register", "--url", f"https://127.0.0.1:{port}", "--webhook-name", name,
         "--namespace-selector", f"kai-test/dev-cluster={marker}"],
        cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        def registered() -> bool:
            assert process.poll() is None, process.communicate()[0].decode()
            try:
                kube.get(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}")
            except ApiError:
                return False
            return True

        wait("kai admission to register its webhooks", registered, timeout=30)
        yield marker
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0].decode()
        delete_webhook_configurations(kube, name)
    assert "Traceback" not in output, output


def test_a_batch_job_runs_on_the_dev_cluster_and_its_namespace_deletes(
    dev_cluster: LiveCluster, admission: str
) -> None:
    kube = Kube(dev_cluster.api)
    namespace = new_namespace(kube, {"kai-test/dev-cluster": admission})
    (job,) = [doc for doc in yaml.safe_load_all(JOB.read_text()) if doc]
    parallelism = job["spec"]["parallelism"]
    deleted = False
    try:
        with running_controller(kube), scheduler(kube, "kai-scheduler"):
            # the webhook may still be starting to listen: the API server then refuses the Job's pods for a while
            kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

            def running() -> list[dict]:
                pods = listed(kube, PODS.path(namespace))
                ok = [p for p in pods if p["spec"].get("nodeName") and p.get("status", {}).get("phase") == "Running"]
                return pods if len(ok) == parallelism else []

            pods = wait("the Job's pods to be created, scheduled and running", running, timeout=90)
        assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"Job"}  # the Job controller's
        assert {p["spec"].get("runtimeClassName") for p in pods} == {"nvidia"}  # kai's admission set it
        groups = {p["metadata"]["annotations"][keys.POD_GROUP_ANNOTATION] for p in pods}
        assert len(groups) == 1
        group = kube.get(PODGROUPS.path(namespace, groups.pop()))
        assert group["spec"]["priorityClassName"] == "train"
        assert group["spec"]["queue"] == "default-queue"
        kube.delete(NAMESPACES.path(None, namespace))
        deleted = True
        wait(f"namespace {namespace} to be deleted", lambda: namespace_gone(kube, namespace), timeout=90)
    finally:
        if not deleted:
            kube.delete(NAMESPACES.path(None, namespace))


def test_a_deployments_pods_go_with_it(dev_cluster: LiveCluster) -> None:
    kube = Kube(dev_cluster.api)
    namespace = new_namespace(kube)
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    }
    try:
        kube.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)
        wait("the ReplicaSet's two pods", lambda: len(listed(kube, PODS.path(namespace))) == 2, timeout=60)
        kube.delete(f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
        # the garbage collector deletes the ReplicaSet, then its pods (never scheduled: gone at once)
        wait("the garbage collector to delete the pods", lambda: not listed(kube, PODS.path(namespace)), timeout=60)
        assert not listed(kube, f"/apis/apps/v1/namespaces/{namespace}/replicasets")
    finally:
        kube.delete(NAMESPACES.path(None, namespace))
    wait(f"namespace {namespace} to be deleted", lambda: namespace_gone(kube, namespace), timeout=90)
