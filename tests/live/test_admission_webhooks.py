"""The admission webhooks through the real API server: registered, called over TLS, obeyed.

The module starts the webhook server in-process on a free loopback port with a freshly
generated CA, and registers its ValidatingWebhookConfiguration and
MutatingWebhookConfiguration (`url: https://127.0.0.1:<port>/...`, the CA as
`caBundle`) with the same code `kai admission --register` runs. Every request below
is an ordinary create or update sent to kube-apiserver; the API server decides to call
the webhook (selectors, match conditions), verifies its certificate, and applies the
verdict or the JSONPatch.

So that the other live tests sharing this control plane are never affected, the pod
and PodGroup webhooks only see namespaces labelled with this module's label, and the
Queue webhook only queues carrying it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from kai.admission.certs import ensure_certificates
from kai.admission.cli import apply_webhook_configurations, delete_webhook_configurations
from kai.admission.registration import WebhookSettings
from kai.admission.rules import PodRules
from kai.admission.server import WebhookServer
from kai.cluster.kube import NAMESPACES, PODGROUPS, PODS, QUEUES, ApiError, Kube
from kai.devcluster.live import LiveCluster

LABEL = "kai-test/admission"
SKIP_LABEL = "kai-test/not-for-kai"


@pytest.fixture(scope="module")
def webhooks(live_cluster: LiveCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, str]]:
    """(admin client, this module's selector value) with the webhooks registered and served."""
    kube = Kube(live_cluster.api)
    marker = uuid.uuid4().hex[:8]
    certs = ensure_certificates(Path(tmp_path_factory.mktemp("admission-certs")), ["127.0.0.1"])
    server = WebhookServer(PodRules(gpu_sharing=True), certs).start()
    settings = WebhookSettings(
        ca_bundle=certs.ca_bundle,
        url_base=f"https://127.0.0.1:{server.port}",
        name=f"kai-admission-{marker}",
        namespace_selector={"matchLabels": {LABEL: marker}},
        pod_selector={"matchExpressions": [{"key": SKIP_LABEL, "operator": "DoesNotExist"}]},
        queue_selector={"matchLabels": {LABEL: marker}},
        podgroup_namespace_selector={"matchLabels": {LABEL: marker}},
    )
    for runtime_class in ("nvidia", "nvidia-legacy-test"):  # the API server rejects pods naming a missing one
        try:
            k8s.NodeV1Api(live_cluster.api).create_runtime_class(
                {"metadata": {"name": runtime_class}, "handler": runtime_class}, _preload_content=False
            )
        except k8s.ApiException as exc:
            assert exc.status == 409
    apply_webhook_configurations(kube, settings)
    try:
        yield kube, marker
    finally:
        delete_webhook_configurations(kube, settings.name)
        server.stop()


@pytest.fixture
def ns(webhooks: tuple[Kube, str], namespace: str) -> str:
    """The test's namespace, labelled so that the webhooks see it."""
    kube, marker = webhooks
    kube.patch(NAMESPACES.path(None, namespace), {"metadata": {"labels": {LABEL: marker}}})
    # The API server matches namespaceSelector against its namespace cache: wait until the label has
    # reached it, probing with a dry run of a PodGroup the webhook must refuse.
    probe = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "probe"},
        "spec": {"minMember": 1, "queue": "q", "subGroups": [{"name": "a"}, {"name": "a"}]},
    }
    deadline = time.monotonic() + 20
    while True:
        try:
            kube.post(PODGROUPS.path(namespace), probe, query={"dryRun": "All"})
        except ApiError as err:
            if err.status in (400, 403):
                return namespace
        assert time.monotonic() < deadline, "the webhooks never saw the labelled namespace"
        time.sleep(0.1)


def gpu_pod(
    name: str, annotations: dict[str, str] | None = None, gpus: int = 0, scheduler: str = "kai-scheduler", **spec: Any
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"schedulerName": scheduler, "containers": [container], **spec},
    }


