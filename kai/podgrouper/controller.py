"""The podgrouper controller: watches kai pods, reads their owners, creates or updates their PodGroups.

The adapter around the pure rules (`group_pod`): for each pod whose `spec.schedulerName`
is the configured scheduler (and that the namespace / pod label selectors admit), it

1. walks the ownerReferences up to the top owner, reading each owner through the API
   (the kind is mapped to its REST path by discovery of the reference's apiVersion;
   an owner it may not read ends the walk there, as in KAI);
2. reads the few extra objects some kinds need (Grove's PodGang, the Knative
   Revision and its pods, the MPIJob launcher pods, the RayCluster of a RayJob or
   RayService), the namespace's labels, the PriorityClass names, the PodGroups of the
   namespace and the default-priorities ConfigMap;
3. calls `group_pod`, then creates the PodGroup or patches it where it differs —
   keeping `spec.queue` (once set), `spec.markUnschedulable`, `spec.schedulingBackoff`,
   an existing node-pool or queue label, and every label or annotation it does not
   set (the scheduler's timestamps, a user's own) — and patches the pod's
   `pod-group-name` annotation and sub-group label when they differ;
4. reports a `GroupingError`, an owner it cannot read, an API server refusal and the
   rules' warnings as `PodGrouperWarning` events on the pod (each message once per
   pod), and retries failed pods with per-pod exponential backoff.

Watches reuse `kai.cluster.reflector.Reflector`; a `WorkQueue` of pod keys feeds
`workers` threads, so one pod is never handled by two threads at once. Nothing a pod
or the API server does stops the controller: every error ends in a log line, an event
or a retry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kai.api import keys
from kai.cluster.kube import (
    CONFIGMAPS,
    EVENTS,
    NAMESPACES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    ApiError,
    Kube,
    Resource,
    object_key,
)
from kai.cluster.leader import LeaderElector
from kai.cluster.reflector import DELETED, MODIFIED, Reflector, wait_all_synced

from .chain import GroupingOptions, OwnerChain, RelatedObjects, WorkloadDefaults, parse_default_priorities
from .controller_queue import WorkQueue
from .errors import GroupingError
from .podgroup import PodGroupMetadata
from .registry import group_pod

log = logging.getLogger("kai.podgrouper")

COMPONENT = "kai-podgrouper"
MAX_OWNER_DEPTH = 16
DISCOVERY_REFRESH = 10.0  # seconds between re-reads of an API group/version that lacked a kind

GROVE_PODGANG_LABEL = "grove.io/podgang"
KNATIVE_REVISION_LABEL = "serving.knative.dev/revision"
MPI_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
MPI_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


@dataclass(frozen=True)
class ControllerConfig:
    """The podgrouper's settings (KAI's flags and Helm values)."""

    options: GroupingOptions = field(default_factory=GroupingOptions)
    namespace_selector: str = ""  # label selector on namespaces (global.namespaceLabelSelector)
    pod_selector: str = ""  # label selector on pods (global.podLabelSelector)
    workers: int = 4
    default_priorities_configmap: str = ""
    default_priorities_namespace: str = ""
    resync_seconds: float = 0.0  # > 0: re-handle every pod that often (a safety net; watches suffice)
    leader_elect: bool = False  # several replicas: only the holder of the Lease writes; the others keep warm
    lease_namespace: str = "kai-scheduler"
    lease_name: str = "kai-podgrouper"
    lease_durations: tuple[float, float, float] = (15.0, 10.0, 2.0)  # lease duration, renew deadline, retry
    event_instance: str = field(default_factory=lambda: os.environ.get("POD_NAME") or socket.gethostname())


class OwnerUnreadable(Exception):
    """An owner that does not exist (yet, or any more) or whose kind the API server does not serve."""

    def __init__(self, pod: Mapping[str, Any], message: str) -> None:
        meta = pod.get("metadata") or {}
        super().__init__(f"Pod {meta.get('namespace')}/{meta.get('name')}: {message}")


# ---------------------------------------------------------------------------------------------------------
# Discovery: apiVersion + kind -> Resource


class ResourceMapper:
    """Maps an (apiVersion, kind) to its REST resource by reading the group/version's discovery document."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, dict[str, Resource]]] = {}

    def _read(self, api_version: str) -> dict[str, Resource]:
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            document = self.kube.get(path)
        except ApiError as err:
            if err.status == 404:
                return {}
            raise
        kinds: dict[str, Resource] = {}
        for entry in document.get("resources") or []:
            name = str(entry.get("name") or "")
            if not name or "/" in name:  # a subresource
                continue
            kinds.setdefault(str(entry.get("kind")), Resource(
                str(entry.get("kind")), api_version, name, bool(entry.get("namespaced"))
            ))
        return kinds

    def resource(self, api_version: str, kind: str) -> Resource | None:
        """The resource serving `kind` in `api_version`, or None when the API server does not serve it."""
        with self._lock:
            cached = self._cache.get(api_version)
        now = time.monotonic()
        if cached is not None and (kind in cached[1] or now - cached[0] < DISCOVERY_REFRESH):
            return cached[1].get(kind)
        kinds = self._read(api_version)
        with self._lock:
            self._cache[api_version] = (now, kinds)
        return kinds.get(kind)


