"""Helpers for the live podgrouper and admission tests: operator CRDs, workload trees, a running controller.

No controller-manager runs on the test control plane, so a test creates what each
operator would: the owner objects and the pods, linked by ownerReferences carrying the
UIDs the API server assigned. `create_tree` does that from the offline tests'
manifests (tests/podgrouper/manifests/), which name their own UIDs: it creates owners
before their dependents and rewrites each reference to the UID the owner got.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from kai.api import keys
from kai.cluster.kube import PODGROUPS, PODS, PRIORITY_CLASSES, ApiError, Kube
from kai.podgrouper.controller import ControllerConfig, PodGrouperController, ResourceMapper

HERE = Path(__file__).resolve().parent
OPERATOR_CRDS = HERE / "manifests" / "crds"
WORKLOADS = HERE.parent / "podgrouper" / "manifests"


def load_manifests(name: str) -> list[dict[str, Any]]:
    with open(WORKLOADS / f"{name}.yaml") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def uid(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def workload(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    """The object `kind`/`name` of a manifest file and everything it owns, directly or not."""
    top = next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    result, uids = [copy.deepcopy(top)], {uid(top)}
    grew = True
    while grew:
        grew = False
        for obj in objects:
            refs = obj["metadata"].get("ownerReferences") or []
            if obj["metadata"].get("uid") not in uids and any(r["uid"] in uids for r in refs):
                result.append(copy.deepcopy(obj))
                uids.add(uid(obj))
                grew = True
    return result


def install_operator_crds(api: k8s.ApiClient, kube: Kube, timeout: float = 30.0) -> None:
    """Create the operators' minimal CRDs (once per control plane) and wait until every kind is served."""
    ext = k8s.ApiextensionsV1Api(api)
    crds = [doc for path in sorted(OPERATOR_CRDS.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]
    for crd in crds:
        try:
            ext.create_custom_resource_definition(crd, _preload_content=False)
        except ApiException as exc:
            if exc.status != 409:
                raise
    mapper = ResourceMapper(kube)
    deadline = time.monotonic() + timeout
    for crd in crds:
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            while mapper.resource(f"{group}/{version['name']}", kind) is None:
                assert time.monotonic() < deadline, f"{kind}.{group} not served"
                time.sleep(0.2)
                mapper = ResourceMapper(kube)


def ensure_priority_classes(kube: Kube) -> None:
    """KAI's four PriorityClasses, as its Helm chart installs them."""
    for name, value in keys.DEFAULT_PRIORITY_CLASSES.items():
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "globalDefault": False,
        }
        with contextlib.suppress(ApiError):
            kube.post(PRIORITY_CLASSES.path(), body)


def _retarget(value: Any, old_namespace: str, namespace: str) -> Any:
    """Deep copy with every `namespace: <old>` field pointing at the test namespace."""
    if isinstance(value, dict):
        return {
            k: (namespace if k == "namespace" and v == old_namespace else _retarget(v, old_namespace, namespace))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_retarget(v, old_namespace, namespace) for v in value]
    return value


