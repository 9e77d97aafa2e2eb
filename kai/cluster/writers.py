"""Two of the scheduler's ports: the BindRequest writer and the evictor.

* :class:`BindRequestWriter` turns each ``Binding`` of a cycle into a BindRequest (name = pod
  name, owner = the pod, label ``selected-node`` (and the partition's node-pool label, when the
  scheduler runs for a node pool); ``receivedResourceType`` Regular, Fraction or
  MigInstance with ``receivedGPU`` and ``selectedGPUGroups``), as KAI's scheduler does, and puts
  the created object straight into the cache so that the next cycle sees the pod as Binding
  even before the watch event arrives.
* :class:`Evictor` carries out ``Eviction`` decisions by deleting the pod (KAI deletes and does
  not consult PodDisruptionBudgets), or, with ``use_eviction_api``, through the Eviction API
  (which does); either way with a ``Evicted`` event on the pod and an ``Evict`` event on its
  PodGroup saying which action evicted it and for whom.

Both write in parallel (a thread pool) and return when every write of the cycle is done.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kai.api import keys
from kai.api.timeutil import format_time
from kai.cluster.events import EventRecorder
from kai.cluster.kube import BIND_REQUESTS, PODGROUPS, PODS, ApiError, Kube
from kai.cluster.reflector import Store
from kai.framework.decisions import Binding, Eviction
from kai.model import ClusterSnapshot, PodInfo

log = logging.getLogger("kai.cluster.writers")


def bind_request_body(binding: Binding, pod: dict[str, Any], info: PodInfo | None, node_memory_mib: int) -> dict:
    meta = pod["metadata"]
    resource_type, count, portion = "Regular", 0, "1.00"
    if info is not None:
        gpu = info.gpu
        if gpu.is_shared:
            resource_type, count = "Fraction", gpu.num_devices
            fraction = gpu.fraction
            if not fraction and gpu.memory_mib and node_memory_mib:
                fraction = math.ceil(gpu.memory_mib / node_memory_mib * 100) / 100
            portion = f"{min(fraction, 1.0):.2f}"
        elif gpu.mig:
            resource_type, count = "MigInstance", sum(c for _, c in gpu.mig)
        else:
            count = int(gpu.whole)
    body: dict[str, Any] = {
        "apiVersion": keys.BINDREQUEST_API_VERSION,
        "kind": "BindRequest",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {"selected-node": binding.node},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": {
            "podName": meta["name"],
            "selectedNode": binding.node,
            "receivedResourceType": resource_type,
            "receivedGPU": {"count": count, "portion": portion},
        },
    }
    if binding.gpu_groups:
        body["spec"]["selectedGPUGroups"] = list(binding.gpu_groups)
    return body


class BindRequestWriter:
    """Port: creates the BindRequests of a cycle."""

    def __init__(
        self,
        kube: Kube,
        store: Store,
        events: EventRecorder,
        pool: ThreadPoolExecutor,
        in_flight: dict[str, dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None,
        node_pool: str = "default",
    ) -> None:
        self.in_flight = in_flight
        self.labels = labels or {}  # on every BindRequest (the shard's node-pool label)
        self.node_pool = node_pool  # named in the Scheduled event, as KAI's ("default": the unlabelled pool)
        self.kube = kube
        self.store = store
        self.events = events
        self.pool = pool
        self.created = 0
        self.failed = 0

    def write(
        self, bindings: Iterable[Binding], pods: dict[str, dict[str, Any]], snapshot: ClusterSnapshot
    ) -> list[Binding]:
        """Create one BindRequest per binding. With ``in_flight`` (asynchronous mode) the creations are
        queued and the bindings returned at once: each request sits in ``in_flight`` (which the cache
        view treats as a live BindRequest) until the API server has answered. Without it, the call
        returns when every request is written, with the bindings whose request exists now."""
        infos = {p.key: p for pg in snapshot.podgroups.values() for p in pg.pods}
        memory = {n.name: n.gpu_memory_mib for n in snapshot.nodes}
        jobs = []
        for binding in bindings:
            pod = pods.get(binding.pod)
            if pod is None:
                continue
            body = bind_request_body(binding, pod, infos.get(binding.pod), memory.get(binding.node, 0))
            body["metadata"]["labels"].update(self.labels)
            jobs.append((binding, pod, body))
        if self.in_flight is not None:
            for binding, pod, body in jobs:
                self.in_flight[binding.pod] = body
                self.pool.submit(self._create, binding, pod, body)
            return [j[0] for j in jobs]
        done = list(self.pool.map(lambda job: self._create(*job), jobs))
        return [b for b, ok in zip((j[0] for j in jobs), done, strict=True) if ok]

    def _create(self, binding: Binding, pod: dict[str, Any], body: dict[str, Any]) -> bool:
        try:
            return self._post(binding, pod, body)
        finally:
            if self.in_flight is not None:
                self.in_flight.pop(binding.pod, None)  # after the store has the request (or it failed)

    def _post(self, binding: Binding, pod: dict[str, Any], body: dict[str, Any]) -> bool:
        meta = body["metadata"]
        try:
            created = self.kube.post(BIND_REQUESTS.path(meta["namespace"]), body)
        except ApiError as err:
            self.failed += 1
            if err.status == 409:
                log.debug("BindRequest %s/%s exists already", meta["namespace"], meta["name"])
                return False
            log.warning("BindRequest for %s not created: %s", binding.pod, err)
            self.events.record(pod, "Warning", "FailedBinding", f"Could not request binding to {binding.node}: {err}")
            return False
        created.setdefault("apiVersion", keys.BINDREQUEST_API_VERSION)
        created.setdefault("kind", "BindRequest")
        self.store.put(created)
        self.created += 1
        self.events.record(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned pod {binding.pod} to node {binding.node} at node-pool {self.node_pool}",
        )
        return True

    def delete_stale(self, stale: list[tuple[dict[str, Any], str]]) -> int:
        def delete(item: tuple[dict[str, Any], str]) -> bool:
            br, why = item
            meta = br["metadata"]
            try:
                self.kube.delete(
                    BIND_REQUESTS.path(meta["namespace"], meta["name"]),
                    {"preconditions": {"uid": meta.get("uid")}} if meta.get("uid") else None,
                )
            except ApiError as err:
                if err.status != 404:
                    # Including 409: a conflict may leave the request in place (a replaced one comes back
                    # through the watch). Forgetting it here would hide it for good, and its pod could never
                    # get a new request under the same name.
                    log.warning("stale BindRequest %s/%s not deleted: %s", meta["namespace"], meta["name"], err)
                    return False
            log.info("deleted BindRequest %s/%s: %s", meta["namespace"], meta["name"], why)
            self.store.remove(br)
            return True

        return sum(self.pool.map(delete, stale))


# The rule behind each evicting action, for the PodGroup's Evict event.
EVICTION_RULES = {
    "reclaim": "fair share: the preemptor's queue is below its fair share and takes resources back",
    "preempt": "priority: a higher-priority job of the same queue",
    "consolidation": "consolidation: moved to another node to make room",
    "stalegangeviction": "stale gang: fewer pods running than minMember for longer than the grace period",
}


class Evictor:
    """Port: carries out the evictions of a cycle."""

    def __init__(
        self,
        kube: Kube,
        events: EventRecorder,
        pool: ThreadPoolExecutor,
        use_eviction_api: bool = False,
        on_evicted: Callable[[Eviction, str, dict[str, Any] | None], None] | None = None,
        update_condition: bool = False,
    ) -> None:
        self.kube = kube
        self.events = events
        self.pool = pool
        self.use_eviction_api = use_eviction_api
        # KAI's --update-pod-eviction-condition: DisruptionTarget=True (PreemptionByScheduler) before the delete.
        self.update_condition = update_condition
        self.on_evicted = on_evicted
        self.evicted = 0

    def evict(
        self,
        evictions: list[Eviction],
        pods: dict[str, dict[str, Any]],
        podgroups: dict[str, dict[str, Any]],
        snapshot: ClusterSnapshot,
    ) -> list[Eviction]:
        jobs = {p.key: p.job_key for pg in snapshot.podgroups.values() for p in pg.pods}
        work = [(e, pods[e.pod]) for e in evictions if e.pod in pods]
        results = list(self.pool.map(lambda item: self._evict(*item), work))
        done = [e for (e, _), ok in zip(work, results, strict=True) if ok]
        per_group: Counter[tuple[str, str, str]] = Counter()
        for e in done:
            per_group[(jobs.get(e.pod, ""), e.action, e.by)] += 1
            if self.on_evicted is not None:  # (eviction, pod group key, the PodGroup object)
                self.on_evicted(e, jobs.get(e.pod, ""), podgroups.get(jobs.get(e.pod, "")))
        for (job, action, by), count in per_group.items():
            pg = podgroups.get(job)
            if pg is not None:
                why = f" to make room for {by}" if by else ""
                rule = EVICTION_RULES.get(action, "")
                text = f"{count} pod(s) of {job} evicted by {action}{why}" + (f" ({rule})" if rule else "")
                self.events.record(pg, "Normal", "Evict", text)
        return done

    def _evict(self, eviction: Eviction, pod: dict[str, Any]) -> bool:
        meta = pod["metadata"]
        why = eviction.message or (
            f"Evicted by {eviction.action}" + (f" to make room for pod group {eviction.by}" if eviction.by else "")
        )
        try:
            if self.update_condition:
                self._mark_disruption_target(pod, why)
            if self.use_eviction_api:
                body = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                    "deleteOptions": {"preconditions": {"uid": meta["uid"]}},
                }
                self.kube.post(PODS.path(meta["namespace"], meta["name"], "eviction"), body)
            else:
                self.kube.delete(PODS.path(meta["namespace"], meta["name"]), {"preconditions": {"uid": meta["uid"]}})
        except ApiError as err:
            if err.status == 404:
                return False
            if err.status == 429:  # a PodDisruptionBudget says no
                self.events.record(pod, "Warning", "EvictionBlocked", f"{why}: refused: {err}")
                return False
            log.warning("evicting %s failed: %s", eviction.pod, err)
            return False
        self.evicted += 1
        self.events.record(pod, "Normal", "Evicted", why)
        return True

    def _mark_disruption_target(self, pod: dict[str, Any], message: str) -> None:
        """Pod condition DisruptionTarget=True, reason PreemptionByScheduler (a strategic merge by type)."""
        meta = pod["metadata"]
        conditions = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": message,
                "lastTransitionTime": format_time(time.time()),
            }
        ]
        try:
            path = PODS.path(meta["namespace"], meta["name"], "status")
            self.kube.patch(path, {"status": {"conditions": conditions}}, "strategic")
        except ApiError as err:  # the eviction goes on: the condition is advice
            if err.status == 404:
                raise
            log.warning("pod %s/%s: DisruptionTarget condition not set: %s", meta["namespace"], meta["name"], err)


def podgroup_path(key: str) -> str:
    namespace, name = key.split("/", 1)
    return PODGROUPS.path(namespace, name)
