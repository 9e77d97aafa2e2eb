"""The webhook server over real TLS on loopback: certificates, paths, bad bodies, health."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kai.admission.certs import ensure_certificates
from kai.admission.rules import PodRules
from kai.admission.server import WebhookServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[WebhookServer]:
    server = WebhookServer(PodRules(gpu_sharing=True), ensure_certificates(tmp_path, ["127.0.0.1"])).start()
    try:
        yield server
    finally:
        server.stop()


def call(server: WebhookServer, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    context = ssl.create_default_context(cadata=server.certs.ca_bundle.decode())  # verifies name and chain
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=5)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def test_review_over_tls(server: WebhookServer) -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "abc", "operation": "CREATE",
        "object": {"metadata": {"name": "p", "namespace": "ml", "annotations": {"gpu-memory": "-1"}},
                   "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}},
    }}
    status, answer = call(server, "POST", "/validate--v1-pod", json.dumps(review).encode())
    assert status == 200 and answer["response"]["uid"] == "abc" and answer["response"]["allowed"] is False
    assert "metadata.annotations[gpu-memory]" in answer["response"]["status"]["message"]
    assert server.reviews == 1


def test_errors_and_health(server: WebhookServer) -> None:
    assert call(server, "GET", "/healthz") == (200, {"status": "ok"})
    for body in (b"not json", b'{"kind": "AdmissionReview"}'):  # denied in an AdmissionReview, code 400
        status, answer = call(server, "POST", "/validate--v1-pod", body)
        assert status == 200 and answer["kind"] == "AdmissionReview"
        assert answer["response"]["allowed"] is False and answer["response"]["status"]["code"] == 400
    assert call(server, "POST", "/elsewhere", b"{}")[0] == 404


def test_mounted_certificates_are_reused(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path)
    second = ensure_certificates(tmp_path)
    assert first.generated and not second.generated
    assert second.ca_bundle == first.ca_bundle


def test_generated_certificates_go_into_a_private_folder(tmp_path: Path) -> None:
    import os
    import stat

    folder = tmp_path / "certs"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    planted = tmp_path / "elsewhere"
    planted.write_text("not a key")
    (folder / "tls.key").symlink_to(planted)  # a symlink where the key goes: replaced, its target untouched
    certs = ensure_certificates(folder)
    assert certs.generated
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert not (folder / "tls.key").is_symlink()
    assert stat.S_IMODE((folder / "tls.key").stat().st_mode) == 0o600
    assert planted.read_text() == "not a key"


def test_a_symlinked_certificate_folder_is_refused(tmp_path: Path) -> None:
    import pytest

    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(OSError, match="symlink"):
        ensure_certificates(link)
    assert list(real.iterdir()) == []