def create_tree(kube: Kube, objects: Iterable[Mapping[str, Any]], namespace: str) -> dict[str, dict[str, Any]]:
    """Create `objects` in `namespace`, owners first, references rewritten to the real UIDs.

    Returns the created objects by their manifest UID (and by `Kind/name`).
    """
    mapper = ResourceMapper(kube)
    pending = [copy.deepcopy(dict(o)) for o in objects]
    manifest_uids = {uid(o) for o in pending}
    real: dict[str, str] = {}
    created: dict[str, dict[str, Any]] = {}
    while pending:
        ready = [
            o
            for o in pending
            if all(
                r["uid"] in real or r["uid"] not in manifest_uids for r in o["metadata"].get("ownerReferences") or []
            )
        ]
        assert ready, "ownerReferences form a cycle"
        for obj in ready:
            pending.remove(obj)
            old_uid = uid(obj)
            body = _retarget(obj, obj["metadata"].get("namespace"), namespace)
            meta = body["metadata"]
            for field in ("uid", "resourceVersion", "creationTimestamp"):
                meta.pop(field, None)
            meta["namespace"] = namespace
            for ref in meta.get("ownerReferences") or []:
                ref["uid"] = real.get(ref["uid"], ref["uid"])
            if body["kind"] == "Pod":
                body.pop("status", None)
            if body["kind"] == "Job":  # the API server makes the selector and its template label itself
                body["spec"].pop("selector", None)
                labels = body["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})
                for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
                    labels.pop(key, None)
            if body["kind"] == "Pod":
                for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
                    (meta.get("labels") or {}).pop(key, None)
            if body["apiVersion"] == "apps/v1":
                _complete_apps_object(body)
            resource = mapper.resource(body["apiVersion"], body["kind"])
            assert resource is not None, f"{body['apiVersion']} {body['kind']} is not served"
            result = kube.post(resource.path(namespace), body)
            real[old_uid] = uid(result)
            created[old_uid] = result
            created[f"{body['kind']}/{meta['name']}"] = result
    return created


def _complete_apps_object(body: dict[str, Any]) -> None:
    """What the offline manifests abbreviate but the API server requires of a Deployment, ReplicaSet or
    StatefulSet: a selector its template's labels match, and a container."""
    spec = body.setdefault("spec", {})
    selector = spec.setdefault("selector", {}).setdefault("matchLabels", {"app": body["metadata"]["name"]})
    template = spec.setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels.update(selector)
    pod_spec = template.setdefault("spec", {})
    if not pod_spec.get("containers"):
        pod_spec["containers"] = [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]


def operator_pod(
    owner: Mapping[str, Any],
    template: Mapping[str, Any],
    name: str,
    labels: Mapping[str, str] | None = None,
    manifest_uid: str | None = None,
) -> dict[str, Any]:
    """A pod as `owner`'s operator creates it from `template` (an object for `create_tree`)."""
    meta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner["metadata"]["namespace"],
            "uid": manifest_uid or f"pod-{name}",
            "labels": {**(meta.get("labels") or {}), **(labels or {})},
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(dict(template["spec"])),
    }


@contextlib.contextmanager
def running_controller(kube: Kube, config: ControllerConfig | None = None) -> Iterator[PodGrouperController]:
    controller = PodGrouperController(kube, config or ControllerConfig(workers=4)).start(sync_timeout=20)
    try:
        assert controller.wait_synced(20)
        yield controller
    finally:
        controller.stop()


def wait_for(what: str, check: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def get_or_none(kube: Kube, path: str) -> dict[str, Any] | None:
    try:
        return kube.get(path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


def podgroup(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return get_or_none(kube, PODGROUPS.path(namespace, name))


def pod(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return kube.get(PODS.path(namespace, name))


def grouped_pod(kube: Kube, namespace: str, name: str, timeout: float = 15.0) -> dict[str, Any]:
    """The pod once the podgrouper has annotated it."""
    return wait_for(
        f"pod {namespace}/{name} to be grouped",
        lambda: (
            (p := pod(kube, namespace, name))["metadata"].get("annotations", {}).get(keys.POD_GROUP_ANNOTATION) and p
        ),
        timeout,
    )


def warnings_on(kube: Kube, namespace: str, pod_name: str) -> list[str]:
    events = kube.get(
        f"/api/v1/namespaces/{namespace}/events",
        {"fieldSelector": f"involvedObject.name={pod_name},reason={keys.PODGROUPER_WARNING_REASON}"},
    )
    return [e.get("message", "") for e in events.get("items") or []]


def prepared_kube(live_cluster: Any) -> Kube:
    """The admin client, with the operators' CRDs and KAI's priority classes installed."""
    kube = Kube(live_cluster.api)
    install_operator_crds(live_cluster.api, kube)
    ensure_priority_classes(kube)
    return kube
