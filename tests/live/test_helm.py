"""The Helm chart: `helm template` output is accepted by the API server (server-side dry run of every
object), and its least-privilege roles are enough: the scheduler and the binder run as their own
service accounts (impersonated) and schedule a gang, a fractional pod and a why-pending condition."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.cluster.cache import RESERVATION_NAMESPACE
from kai.cluster.kube import PODS, ApiError, Kube, Resource
from kai.devcluster import build
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    REPO,
    bound,
    cleanup,
    condition,
    create,
    fresh_nodes,
    pod,
    podgroup,
    pods,
    queue,
    scheduler,
    wait,
)

CHART = REPO / "deploy" / "helm" / "kai-scheduler"
HELM_VERSION = "v3.16.4"
RELEASE_NS = "kai-scheduler"

KINDS = {
    ("v1", "Namespace"): Resource("Namespace", "v1", "namespaces", False),
    ("v1", "ServiceAccount"): Resource("ServiceAccount", "v1", "serviceaccounts", True),
    ("v1", "ConfigMap"): Resource("ConfigMap", "v1", "configmaps", True),
    ("v1", "Secret"): Resource("Secret", "v1", "secrets", True),
    ("v1", "Service"): Resource("Service", "v1", "services", True),
    ("apps/v1", "Deployment"): Resource("Deployment", "apps/v1", "deployments", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): Resource(
        "ClusterRole", "rbac.authorization.k8s.io/v1", "clusterroles", False
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): Resource(
        "ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "clusterrolebindings", False
    ),
    ("rbac.authorization.k8s.io/v1", "Role"): Resource("Role", "rbac.authorization.k8s.io/v1", "roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): Resource(
        "RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", True
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): Resource(
        "ValidatingWebhookConfiguration", "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", False
    ),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): Resource(
        "MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): Resource(
        "ValidatingAdmissionPolicy", "admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): Resource(
        "ValidatingAdmissionPolicyBinding",
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        False,
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): Resource(
        "CustomResourceDefinition", "apiextensions.k8s.io/v1", "customresourcedefinitions", False
    ),
    ("scheduling.run.ai/v2", "Queue"): Resource("Queue", "scheduling.run.ai/v2", "queues", False),
    ("scheduling.k8s.io/v1", "PriorityClass"): Resource(
        "PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False
    ),
}


@pytest.fixture(scope="module")
def helm() -> Path:
    """helm from PATH, or built once from the Go module proxy into the control-plane cache."""
    found = shutil.which("helm")
    if found:
        return Path(found)
    target = build.cache_root() / f"helm-{HELM_VERSION}" / "bin"
    binary = target / "helm"
    if not binary.exists():
        target.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["go", "install", "-trimpath", "-ldflags", "-s -w", f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
            env={**os.environ, "GOBIN": str(target), "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"},
            capture_output=True,
            text=True,
            timeout=1500,
            check=False,
        )
        if done.returncode != 0 or not binary.exists():
            reason = f"helm could not be built: {done.stderr.strip()[-400:]}"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
    return binary


def render(helm: Path, *values: str) -> list[dict[str, Any]]:
    args = [
        str(helm),
        "template",
        "kai",
        str(CHART),
        "--namespace",
        RELEASE_NS,
        "--include-crds",
        "--kube-version",
        "1.34.4",
    ]
    for value in values:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def apply(kube: Kube, obj: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    resource = KINDS[(obj["apiVersion"], obj["kind"])]
    meta = obj["metadata"]
    path = resource.path(meta.get("namespace") or RELEASE_NS if resource.namespaced else None, meta["name"])
    query = {"fieldManager": "kai-helm-test", "force": "true"}
    if dry_run:
        query["dryRun"] = "All"
    return kube.request("PATCH", path, query, obj, "application/apply-patch+yaml")


def _namespace(kube: Kube, name: str) -> None:
    try:
        kube.post("/api/v1/namespaces", {"metadata": {"name": name}})
    except ApiError as err:
        assert err.status == 409, err


def test_helm_template_is_accepted_by_the_api_server(helm: Path, live_cluster: LiveCluster) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    for name in (RELEASE_NS, RESERVATION_NAMESPACE):
        _namespace(kube, name)
    for values in (
        (),
        (
            "scheduler.replicas=2",
            "scheduler.evictionApi=true",
            "global.gpuSharing=true",
            "scheduler.config.actions=allocate\\, reclaim",
        ),
    ):
        docs = render(helm, *values)
        kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
        for needed in (
            ("Deployment", "kai-scheduler"),
            ("Deployment", "kai-binder"),
            ("ClusterRole", "kai-scheduler"),
            ("ClusterRole", "kai-binder"),
            ("ConfigMap", "kai-scheduler-config"),
            ("Role", "kai-binder-reservations"),
        ):
            assert needed in kinds, needed
        for doc in docs:
            accepted = apply(kube, doc, dry_run=True)
            assert accepted["metadata"]["name"] == doc["metadata"]["name"]
        config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kai-scheduler-config")
        parsed = yaml.safe_load(config["data"]["config.yaml"])
        assert parsed["schedulerParams"]["schedulerName"] == "kai-scheduler"
        args = next(d for d in docs if d["metadata"]["name"] == "kai-scheduler" and d["kind"] == "Deployment")
        argv = args["spec"]["template"]["spec"]["containers"][0]["args"]
        assert argv[:2] == ["run", "--no-binder"]


def _as(live: LiveCluster, account: str) -> Kube:
    kube = Kube.from_kubeconfig(str(live.kubeconfig))
    kube.api.set_default_header("Impersonate-User", f"system:serviceaccount:{RELEASE_NS}:{account}")
    return kube


def test_the_chart_roles_are_enough_for_the_scheduler_and_the_binder(
    helm: Path, live_cluster: LiveCluster, namespace: str, tmp_path: Path
) -> None:
    admin = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    for name in (RELEASE_NS, RESERVATION_NAMESPACE):
        _namespace(admin, name)
    rbac_kinds = {
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for doc in render(helm):
        if doc["kind"] in rbac_kinds:
            apply(admin, doc, dry_run=False)
    name = "kai-scheduler-rbac-test"
    q = f"q-{name}"
    create(admin, queue(q))
    fresh_nodes(live_cluster, 2, gpus=4)
    as_scheduler, as_binder = _as(live_cluster, "kai-scheduler"), _as(live_cluster, "kai-binder")
    with pytest.raises(ApiError) as denied:  # the scheduler cannot bind by itself
        as_scheduler.post(f"/api/v1/namespaces/{namespace}/pods/x/binding", {"target": {"name": "n"}})
    assert denied.value.status == 403
    try:
        with (
            scheduler(
                as_scheduler,
                name,
                binder=False,
                leader_elect=True,
                lease_namespace=RELEASE_NS,
                lease_name=f"{name}-scheduler",
            ),
            scheduler(
                as_binder,
                name,
                scheduler=False,
                leader_elect=True,
                lease_namespace=RELEASE_NS,
                lease_name=f"{name}-binder",
            ),
        ):
            create(admin, podgroup("gang", namespace, q, min_member=4))
            for i in range(4):
                create(admin, pod(f"w{i}", namespace, name, group="gang", gpus=1))
            create(admin, pod("half", namespace, name, queue_name=q, annotations={"gpu-fraction": "0.5"}))
            create(admin, pod("huge", namespace, name, queue_name=q, gpus=8))
            wait("the gang and the fraction bound", lambda: len(bound(admin, namespace)) == 5, timeout=60)
            wait(
                "the why-pending condition",
                lambda: (
                    (c := condition(pods(admin, namespace)["huge"], "PodScheduled")) and c["reason"] == "Unschedulable"
                ),
            )
    finally:
        cleanup(admin, namespace, [q])
        admin.delete(PODS.path(RESERVATION_NAMESPACE), query={"gracePeriodSeconds": 0})


def test_the_chart_s_defaults_are_secure(helm: Path) -> None:
    docs = render(helm)
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {
        "kai-scheduler",
        "kai-binder",
        "kai-podgrouper",
        "kai-admission",
    }
    for d in deployments:
        spec = d["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, d["metadata"]["name"]
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in spec["containers"]:
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert not any("snapshot" in a for a in container["args"])  # /snapshot is not served
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    for rule in roles["kai-podgrouper"]["rules"]:
        assert "*" not in rule["resources"], rule
    binder_configmaps = [r for r in roles["kai-binder"]["rules"] if "configmaps" in r["resources"]]
    assert all(set(r["verbs"]) <= {"create", "patch"} for r in binder_configmaps)
    policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    assert policy["metadata"]["name"] == "kai-binder-configmaps"
    assert f"system:serviceaccount:{RELEASE_NS}:kai-binder" in policy["spec"]["matchConditions"][0]["expression"]


def test_the_binder_may_write_only_pod_owned_configmaps(helm: Path, live_cluster: LiveCluster, namespace: str) -> None:
    """RBAC cannot name the binder's GPU-sharing ConfigMaps; the chart's admission policy confines its
    ConfigMap writes to ones a pod owns, and the binder itself never rewrites one its pod does not own."""
    from kai.cluster.binder import Binder, BindError
    from kai.cluster.cache import BINDER_KINDS, ClusterCache
    from kai.cluster.kube import CONFIGMAPS

    admin = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    _namespace(admin, RELEASE_NS)
    for doc in render(helm):
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding", "ServiceAccount") or doc["kind"].startswith(
            "ValidatingAdmissionPolicy"
        ):
            apply(admin, doc, dry_run=False)
    as_binder = _as(live_cluster, "kai-binder")
    owner_pod = create(admin, pod("owner", namespace, "nobody"))
    owned = [{"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_pod["metadata"]["uid"]}]
    admin.post(CONFIGMAPS.path(namespace), {"metadata": {"name": "users-own"}, "data": {"k": "v"}})

    def denied() -> bool:
        try:
            as_binder.patch(CONFIGMAPS.path(namespace, "users-own"), {"data": {"k": "clobbered"}})
        except ApiError as err:
            return err.status in (403, 422)
        return False

    try:
        wait("the policy to take effect", denied, timeout=30, interval=0.5)
        assert admin.get(CONFIGMAPS.path(namespace, "users-own"))["data"] == {"k": "v"}
        with pytest.raises(ApiError):  # a ConfigMap no pod owns cannot be created either
            as_binder.post(CONFIGMAPS.path(namespace), {"metadata": {"name": "loose"}, "data": {}})
        body = {"metadata": {"name": "owner-shared-gpu-0", "ownerReferences": owned}, "data": {"A": "1"}}
        as_binder.post(CONFIGMAPS.path(namespace), body)
        as_binder.patch(CONFIGMAPS.path(namespace, "owner-shared-gpu-0"), {"data": {"A": "2"}})
        with pytest.raises(ApiError):  # nor may it take a ConfigMap away from its pod
            as_binder.patch(CONFIGMAPS.path(namespace, "owner-shared-gpu-0"), {"metadata": {"ownerReferences": None}})
        binder = Binder(admin, ClusterCache(admin, BINDER_KINDS))  # not started: only its ConfigMap write is used
        with pytest.raises(BindError, match="not this pod's"):
            binder._update_own_configmap(owner_pod["metadata"], "users-own", {"A": "3"})
        assert admin.get(CONFIGMAPS.path(namespace, "users-own"))["data"] == {"k": "v"}
        binder._update_own_configmap(owner_pod["metadata"], "owner-shared-gpu-0", {"A": "3"})
        assert admin.get(CONFIGMAPS.path(namespace, "owner-shared-gpu-0"))["data"] == {"A": "3"}
    finally:
        cleanup(admin, namespace)
        for name in ("users-own", "owner-shared-gpu-0"):
            with contextlib.suppress(ApiError):
                admin.delete(CONFIGMAPS.path(namespace, name))