def create_pod(kube: Kube, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    return kube.post(PODS.path(namespace), body)


def denial(call: Any) -> str:
    """The API server's message for a request the webhook denied."""
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status in (400, 403), caught.value
    return str(caught.value.body.get("message"))


# ---------------------------------------------------------------------------------------------------------
# Pods: GPU-sharing validation


@pytest.mark.parametrize(
    ("annotations", "gpus", "annotation", "words"),
    [
        ({"gpu-fraction": "1.5"}, 0, "gpu-fraction", "between 0 and 1"),
        ({"gpu-fraction": "0"}, 0, "gpu-fraction", "between 0 and 1"),
        ({"gpu-fraction": "0.5"}, 1, "gpu-fraction", "whole-GPU"),
        ({"gpu-memory": "2000", "gpu-fraction": "0.5"}, 0, "gpu-memory", "cannot be combined with gpu-fraction"),
        ({"gpu-memory": "2000"}, 2, "gpu-memory", "whole-GPU"),
        ({"gpu-memory": "lots"}, 0, "gpu-memory", "positive integer"),
        ({"gpu-fraction-num-devices": "2"}, 0, "gpu-fraction-num-devices", "needs gpu-fraction or gpu-memory"),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, 0, "gpu-fraction-num-devices", "positive integer"),
        ({"mps": "true"}, 0, "mps", "only for shared GPUs"),
    ],
    ids=[
        "fraction-1.5",
        "fraction-0",
        "fraction+gpu",
        "memory+fraction",
        "memory+gpu",
        "memory-nan",
        "devices-alone",
        "devices-0",
        "mps-alone",
    ],
)
def test_contradictory_gpu_requests_are_rejected_naming_the_annotation(
    webhooks: tuple[Kube, str], ns: str, annotations: dict[str, str], gpus: int, annotation: str, words: str
) -> None:
    kube, _ = webhooks
    message = denial(lambda: create_pod(kube, ns, gpu_pod("bad", annotations, gpus)))
    assert f"metadata.annotations[{annotation}]" in message
    assert words in message
    assert 'admission webhook "pod-validation.kai.scheduler" denied the request' in message


def test_a_valid_fraction_is_admitted_with_the_gpu_runtime_class(webhooks: tuple[Kube, str], ns: str) -> None:
    kube, _ = webhooks
    created = create_pod(kube, ns, gpu_pod("half", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}))
    assert created["spec"]["runtimeClassName"] == "nvidia"


