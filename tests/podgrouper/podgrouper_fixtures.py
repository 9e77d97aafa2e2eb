"""Helpers for the podgrouper tests: load workload manifests and build owner chains like the controller.

A manifest file holds the objects a workload's operators create (top owner,
intermediate owners, pods), each with its uid and ownerReferences. `chain_for`
walks the pod's ownerReferences by uid, as the controller walks the API.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kai.podgrouper import OwnerChain

MANIFESTS = Path(__file__).resolve().parent / "manifests"
KAI_EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "kai-examples"


def load(name: str) -> list[dict[str, Any]]:
    """All objects of `manifests/<name>.yaml`."""
    with open(MANIFESTS / f"{name}.yaml") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def find(objects: Iterable[Mapping[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return copy.deepcopy(dict(obj))
    raise KeyError(f"{kind} {name}")


def owners_of(objects: Iterable[Mapping[str, Any]], obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The owner chain of `obj`: its first owner, that owner's first owner, ... up to the top."""
    by_uid = {o["metadata"]["uid"]: o for o in objects}
    chain: list[dict[str, Any]] = []
    current = obj
    while current["metadata"].get("ownerReferences"):
        reference = current["metadata"]["ownerReferences"][0]
        current = by_uid[reference["uid"]]
        chain.append(copy.deepcopy(dict(current)))
    return chain


def chain_for(objects: list[dict[str, Any]], pod_name: str, **extra: Any) -> OwnerChain:
    """The OwnerChain of pod `pod_name` among `objects` (extra fields go to OwnerChain)."""
    pod = find(objects, "Pod", pod_name)
    return OwnerChain(pod=pod, owners=owners_of(objects, pod), **extra)


def owner_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ownerReference a controller puts on the objects it creates for `obj`."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def kai_example(file_name: str) -> list[dict[str, Any]]:
    """The objects of one of KAI's example manifests (shared/kai-examples), as a user would apply them."""
    with open(KAI_EXAMPLES / file_name) as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def admitted(obj: Mapping[str, Any], uid: str, namespace: str = "default") -> dict[str, Any]:
    """`obj` as the API server returns it once created: with namespace and uid."""
    result = copy.deepcopy(dict(obj))
    result["metadata"] = {**result["metadata"], "namespace": namespace, "uid": uid}
    return result


def pod_from_template(
    owner: Mapping[str, Any],
    template: Mapping[str, Any],
    name: str,
    uid: str,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as `owner`'s controller creates it from a pod template."""
    template_metadata = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner["metadata"]["namespace"],
            "uid": uid,
            "labels": {**(template_metadata.get("labels") or {}), **(labels or {})},
            "annotations": dict(template_metadata.get("annotations") or {}),
            "ownerReferences": [owner_ref(owner)],
        },
        "spec": copy.deepcopy(dict(template["spec"])),
        "status": {"phase": "Pending"},
    }
