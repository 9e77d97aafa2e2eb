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
# As helm's own release build: its version, and the Kubernetes version `helm template` assumes
# (a plain `go install` leaves v1.20). The chart renders without --kube-version either way.
HELM_LDFLAGS = (
    "-s -w"
    f" -X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"
    " -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1"
    " -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34"
)
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
    ("kai.scheduler/v1", "SchedulingShard"): Resource("SchedulingShard", "kai.scheduler/v1", "schedulingshards", False),
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
            ["go", "install", "-trimpath", "-ldflags", HELM_LDFLAGS, f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
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


def render(helm: Path, *values: str, namespace: str = RELEASE_NS, json_values: tuple[str, ...] = ()) -> list[dict]:
    """`helm template` as a user runs it: no --kube-version (the chart asks for none)."""
    args = [str(helm), "template", "kai", str(CHART), "--namespace", namespace, "--include-crds"]
    for value in values:
        args += ["--set", value]
    for value in json_values:
        args += ["--set-json", value]
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
            ("Namespace", RELEASE_NS),  # the release namespace is the chart's
            ("Deployment", "kai-scheduler-default"),  # KAI's name: <schedulerName>-<shard>
            ("Deployment", "kai-binder"),
            ("ClusterRole", "kai-scheduler"),
            ("ClusterRole", "kai-binder"),
            ("ConfigMap", "kai-scheduler-default"),
            ("SchedulingShard", "default"),
            ("Role", "kai-binder-reservations"),
        ):
            assert needed in kinds, needed
        for doc in docs:
            accepted = apply(kube, doc, dry_run=True)
            assert accepted["metadata"]["name"] == doc["metadata"]["name"]
        config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kai-scheduler-default")
        parsed = yaml.safe_load(config["data"]["config.yaml"])
        assert parsed["schedulerParams"]["schedulerName"] == "kai-scheduler"
        assert yaml.safe_load(config["data"]["shard.yaml"])["spec"]["partitionLabelValue"] == ""
        args = next(d for d in docs if d["metadata"]["name"] == "kai-scheduler-default" and d["kind"] == "Deployment")
        argv = args["spec"]["template"]["spec"]["containers"][0]["args"]
        assert argv[:2] == ["run", "--no-binder"]
        assert "--scheduling-shard=/etc/kai/shard.yaml" in argv and "--partition-label-value=" in argv


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
        "kai-scheduler-default",
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


def _deployment(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)


def _args(docs: list[dict[str, Any]], name: str) -> list[str]:
    return _deployment(docs, name)["spec"]["template"]["spec"]["containers"][0]["args"]


def test_kai_s_chart_values_render_the_same_objects(helm: Path) -> None:
    """Values of KAI's chart, set the way a KAI user sets them, mean the same here."""
    docs = render(
        helm,
        "global.registry=registry.example.com/ml",
        "global.tag=1.2.3",
        "global.imagePullPolicy=Always",
        "operator.replicaCount=2",
        "global.requireDefaultPodAntiAffinityTerm=true",
        "podgrouper.queueLabelKey=example.com/queue",
        "binder.ports.metricsPort=9090",
        "scheduler.ports.metricsPort=9091",
        "admission.ports.webhookPort=9444",
        "scheduler.placementStrategy=spread",
        "defaultQueue.parentName=top",
        "defaultQueue.childResources.gpu.quota=4",
        json_values=(
            'global.imagePullSecrets=["regcred"]',
            'global.tolerations=[{"key":"gpu","operator":"Exists","effect":"NoSchedule"}]',
            'binder.resourceReservationPodResources={"requests":{"cpu":"1m"}}',
            'scheduler.actions=["allocate","reclaim"]',
        ),
    )
    for d in (d for d in docs if d["kind"] == "Deployment"):
        spec = d["spec"]["template"]["spec"]
        container = spec["containers"][0]
        assert container["image"] == "registry.example.com/ml/kai:1.2.3", d["metadata"]["name"]
        assert container["imagePullPolicy"] == "Always"
        assert d["spec"]["replicas"] == 2
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
        (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"] == {"app": d["spec"]["selector"]["matchLabels"]["app"]}
    assert "--queue-label-key=example.com/queue" in _args(docs, "kai-podgrouper")
    assert "--queue-label-key=example.com/queue" in _args(docs, "kai-scheduler-default")
    binder = _args(docs, "kai-binder")
    assert "--metrics-bind-address=:9090" in binder
    assert '--resource-reservation-pod-resources={"requests":{"cpu":"1m"}}' in binder
    assert "--listen-address=:9091" in _args(docs, "kai-scheduler-default")
    assert "--port=9444" in _args(docs, "kai-admission")
    config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kai-scheduler-default")
    assert yaml.safe_load(config["data"]["config.yaml"])["actions"] == "allocate, reclaim"
    shard = yaml.safe_load(config["data"]["shard.yaml"])["spec"]
    assert shard["placementStrategy"] == {"gpu": "spread", "cpu": "spread"}
    queues = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Queue"}
    assert set(queues) == {"top", "default-queue"}
    assert queues["default-queue"]["spec"]["parentQueue"] == "top"
    assert queues["default-queue"]["spec"]["resources"]["gpu"] == {"quota": 4, "limit": -1, "overQuotaWeight": 1}


def test_one_scheduler_per_shard(helm: Path) -> None:
    docs = render(
        helm, "shards.gpu-pool.partitionLabelValue=gpu-pool", "shards.gpu-pool.args.max-consolidation-preemptees=4"
    )
    shards = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "SchedulingShard"}
    assert shards == {"default": {"partitionLabelValue": ""}, "gpu-pool": shards["gpu-pool"]}
    assert shards["gpu-pool"]["args"] == {"max-consolidation-preemptees": "4"}  # strings, as the CRD's type
    schedulers = {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"} - {
        "kai-binder",
        "kai-podgrouper",
        "kai-admission",
    }
    assert schedulers == {"kai-scheduler-default", "kai-scheduler-gpu-pool"}
    pool = _args(docs, "kai-scheduler-gpu-pool")
    assert "--partition-label-value=gpu-pool" in pool
    assert pool[-1] == "--max-consolidation-preemptees=4"  # after the chart's own flags: it wins
    selectors = [_deployment(docs, n)["spec"]["selector"]["matchLabels"] for n in sorted(schedulers)]
    assert selectors[0] != selectors[1]  # each Deployment owns only its pods
    services = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
    assert {"kai-scheduler-default", "kai-scheduler-gpu-pool"} <= services


