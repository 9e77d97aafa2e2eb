"""The binder: carries out BindRequests (KAI's flow; see docs/deployment.md).

For each BindRequest that is neither Succeeded nor Failed:

1. read the pod and the node from the cache; the pod must be the one the request names (its
   owner UID), not bound yet, and the node must exist;
2. under a per-node lock, check that the pod **fits the node now**: its requests plus those of
   every pod bound to the node (and of pods this binder bound whose watch event has not come
   back yet) within the node's allocatable; for a fractional request, that each selected GPU
   group has room and a whole GPU is free for each group that has no reservation pod yet;
3. DRA: write the allocation of each resource claim the request carries and reserve it for the pod
   (:mod:`kai.cluster.claims`);
   fractional requests: make sure each GPU group has a reservation pod in
   ``kai-resource-reservation`` (1 ``nvidia.com/gpu``, bound straight to the node), wait for
   its GPU UUID annotation, write the pod's GPU-sharing ConfigMaps (``NVIDIA_VISIBLE_DEVICES``,
   ``GPU_PORTION``) and label the pod with its group(s) and ``received-resource-type``;
4. POST the ``pods/binding`` subresource with the pod's UID as precondition;
5. report ``status.phase`` Succeeded, or Failed with the reason (and ``failedAttempts``).

Why a pod is never bound twice: the API server refuses a binding for a pod that already has a
node (409), and the binder treats that as success only when the node is the requested one;
the BindRequest is named after the pod, so the scheduler cannot create two for one pod; the
scheduler treats a pod with a live BindRequest as bound and never places it again; a failed
request is deleted by the scheduler before the pod is placed anew.

The scheduler never sets ``backoffLimit``, so a failed bind is retried by rescheduling, as in KAI.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kai.api import keys
from kai.api.quantity import QuantityError, as_float, cpu_millis
from kai.api.timeutil import format_time
from kai.cluster import claims
from kai.cluster.cache import RESERVATION_NAMESPACE, ClusterCache, gpu_group_labels, owner_uid
from kai.cluster.events import EventRecorder
from kai.cluster.kube import BIND_REQUESTS, CONFIGMAPS, NODES, PODS, ApiError, Kube, object_key
from kai.cluster.reflector import DELETED

log = logging.getLogger("kai.cluster.binder")

RESERVE_UUID_ANNOTATION = "run.ai/reserve_for_gpu_index"
RESERVATION_APP_LABEL = "kai-resource-reservation"
SHARED_GPU_CONFIGMAP_ANNOTATION = keys.SHARED_GPU_CONFIGMAP_ANNOTATION
GPU = keys.GPU_RESOURCE


class BindError(Exception):
    """A bind that cannot be done; the message becomes the BindRequest's `status.reason`."""


