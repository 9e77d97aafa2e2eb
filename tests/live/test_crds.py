"""kai's CRDs on a real API server: served, validating like KAI's, and accepting KAI's own manifests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kai.devcluster.live import LiveCluster

REPO = Path(__file__).resolve().parents[2]
KAI_EXAMPLES = REPO / "examples" / "kai"
MANIFESTS = Path(__file__).resolve().parent / "manifests"

QUEUE = ("scheduling.run.ai", "v2", "queues")
PODGROUP = ("scheduling.run.ai", "v2alpha2", "podgroups")
BINDREQUEST = ("scheduling.run.ai", "v1alpha2", "bindrequests")
TOPOLOGY = ("kai.scheduler", "v1alpha1", "topologies")


def _ns(kind: tuple[str, str, str], namespace: str) -> tuple[str, str, str, str]:
    """(group, version, namespace, plural): the argument order of the namespaced custom-object calls."""
    group, version, plural = kind
    return group, version, namespace, plural


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _queue(name: str, resources: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name},
            "spec": {"resources": resources}}


def _create_queue(cluster: LiveCluster, body: dict[str, Any]) -> dict[str, Any]:
    return dict(cluster.custom.create_cluster_custom_object(*QUEUE, body))


def _delete_queues(cluster: LiveCluster, names: list[str]) -> None:
    for name in names:
        try:
            cluster.custom.delete_cluster_custom_object(*QUEUE, name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def test_every_crd_is_established_and_in_discovery(live_cluster: LiveCluster) -> None:
    ext = k8s.ApiextensionsV1Api(live_cluster.api)
    names = {
        "queues.scheduling.run.ai", "podgroups.scheduling.run.ai",
        "bindrequests.scheduling.run.ai", "topologies.kai.scheduler",
    }
    for name in names:
        crd = json.loads(ext.read_custom_resource_definition(name, _preload_content=False).data)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True", name
        assert conditions["NamesAccepted"] == "True", name
    apis = k8s.ApisApi(live_cluster.api).get_api_versions()
    served = {(g.name, v.version) for g in apis.groups for v in g.versions}
    assert {("scheduling.run.ai", "v2"), ("scheduling.run.ai", "v2alpha2"),
            ("scheduling.run.ai", "v1alpha2"), ("kai.scheduler", "v1alpha1")} <= served
    resources = live_cluster.custom.get_api_resources("scheduling.run.ai", "v2alpha2").resources
    podgroups = next(r for r in resources if r.name == "podgroups")
    assert podgroups.namespaced is True
    assert podgroups.short_names == ["pg"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("resources", "gpu", "quota"), "lots"),
        (("resources", "cpu", "limit"), "unlimited"),
        (("resources", "memory", "overQuotaWeight"), "1"),
        (("priority",), "high"),
        (("priority",), 1.5),
    ],
)
def test_queue_with_wrong_type_is_rejected(
    live_cluster: LiveCluster, field: tuple[str, ...], value: Any
) -> None:
    body = _queue("bad-queue", {"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 1}})
    target = body["spec"]
    for key in field[:-1]:
        target = target.setdefault(key, {})
    target[field[-1]] = value
    with pytest.raises(ApiException) as info:
        _create_queue(live_cluster, body)
    _delete_queues(live_cluster, ["bad-queue"])
    assert info.value.status == 422, info.value.body
    assert f"spec.{'.'.join(field)}" in info.value.body


def test_queue_numbers_may_be_fractional_and_negative(live_cluster: LiveCluster) -> None:
    body = _queue("fractional", {"gpu": {"quota": 0.5, "limit": -1, "overQuotaWeight": 2.5}})
    created = _create_queue(live_cluster, body)
    try:
        assert created["spec"]["resources"]["gpu"] == {"quota": 0.5, "limit": -1, "overQuotaWeight": 2.5}
    finally:
        _delete_queues(live_cluster, ["fractional"])


@pytest.mark.parametrize(
    "example",
    [
        "quickstart/default-queues.yaml",
        "priority/limited-queue.yaml",
        "time-based-fairshare/queues.yaml",
    ],
)
def test_kai_queue_examples_are_accepted_unchanged(live_cluster: LiveCluster, example: str) -> None:
    docs = _docs(KAI_EXAMPLES / example)
    names = [d["metadata"]["name"] for d in docs]
    try:
        for doc in docs:
            created = _create_queue(live_cluster, copy.deepcopy(doc))
            assert created["spec"] == doc["spec"], "the API server dropped or changed a field"
    finally:
        _delete_queues(live_cluster, names)


def test_kai_podgroup_doc_examples_are_accepted(live_cluster: LiveCluster, namespace: str) -> None:
    docs = _docs(MANIFESTS / "docs__topology__multilevel__podgroups.yaml")
    for doc in docs:
        created = live_cluster.custom.create_namespaced_custom_object(
            *_ns(PODGROUP, namespace), copy.deepcopy(doc)
        )
        assert created["spec"]["queue"] == "test"
        assert created["spec"]["priorityClassName"] == "inference"
        # As with KAI's own CRD: `subgroups` is not a field (the key is `subGroups`), so it is pruned.
        assert "subgroups" not in created["spec"]
    sample2 = live_cluster.custom.get_namespaced_custom_object(*_ns(PODGROUP, namespace), "sample2")
    assert sample2["spec"]["topologyConstraint"] == docs[1]["spec"]["topologyConstraint"]


def test_podgroup_schema_round_trips_and_validates(live_cluster: LiveCluster, namespace: str) -> None:
    body = {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg-ok"},
        "spec": {
            "minMember": 2, "queue": "team-a", "priorityClassName": "train", "preemptibility": "preemptible",
            "markUnschedulable": False, "schedulingBackoff": 1,
            "topologyConstraint": {"topology": "t", "requiredTopologyLevel": "zone"},
            "subGroups": [
                {"name": "workers",
                 "topologyConstraint": {"topology": "t", "preferredTopologyLevel": "rack"}},
                {"name": "leaf-1", "minMember": 1, "parent": "workers"},
            ],
        },
    }
    created = live_cluster.custom.create_namespaced_custom_object(*_ns(PODGROUP, namespace), copy.deepcopy(body))
    assert created["spec"] == body["spec"]
    invalid = [
        ("minMember", 0),
        ("preemptibility", "sometimes"),
        ("subGroups", [{"name": "Upper"}]),
        ("subGroups", [{"minMember": 1}]),
        ("minMember", "two"),
    ]
    for key, value in invalid:
        bad = copy.deepcopy(body)
        bad["metadata"]["name"] = "pg-bad"
        bad["spec"][key] = value
        with pytest.raises(ApiException) as info:
            live_cluster.custom.create_namespaced_custom_object(*_ns(PODGROUP, namespace), bad)
        assert info.value.status == 422, (key, value, info.value.body)


def test_podgroup_status_is_a_subresource(live_cluster: LiveCluster, namespace: str) -> None:
    body = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg-status"},
            "spec": {"minMember": 1, "queue": "q"},
            "status": {"phase": "ignored-on-create"}}
    created = live_cluster.custom.create_namespaced_custom_object(*_ns(PODGROUP, namespace), body)
    assert "status" not in created or "phase" not in created.get("status", {})
    patch = {"status": {"schedulingConditions": [{
        "type": "UnschedulableOnNodePool", "nodePool": "default", "reason": "Unschedulable", "status": "True",
        "transitionID": "0", "message": "m",
        "reasons": [{"reason": "OverLimit", "message": "m", "details": {"queueDetails": {
            "name": "q", "queueResourceLimits": {"nvidia.com/gpu": "1.5", "cpu": "500m"}}}}],
    }], "resourcesStatus": {"allocated": {"cpu": "500m", "memory": "1Gi"}}}}
    custom = live_cluster.custom
    updated = custom.patch_namespaced_custom_object_status(*_ns(PODGROUP, namespace), "pg-status", patch)
    assert updated["status"]["schedulingConditions"][0]["reasons"][0]["reason"] == "OverLimit"
    assert updated["status"]["resourcesStatus"]["allocated"] == {"cpu": "500m", "memory": "1Gi"}


def test_bindrequest_round_trips(live_cluster: LiveCluster, namespace: str) -> None:
    body = {
        "apiVersion": "scheduling.run.ai/v1alpha2", "kind": "BindRequest", "metadata": {"name": "pod-a"},
        "spec": {
            "podName": "pod-a", "selectedNode": "node-1", "receivedResourceType": "Fraction",
            "receivedGPU": {"count": 1, "portion": "0.50"}, "selectedGPUGroups": ["g-1"], "backoffLimit": 3,
            "resourceClaimAllocations": [{"name": "gpu", "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}]}}}],
        },
    }
    custom = live_cluster.custom
    created = custom.create_namespaced_custom_object(*_ns(BINDREQUEST, namespace), copy.deepcopy(body))
    assert created["spec"] == body["spec"]
    status = {"status": {"phase": "Failed", "reason": "node gone", "failedAttempts": 2}}
    updated = custom.patch_namespaced_custom_object_status(*_ns(BINDREQUEST, namespace), "pod-a", status)
    assert updated["status"] == status["status"]


def test_topology_validation_rules(live_cluster: LiveCluster) -> None:
    def topology(name: str, labels: list[str]) -> dict[str, Any]:
        return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
                "spec": {"levels": [{"nodeLabel": label} for label in labels]}}

    good = topology("cluster-topology", ["cloud.provider.com/topology-block", "kubernetes.io/hostname"])
    live_cluster.custom.create_cluster_custom_object(*TOPOLOGY, good)
    try:
        for name, labels in [
            ("hostname-not-last", ["kubernetes.io/hostname", "rack"]),
            ("duplicate", ["rack", "rack"]),
            ("empty", []),
            ("bad-label", ["not a label"]),
        ]:
            with pytest.raises(ApiException) as info:
                live_cluster.custom.create_cluster_custom_object(*TOPOLOGY, topology(name, labels))
            assert info.value.status == 422, (name, info.value.body)
        with pytest.raises(ApiException) as info:
            live_cluster.custom.patch_cluster_custom_object(
                *TOPOLOGY, "cluster-topology", {"spec": {"levels": [{"nodeLabel": "zone"}]}}
            )
        assert info.value.status == 422 and "immutable" in info.value.body
    finally:
        live_cluster.custom.delete_cluster_custom_object(*TOPOLOGY, "cluster-topology")


def test_rbac_manifests_are_accepted(live_cluster: LiveCluster) -> None:
    from kubernetes import utils

    live_cluster.core.create_namespace({"metadata": {"name": "kai-scheduler"}})
    for path in sorted((REPO / "deploy" / "rbac").glob("*.yaml")):
        utils.create_from_yaml(live_cluster.api, yaml_objects=_docs(path), namespace="kai-scheduler")
    rbac = k8s.RbacAuthorizationV1Api(live_cluster.api)
    role = rbac.read_cluster_role("kai-scheduler")
    granted = {(g, r) for rule in role.rules for g in (rule.api_groups or []) for r in (rule.resources or [])}
    for needed in [("", "pods"), ("", "nodes"), ("scheduling.run.ai", "queues"),
                   ("scheduling.run.ai", "podgroups"), ("scheduling.run.ai", "bindrequests"),
                   ("kai.scheduler", "topologies")]:
        assert needed in granted, needed
    binder = rbac.read_cluster_role("kai-binder")  # the binder binds; the scheduler only asks it to
    granted = {(g, r) for rule in binder.rules for g in (rule.api_groups or []) for r in (rule.resources or [])}
    assert ("", "pods/binding") in granted and ("scheduling.run.ai", "bindrequests/status") in granted