def _render_live(helm: Path, live: LiveCluster, namespace: str, tmp: Path) -> tuple[list[dict[str, Any]], str]:
    """`helm template --dry-run=server`: the chart's lookups see the live cluster (as at install). NOTES
    are rendered too, from a copy of the chart where NOTES.txt is an ordinary template."""
    chart = tmp / "chart"
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes.txt")
    (chart / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n'
    )
    args = [str(helm), "template", "kai", str(chart), "--namespace", namespace, "--dry-run=server"]
    # helm install sees the cluster's API versions (kai's CRDs among them); helm template, its own
    # unless told.
    args += ["--kubeconfig", str(live.kubeconfig)]
    for served in ("apiregistration.k8s.io/v1", "kai.scheduler/v1/Config", "kai.scheduler/v1/SchedulingShard"):
        args += ["--api-versions", served]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    notes = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "notes")
    return [d for d in docs if d is not notes], notes["data"]["notes"]


CONFIGS = Resource("Config", "kai.scheduler/v1", "configs", False)
SHARDS = Resource("SchedulingShard", "kai.scheduler/v1", "schedulingshards", False)


def test_a_kai_install_s_config_and_shards_carry_over(
    helm: Path, live_cluster: LiveCluster, namespace: str, tmp_path: Path
) -> None:
    """KAI's kai-config and SchedulingShards, left in the cluster by a KAI install, configure the chart;
    the Config fields kai does not read are named in NOTES."""
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    config = {
        "apiVersion": "kai.scheduler/v1",
        "kind": "Config",
        "metadata": {"name": "kai-config"},
        "spec": {
            "namespace": namespace,
            "global": {"schedulerName": "team-scheduler", "replicaCount": 3, "openshift": False},
            "binder": {"maxConcurrentReconciles": 42, "resourceReservation": {"appLabel": "reserved"}},
            "admission": {"gpuSharing": True, "gpuPodRuntimeClassName": ""},
            "podGrouper": {"args": {"gangScheduleKnative": False}},
            "queueController": {"metricsNamespace": "kai"},
        },
    }
    shard = {
        "apiVersion": "kai.scheduler/v1",
        "kind": "SchedulingShard",
        "metadata": {"name": "big-pool"},
        "spec": {"partitionLabelValue": "big", "placementStrategy": {"gpu": "spread"}, "goMemLimitRatio": 0.8},
    }
    kube.post(CONFIGS.path(), config)
    kube.post(SHARDS.path(), shard)
    try:
        docs, notes = _render_live(helm, live_cluster, namespace, tmp_path)
    finally:
        for path in (CONFIGS.path(name="kai-config"), SHARDS.path(name="big-pool")):
            with contextlib.suppress(ApiError):
                kube.delete(path)
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert {"team-scheduler-default", "team-scheduler-big-pool", "kai-binder"} <= set(deployments)
    # Against a cluster the release namespace is helm's (--create-namespace), not the chart's.
    assert not [d for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"] == namespace]
    assert all(d["spec"]["replicas"] == 3 for d in deployments.values())
    assert "--partition-label-value=big" in _args(docs, "team-scheduler-big-pool")
    binder = _args(docs, "kai-binder")
    assert "--max-concurrent-reconciles=42" in binder and "--resource-reservation-app-label=reserved" in binder
    admission = _args(docs, "kai-admission")
    assert "--gpu-sharing" in admission and "--gpu-runtime-class=" in admission
    assert "--no-gang-schedule-knative" in _args(docs, "kai-podgrouper")
    # The shard made elsewhere is not taken over (nor rendered), its scheduler is.
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "SchedulingShard"} == {"default"}
    assert "spec.queueController" in notes and "spec.global.openshift" in notes
    assert "SchedulingShard big-pool: spec.goMemLimitRatio" in notes
    assert "spec.binder.maxConcurrentReconciles" not in notes