def test_a_fraction_container_gets_its_gpu_from_the_binders_configmaps(webhooks: tuple[Kube, str], ns: str) -> None:
    kube, _ = webhooks
    created = create_pod(kube, ns, gpu_pod("wired", {"gpu-memory": "2000"}))
    assert created["metadata"]["annotations"]["runai/shared-gpu-configmap"] == "wired-shared-gpu"
    env = {e["name"]: e for e in created["spec"]["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["valueFrom"]["configMapKeyRef"] == {
        "name": "wired-shared-gpu-0",
        "key": "NVIDIA_VISIBLE_DEVICES",
    }
    assert env["GPU_PORTION"]["valueFrom"]["configMapKeyRef"]["name"] == "wired-shared-gpu-0"
    assert {"configMapRef": {"name": "wired-shared-gpu-0-evar"}} in created["spec"]["containers"][0]["envFrom"]


def test_runtime_class_only_where_a_gpu_is_asked_and_none_is_named(webhooks: tuple[Kube, str], ns: str) -> None:
    kube, _ = webhooks
    whole = create_pod(kube, ns, gpu_pod("whole", gpus=1))
    cpu_only = create_pod(kube, ns, gpu_pod("cpu-only"))
    own = create_pod(kube, ns, gpu_pod("own", gpus=1, runtimeClassName="nvidia-legacy-test"))  # kept as named
    other = create_pod(kube, ns, gpu_pod("other", gpus=1, scheduler="default-scheduler"))
    assert whole["spec"]["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in cpu_only["spec"]
    assert own["spec"]["runtimeClassName"] == "nvidia-legacy-test"
    assert "runtimeClassName" not in other["spec"]


def test_pods_of_other_schedulers_are_not_checked(webhooks: tuple[Kube, str], ns: str) -> None:
    kube, _ = webhooks
    create_pod(kube, ns, gpu_pod("theirs", {"gpu-fraction": "7"}, scheduler="default-scheduler"))


def test_an_update_that_breaks_the_gpu_request_is_rejected_but_others_pass(webhooks: tuple[Kube, str], ns: str) -> None:
    kube, _ = webhooks
    create_pod(kube, ns, gpu_pod("quarter", {"gpu-fraction": "0.25"}))
    path = PODS.path(ns, "quarter")
    message = denial(lambda: kube.patch(path, {"metadata": {"annotations": {"gpu-fraction": "2"}}}))
    assert "metadata.annotations[gpu-fraction]" in message
    # What the podgrouper does to every pod: an annotation unrelated to GPUs.
    kube.patch(path, {"metadata": {"annotations": {"pod-group-name": "pg-quarter"}}})


def test_namespaces_outside_the_selector_are_not_seen(webhooks: tuple[Kube, str], namespace: str) -> None:
    kube, _ = webhooks  # `namespace` is not labelled: the API server does not call the webhook
    created = create_pod(kube, namespace, gpu_pod("unseen", {"gpu-fraction": "1.5"}, gpus=1))
    assert "runtimeClassName" not in created["spec"]


def test_pods_outside_the_pod_selector_are_not_seen(webhooks: tuple[Kube, str], ns: str) -> None:
    kube, _ = webhooks
    body = gpu_pod("unselected", {"gpu-fraction": "1.5"}, gpus=1)
    body["metadata"]["labels"] = {SKIP_LABEL: "yes"}
    created = create_pod(kube, ns, body)
    assert "runtimeClassName" not in created["spec"]


# ---------------------------------------------------------------------------------------------------------
# Queues and PodGroups


def queue(name: str, marker: str, resources: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentQueue": "default-parent-queue"}
    if resources is not None:
        spec["resources"] = resources
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "labels": {LABEL: marker}},
        "spec": spec,
    }


def test_queue_rules(webhooks: tuple[Kube, str]) -> None:
    kube, marker = webhooks
    name = f"q-{marker}"
    missing = denial(lambda: kube.post(QUEUES.path(), queue(name, marker, None)))
    assert "spec.resources: must be specified" in missing
    # Values KAI accepts are allowed (with warnings): a quota above its limit, a negative quota or weight.
    odd = {"gpu": {"quota": 8, "limit": 4, "overQuotaWeight": -1}, "cpu": {"quota": -2, "limit": -1}}
    kube.post(QUEUES.path(), queue(name, marker, odd))
    try:
        kube.patch(QUEUES.path(None, name), {"spec": {"resources": {"gpu": {"limit": 2}}}})
        message = denial(lambda: kube.patch(QUEUES.path(None, name), {"spec": {"parentQueue": name}}))
        assert "a queue cannot be its own parent" in message
    finally:
        kube.delete(QUEUES.path(None, name))


def podgroup(name: str, sub_groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 1, "queue": "default-queue", "subGroups": sub_groups},
    }


@pytest.mark.parametrize(
    ("sub_groups", "expected"),
    [
        (
            [{"name": "a", "minMember": 1}, {"name": "a", "minMember": 2}],
            "spec.subGroups[1].name: 'a' is already used by spec.subGroups[0]",
        ),
        (
            [{"name": "a", "minMember": 1, "parent": "ghost"}],
            "spec.subGroups[0].parent: names sub-group 'ghost', which does not exist",
        ),
        (
            [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}, {"name": "c", "minMember": 1}],
            "forms a cycle: a -> b -> a",
        ),
    ],
    ids=["duplicate", "missing-parent", "cycle"],
)
def test_broken_sub_groups_are_rejected(
    webhooks: tuple[Kube, str], ns: str, sub_groups: list[dict[str, Any]], expected: str
) -> None:
    kube, _ = webhooks
    message = denial(lambda: kube.post(PODGROUPS.path(ns), podgroup("pg", sub_groups)))
    assert expected in message


def test_a_sub_group_tree_is_admitted(webhooks: tuple[Kube, str], ns: str) -> None:
    kube, _ = webhooks
    tree = [
        {"name": "decode"},
        {"name": "leader", "minMember": 1, "parent": "decode"},
        {"name": "workers", "minMember": 2, "parent": "decode"},
    ]
    created = kube.post(PODGROUPS.path(ns), podgroup("tree", tree))
    assert created["spec"]["subGroups"] == tree
