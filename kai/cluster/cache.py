"""The live cache: one reflector per kind the scheduler reads, and the per-cycle view of them.

:meth:`ClusterCache.view` turns the stores into the plain object dicts that
``kai.snapshot.builder.build_snapshot`` takes (the same builder ``kai simulate`` uses, so the
live cycle and a simulation of a recorded snapshot decide the same thing), after applying
KAI's BindRequest rules:

* a pod with a non-failed BindRequest (or one the scheduler is creating right now) and no
  ``spec.nodeName`` is *Binding*: it is handed to
  the builder as a shallow copy with ``spec.nodeName`` = the request's node (and the GPU-group
  labels of a fractional request), so it holds its node's resources like a bound pod;
* a failed BindRequest, one whose node is gone, and one whose pod is gone (or is another pod
  of the same name) is *stale*: listed in ``view.stale_bind_requests`` for the scheduler to
  delete; its pod is Pending again;
* reservation pods (namespace ``kai-resource-reservation``) are left out: the GPU groups they
  hold are accounted through the fractional pods that use them, as in KAI;
* the Dynamic Resource Allocation kinds (DeviceClass, ResourceSlice, ResourceClaim,
  ResourceClaimTemplate) are watched when the API server serves ``resource.k8s.io/v1``.

The scheduler's cache also watches Namespaces, PersistentVolumeClaims, PersistentVolumes and
StorageClasses (``STORAGE_KINDS``): with them the snapshot lists every claim there is
(``watches_storage``), so a pod naming a missing claim is unschedulable with a reason.

Incremental: the stores hand over the same dict for an object until it changes, and the view
keeps the Binding copy of a pod while neither the pod nor its BindRequest changes, so the
builder's :class:`~kai.snapshot.builder.ConversionMemo` converts each object once per change.
When no store and no in-flight BindRequest changed since the last view, :meth:`view` returns
that view itself (``CacheView.signature`` says what it was taken from).

The cache also keeps an index of pods by node (the binder's fit check reads it).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kai.api import keys
from kai.cluster.kube import (
    BIND_REQUESTS,
    DRA_API,
    DRA_KINDS,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    PVS,
    QUEUES,
    STORAGE_CLASSES,
    TOPOLOGIES,
    ApiError,
    Kube,
    Resource,
    object_key,
)
from kai.cluster.reflector import DELETED, Reflector, Store, wait_all_synced

RESERVATION_NAMESPACE = "kai-resource-reservation"
STORAGE_KINDS = (NAMESPACES, PVCS, PVS, STORAGE_CLASSES)
SCHEDULER_KINDS = (
    NODES,
    PODS,
    QUEUES,
    PODGROUPS,
    PRIORITY_CLASSES,
    BIND_REQUESTS,
    TOPOLOGIES,
    *DRA_KINDS,
    *STORAGE_KINDS,
)
BINDER_KINDS = (NODES, PODS, BIND_REQUESTS)


def serves_dra(kube: Kube) -> bool:
    """Whether the API server serves resource.k8s.io/v1 (KAI detects the DRA feature the same way)."""
    try:
        kube.get(f"/apis/{DRA_API}")
    except ApiError as err:
        if err.status in (403, 404):
            return False
        raise
    return True


def bind_request_failed(br: dict[str, Any]) -> bool:
    """KAI: phase Failed and failedAttempts >= backoffLimit, or no backoffLimit."""
    status = br.get("status") or {}
    if status.get("phase") != "Failed":
        return False
    limit = (br.get("spec") or {}).get("backoffLimit")
    return limit is None or int(status.get("failedAttempts") or 0) >= int(limit)


def owner_uid(br: dict[str, Any]) -> str:
    for ref in (br.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Pod":
            return str(ref.get("uid") or "")
    return ""


def as_binding(pod: dict[str, Any], br: dict[str, Any]) -> dict[str, Any]:
    """A shallow copy of the pod as if bound to the BindRequest's node (with its GPU groups)."""
    spec = br.get("spec") or {}
    copy = dict(pod)
    copy["spec"] = {**(pod.get("spec") or {}), "nodeName": spec.get("selectedNode")}
    groups = spec.get("selectedGPUGroups") or []
    if groups:
        meta = dict(pod.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        labels.update(gpu_group_labels(groups))
        meta["labels"] = labels
        copy["metadata"] = meta
    return copy


def gpu_group_labels(groups: Iterable[str]) -> dict[str, str]:
    """KAI's labels: `runai-gpu-group=<id>` for one device, `runai-gpu-group/<id>=<id>` for several."""
    groups = list(groups)
    if len(groups) == 1:
        return {keys.GPU_GROUP_LABEL: groups[0]}
    return {f"{keys.MULTI_GPU_GROUP_LABEL_PREFIX}{g}": g for g in groups}


@dataclass
class CacheView:
    """What one cycle sees: the objects for the snapshot builder, and the raw objects by key."""

    objects: list[dict[str, Any]]
    pods: dict[str, dict[str, Any]]
    podgroups: dict[str, dict[str, Any]]
    queues: dict[str, dict[str, Any]]
    nodes: dict[str, dict[str, Any]]
    bind_requests: dict[str, dict[str, Any]]
    binding: dict[str, str] = field(default_factory=dict)  # pod key -> node, for pods in Binding state
    stale_bind_requests: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (BR, why)
    storage_listed: bool = False  # `objects` hold every PersistentVolumeClaim (the cache watches them)
    signature: tuple[Any, ...] = ()  # the store versions and in-flight requests the view was taken from


class ClusterCache:
    """Reflectors for the kinds the scheduler (or the binder) reads, plus a pods-by-node index."""

    def __init__(self, kube: Kube, kinds: Iterable[Resource] = SCHEDULER_KINDS, watch_timeout: int = 300) -> None:
        self.kube = kube
        self.reflectors: dict[str, Reflector] = {}
        self.stores: dict[str, Store] = {}
        self._by_node: dict[str, set[str]] = defaultdict(set)
        self._node_of: dict[str, str] = {}
        self._index_lock = threading.Lock()
        # BindRequests being created (pod key -> body): the scheduler's own, not yet answered.
        self.in_flight: dict[str, dict[str, Any]] = {}
        kinds = list(kinds)
        if any(k in DRA_KINDS for k in kinds) and not serves_dra(kube):
            kinds = [k for k in kinds if k not in DRA_KINDS]  # no DRA API: no claims to read
        self._last_view: CacheView | None = None
        # pod key -> (pod, BindRequest, the pod as Binding): kept while neither changes.
        self._binding_copies: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        # id(BindRequest) -> (it, its pod, node exists, pod key, why stale): see view().
        self._judged: dict[int, tuple[dict[str, Any], dict[str, Any] | None, bool, str, str | None]] = {}
        for resource in kinds:
            handler = self._index_pod if resource is PODS else None
            r = Reflector(kube, resource, on_event=handler, watch_timeout=watch_timeout, name=resource.plural)
            self.reflectors[resource.kind] = r
            self.stores[resource.kind] = r.store

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ClusterCache:
        for r in self.reflectors.values():
            r.start()
        return self

    def stop(self) -> None:
        for r in self.reflectors.values():
            r.stop()

    def wait_synced(self, timeout: float = 60.0) -> bool:
        return wait_all_synced(self.reflectors.values(), timeout)

    @property
    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors.values())

    def store(self, resource: Resource) -> Store:
        return self.stores[resource.kind]

    @property
    def watches_storage(self) -> bool:
        """The cache lists every PersistentVolumeClaim (and the volumes, classes and namespaces)."""
        return all(r.kind in self.stores for r in STORAGE_KINDS)

    # -- pods by node ---------------------------------------------------------------------------
    def _index_pod(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = object_key(obj)
        node = "" if event_type == DELETED else str((obj.get("spec") or {}).get("nodeName") or "")
        with self._index_lock:
            previous = self._node_of.get(key, "")
            if previous == node:
                return
            if previous:
                self._by_node[previous].discard(key)
                self._node_of.pop(key, None)
            if node:
                self._by_node[node].add(key)
                self._node_of[key] = node

    def pods_on_node(self, node: str) -> list[dict[str, Any]]:
        store = self.stores[PODS.kind]
        with self._index_lock:
            names = list(self._by_node.get(node, ()))
        return [p for p in (store.get(k) for k in names) if p is not None]

    def assume_bound(self, pod: dict[str, Any], node: str) -> None:
        """Record at once that we bound `pod` (the watch event follows; it carries the same node)."""
        copy = dict(pod)
        copy["spec"] = {**(pod.get("spec") or {}), "nodeName": node}
        self.stores[PODS.kind].put(copy)
        self._index_pod("MODIFIED", copy, pod)

    # -- the per-cycle view ---------------------------------------------------------------------
    @staticmethod
    def _judge(
        br: dict[str, Any], pods: dict[str, dict[str, Any]], nodes: dict[str, dict[str, Any]]
    ) -> tuple[dict[str, Any], dict[str, Any] | None, bool, str, str | None]:
        """(br, its pod, its node exists, pod key, why it is stale or None). A deleted request has no pod key."""
        spec = br.get("spec") or {}
        node_exists = spec.get("selectedNode") in nodes
        if (br.get("metadata") or {}).get("deletionTimestamp"):
            return br, None, node_exists, "", None
        namespace = (br.get("metadata") or {}).get("namespace") or ""
        pod_key = f"{namespace}/{spec.get('podName')}"
        pod = pods.get(pod_key)
        uid = owner_uid(br)
        why: str | None = None
        if pod is None or (uid and (pod.get("metadata") or {}).get("uid") != uid):
            why = "its pod is gone"
        elif bind_request_failed(br):
            why = f"binding failed: {(br.get('status') or {}).get('reason', '')}"
        elif not node_exists:
            why = f"node {spec.get('selectedNode')!r} is gone"
        return br, pod, node_exists, pod_key, why

    def signature(self) -> tuple[Any, ...]:
        """What a view depends on: every store's change count and the in-flight BindRequests."""
        versions = tuple(store.version for store in self.stores.values())
        return versions, tuple((key, id(body)) for key, body in list(self.in_flight.items()))

    def view(self) -> CacheView:
        signature = self.signature()  # before the items: a change that lands meanwhile shows next time
        last = self._last_view
        if last is not None and last.signature == signature:
            return last

        def items(resource: Resource) -> dict[str, dict[str, Any]]:
            store = self.stores.get(resource.kind)
            return store.items() if store is not None else {}

        nodes, pods, brs = items(NODES), items(PODS), items(BIND_REQUESTS)
        queues, podgroups = items(QUEUES), items(PODGROUPS)
        objects: list[dict[str, Any]] = list(nodes.values())
        objects.extend(queues.values())
        objects.extend(podgroups.values())
        objects.extend(items(PRIORITY_CLASSES).values())
        objects.extend(items(TOPOLOGIES).values())
        for resource in (*DRA_KINDS, *STORAGE_KINDS):
            objects.extend(items(resource).values())
        view = CacheView([], pods, podgroups, queues, nodes, brs)
        view.storage_listed = self.watches_storage
        view.signature = signature
        live_br: dict[str, dict[str, Any]] = {}
        judged = self._judged
        kept_judged: dict[int, tuple[dict[str, Any], dict[str, Any] | None, bool, str, str | None]] = {}
        for br in brs.values():
            # What a BindRequest is depends only on it, its pod and whether its node exists: judged once
            # while none of the three changes.
            entry = judged.get(id(br))
            if entry is not None and entry[0] is br and pods.get(entry[3]) is entry[1]:
                spec = br.get("spec") or {}
                if (spec.get("selectedNode") in nodes) is not entry[2]:
                    entry = None
            else:
                entry = None
            if entry is None:
                entry = self._judge(br, pods, nodes)
            kept_judged[id(br)] = entry
            why, pod_key = entry[4], entry[3]
            if why is None:
                if pod_key:
                    live_br[pod_key] = br
            else:
                view.stale_bind_requests.append((br, why))
        self._judged = kept_judged
        # Pods with a request and no node yet are Binding: each is handed over as its Binding copy.
        in_flight = dict(self.in_flight)
        copies = self._binding_copies
        kept_copies: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        reserved = RESERVATION_NAMESPACE + "/"
        for key in {**in_flight, **live_br}:
            pod = pods.get(key)
            if pod is None or key.startswith(reserved) or (pod.get("spec") or {}).get("nodeName"):
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            br = live_br.get(key) or in_flight[key]
            view.binding[key] = str((br.get("spec") or {}).get("selectedNode"))
            kept = copies.get(key)
            if kept is None or kept[0] is not pod or kept[1] is not br:
                kept = (pod, br, as_binding(pod, br))
            kept_copies[key] = kept
        if kept_copies:
            objects.extend(
                kept_copies[k][2] if k in kept_copies else p for k, p in pods.items() if not k.startswith(reserved)
            )
        else:
            objects.extend(p for k, p in pods.items() if not k.startswith(reserved))
        self._binding_copies = kept_copies
        view.objects = objects
        self._last_view = view
        return view
