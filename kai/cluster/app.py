"""Wiring: a live process with the scheduler role, the binder role, or both.

KAI runs the scheduler and the binder as two Deployments; ``kai run`` runs both roles in one
process by default (one cache, one lease, one port: the simplest thing for a dev cluster and
for the tests), and ``kai run --no-binder`` + ``kai binder`` split them the way the Helm chart
deploys them. Either way each role only acts while its process holds the role's Lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kai.api import keys
from kai.cluster.binder import Binder
from kai.cluster.cache import BINDER_KINDS, SCHEDULER_KINDS, ClusterCache
from kai.cluster.events import EventRecorder
from kai.cluster.kube import BIND_REQUESTS, Kube
from kai.cluster.leader import LeaderElector
from kai.cluster.metrics import BINDER_CONTROLLER, HttpServer, Metrics
from kai.cluster.scheduler import Scheduler
from kai.cluster.status import StatusUpdater
from kai.cluster.writers import BindRequestWriter, Evictor
from kai.framework.config import SchedulerConfig
from kai.framework.decisions import Eviction

log = logging.getLogger("kai.cluster")


@dataclass
class LiveOptions:
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    scheduler: bool = True
    binder: bool = True
    period: float = 1.0
    leader_elect: bool = True
    lease_namespace: str = "kai-scheduler"
    lease_name: str = ""  # default: kai-scheduler (kai-scheduler-<partition> for a node pool's), or kai-binder
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    listen: str = "127.0.0.1:8080"  # host:port; port 0 picks a free one; "" serves nothing
    binder_workers: int = 8
    writers: int = 8
    routine_events: bool = True  # Scheduled / Bound events on every pod, as KAI
    async_bind_requests: bool = True  # the cycle does not wait for its BindRequests to be written
    eviction_api: bool = False
    record_dir: Path | None = None
    record_every: int = 0
    fake_gpu_uuids: bool = False
    reservation_timeout: float = 40.0
    max_cycles: int = 0
    # KAI's flags (kai/cluster/cli.py maps them)
    metrics_namespace: str = "kai"
    queue_label_key: str = keys.QUEUE_LABEL
    nodepool_label_key: str = keys.NODE_POOL_LABEL
    partition_label_value: str = ""
    update_pod_eviction_condition: bool = False
    # The binder's two listeners as KAI's (--metrics-bind-address, --health-probe-bind-address); when
    # either is set, `listen` is not used.
    metrics_listen: str = ""
    probe_listen: str = ""
    binder_settings: dict[str, Any] = field(default_factory=dict)  # reservation pod options, Binder keywords
    # /snapshot (the last cycle's input: every pod, node and queue of the cluster) is served only when
    # asked for, on its own address, which must be a loopback one.
    snapshot_listen: str = ""


class LiveProcess:
    """Cache + leader election + scheduler and/or binder + HTTP endpoints."""

    def __init__(self, kube: Kube, options: LiveOptions) -> None:
        self.kube = kube
        self.options = options
        o = options
        kinds = SCHEDULER_KINDS if o.scheduler else BINDER_KINDS
        self.cache = ClusterCache(kube, kinds)
        self.metrics = Metrics(o.metrics_namespace, scheduler=o.scheduler, binder=o.binder)
        component = "kai-scheduler" if o.scheduler else "kai-binder"
        self.events = EventRecorder(
            kube, component, routine=o.routine_events, on_dropped=self.metrics.events_dropped.labels(component).inc
        )
        self.pool = ThreadPoolExecutor(o.writers, thread_name_prefix="writer")
        self.bind_request_pool = ThreadPoolExecutor(o.writers, thread_name_prefix="bindrequests")
        self.scheduler: Scheduler | None = None
        self.binder: Binder | None = None
        self.leader: LeaderElector | None = None
        if o.binder:
            self.binder = Binder(
                kube,
                self.cache,
                workers=o.binder_workers,
                events=EventRecorder(
                    kube,
                    "kai-binder",
                    routine=o.routine_events,
                    on_dropped=self.metrics.events_dropped.labels("kai-binder").inc,
                ),
                fake_gpu_uuids=o.fake_gpu_uuids,
                reservation_timeout=o.reservation_timeout,
                **o.binder_settings,
                on_bound=lambda pod, seconds: (
                    self.metrics.pods_bound.inc(),
                    self.metrics.task_bind.observe(seconds * 1000),
                ),
                on_reconciled=self._reconciled,
                on_busy=lambda n: self.metrics.active_workers.labels(BINDER_CONTROLLER).set(n),
            )
            self.metrics.max_concurrent_reconciles.labels(BINDER_CONTROLLER).set(o.binder_workers)
        if o.scheduler:
            self.status = StatusUpdater(kube, self.events)
            self.scheduler = Scheduler(
                self.cache,
                o.config,
                bind_requests=BindRequestWriter(
                    kube,
                    self.cache.store(BIND_REQUESTS),
                    self.events,
                    self.bind_request_pool,
                    in_flight=self.cache.in_flight if o.async_bind_requests else None,
                    labels={o.nodepool_label_key: o.partition_label_value}
                    if o.nodepool_label_key and o.partition_label_value
                    else None,
                    node_pool=o.partition_label_value or "default",
                ),
                evictor=Evictor(
                    kube,
                    self.events,
                    self.pool,
                    use_eviction_api=o.eviction_api,
                    update_condition=o.update_pod_eviction_condition,
                    on_evicted=self._evicted,
                ),
                status=self.status,
                events=self.events,
                metrics=self.metrics,
                period=o.period,
                record_dir=o.record_dir,
                record_every=o.record_every,
                queue_label_key=o.queue_label_key,
                nodepool_label_key=o.nodepool_label_key,
                partition_label_value=o.partition_label_value,
            )
        if o.leader_elect:
            identity = o.identity or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
            self.leader = LeaderElector(
                kube,
                o.lease_namespace,
                o.lease_name or _lease_name(component, o.partition_label_value if o.scheduler else ""),
                identity,
                o.lease_duration,
                o.renew_deadline,
                o.retry_period,
                on_change=self._leading,
            )
        self.servers: list[HttpServer] = []
        endpoints = {
            "metrics": o.metrics_listen,
            "probes": o.probe_listen,
        }
        if not (o.metrics_listen or o.probe_listen):
            endpoints = {"all": o.listen} if o.listen else {}
        if o.snapshot_listen and o.scheduler:
            endpoints["snapshot"] = o.snapshot_listen
        for role, address in endpoints.items():
            if not address:
                continue
            host, _, port = address.rpartition(":")
            if role == "snapshot" and not _loopback(host):
                raise ValueError(f"the snapshot endpoint serves only on a loopback address, not {address!r}")
            self.servers.append(
                HttpServer(
                    host or "0.0.0.0",
                    int(port),
                    self.metrics,
                    healthy=self.healthy,
                    ready=lambda: self.cache.synced,
                    snapshot=self._snapshot if role == "snapshot" else None,
                    paths={
                        "metrics": {"/metrics"},
                        "probes": {"/healthz", "/readyz"},
                        "all": {"/metrics", "/healthz", "/readyz"},
                        "snapshot": {"/snapshot"},
                    }[role],
                )
            )
        self.http: HttpServer | None = self.servers[0] if self.servers else None
        self.snapshot_http: HttpServer | None = next((srv for srv in self.servers if srv.paths == {"/snapshot"}), None)
        self._threads: list[threading.Thread] = []
        self._stopped = threading.Event()

    def _snapshot(self) -> dict[str, Any] | None:
        return self.scheduler.last_input.as_list() if self.scheduler and self.scheduler.last_input else None

    def _reconciled(self, result: str, seconds: float) -> None:
        self.metrics.reconciled(result, seconds)
        if result == "error":
            self.metrics.bind_failures.inc()

    def _evicted(self, eviction: Eviction, job: str, podgroup: dict[str, Any] | None) -> None:
        """KAI's pod_group_evicted_pods_total{podgroup, namespace, uid, nodepool, action}."""
        namespace, _, name = job.partition("/")
        meta = (podgroup or {}).get("metadata") or {}
        pool = self.options.partition_label_value or "default"
        self.metrics.evicted_pods.labels(name, namespace, str(meta.get("uid") or ""), pool, eviction.action).inc()

    def is_leader(self) -> bool:
        return self.leader.is_leader if self.leader is not None else True

    def _leading(self, leading: bool) -> None:
        self.metrics.is_leader.set(1 if leading else 0)
        if self.binder is not None:
            (self.binder.active.set if leading else self.binder.active.clear)()

    def healthy(self) -> bool:
        return self.scheduler.healthy() if self.scheduler is not None else not self._stopped.is_set()

    def start(self) -> LiveProcess:
        for server in self.servers:
            server.start()
        self.cache.start()
        if self.leader is not None:
            if self.binder is not None:
                self.binder.active.clear()
            self.leader.start()
        else:
            self.metrics.is_leader.set(1)
        if self.binder is not None:
            self.binder.start()
        if self.scheduler is not None:
            t = threading.Thread(
                target=self.scheduler.run,
                args=(self.is_leader, self.options.max_cycles),
                name="scheduler",
                daemon=True,
            )
            t.start()
            self._threads.append(t)
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Block until stopped (or the scheduler ran `max_cycles`); True if it ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopped.is_set():
            if self._threads and not any(t.is_alive() for t in self._threads):
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            self._stopped.wait(0.2)
        return True

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.scheduler is not None:
            self.scheduler.stop()
        for t in self._threads:
            t.join(10)
        if self.binder is not None:
            self.binder.stop()
        if self.leader is not None:
            self.leader.stop(release=True)
        self.cache.stop()
        for server in self.servers:
            server.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.bind_request_pool.shutdown(wait=False, cancel_futures=True)


def _lease_name(component: str, partition: str) -> str:
    """One Lease per node pool's scheduler, so that the shards of a cluster lead side by side."""
    if not partition:
        return component
    return f"{component}-{partition.lower().replace('_', '-').strip('-.')}"[:253]


def _loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (never every interface)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
