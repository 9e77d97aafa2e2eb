"""`kai admission --register` as a user runs it on a dev cluster: a process that generates its certificate,
registers its webhooks by URL with the CA bundle, and is then called by the API server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kai.admission.cli import MUTATING, VALIDATING, delete_webhook_configurations
from kai.cluster.kube import NAMESPACES, PODS, ApiError, Kube
from kai.devcluster.live import LiveCluster

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_kai_admission_registers_itself_and_rejects_bad_pods(
    live_cluster: LiveCluster, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(live_cluster.api)
    marker = uuid.uuid4().hex[:8]
    name = f"kai-admission-cli-{marker}"
    port = free_port()
    kube.patch(NAMESPACES.path(None, namespace), {"metadata": {"labels": {"kai-test/admission-cli": marker}}})
    try:  # GPU pods get runtimeClassName nvidia; the API server rejects pods naming a RuntimeClass that is missing
        kube.post("/apis/node.k8s.io/v1/runtimeclasses", {"metadata": {"name": "nvidia"}, "handler": "nvidia"})
    except ApiError as err:
        assert err.status == 409
    process = subprocess.Popen(
        [sys.executable, "-m", "kai.cli", "admission", "--kubeconfig", str(live_cluster.kubeconfig),
         "--host", "127.0.0.1", "--port", str(port), "--cert-dir", str(tmp_path / "certs"),
         "--register", "--url", f"https://127.0.0.1:{port}", "--webhook-name", name,
         "--namespace-selector", f"kai-test/admission-cli={marker}"],
        cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                kube.get(f"{MUTATING}/{name}")
                kube.get(f"{VALIDATING}/{name}")
                break
            except ApiError:
                assert process.poll() is None, process.communicate()[0].decode()
                assert time.monotonic() < deadline, "the webhooks were not registered"
                time.sleep(0.2)
        bad = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "bad", "annotations": {"gpu-fraction": "0.5"}},
               "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "x"}]}}
        while True:  # the server may still be starting to listen: the API server then fails the call
            try:
                kube.post(PODS.path(namespace), bad)
            except ApiError as err:
                message = str(err.body.get("message"))
                if "GPU sharing is disabled" in message:
                    break
                assert time.monotonic() < deadline, message
                time.sleep(0.2)
                continue
            pytest.fail("a gpu-fraction pod was admitted with GPU sharing disabled")
        assert "metadata.annotations[gpu-fraction]" in message
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0].decode()
        delete_webhook_configurations(kube, name)
    assert "Traceback" not in output, output