# ---------------------------------------------------------------------------------------------------------
# Updating an existing PodGroup


def podgroup_update(current: Mapping[str, Any], desired: Mapping[str, Any], options: GroupingOptions) -> dict[str, Any]:
    """The merge patch that brings `current` to `desired` while keeping what users and the scheduler own.

    The podgrouper owns `spec.minMember`, `priorityClassName`, `preemptibility`,
    `topologyConstraint` and `subGroups` (cleared when the rules no longer set them), the
    labels and annotations it computes, and the owner reference of a PodGroup that has none.
    Kept as they are: `spec.queue` once set, `spec.markUnschedulable`,
    `spec.schedulingBackoff`, an existing node-pool or queue label, and every other label
    or annotation. Empty when nothing differs.
    """
    patch: dict[str, Any] = {}
    current_spec = current.get("spec") or {}
    desired_spec = desired.get("spec") or {}
    spec: dict[str, Any] = {}
    for key in ("minMember", "priorityClassName", "preemptibility", "topologyConstraint", "subGroups"):
        want = desired_spec.get(key)
        if current_spec.get(key) != want and not (want is None and key not in current_spec):
            spec[key] = want
    if not current_spec.get("queue") and desired_spec.get("queue"):
        spec["queue"] = desired_spec["queue"]
    if spec:
        patch["spec"] = spec
    current_meta = current.get("metadata") or {}
    desired_meta = desired.get("metadata") or {}
    metadata: dict[str, Any] = {}
    current_labels = current_meta.get("labels") or {}
    kept = {options.node_pool_label_key, options.queue_label_key}
    labels = {
        k: v
        for k, v in (desired_meta.get("labels") or {}).items()
        if current_labels.get(k) != v and not (k in kept and current_labels.get(k))
    }
    if labels:
        metadata["labels"] = labels
    current_annotations = current_meta.get("annotations") or {}
    annotations = {
        k: v for k, v in (desired_meta.get("annotations") or {}).items() if current_annotations.get(k) != v
    }
    if annotations:
        metadata["annotations"] = annotations
    if not current_meta.get("ownerReferences") and desired_meta.get("ownerReferences"):
        metadata["ownerReferences"] = desired_meta["ownerReferences"]
    if metadata:
        patch["metadata"] = metadata
    if patch:  # optimistic concurrency: a PodGroup changed since it was read makes the patch fail with 409
        patch.setdefault("metadata", {})["resourceVersion"] = current_meta.get("resourceVersion")
    return patch