def pod_requests(pod: dict[str, Any]) -> dict[str, float]:
    """Effective requests (max of containers' sum and largest init container, plus overhead); cpu in millis."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    init: dict[str, float] = {}
    for section, target, combine in (("containers", total, True), ("initContainers", init, False)):
        for container in spec.get(section) or []:
            res = (container or {}).get("resources") or {}
            merged = dict(res.get("limits") or {})
            merged.update(res.get("requests") or {})
            for name, raw in merged.items():
                try:
                    amount = cpu_millis(raw) if name == "cpu" else as_float(raw)
                except QuantityError:
                    continue
                target[name] = target.get(name, 0.0) + amount if combine else max(target.get(name, 0.0), amount)
    for name, amount in init.items():
        total[name] = max(total.get(name, 0.0), amount)
    for name, raw in (spec.get("overhead") or {}).items():
        with contextlib.suppress(QuantityError):
            total[name] = total.get(name, 0.0) + (cpu_millis(raw) if name == "cpu" else as_float(raw))
    total["pods"] = 1.0
    return total


def node_allocatable(node: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {"pods": 110.0}
    for name, raw in ((node.get("status") or {}).get("allocatable") or {}).items():
        with contextlib.suppress(QuantityError):
            out[name] = cpu_millis(raw) if name == "cpu" else as_float(raw)
    return out


def _terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_fraction(pod: dict[str, Any]) -> float:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        return float(annotations.get(keys.GPU_FRACTION_ANNOTATION) or 0.0)
    except ValueError:
        return 0.0


def pod_groups(pod: dict[str, Any]) -> list[str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    groups = [labels[keys.GPU_GROUP_LABEL]] if labels.get(keys.GPU_GROUP_LABEL) else []
    groups += [v for k, v in labels.items() if k.startswith(keys.MULTI_GPU_GROUP_LABEL_PREFIX)]
    return groups


class Binder:
    """Works off BindRequests from the cache with a pool of worker threads."""

    def __init__(
        self,
        kube: Kube,
        cache: ClusterCache,
        *,
        workers: int = 16,
        events: EventRecorder | None = None,
        reservation_timeout: float = 40.0,
        fake_gpu_uuids: bool = False,
        reservation_image: str = "ghcr.io/nvidia/kai-scheduler/resource-reservation:latest",
        on_bound: Callable[[dict[str, Any], float], None] | None = None,
        reservation_app_label: str = RESERVATION_APP_LABEL,
        reservation_service_account: str = "",
        reservation_resources: dict[str, Any] | None = None,
        reservation_runtime_class: str = "",
        on_reconciled: Callable[[str, float], None] | None = None,
        on_busy: Callable[[int], None] | None = None,
    ) -> None:
        # Metrics hooks: each reconcile's result (success, error, requeue) and seconds; busy workers.
        self.on_reconciled = on_reconciled
        self.on_busy = on_busy
        # KAI's --resource-reservation-{app-label,service-account,pod-resources} and --runtime-class-name.
        self.reservation_app_label = reservation_app_label
        self.reservation_service_account = reservation_service_account
        self.reservation_resources = reservation_resources or {}
        self.reservation_runtime_class = reservation_runtime_class
        self.kube = kube
        self.cache = cache
        self.workers = workers
        self.events = events or EventRecorder(kube, "kai-binder")
        self.reservation_timeout = reservation_timeout
        self.fake_gpu_uuids = fake_gpu_uuids
        self.reservation_image = reservation_image
        self.on_bound = on_bound
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._queued_lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = defaultdict(threading.Lock)
        self._node_locks_lock = threading.Lock()
        # Pods bound here whose watch event has not come back: node -> {pod key: requests}.
        self._assumed: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
        self._assumed_on: dict[str, str] = {}  # pod key -> the node of its entry in _assumed
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.bound = 0
        self.failed = 0
        self.active = threading.Event()
        self.active.set()
        self._requests_cache: dict[str, dict[str, float]] = {}
        # pod key -> (its object, terminal, requests) as _check_fit last read them: a node's other pods are
        # read for every bind on it, and most are the same objects as at the last bind
        self._facts: dict[str, tuple[dict[str, Any], bool, dict[str, float]]] = {}
        self._allocatable_cache: dict[str, tuple[dict[str, Any], dict[str, float]]] = {}
        self._open_keys: set[str] = set()  # BindRequests open when last seen (the resync's round)
        cache.reflectors[BIND_REQUESTS.kind].on_event = self._on_bind_request
        pods = cache.reflectors[PODS.kind]
        previous = pods.on_event

        def on_pod(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            if previous is not None:
                previous(event_type, obj, old)
            self._on_pod(event_type, obj)

        pods.on_event = on_pod

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> Binder:
        store = self.cache.store(BIND_REQUESTS)  # what the watch brought before the binder listened
        self._open_keys.update(k for k, br in store.items().items() if self._open(br))
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"binder-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        threading.Thread(target=self._resync, name="binder-resync", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(5)

    def _resync(self) -> None:
        """Every two seconds, queue whatever is still open (a missed or deferred request)."""
        ticks = 0
        while not self._stop.wait(2.0):
            if self.active.is_set():
                # The requests last seen open (the watch's handler keeps the set): a pass over those, not
                # over every request, most of them long Succeeded; every fifth round, over all of them.
                # (A membership test needs no lock; _enqueue checks again under it.)
                store, queued = self.cache.store(BIND_REQUESTS), self._queued
                if ticks % 5 == 4:
                    self._open_keys.update(k for k, br in store.items().items() if self._open(br))
                for key in list(self._open_keys):
                    br = store.get(key)
                    if br is None or not self._open(br):
                        self._open_keys.discard(key)
                    elif key not in queued:
                        self._enqueue(key)
                ticks += 1
                if ticks % 5 == 0:
                    try:
                        self.cleanup_reservations()
                    except ApiError as err:
                        log.warning("reservation pods not cleaned up: %s", err)

    # -- intake ---------------------------------------------------------------------------------
    @staticmethod
    def _open(br: dict[str, Any]) -> bool:
        if (br.get("metadata") or {}).get("deletionTimestamp"):
            return False
        return (br.get("status") or {}).get("phase") not in ("Succeeded", "Failed")

    def _on_bind_request(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = object_key(obj)
        if event_type != DELETED and self._open(obj):
            self._open_keys.add(key)
            self._enqueue(key)
        else:
            self._open_keys.discard(key)

    def _on_pod(self, event_type: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        node = (obj.get("spec") or {}).get("nodeName")
        if event_type == DELETED or node:
            # (One lookup, not a pass over every node's entries: this runs for every pod event, while
            # workers add entries for other nodes.)
            assumed_on = self._assumed_on.pop(key, None)
            if assumed_on is not None:
                self._assumed[assumed_on].pop(key, None)
        if event_type == DELETED:
            self._requests_cache.pop(str((obj.get("metadata") or {}).get("uid")), None)
            self._facts.pop(key, None)

    def _enqueue(self, key: str) -> None:
        with self._queued_lock:
            if key in self._queued:
                return
            self._queued.add(key)
        self._queue.put(key)

    def _work(self) -> None:
        while not self._stop.is_set():
            key = self._queue.get()
            if key is None:
                return
            with self._queued_lock:
                self._queued.discard(key)
                if key in self._processing:
                    continue  # another worker has it; the resync brings it back if it stays open
                self._processing.add(key)
                busy = len(self._processing)
            if self.on_busy is not None:
                self.on_busy(busy)
            started = time.monotonic()
            result = "success"
            try:
                if self.active.is_set():
                    result = self.process(key)
            except Exception:  # a bug must not kill the worker
                result = "error"
                log.exception("binding %s failed unexpectedly", key)
            finally:
                with self._queued_lock:
                    self._processing.discard(key)
                    busy = len(self._processing)
                if self.on_busy is not None:
                    self.on_busy(busy)
            if self.on_reconciled is not None and self.active.is_set():
                self.on_reconciled(result, time.monotonic() - started)

    # -- one BindRequest ------------------------------------------------------------------------
    def process(self, key: str) -> str:
        """Work off one BindRequest: "success" (bound, or nothing to do), "error" (the request failed) or
        "requeue" (the API server could not be asked; the resync brings it back)."""
        br = self.cache.store(BIND_REQUESTS).get(key)
        if br is None or not self._open(br):
            return "success"
        started = time.monotonic()
        spec = br.get("spec") or {}
        namespace = br["metadata"]["namespace"]
        pod_key = f"{namespace}/{spec.get('podName')}"
        node_name = str(spec.get("selectedNode") or "")
        try:
            pod = self.cache.store(PODS).get(pod_key)
            if pod is None:
                raise BindError(f"pod {pod_key} does not exist")
            uid = owner_uid(br)
            if uid and pod["metadata"].get("uid") != uid:
                raise BindError(f"pod {pod_key} is not the pod this request was made for")
            bound_to = (pod.get("spec") or {}).get("nodeName")
            if bound_to:
                if bound_to != node_name:
                    raise BindError(f"pod {pod_key} is already bound to {bound_to}")
                self._report(br, "Succeeded", "")
                return "success"
            node = self.cache.store(NODES).get(node_name)
            if node is None:
                raise BindError(f"node {node_name} does not exist")
            self._allocate_claims(pod, spec)
            fractional = spec.get("receivedResourceType") == "Fraction"
            groups = list(spec.get("selectedGPUGroups") or [])
            if fractional and not groups:
                raise BindError("a Fraction request names no GPU group")
            if fractional:
                # Shared GPUs: the whole bind under the node's lock, so that one group never gets two
                # reservation pods.
                with self._node_lock(node_name):
                    self._check_fit(pod, node, groups)
                    self._prepare_shared_gpus(pod, node_name, groups, spec)
                    self._bind(pod, node_name)
                    self._assume(node_name, pod_key, pod)
            else:
                # Reserve under the lock (fit check + assume), bind outside it: binds to one node overlap.
                with self._node_lock(node_name):
                    self._check_fit(pod, node, [])
                    self._assume(node_name, pod_key, pod)
                try:
                    self._bind(pod, node_name)
                except BaseException:
                    self._assumed[node_name].pop(pod_key, None)
                    self._assumed_on.pop(pod_key, None)
                    raise
            self.cache.assume_bound(pod, node_name)
            self._report(br, "Succeeded", "")
            self.bound += 1
            self.events.record(pod, "Normal", "Bound", f"Bound to node {node_name}")
            if self.on_bound is not None:
                self.on_bound(pod, time.monotonic() - started)
        except BindError as err:
            self.failed += 1
            log.info("bind %s -> %s failed: %s", pod_key, node_name, err)
            self._report(br, "Failed", str(err))
            pod = self.cache.store(PODS).get(pod_key)
            if pod is not None:
                self.events.record(pod, "Warning", "BindingError", f"Binding to {node_name} failed: {err}")
            return "error"
        except ApiError as err:
            # The API server could not be asked (5xx, 429, conflict, network): leave the request
            # open; the resync queues it again.
            log.warning("bind %s -> %s: %s; will retry", pod_key, node_name, err)
            return "requeue"
        return "success"

    def _allocate_claims(self, pod: dict[str, Any], spec: dict[str, Any]) -> None:
        """DRA: write the allocation of each of the pod's resource claims (kai.cluster.claims)."""
        allocations = spec.get("resourceClaimAllocations") or []
        if not allocations:
            return
        try:
            claims.allocate(self.kube, pod, allocations)
        except claims.ClaimError as err:
            raise BindError(str(err)) from err

    def _assume(self, node: str, pod_key: str, pod: dict[str, Any]) -> None:
        """The pod holds the node's resources until its watch event (bound or deleted) comes back."""
        self._assumed_on[pod_key] = node
        self._assumed[node][pod_key] = self._requests(pod)

    def _node_lock(self, node: str) -> threading.Lock:
        with self._node_locks_lock:
            return self._node_locks[node]

    def _requests(self, pod: dict[str, Any]) -> dict[str, float]:
        uid = str((pod.get("metadata") or {}).get("uid"))
        cached = self._requests_cache.get(uid)
        if cached is None:
            cached = self._requests_cache[uid] = pod_requests(pod)
        return cached

    def _allocatable(self, node: dict[str, Any]) -> dict[str, float]:
        """The node's allocatable, parsed once per node object (the reflector replaces it on change)."""
        name = node["metadata"]["name"]
        kept = self._allocatable_cache.get(name)
        if kept is None or kept[0] is not node:
            kept = self._allocatable_cache[name] = (node, node_allocatable(node))
        return kept[1]

    def _check_fit(self, pod: dict[str, Any], node: dict[str, Any], groups: list[str]) -> None:
        name = node["metadata"]["name"]
        allocatable = self._allocatable(node)
        used: dict[str, float] = defaultdict(float)
        group_use: dict[str, float] = defaultdict(float)
        reserved_groups: set[str] = set()
        seen: set[str] = set()
        facts = self._facts
        for key, other in self.cache.pods_on_node(name):
            known = facts.get(key)
            if known is None or known[0] is not other:
                known = facts[key] = (other, _terminal(other), self._requests(other))
            if known[1]:
                continue
            seen.add(key)
            for res, amount in known[2].items():
                used[res] += amount
            if not groups:  # GPU groups matter only to a shared-GPU request
                continue
            other_groups = pod_groups(other)
            if key.startswith(RESERVATION_NAMESPACE + "/"):
                reserved_groups.update(other_groups)
            else:
                for g in other_groups:
                    group_use[g] += pod_fraction(other)
        for key, requests in list(self._assumed.get(name, {}).items()):
            if key in seen:
                continue
            for res, amount in requests.items():
                used[res] += amount
        wanted = dict(self._requests(pod))
        new_groups = [g for g in groups if g not in reserved_groups]
        if new_groups:
            wanted[GPU] = wanted.get(GPU, 0.0) + len(new_groups)  # one reservation pod per new group
            wanted["pods"] = wanted.get("pods", 0.0) + len(new_groups)
        short = []
        for res, amount in wanted.items():
            if amount <= 0:
                continue
            free = allocatable.get(res, 0.0) - used.get(res, 0.0)
            if amount > free + 1e-9:
                short.append(f"{res} (wants {amount:g}, {max(free, 0):g} free)")
        fraction = pod_fraction(pod)
        for g in groups:
            if fraction and group_use.get(g, 0.0) + fraction > 1.0 + 1e-9:
                short.append(f"GPU group {g} (wants {fraction:g}, {1 - group_use[g]:g} free)")
        if short:
            raise BindError(f"pod does not fit node {name} now: not enough " + ", ".join(short))

    # -- GPU sharing ----------------------------------------------------------------------------
    def _prepare_shared_gpus(self, pod: dict[str, Any], node: str, groups: list[str], spec: dict[str, Any]) -> None:
        uuids = [self._reserve(node, g) for g in groups]
        meta = pod["metadata"]
        portion = str((spec.get("receivedGPU") or {}).get("portion") or f"{pod_fraction(pod):.2f}")
        prefix = (meta.get("annotations") or {}).get(SHARED_GPU_CONFIGMAP_ANNOTATION) or f"{meta['name']}-shared-gpu"
        env = {"NVIDIA_VISIBLE_DEVICES": ",".join(uuids), "GPU_PORTION": portion, "RUNAI_NUM_OF_GPUS": portion}
        owner = [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}]
        for name in (f"{prefix}-0", f"{prefix}-0-evar"):
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": owner},
                "data": env,
            }
            try:
                self.kube.post(CONFIGMAPS.path(meta["namespace"]), body)
            except ApiError as err:
                if err.status != 409:
                    raise
                self._update_own_configmap(meta, name, env)
        labels = gpu_group_labels(groups)
        self.kube.patch(
            PODS.path(meta["namespace"], meta["name"]),
            {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        keys.RECEIVED_RESOURCE_TYPE_ANNOTATION: "Fraction",
                        SHARED_GPU_CONFIGMAP_ANNOTATION: prefix,
                    },
                }
            },
        )

    def _update_own_configmap(self, pod_meta: dict[str, Any], name: str, env: dict[str, str]) -> None:
        """Rewrite an existing GPU-sharing ConfigMap only if this pod owns it: one JSON patch whose ``test``
        makes the API server refuse it otherwise (nothing else in the namespace is ever overwritten)."""
        ops = [
            {"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": pod_meta["uid"]},
            {"op": "replace", "path": "/data", "value": env},
        ]
        try:
            self.kube.patch(CONFIGMAPS.path(pod_meta["namespace"], name), ops, "json")
        except ApiError as err:
            if err.status in (403, 409, 422, 500):  # refused: the test failed, or a policy said no
                raise BindError(
                    f"ConfigMap {pod_meta['namespace']}/{name} exists and is not this pod's: not overwriting it"
                ) from err
            raise

    def _reservation_pods(self, node: str, group: str) -> list[dict[str, Any]]:
        return [
            p
            for key, p in self.cache.pods_on_node(node)
            if key.startswith(RESERVATION_NAMESPACE + "/") and group in pod_groups(p) and not _terminal(p)
        ]

    def _reserve(self, node: str, group: str) -> str:
        """The GPU UUID of the group's reservation pod on the node, creating the pod if needed."""
        existing = self._reservation_pods(node, group)
        if existing:
            pod = existing[0]
        else:
            suffix = hashlib.sha1(f"{node}/{group}".encode()).hexdigest()[:5]
            name = f"gpu-reservation-{node}-{suffix}"[:63].rstrip("-")
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": RESERVATION_NAMESPACE,
                    "labels": {"app": self.reservation_app_label, keys.GPU_GROUP_LABEL: group},
                    "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                },
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "resource-reservation",
                            "image": self.reservation_image,
                            "resources": self._reservation_container_resources(),
                        }
                    ],
                },
            }
            if self.reservation_service_account:
                body["spec"]["serviceAccountName"] = self.reservation_service_account
            if self.reservation_runtime_class:
                body["spec"]["runtimeClassName"] = self.reservation_runtime_class
            self._ensure_namespace()
            try:
                pod = self.kube.post(PODS.path(RESERVATION_NAMESPACE), body)
            except ApiError as err:
                if err.status != 409:
                    raise
                pod = self.kube.get(PODS.path(RESERVATION_NAMESPACE, name))
            pod.setdefault("kind", "Pod")
            pod.setdefault("apiVersion", "v1")
            self.cache.store(PODS).put(pod)
            self.cache.assume_bound(pod, node)
        deadline = time.monotonic() + self.reservation_timeout
        name = pod["metadata"]["name"]
        while True:
            current = self.cache.store(PODS).get(f"{RESERVATION_NAMESPACE}/{name}") or pod
            gpu_uuid = ((current.get("metadata") or {}).get("annotations") or {}).get(RESERVE_UUID_ANNOTATION)
            if gpu_uuid:
                return str(gpu_uuid)
            if self.fake_gpu_uuids:
                # Dev clusters (KWOK) run no reservation image to read the UUID through NVML.
                gpu_uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{node}/{group}')}"
                self.kube.patch(
                    PODS.path(RESERVATION_NAMESPACE, name),
                    {"metadata": {"annotations": {RESERVE_UUID_ANNOTATION: gpu_uuid}}},
                )
                return gpu_uuid
            if time.monotonic() > deadline:
                raise BindError(f"the reservation pod {name} reported no GPU within {self.reservation_timeout:g}s")
            time.sleep(0.2)

    _namespace_ready = False

    def _reservation_container_resources(self) -> dict[str, Any]:
        """One whole GPU, plus what --resource-reservation-pod-resources adds (the GPU count stays 1)."""
        extra = self.reservation_resources
        return {
            "limits": {**(extra.get("limits") or {}), GPU: "1"},
            "requests": {**(extra.get("requests") or {}), GPU: "1"},
        }

    def _ensure_namespace(self) -> None:
        if self._namespace_ready:
            return
        try:
            self.kube.post("/api/v1/namespaces", {"metadata": {"name": RESERVATION_NAMESPACE}})
        except ApiError as err:
            if err.status not in (403, 409):  # 403: not ours to create (the Helm chart makes it)
                raise
        self._namespace_ready = True

    def cleanup_reservations(self) -> int:
        """Delete reservation pods whose GPU group no live fractional pod uses; returns how many."""
        pods = self.cache.store(PODS).items()
        if not any(key.startswith(RESERVATION_NAMESPACE + "/") for key in pods):
            return 0  # none to delete (the common case: no GPU sharing)
        in_use: set[tuple[str, str]] = set()
        brs = self.cache.store(BIND_REQUESTS).items()
        for key, pod in pods.items():
            if key.startswith(RESERVATION_NAMESPACE + "/") or _terminal(pod):
                continue
            node = (pod.get("spec") or {}).get("nodeName") or ""
            for g in pod_groups(pod):
                in_use.add((node, g))
        for br in brs.values():
            spec = br.get("spec") or {}
            if self._open(br) or (br.get("status") or {}).get("phase") == "Succeeded":
                for g in spec.get("selectedGPUGroups") or []:
                    in_use.add((str(spec.get("selectedNode")), g))
        deleted = 0
        for key, pod in pods.items():
            if not key.startswith(RESERVATION_NAMESPACE + "/") or (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            node = (pod.get("spec") or {}).get("nodeName") or ""
            if not any((node, g) in in_use for g in pod_groups(pod)):
                with contextlib.suppress(ApiError):
                    self.kube.delete(PODS.path(RESERVATION_NAMESPACE, pod["metadata"]["name"]))
                    deleted += 1
        return deleted

    # -- API writes -----------------------------------------------------------------------------
    def _bind(self, pod: dict[str, Any], node: str) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self.kube.post(PODS.path(meta["namespace"], meta["name"], "binding"), body)
        except ApiError as err:
            if err.status == 404:
                raise BindError(f"pod {meta['namespace']}/{meta['name']} is gone") from err
            if err.status != 409:
                raise
            # Already bound (by us, before a restart, or by someone else): find out where.
            current = self.kube.get(PODS.path(meta["namespace"], meta["name"]))
            where = (current.get("spec") or {}).get("nodeName")
            if not where:
                raise  # a conflict that left the pod unbound: try again later
            if where != node:
                raise BindError(f"pod is already bound to {where}") from err

    def _report(self, br: dict[str, Any], phase: str, reason: str) -> None:
        meta = br["metadata"]
        status: dict[str, Any] = {"phase": phase, "reason": reason}
        if phase == "Failed":
            status["failedAttempts"] = int((br.get("status") or {}).get("failedAttempts") or 0) + 1
        # Only on the BindRequest this bind was for: one deleted and made again under the same name (the pod's)
        # meanwhile must not get this bind's outcome. The status subresource ignores a UID in a patch, so the
        # patch carries the resourceVersion, and a conflict is settled by reading the request again.
        path = BIND_REQUESTS.path(meta["namespace"], meta["name"], "status")
        version = meta.get("resourceVersion")
        written: Any = None
        try:
            for attempt in range(2):
                try:
                    written = self.kube.patch(path, {"metadata": {"resourceVersion": version}, "status": status})
                    break
                except ApiError as err:
                    if err.status != 409 or attempt:
                        raise
                    current = self.kube.get(BIND_REQUESTS.path(meta["namespace"], meta["name"]))
                    if current["metadata"].get("uid") != meta.get("uid"):
                        log.info(
                            "BindRequest %s was replaced while it was bound: %s not reported", object_key(br), phase
                        )
                        return
                    version = current["metadata"].get("resourceVersion")
        except ApiError as err:
            if err.status != 404:
                log.warning("could not report %s on BindRequest %s: %s", phase, object_key(br), err)
                return
        if isinstance(written, dict) and written.get("metadata"):
            written.setdefault("apiVersion", br.get("apiVersion"))
            written.setdefault("kind", br.get("kind"))
            updated = written  # with the new resourceVersion
        else:
            updated = {**br, "status": {**(br.get("status") or {}), **status}}
        self.cache.store(BIND_REQUESTS).put(updated)


def now_rfc3339() -> str:
    return format_time(time.time())
