"""Hostile and malformed requests to the real webhook server over TLS: every one gets an AdmissionReview
back (HTTP 200, `allowed: false` with a status code and a short message), never an HTTP 500 or a plain
error body; long sub-group chains are checked in linear time and bounded (also in the CRD)."""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.admission import review as review_module
from kai.admission.certs import ensure_certificates
from kai.admission.rules import MAX_SUBGROUP_DEPTH, MAX_SUBGROUPS, PodRules
from kai.admission.server import MAX_BODY, WebhookServer

ROOT = Path(__file__).resolve().parents[2]
PODGROUP = "/validate-scheduling-run-ai-v2alpha2-podgroup"
POD = "/validate--v1-pod"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[WebhookServer]:
    server = WebhookServer(PodRules(gpu_sharing=True), ensure_certificates(tmp_path, ["127.0.0.1"])).start()
    try:
        yield server
    finally:
        server.stop()


def post(server: WebhookServer, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    context = ssl.create_default_context(cadata=server.certs.ca_bundle.decode())
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=60)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def review(obj: Any, uid: str = "u-1") -> bytes:
    request = {"uid": uid, "operation": "CREATE", "object": obj}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def denied(answer: Any, code: int) -> str:
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["allowed"] is False and response["status"]["code"] == code, response
    assert len(response["status"]["message"]) <= 1024
    return response["status"]["message"]


def chain(length: int) -> list[dict[str, Any]]:
    return [{"name": f"s{i}", "minMember": 1, **({"parent": f"s{i - 1}"} if i else {})} for i in range(length)]


def podgroup(subgroups: Any) -> dict[str, Any]:
    return {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"queue": "q", "subGroups": subgroups}}


def test_a_long_subgroup_chain_is_refused_by_depth(server: WebhookServer) -> None:
    status, answer = post(server, PODGROUP, review(podgroup(chain(MAX_SUBGROUPS))))
    assert status == 200
    message = denied(answer, 403)
    assert f"at most {MAX_SUBGROUP_DEPTH} levels of sub-groups are allowed" in message
    status, answer = post(server, PODGROUP, review(podgroup(chain(MAX_SUBGROUP_DEPTH))))
    assert status == 200 and answer["response"]["allowed"] is True


def test_too_many_subgroups_and_the_crd_limit(server: WebhookServer) -> None:
    flat = [{"name": f"s{i}", "minMember": 1} for i in range(MAX_SUBGROUPS + 1)]
    message = denied(post(server, PODGROUP, review(podgroup(flat)))[1], 403)
    assert f"has {MAX_SUBGROUPS + 1} sub-groups, more than {MAX_SUBGROUPS}" in message
    for crd in ("deploy/crds", "deploy/helm/kai-scheduler/crds"):
        doc = yaml.safe_load((ROOT / crd / "scheduling.run.ai_podgroups.yaml").read_text())
        schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert schema["properties"]["spec"]["properties"]["subGroups"]["maxItems"] == MAX_SUBGROUPS


def test_a_long_cycle_is_reported_once_and_short(server: WebhookServer) -> None:
    subgroups = chain(30)
    subgroups[0]["parent"] = "s29"
    message = denied(post(server, PODGROUP, review(podgroup(subgroups)))[1], 403)
    assert message.count("forms a cycle") == 1 and "..." in message


@pytest.mark.parametrize(
    "obj",
    [
        {"metadata": ["x"], "spec": "y"},
        {"metadata": {"name": "p", "annotations": 5}, "spec": {"schedulerName": "kai-scheduler", "containers": 3}},
        {
            "metadata": {"name": ["p"]},
            "spec": {"schedulerName": "kai-scheduler", "containers": ["c", {"resources": 1}]},
        },
    ],
)
def test_wrongly_shaped_pods_get_an_admission_review(server: WebhookServer, obj: dict[str, Any]) -> None:
    for path in (POD, "/mutate--v1-pod", "/validate-scheduling-run-ai-v2-queue", PODGROUP):
        status, answer = post(server, path, review(obj))
        assert status == 200 and answer["kind"] == "AdmissionReview" and answer["response"]["uid"] == "u-1"


def test_subgroups_of_the_wrong_shape(server: WebhookServer) -> None:
    message = denied(post(server, PODGROUP, review(podgroup("s0")))[1], 403)
    assert "PodGroup ns/g: spec.subGroups: must be a list" in message
    message = denied(post(server, PODGROUP, review(podgroup([{"name": 5}, 7])))[1], 403)
    assert "spec.subGroups[0].name: must be a string" in message and "spec.subGroups[1]: must be an object" in message


def test_hostile_values_are_not_echoed_in_full(server: WebhookServer, caplog: pytest.LogCaptureFixture) -> None:
    huge = "x" * 100_000
    pod = {
        "metadata": {"name": huge, "namespace": "ns", "annotations": {"gpu-fraction": huge}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]},
    }
    with caplog.at_level("INFO", logger="kai.admission"):
        status, answer = post(server, POD, review(pod))
    assert status == 200
    denied(answer, 403)
    assert all(len(r.getMessage()) < 2000 for r in caplog.records)


def test_malformed_bodies_are_denied_in_review_form(server: WebhookServer) -> None:
    assert denied(post(server, POD, b"\xff\xfe not json")[1], 400)
    assert denied(post(server, POD, b"[" * 100_000)[1], 400)
    assert denied(post(server, POD, b'{"request": {"uid": ["x"], "object": {}}}')[1], 400)
    assert denied(post(server, POD, b'"just a string"')[1], 400)


def test_a_request_over_the_size_limit(server: WebhookServer) -> None:
    # the body is announced, not sent: the server answers without reading it
    status, answer = post(server, POD, b"{}", {"Content-Length": str(MAX_BODY + 1)})
    assert status == 200 and "larger than" in denied(answer, 413)


def test_a_review_over_the_time_limit_is_denied(server: WebhookServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(request: Any, rules: PodRules) -> dict[str, Any]:
        time.sleep(2)
        return {"allowed": True}

    monkeypatch.setitem(review_module.HANDLERS, POD, slow)
    server._server.request_seconds = 0.05
    status, answer = post(server, POD, review({"metadata": {"name": "p"}}))
    assert status == 200 and "took longer than" in denied(answer, 504)
