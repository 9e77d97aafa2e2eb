"""The binder's DRA step: before a pod with resource claims is bound, write each claim's allocation.

For every entry of the BindRequest's `resourceClaimAllocations` (the pod's claim entry name and a
resource.k8s.io/v1 AllocationResult):

1. find the claim: the pod's `resourceClaimName`, or the claim its `status.resourceClaimStatuses`
   names for a template entry; when a template entry has no claim yet (no resource-claim controller
   has made one), make it from the template, named `<pod>-<entry>`, owned by the pod and annotated
   with the entry name, and record it in the pod's status, as that controller does;
2. write `status.allocation` (unless the claim is allocated already: a shared claim) and add the pod
   to `status.reservedFor`, with the claim's resourceVersion as precondition (a conflict is retried
   on a fresh read).

A claim allocated to other devices than the request says, a claim being deleted, or a claim at its
consumer limit fails the bind.
"""

from __future__ import annotations

import logging
from typing import Any

from kai.cluster.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, ApiError, Kube

log = logging.getLogger("kai.cluster.claims")

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
RESERVED_FOR_MAX = 256


class ClaimError(Exception):
    """The claim cannot be allocated as the BindRequest says (the bind fails with this reason)."""


def _devices(allocation: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return sorted((str(r.get("driver")), str(r.get("pool")), str(r.get("device"))) for r in results)


def claim_name(kube: Kube, pod: dict[str, Any], entry: str) -> str:
    """The ResourceClaim of the pod's claim entry, made from its template when there is none yet."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    ref = next((c for c in spec.get("resourceClaims") or [] if c.get("name") == entry), None)
    if ref is None:
        raise ClaimError(f"pod has no resource claim entry {entry!r}")
    if ref.get("resourceClaimName"):
        return str(ref["resourceClaimName"])
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == entry and status.get("resourceClaimName"):
            return str(status["resourceClaimName"])
    template = ref.get("resourceClaimTemplateName")
    if not template:
        raise ClaimError(f"resource claim entry {entry!r} names neither a claim nor a template")
    namespace, name = meta["namespace"], f"{meta['name']}-{entry}"
    try:
        found = kube.get(RESOURCE_CLAIM_TEMPLATES.path(namespace, template))
    except ApiError as err:
        if err.status == 404:
            raise ClaimError(f"resourceclaimtemplate {template!r} not found") from err
        raise
    inner = (found.get("spec") or {}).get("spec") or {}
    body = {
        "apiVersion": RESOURCE_CLAIMS.api_version,
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": ((found.get("spec") or {}).get("metadata") or {}).get("labels") or {},
            "annotations": {POD_CLAIM_NAME_ANNOTATION: entry},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": inner,
    }
    try:
        kube.post(RESOURCE_CLAIMS.path(namespace), body)
    except ApiError as err:
        if err.status != 409:
            raise
    statuses = [s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [] if s.get("name") != entry]
    statuses.append({"name": entry, "resourceClaimName": name})
    kube.patch(PODS.path(namespace, meta["name"], "status"), {"status": {"resourceClaimStatuses": statuses}})
    return name


def allocate(kube: Kube, pod: dict[str, Any], allocations: list[dict[str, Any]]) -> None:
    """Write every claim's allocation and reserve it for the pod (see the module docstring)."""
    meta = pod["metadata"]
    namespace = meta["namespace"]
    me = {"resource": "pods", "name": meta["name"], "uid": meta["uid"]}
    for item in allocations:
        entry, wanted = str(item.get("name") or ""), item.get("allocation") or {}
        name = claim_name(kube, pod, entry)
        for _attempt in range(5):
            try:
                claim = kube.get(RESOURCE_CLAIMS.path(namespace, name))
            except ApiError as err:
                if err.status == 404:
                    raise ClaimError(f'resourceclaim "{name}" not found') from err
                raise
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                raise ClaimError(f'resourceclaim "{name}" is being deleted')
            status = dict(claim.get("status") or {})
            reserved = list(status.get("reservedFor") or [])
            if status.get("allocation") and _devices(status["allocation"]) != _devices(wanted):
                raise ClaimError(f"resource claim {name} is allocated to other devices than the scheduler chose")
            if any(r.get("uid") == meta["uid"] for r in reserved):
                break
            if len(reserved) >= RESERVED_FOR_MAX:
                raise ClaimError(f"resource claim {name} has reached its maximum number of consumers")
            status.setdefault("allocation", wanted)
            status["reservedFor"] = [*reserved, me]
            claim["status"] = status
            try:
                kube.put(RESOURCE_CLAIMS.path(namespace, name, "status"), claim)
            except ApiError as err:
                if err.status == 409:  # changed since we read it: read again
                    continue
                raise
            log.info("resource claim %s/%s allocated for pod %s", namespace, name, meta["name"])
            break
        else:
            raise ClaimError(f"resource claim {name} kept changing while its allocation was written")