def pod_update(pod: Mapping[str, Any], metadata: PodGroupMetadata) -> dict[str, Any]:
    """The merge patch for the pod's annotation and sub-group label, or {} when both are already right."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    if annotations.get(keys.POD_GROUP_ANNOTATION) == metadata.name and (
        metadata.pod_subgroup is None or labels.get(keys.SUBGROUP_LABEL) == metadata.pod_subgroup
    ):
        return {}
    return metadata.pod_patch()


# ---------------------------------------------------------------------------------------------------------
# The controller


class PodGrouperController:
    """Watches pods and keeps their PodGroups; see the module doc. `start()`, then `stop()`."""

    def __init__(self, kube: Kube, config: ControllerConfig | None = None) -> None:
        self.kube = kube
        self.config = config or ControllerConfig()
        self.options = self.config.options
        self.mapper = ResourceMapper(kube)
        self.queue = WorkQueue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._reported: dict[str, set[str]] = {}  # pod uid -> event messages already sent
        self._podgroups_by_namespace: dict[str, dict[str, dict[str, Any]]] = {}  # from the PodGroup watch
        self._index_lock = threading.Lock()
        self._reported_lock = threading.Lock()
        # Counters (tests and logs).
        self.reconciled = 0
        self.podgroups_created = 0
        self.podgroups_patched = 0
        self.pods_patched = 0
        self.events_sent = 0
        self.failures = 0

        self.namespaces = Reflector(
            kube, NAMESPACES, label_selector=self.config.namespace_selector or None,
            on_event=self._on_namespace, name="podgrouper-namespaces",
        )
        self.pods = Reflector(
            kube, PODS, label_selector=self.config.pod_selector or None,
            field_selector=f"spec.schedulerName={self.options.scheduler_name}",
            on_event=self._on_pod, name="podgrouper-pods",
        )
        self.podgroups = Reflector(kube, PODGROUPS, on_event=self._on_podgroup, name="podgrouper-podgroups")
        self.priority_classes = Reflector(kube, PRIORITY_CLASSES, name="podgrouper-priorityclasses")
        self.configmap: Reflector | None = None
        if self.config.default_priorities_configmap:
            self.configmap = Reflector(
                kube, CONFIGMAPS, namespace=self.config.default_priorities_namespace or "default",
                field_selector=f"metadata.name={self.config.default_priorities_configmap}",
                name="podgrouper-defaults",
            )
        self._defaults: tuple[WorkloadDefaults, ...] = ()
        self._defaults_version = ""
        self.leader: LeaderElector | None = None
        if self.config.leader_elect:
            duration, deadline, retry = self.config.lease_durations
            self.leader = LeaderElector(
                kube, self.config.lease_namespace, self.config.lease_name, self.config.event_instance,
                lease_duration=duration, renew_deadline=deadline, retry_period=retry,
            )

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def reflectors(self) -> list[Reflector]:
        extra = [self.configmap] if self.configmap is not None else []
        return [self.namespaces, self.podgroups, self.priority_classes, *extra, self.pods]

    def start(self, sync_timeout: float = 60.0) -> PodGrouperController:
        """Start the watches, wait (up to `sync_timeout`) for their first lists, then the workers."""
        if self.leader is not None:
            self.leader.start()
        for reflector in self.reflectors[:-1]:
            reflector.start()
        if not wait_all_synced(self.reflectors[:-1], sync_timeout):
            log.warning("podgrouper: some watches have not listed yet; starting anyway")
        self.pods.start()
        for index in range(max(1, self.config.workers)):
            thread = threading.Thread(target=self._work, name=f"podgrouper-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.config.resync_seconds > 0:
            thread = threading.Thread(target=self._resync, name="podgrouper-resync", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def wait_synced(self, timeout: float) -> bool:
        return wait_all_synced(self.reflectors, timeout)

    def stop(self) -> None:
        self._stop.set()
        self.queue.shutdown()
        if self.leader is not None:
            self.leader.stop()
        for reflector in self.reflectors:
            reflector.stop()
        for thread in self._threads:
            thread.join(5)

    def run_forever(self) -> None:
        """Start and block until `stop()` (from a signal handler) is called."""
        self.start()
        while not self._stop.wait(1.0):
            pass

    def _resync(self) -> None:
        while not self._stop.wait(self.config.resync_seconds):
            for key in list(self.pods.store.items()):
                self.queue.add(key)

    # -- events from the watches ----------------------------------------------------------------
    def _on_pod(self, event_type: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = object_key(pod)
        if event_type == DELETED:
            self.queue.forget(key)
            with self._reported_lock:
                self._reported.pop(str((pod.get("metadata") or {}).get("uid")), None)
            return
        if event_type == MODIFIED and old is not None and not _grouping_inputs_changed(old, pod):
            return
        self.queue.add(key)

    def _on_namespace(self, event_type: str, namespace: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event_type == DELETED:
            return
        if event_type == MODIFIED and old is not None and _labels(old) == _labels(namespace):
            return
        name = (namespace.get("metadata") or {}).get("name")
        for pod in self.pods.store.list():
            if (pod.get("metadata") or {}).get("namespace") == name:
                self.queue.add(object_key(pod))

    def _on_podgroup(self, event_type: str, podgroup: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = podgroup.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        with self._index_lock:
            in_namespace = self._podgroups_by_namespace.setdefault(namespace, {})
            if event_type == DELETED:
                in_namespace.pop(name, None)
            else:
                in_namespace[name] = podgroup
        if event_type != DELETED:
            return  # a deleted PodGroup is made again for the pods that still name it
        for pod in self.pods.store.list():
            pod_meta = pod.get("metadata") or {}
            if pod_meta.get("namespace") == meta.get("namespace") and (
                (pod_meta.get("annotations") or {}).get(keys.POD_GROUP_ANNOTATION) == meta.get("name")
            ):
                self.queue.add(object_key(pod))

    def _default_priorities(self) -> tuple[WorkloadDefaults, ...]:
        """The default-priorities table from the watched ConfigMap (parsed once per version of it)."""
        if self.configmap is None:
            return ()
        configmaps = self.configmap.store.list()
        if not configmaps:
            return ()
        version = str((configmaps[0].get("metadata") or {}).get("resourceVersion"))
        if version != self._defaults_version:
            text = (configmaps[0].get("data") or {}).get("types")
            try:
                self._defaults = parse_default_priorities(text) if text else ()
            except GroupingError as err:
                self._defaults = ()
                log.warning("default priorities ignored: %s", err)
            self._defaults_version = version
        return self._defaults

    # -- the work loop --------------------------------------------------------------------------
    def _work(self) -> None:
        while not self._stop.is_set():
            if self.leader is not None and not self.leader.is_leader:
                self._stop.wait(0.2)  # a standby: its watches stay warm, its queue fills, it writes nothing
                continue
            key = self.queue.get(timeout=1.0)
            if key is None:
                continue
            try:
                retry = self.reconcile(str(key))
            except Exception:  # never let one pod kill a worker
                log.exception("podgrouper: unexpected error on pod %s", key)
                retry = True
            finally:
                self.queue.done(key)
            if retry:
                self.failures += 1
                delay = self.queue.add_rate_limited(key)
                log.debug("podgrouper: retrying %s in %.2fs", key, delay)
            else:
                self.queue.forget(key)

    def reconcile(self, key: str) -> bool:
        """Handle one pod; True asks for a retry with backoff."""
        self.reconciled += 1
        pod = self.pods.store.get(key)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        namespace_name = str((pod.get("metadata") or {}).get("namespace") or "")
        namespace = self.namespaces.store.get(namespace_name)
        if namespace is None:
            return False  # not selected (or not listed yet: its ADDED event re-queues the pod)
        if (namespace.get("metadata") or {}).get("deletionTimestamp"):
            return False  # a namespace being deleted accepts no new objects
        try:
            chain = self._chain(pod, namespace)
            metadata = group_pod(chain, self.options)
            if metadata is None:
                return False
            self._apply_podgroup(metadata)
            patch = pod_update(pod, metadata)
            if patch:
                self.kube.patch(PODS.path(namespace_name, _name(pod)), patch, "merge")
                self.pods_patched += 1
            for warning in metadata.warnings:
                self._report(pod, warning)
            return False
        except GroupingError as err:
            self._report(pod, f"cannot group the pod: {err}")
            return True
        except OwnerUnreadable as err:
            self._report(pod, str(err))
            return True
        except ApiError as err:
            if err.status == 409:
                return True  # changed meanwhile (or made by another worker): read again
            if err.status == 404 and self._pod_gone(pod):
                return False
            if err.status in (400, 403, 404, 422):
                self._report(pod, f"the API server refused the podgrouper: {_api_message(err)}")
            else:
                log.info("podgrouper: %s: %s (will retry)", key, err)
            return True

    def _pod_gone(self, pod: Mapping[str, Any]) -> bool:
        try:
            current = self.kube.get(PODS.path(str(pod["metadata"].get("namespace")), _name(pod)))
        except ApiError as err:
            return err.status == 404
        return (current.get("metadata") or {}).get("uid") != (pod.get("metadata") or {}).get("uid")

    # -- reading ----------------------------------------------------------------------------------
    def _chain(self, pod: dict[str, Any], namespace: Mapping[str, Any]) -> OwnerChain:
        owners = self._owners(pod)
        namespace_name = str((pod.get("metadata") or {}).get("namespace") or "")
        with self._index_lock:
            existing = dict(self._podgroups_by_namespace.get(namespace_name) or {})
        classes = frozenset(_name(pc) for pc in self.priority_classes.store.list())
        return OwnerChain(
            pod=pod,
            owners=owners,
            namespace_labels=_labels(namespace),
            default_priorities=self._default_priorities(),
            priority_classes=classes if self.priority_classes.synced.is_set() else None,
            existing_podgroups=existing,
            related=self._related(pod, owners),
        )

    def _read(self, pod: Mapping[str, Any], api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        """An object of the pod's namespace (or cluster-scoped) by kind and name; None if it may not be read."""
        resource = self.mapper.resource(api_version, kind)
        if resource is None:
            raise OwnerUnreadable(pod, f"the API server serves no {kind} in {api_version}")
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        try:
            obj = self.kube.get(resource.path(namespace if resource.namespaced else None, name))
        except ApiError as err:
            if err.status == 403:
                log.info("podgrouper: may not read %s %s/%s; stopping the owner walk there", kind, namespace, name)
                return None
            if err.status == 404:
                raise OwnerUnreadable(pod, f"{kind} {name} (in {api_version}) does not exist") from err
            raise
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", kind)
        return obj

    def _owners(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """The owners from the pod's first ownerReference up; stops at an owner it may not read."""
        owners: list[dict[str, Any]] = []
        child: Mapping[str, Any] = pod
        for _ in range(MAX_OWNER_DEPTH):
            references = (child.get("metadata") or {}).get("ownerReferences") or []
            if not references or (child is not pod and len(references) > 1):
                break  # (several owners: the rules report it)
            reference = references[0]
            owner = self._read(pod, str(reference.get("apiVersion")), str(reference.get("kind")),
                               str(reference.get("name")))
            if owner is None:
                break
            owners.append(owner)
            child = owner
        return owners

    def _related(self, pod: Mapping[str, Any], owners: list[dict[str, Any]]) -> RelatedObjects:
        labels = _labels(pod)
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        kinds = {(str(o.get("apiVersion", "")).split("/")[0], o.get("kind")) for o in owners}
        related: dict[str, Any] = {}
        if labels.get(GROVE_PODGANG_LABEL) and any(group == "grove.io" for group, _ in kinds):
            related["pod_gang"] = self._read_optional(pod, "scheduler.grove.io/v1alpha1", "PodGang",
                                                      labels[GROVE_PODGANG_LABEL])
        revision = labels.get(KNATIVE_REVISION_LABEL)
        if revision and any(group == "serving.knative.dev" for group, _ in kinds):
            if not any(o.get("kind") == "Revision" and _name(o) == revision for o in owners):
                related["knative_revision"] = self._read_optional(pod, "serving.knative.dev/v1", "Revision", revision)
            related["knative_revision_pods"] = self._list_pods(namespace, f"{KNATIVE_REVISION_LABEL}={revision}")
        for owner in owners:
            group = str(owner.get("apiVersion", "")).split("/")[0]
            if group == "kubeflow.org" and owner.get("kind") == "MPIJob":
                selector = f"{MPI_JOB_NAME_LABEL}={_name(owner)},{MPI_JOB_ROLE_LABEL}=launcher"
                related["mpi_launcher_pods"] = self._list_pods(namespace, selector)
            if group == "ray.io" and owner.get("kind") in ("RayJob", "RayService"):
                status = owner.get("status") or {}
                cluster = (
                    status.get("rayClusterName")
                    or (status.get("activeServiceStatus") or {}).get("rayClusterName")
                    or (status.get("pendingServiceStatus") or {}).get("rayClusterName")
                )
                if cluster and not any(o.get("kind") == "RayCluster" and _name(o) == cluster for o in owners):
                    related["ray_cluster"] = self._read_optional(pod, str(owner.get("apiVersion")), "RayCluster",
                                                                 cluster)
        return RelatedObjects(**related)

    def _read_optional(self, pod: Mapping[str, Any], api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return self._read(pod, api_version, kind, name)
        except OwnerUnreadable:
            return None  # the rule names what is missing

    def _list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        items = self.kube.list_all(PODS.path(namespace), {"labelSelector": selector})["items"]
        for item in items:
            item.setdefault("apiVersion", "v1")
            item.setdefault("kind", "Pod")
        return items

    # -- writing ----------------------------------------------------------------------------------
    def _apply_podgroup(self, metadata: PodGroupMetadata) -> None:
        desired = metadata.to_manifest()
        path = PODGROUPS.path(metadata.namespace, metadata.name)
        try:
            current = self.kube.get(path)
        except ApiError as err:
            if err.status != 404:
                raise
            self.kube.post(PODGROUPS.path(metadata.namespace), desired)  # 409 if made meanwhile: retried
            self.podgroups_created += 1
            log.info("podgrouper: created PodGroup %s/%s", metadata.namespace, metadata.name)
            return
        patch = podgroup_update(current, desired, self.options)
        if patch:
            self.kube.patch(path, patch, "merge")
            self.podgroups_patched += 1

    def _report(self, pod: Mapping[str, Any], message: str) -> None:
        """A `PodGrouperWarning` event on the pod, once per pod and message."""
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        with self._reported_lock:
            sent = self._reported.setdefault(uid, set())
            if message in sent:
                return
            sent.add(message)
            if len(self._reported) > 10000:  # pods deleted while we were away: forget the oldest half
                for stale in list(self._reported)[:5000]:
                    self._reported.pop(stale, None)
        log.warning("podgrouper: %s/%s: %s", meta.get("namespace"), meta.get("name"), message)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": meta.get("namespace")},
            "involvedObject": {
                "apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "namespace": meta.get("namespace"),
                "uid": uid, "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": keys.PODGROUPER_WARNING_REASON,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.config.event_instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.kube.post(EVENTS.path(str(meta.get("namespace"))), event)
            self.events_sent += 1
        except ApiError as err:
            log.warning("podgrouper: could not record an event on pod %s: %s", meta.get("name"), err)


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _grouping_inputs_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a pod update can change its PodGroup or the pod's patch.

    Status-only updates cannot; nor can the podgrouper's own patch (the PodGroup annotation and
    sub-group label appearing or changing). Their removal can: the pod is handled again.
    """
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if old_meta.get("ownerReferences") != new_meta.get("ownerReferences"):
        return True
    if (old.get("spec") or {}).get("priorityClassName") != (new.get("spec") or {}).get("priorityClassName"):
        return True
    new_annotations = new_meta.get("annotations") or {}
    new_labels = new_meta.get("labels") or {}
    if keys.POD_GROUP_ANNOTATION not in new_annotations:
        return True
    ours = {keys.POD_GROUP_ANNOTATION, keys.SUBGROUP_LABEL}

    def others(values: Mapping[str, str] | None) -> dict[str, str]:
        return {k: v for k, v in (values or {}).items() if k not in ours}

    if keys.SUBGROUP_LABEL in (old_meta.get("labels") or {}) and keys.SUBGROUP_LABEL not in new_labels:
        return True
    return others(old_meta.get("labels")) != others(new_labels) or others(old_meta.get("annotations")) != others(
        new_annotations
    )


def _api_message(err: ApiError) -> str:
    message = err.body.get("message") if isinstance(err.body, dict) else None
    return str(message or err)


__all__ = [
    "ControllerConfig",
    "OwnerUnreadable",
    "PodGrouperController",
    "ResourceMapper",
    "pod_update",
    "podgroup_update",
]
