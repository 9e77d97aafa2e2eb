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
RESERVED = RESERVATION_NAMESPACE + "/"
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


def _bound_to(br: dict[str, Any]) -> tuple[Any, Any]:
    """What :func:`as_binding` reads of a BindRequest."""
    spec = br.get("spec") or {}
    return spec.get("selectedNode"), spec.get("selectedGPUGroups") or []


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
    # For a consumer that keeps what it derives from views (kai.cluster.incremental): the views are
    # numbered; `changed_pods` holds (at least) the keys of the pods whose object in `objects` may differ
    # from the one the view numbered `serial - 1` handed over (None: unknown); `fixed` holds the objects
    # that are neither Pods nor PodGroups, in `objects`' order; `copies` the Binding copies by pod key.
    serial: int = 0
    versions_after: tuple[int, ...] = ()  # the stores' change counts once the view was read
    changed_pods: set[str] | None = None
    fixed: list[dict[str, Any]] = field(default_factory=list)
    copies: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_order: dict[str, int] = field(default_factory=dict)  # pod key -> its place in `pods` (the cache's order)


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
        self.in_flight = InFlight()
        kinds = list(kinds)
        if any(k in DRA_KINDS for k in kinds) and not serves_dra(kube):
            kinds = [k for k in kinds if k not in DRA_KINDS]  # no DRA API: no claims to read
        self._last_view: CacheView | None = None
        self._derived: _Derived | None = None  # what views derive, kept between them (made by the first)
        for resource in kinds:
            handler = self._index_pod if resource is PODS else None
            r = Reflector(
                kube,
                resource,
                on_event=handler,
                watch_timeout=watch_timeout,
                name=resource.plural,
                drop_managed_fields=True,  # never read, and never written back: see kai/cluster/NOTES.md
            )
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

    def pods_on_node(self, node: str) -> list[tuple[str, dict[str, Any]]]:
        """The pods whose spec.nodeName is `node`, each with its key."""
        store = self.stores[PODS.kind]
        with self._index_lock:
            names = list(self._by_node.get(node, ()))
        return [(k, p) for k, p in zip(names, map(store.get, names), strict=True) if p is not None]

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
        """What a view depends on: every store's change count and the in-flight BindRequests'."""
        return tuple(store.version for store in self.stores.values()), self.in_flight.version

    def view(self) -> CacheView:
        signature = self.signature()  # before the items: a change that lands meanwhile shows next time
        last = self._last_view
        if last is not None and last.signature == signature:
            return last
        if self._derived is None:
            self._derived = _Derived(self)
        return self._derived.view(signature)


Judged = tuple[dict[str, Any], "dict[str, Any] | None", bool, str, "str | None"]


