"""The admission rules as pure functions: GPU sharing, runtime class, Queue and PodGroup checks."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kai.admission.registration import (
    SelectorError,
    WebhookSettings,
    merge_selectors,
    parse_selector,
    webhook_configurations,
)
from kai.admission.review import POD_MUTATE_PATH, POD_VALIDATE_PATH, QUEUE_VALIDATE_PATH, BadReview, review
from kai.admission.rules import (
    PodRules,
    mutate_pod,
    queue_warnings,
    validate_pod,
    validate_podgroup,
    validate_queue,
)

SHARING = PodRules(gpu_sharing=True)


def pod(
    annotations: dict[str, str] | None = None,
    gpus: int = 0,
    scheduler: str = "kai-scheduler",
    namespace: str = "ml",
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "x"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "metadata": {"name": "p", "namespace": namespace, "annotations": annotations or {}},
        "spec": {"schedulerName": scheduler, "containers": [container], **spec},
    }


def messages(problems: list[Any]) -> list[str]:
    return [str(p) for p in problems]


@pytest.mark.parametrize(
    ("annotations", "gpus"),
    [
        ({"gpu-fraction": "0.5"}, 0),
        ({"gpu-fraction": "0.25", "gpu-fraction-num-devices": "4", "mps": "true"}, 0),
        ({"gpu-memory": "20000", "gpu-fraction-num-devices": "2"}, 0),
        ({"gpu-fraction": "0.5", "gpu-fraction-container-name": "main"}, 0),
        ({}, 4),
        ({"mps": "false"}, 0),
    ],
)
def test_valid_requests_pass(annotations: dict[str, str], gpus: int) -> None:
    assert validate_pod(pod(annotations, gpus), SHARING) == []


@pytest.mark.parametrize(
    ("annotations", "gpus", "expected"),
    [
        ({"gpu-fraction": "1"}, 0, "metadata.annotations[gpu-fraction]: must be a number between 0 and 1"),
        ({"gpu-fraction": "nan"}, 0, "metadata.annotations[gpu-fraction]: must be a number between 0 and 1"),
        ({"gpu-fraction": "-0.5"}, 0, "metadata.annotations[gpu-fraction]: must be a number between 0 and 1"),
        ({"gpu-fraction": "half"}, 0, "metadata.annotations[gpu-fraction]: must be a number between 0 and 1"),
        ({"gpu-fraction": "0.5"}, 2, "metadata.annotations[gpu-fraction]: cannot be combined with a whole-GPU"),
        ({"gpu-memory": "0"}, 0, "metadata.annotations[gpu-memory]: must be a positive integer"),
        ({"gpu-memory": "1.5"}, 0, "metadata.annotations[gpu-memory]: must be a positive integer"),
        ({"gpu-memory": "100", "gpu-fraction": "0.1"}, 0, "metadata.annotations[gpu-memory]: cannot be combined"),
        ({"gpu-memory": "100"}, 1, "metadata.annotations[gpu-memory]: cannot be combined with a whole-GPU"),
        ({"gpu-fraction-num-devices": "2"}, 0, "metadata.annotations[gpu-fraction-num-devices]: needs"),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "-1"},
            0,
            "metadata.annotations[gpu-fraction-num-devices]: must be a positive integer",
        ),
        ({"mps": "true"}, 2, "metadata.annotations[mps]: MPS is only for shared GPUs"),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-container-name": "sidecar"},
            0,
            "metadata.annotations[gpu-fraction-container-name]: names container 'sidecar'",
        ),
    ],
)
def test_contradictory_requests_name_the_annotation(annotations: dict[str, str], gpus: int, expected: str) -> None:
    found = messages(validate_pod(pod(annotations, gpus), SHARING))
    assert any(expected in m for m in found), found
    assert all(m.startswith("Pod ml/p: metadata.annotations[") for m in found)


def test_sharing_disabled_rejects_fraction_and_memory() -> None:
    found = messages(validate_pod(pod({"gpu-fraction": "0.5", "gpu-memory": "10"}), PodRules()))
    assert len(found) == 2 and all("GPU sharing is disabled" in m for m in found)


def test_other_schedulers_and_unchanged_updates_pass() -> None:
    bad = pod({"gpu-fraction": "3"})
    assert validate_pod(pod({"gpu-fraction": "3"}, scheduler="default-scheduler"), SHARING) == []
    assert validate_pod(bad, SHARING, old=bad) == []  # a podgrouper patch of a pod admitted before the webhook
    assert validate_pod(bad, SHARING, old=pod({"gpu-fraction": "0.5"})) != []


@pytest.mark.parametrize(
    ("obj", "rules", "patched"),
    [
        (pod(gpus=1), PodRules(), "nvidia"),
        (pod({"gpu-memory": "100"}), PodRules(), "nvidia"),
        (pod(gpus=1), PodRules(gpu_runtime_class="custom"), "custom"),
        (pod(gpus=1), PodRules(gpu_runtime_class=""), None),
        (pod(), PodRules(), None),
        (pod(gpus=1, runtimeClassName="mine"), PodRules(), None),
        (pod(gpus=1, namespace="kai-resource-reservation"), PodRules(), None),
        (pod(gpus=1, scheduler="other"), PodRules(), None),
    ],
    ids=["whole", "memory", "configured", "disabled", "cpu", "named", "reservation", "other-scheduler"],
)
def test_runtime_class_mutation(obj: dict[str, Any], rules: PodRules, patched: str | None) -> None:
    patch = mutate_pod(obj, rules)
    assert patch == ([{"op": "add", "path": "/spec/runtimeClassName", "value": patched}] if patched else [])


def test_mig_pods_get_the_runtime_class() -> None:
    obj = pod()
    obj["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    assert mutate_pod(obj, PodRules())[0]["value"] == "nvidia"


# ---------------------------------------------------------------------------------------------------------
# Queues and PodGroups


def queue(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "team-a"}, "spec": spec}


def test_queue_rules() -> None:
    assert messages(validate_queue(queue())) == [
        "Queue team-a: spec.resources: must be specified (quota, limit and overQuotaWeight per resource)"
    ]
    good = {
        "gpu": {"quota": 2, "limit": 4, "overQuotaWeight": 1},
        "cpu": {"quota": -1, "limit": -1},
        "memory": {"quota": 0, "limit": 0},
    }
    assert validate_queue(queue(resources=good)) == []
    assert validate_queue(queue(resources={"gpu": {"quota": -1, "limit": 4}})) == []  # unlimited quota, capped
    bad = {"gpu": {"quota": 5, "limit": "x"}, "cpu": {"quota": float("nan"), "overQuotaWeight": True}}
    assert messages(validate_queue(queue(resources=bad, parentQueue="team-a"))) == [
        "Queue team-a: spec.parentQueue: a queue cannot be its own parent",
        "Queue team-a: spec.resources.gpu.limit: must be a finite number, got 'x'",
        "Queue team-a: spec.resources.cpu.quota: must be a finite number, got nan",
        "Queue team-a: spec.resources.cpu.overQuotaWeight: must be a finite number, got True",
    ]


def test_queue_values_kai_accepts_are_allowed_with_warnings() -> None:
    """KAI's CRD takes any number and KAI uses it: a quota above its limit, a negative weight, a quota
    or limit below zero other than -1 are allowed, each with a warning naming the field."""
    odd = {"gpu": {"quota": 5, "limit": 4}, "cpu": {"quota": -3, "limit": -2, "overQuotaWeight": -1}}
    assert validate_queue(queue(resources=odd)) == []
    warnings = queue_warnings(queue(resources=odd))
    assert [w.split(":", 1)[0] for w in warnings] == [
        "spec.resources.gpu.quota",
        "spec.resources.cpu.overQuotaWeight",
        "spec.resources.cpu.quota",
        "spec.resources.cpu.limit",
    ]
    assert "the limit wins" in warnings[0]
    assert queue_warnings(queue(resources={"gpu": {"quota": 2, "limit": 4, "overQuotaWeight": 1}})) == []


def podgroup(*groups: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": 1, "subGroups": list(groups)}}


def test_podgroup_rules() -> None:
    assert validate_podgroup(podgroup()) == []
    assert validate_podgroup(podgroup({"name": "a"}, {"name": "b", "minMember": 1, "parent": "A"})) == []
    assert messages(validate_podgroup(podgroup({"name": "a"}, {"name": "A"}))) == [
        "PodGroup ml/pg: spec.subGroups[1].name: 'A' is already used by spec.subGroups[0]"
    ]
    assert messages(validate_podgroup(podgroup({"name": "a", "parent": "x"}))) == [
        "PodGroup ml/pg: spec.subGroups[0].parent: names sub-group 'x', which does not exist"
    ]
    cycle = podgroup(
        {"name": "a", "parent": "c"},
        {"name": "b", "parent": "a"},
        {"name": "c", "parent": "b"},
        {"name": "d", "parent": "d"},
    )
    assert messages(validate_podgroup(cycle)) == [
        "PodGroup ml/pg: spec.subGroups[0].parent: forms a cycle: a -> c -> b -> a",
        "PodGroup ml/pg: spec.subGroups[3].parent: forms a cycle: d -> d",
    ]


# ---------------------------------------------------------------------------------------------------------
# AdmissionReview and webhook configurations


def admission_review(obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": operation, "object": obj, "oldObject": old},
    }


def test_review_responses() -> None:
    denied = review(POD_VALIDATE_PATH, admission_review(pod({"gpu-fraction": "2"})), SHARING)
    assert denied["response"]["uid"] == "u-1" and denied["response"]["allowed"] is False
    assert "metadata.annotations[gpu-fraction]" in denied["response"]["status"]["message"]
    mutated = review(POD_MUTATE_PATH, admission_review(pod(gpus=1)), SHARING)["response"]
    assert mutated["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(mutated["patch"])) == [
        {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"}
    ]
    assert review(QUEUE_VALIDATE_PATH, admission_review({}, "DELETE"), SHARING)["response"]["allowed"] is True
    with pytest.raises(BadReview):
        review(POD_VALIDATE_PATH, {"kind": "AdmissionReview"}, SHARING)
    with pytest.raises(KeyError):
        review("/nope", admission_review(pod()), SHARING)


def test_label_selectors_parse_like_kubectl() -> None:
    assert parse_selector("") == {}
    assert parse_selector("team=ml, tier==gold,env!=dev,gpu,!legacy,zone in (a, b),x notin (y)") == {
        "matchLabels": {"team": "ml", "tier": "gold"},
        "matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "gpu", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "x", "operator": "NotIn", "values": ["y"]},
        ],
    }
    with pytest.raises(SelectorError):
        parse_selector("a in (")
    assert merge_selectors({"matchLabels": {"a": "1"}}, {}) == {"matchLabels": {"a": "1"}}


def test_webhook_configurations_follow_kai() -> None:
    settings = WebhookSettings(
        ca_bundle=b"CA",
        namespace_selector=parse_selector("team=ml"),
        pod_selector=parse_selector("gpu"),
        queue_label_namespaces=True,
    )
    validating, mutating = webhook_configurations(settings)
    pod_hook = validating["webhooks"][0]
    assert pod_hook["clientConfig"]["service"] == {
        "namespace": "kai-scheduler",
        "name": "kai-admission",
        "path": "/validate--v1-pod",
        "port": 443,
    }
    assert pod_hook["clientConfig"]["caBundle"] == base64.b64encode(b"CA").decode()
    assert pod_hook["failurePolicy"] == "Fail" and pod_hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert pod_hook["matchConditions"][0]["expression"] == "object.spec.schedulerName == 'kai-scheduler'"
    assert pod_hook["namespaceSelector"] == {
        "matchLabels": {"team": "ml"},
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kai-scheduler"]},
            {"key": "kai.scheduler/queue", "operator": "Exists"},
        ],
    }
    assert pod_hook["objectSelector"] == {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}
    assert [h["name"] for h in validating["webhooks"]] == [
        "pod-validation.kai.scheduler",
        "queue-validation.kai.scheduler",
        "podgroup-validation.kai.scheduler",
    ]
    assert mutating["webhooks"][0]["rules"][0]["operations"] == ["CREATE"]
    url = WebhookSettings(ca_bundle=b"", url_base="https://127.0.0.1:9443/")
    assert (
        webhook_configurations(url)[1]["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate--v1-pod"
    )


def test_the_rules_import_only_the_standard_library_and_kai_api() -> None:
    import ast
    import sys
    from pathlib import Path

    import kai.admission

    folder = Path(kai.admission.__file__).parent
    for name in ("rules.py", "review.py", "registration.py"):
        for node in ast.walk(ast.parse((folder / name).read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                assert top in sys.stdlib_module_names or module.startswith("kai.api"), (name, module)


def test_shared_gpu_pods_are_wired_to_the_configmaps_the_binder_fills() -> None:
    from kai.admission.rules import PodRules, mutate_pod

    shared = {
        "metadata": {
            "name": "nb",
            "namespace": "ml",
            "annotations": {"gpu-fraction": "0.5", "gpu-fraction-container-name": "gpu"},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "sidecar"}, {"name": "gpu", "env": [{"name": "X", "value": "1"}]}],
        },
    }
    patch = mutate_pod(shared, PodRules(gpu_sharing=True))
    assert {"op": "add", "path": "/metadata/annotations/runai~1shared-gpu-configmap", "value": "nb-shared-gpu"} in patch
    env = [op["value"] for op in patch if op["path"] == "/spec/containers/1/env/-"]
    assert {
        "name": "NVIDIA_VISIBLE_DEVICES",
        "valueFrom": {"configMapKeyRef": {"name": "nb-shared-gpu-0", "key": "NVIDIA_VISIBLE_DEVICES"}},
    } in env
    assert {
        "name": "GPU_PORTION",
        "valueFrom": {"configMapKeyRef": {"name": "nb-shared-gpu-0", "key": "GPU_PORTION"}},
    } in env
    assert {"op": "add", "path": "/spec/containers/1/envFrom", "value": []} in patch
    assert not any(op["path"].startswith("/spec/containers/0/") for op in patch)  # the sidecar is left alone
    # Without GPU sharing enabled, or for a whole-GPU pod, nothing but the runtime class.
    assert not any("env" in op["path"] for op in mutate_pod(shared, PodRules(gpu_sharing=False)))
    whole = {
        "metadata": {"name": "w"},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    assert [op["path"] for op in mutate_pod(whole, PodRules(gpu_sharing=True))] == ["/spec/runtimeClassName"]