class InFlight(dict):  # type: ignore[type-arg]
    """The BindRequests being created (pod key -> body), with a change count and the keys changed since
    the cache's last view (a writer thread pops what another thread put)."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 0
        self._changed: set[str] = set()
        self._lock = threading.Lock()

    def _note(self, key: str) -> None:  # after the change: a view that misses the key sees it next time
        with self._lock:
            self._changed.add(key)
            self.version += 1

    def __setitem__(self, key: str, value: dict[str, Any]) -> None:
        super().__setitem__(key, value)
        self._note(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._note(key)

    def pop(self, key: str, *default: Any) -> Any:
        value = super().pop(key, *default)
        self._note(key)
        return value

    def take(self) -> set[str]:
        """The keys changed since the last take."""
        with self._lock:
            keys, self._changed = self._changed, set()
        return keys


class _Derived:
    """What the view derives from the stores, kept between views and updated for the keys that changed
    (the stores' change logs): each BindRequest's judgement, the live request of each pod, the pods in
    Binding state with their Binding copies, and the reservation pods left out. A view then costs
    dictionary copies plus work per changed object."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.logs = {kind: store.changes() for kind, store in cache.stores.items()}
        self.node_names: set[str] = set()
        self.judged: dict[str, Judged] = {}  # BindRequest key -> its judgement
        self.requests_of: dict[str, set[str]] = defaultdict(set)  # pod key -> keys of the requests naming it
        self.live: dict[str, set[str]] = defaultdict(set)  # pod key -> keys of its live requests
        self.stale: set[str] = set()  # keys of stale requests
        self.binding: dict[str, str] = {}  # pod key -> node, for pods in Binding state
        self.copies: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}  # (pod, BR, copy)
        self.copy_of: dict[str, dict[str, Any]] = {}  # pod key -> its Binding copy (the copies' third items)
        # The pods' keys in the store's order, their places, and the last view's pod list before the
        # reservation pods left it: kept while the keys stay the same, in the same order.
        self.pod_keys: list[str] = []
        self.pod_order: dict[str, int] = {}
        self.pod_list: list[dict[str, Any]] = []
        self.reserved: set[str] = set()  # reservation pods' keys
        self.serial = 0  # views made

    def _take(self, resource: Resource) -> tuple[dict[str, dict[str, Any]], set[str]]:
        store = self.cache.stores.get(resource.kind)
        if store is None:
            return {}, set()
        return store.items_and_changes(self.logs[resource.kind])

    def view(self, signature: tuple[Any, ...]) -> CacheView:
        cache = self.cache
        flying = cache.in_flight.take()  # before the copy: a change that lands meanwhile is redone next time
        in_flight = dict(cache.in_flight)
        nodes, node_changes = self._take(NODES)
        pods, pod_changes = self._take(PODS)
        brs, br_changes = self._take(BIND_REQUESTS)

        def items(resource: Resource) -> dict[str, dict[str, Any]]:
            store = cache.stores.get(resource.kind)
            return store.items() if store is not None else {}

        queues, podgroups = items(QUEUES), items(PODGROUPS)
        objects: list[dict[str, Any]] = list(nodes.values())
        objects.extend(queues.values())
        objects.extend(podgroups.values())
        fixed = list(objects[: len(nodes) + len(queues)])
        for resource in (PRIORITY_CLASSES, TOPOLOGIES, *DRA_KINDS, *STORAGE_KINDS):
            listed = items(resource).values()
            objects.extend(listed)
            fixed.extend(listed)
        view = CacheView([], pods, podgroups, queues, nodes, brs)
        view.fixed = fixed
        self.serial += 1
        view.serial = self.serial
        view.storage_listed = cache.watches_storage
        view.signature = signature

        # BindRequests to judge again: those that changed, those naming a pod that changed, and every one
        # when a node came or went (what a request is depends on it, its pod and whether its node exists).
        flipped = False
        for name in node_changes:
            if (name in nodes) is not (name in self.node_names):
                flipped = True
                if name in nodes:
                    self.node_names.add(name)
                else:
                    self.node_names.discard(name)
        dirty = set(brs) | set(self.judged) if flipped else set(br_changes)
        for key in pod_changes:
            dirty.update(self.requests_of.get(key, ()))
        touched_pods = set(pod_changes) | flying  # pods whose Binding state may have changed
        for key in dirty:
            old = self.judged.pop(key, None)
            if old is not None:
                touched_pods.add(old[3])
                self._unlink(key, old[3])
            self.stale.discard(key)
            br = brs.get(key)
            if br is None:
                continue
            entry = ClusterCache._judge(br, pods, nodes)
            self.judged[key] = entry
            pod_key, why = entry[3], entry[4]
            if pod_key:
                self.requests_of[pod_key].add(key)
                touched_pods.add(pod_key)
            if why is not None:
                self.stale.add(key)
            elif pod_key:
                self.live[pod_key].add(key)
        if self.stale:
            view.stale_bind_requests = [(brs[k], self.judged[k][4]) for k in brs if k in self.stale]  # type: ignore[misc]

        # Pods with a request and no node yet are Binding: each is handed over as its Binding copy.
        for key in touched_pods:
            if key.startswith(RESERVED):
                if key in pods:
                    self.reserved.add(key)
                else:
                    self.reserved.discard(key)
                continue
            pod = pods.get(key)
            br = self._live_request(key, brs) or in_flight.get(key)
            if (
                pod is None
                or br is None
                or (pod.get("spec") or {}).get("nodeName")
                or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            ):
                self.binding.pop(key, None)
                self.copies.pop(key, None)
                self.copy_of.pop(key, None)
                continue
            self.binding[key] = str((br.get("spec") or {}).get("selectedNode"))
            kept = self.copies.get(key)
            if kept is None or kept[0] is not pod or (kept[1] is not br and _bound_to(kept[1]) != _bound_to(br)):
                kept = self.copies[key] = (pod, br, as_binding(pod, br))
                self.copy_of[key] = kept[2]
            elif kept[1] is not br:  # another request (the in-flight one stored) to the same place: same copy
                self.copies[key] = (pod, br, kept[2])
        view.binding = dict(self.binding)
        view.copies = dict(self.copy_of)
        # The pods in the store's order, each Binding one as its copy. While the keys are the same (in the
        # same order), the last list is copied and only the changed pods' places are written again.
        keys = list(pods)
        same: set[str] = set()
        if keys == self.pod_keys:
            listed = self.pod_list.copy()
            position = self.pod_order
            copy_of = self.copy_of
            for key in touched_pods:
                at = position.get(key)
                if at is not None:
                    handed = copy_of.get(key) or pods[key]
                    if listed[at] is handed:  # the very object the last view handed over: not changed
                        same.add(key)
                    else:
                        listed[at] = handed
        else:
            listed = list(pods.values())
            position = dict(zip(keys, range(len(keys)), strict=True))
            for key, copy in self.copy_of.items():
                listed[position[key]] = copy
            self.pod_keys, self.pod_order = keys, position
        self.pod_list = listed
        view.pod_order = position
        view.changed_pods = {k for k in touched_pods if k not in same and not k.startswith(RESERVED)}
        if self.reserved:
            listed = listed.copy()
            for at in sorted((position[k] for k in self.reserved if k in position), reverse=True):
                del listed[at]
        objects.extend(listed)
        view.objects = objects
        view.versions_after = tuple(store.version for store in cache.stores.values())
        cache._last_view = view
        return view

    def _unlink(self, br_key: str, pod_key: str) -> None:
        for index in (self.requests_of, self.live):
            keys = index.get(pod_key)
            if keys is not None:
                keys.discard(br_key)
                if not keys:
                    del index[pod_key]

    def _live_request(self, pod_key: str, brs: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
        """The pod's live BindRequest (of several, the last in the store's order, as a full pass finds)."""
        keys = self.live.get(pod_key)
        if not keys:
            return None
        if len(keys) == 1:
            return brs.get(next(iter(keys)))
        return next((brs[k] for k in reversed(list(brs)) if k in keys), None)
