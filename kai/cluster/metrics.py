"""Prometheus metrics with KAI's names (prefix ``kai_``), and the HTTP endpoints of a live process.

KAI's scheduler metrics (listed in docs/metrics.md), all in milliseconds:
``e2e_scheduling_latency_milliseconds``, ``open_session_latency_milliseconds``,
``close_session_latency_milliseconds``, ``action_scheduling_latency_milliseconds{action}`` (gauges
of the last cycle); histograms ``task_scheduling_latency_milliseconds`` (pod creation ->
BindRequest) and ``task_bind_latency_milliseconds`` (buckets 5·2^i ms); counters
``podgroups_scheduled_by_action{action}``, ``pod_group_evicted_pods_total{podgroup,uid,nodepool,
action}``; per-queue gauges ``queue_fair_share_{cpu_cores,memory_gb,gpu}{queue_name}`` and
``queue_{cpu,memory,gpu}_usage{queue_name}``.

kai's own, beside them: ``e2e_scheduling_latency_seconds`` (a histogram of the cycle, for the
distribution the gauge cannot give), ``pods_scheduled_total``, ``pods_bound_total``,
``bind_failures_total``, ``evictions_total{action}``, ``is_leader``, and
``unsupported_feature_uses_total{feature}``: objects seen using a KAI feature kai has not built
(``DynamicResourceAllocation``), counted once per object, and KAI plugins the configuration names that
kai has not built (``plugin/<name>``), counted once at start.

:class:`HttpServer` serves ``/metrics``, ``/healthz`` (the loop is alive), ``/readyz`` (caches
synced) and ``/snapshot`` (the last cycle's input as a JSON ``v1 List``, which ``kai simulate -f``
reads).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MS_BUCKETS = tuple(5.0 * 2**i for i in range(10))


class Metrics:
    def __init__(self, namespace: str = "kai") -> None:
        self.registry = CollectorRegistry()
        r, ns = self.registry, namespace
        self.e2e = Gauge("e2e_scheduling_latency_milliseconds", "Last cycle, end to end", namespace=ns, registry=r)
        self.open_session = Gauge("open_session_latency_milliseconds", "Last open session", namespace=ns, registry=r)
        self.close_session = Gauge("close_session_latency_milliseconds", "Last close session", namespace=ns, registry=r)
        self.action = Gauge(
            "action_scheduling_latency_milliseconds", "Last cycle, per action", ["action"], namespace=ns, registry=r
        )
        self.cycle_seconds = Histogram(
            "e2e_scheduling_latency_seconds",
            "Cycle latency distribution",
            namespace=ns,
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.task_scheduling = Histogram(
            "task_scheduling_latency_milliseconds",
            "Pod creation to BindRequest",
            namespace=ns,
            registry=r,
            buckets=MS_BUCKETS,
        )
        self.task_bind = Histogram(
            "task_bind_latency_milliseconds",
            "Binder: BindRequest to bound",
            namespace=ns,
            registry=r,
            buckets=MS_BUCKETS,
        )
        self.podgroups_scheduled = Counter(
            "podgroups_scheduled_by_action", "Pod groups scheduled", ["action"], namespace=ns, registry=r
        )
        self.evicted_pods = Counter(
            "pod_group_evicted_pods_total",
            "Pods evicted",
            ["podgroup", "uid", "nodepool", "action"],
            namespace=ns,
            registry=r,
        )
        self.evictions = Counter("evictions_total", "Evictions by action", ["action"], namespace=ns, registry=r)
        self.pods_scheduled = Counter("pods_scheduled_total", "BindRequests created", namespace=ns, registry=r)
        self.pods_bound = Counter("pods_bound_total", "Pods bound by the binder", namespace=ns, registry=r)
        self.bind_failures = Counter("bind_failures_total", "Failed binds", namespace=ns, registry=r)
        self.is_leader = Gauge("is_leader", "1 while this process leads", namespace=ns, registry=r)
        self.unsupported = Counter(
            "unsupported_feature_uses",
            "Objects and configured plugins using a KAI feature kai has not built",
            ["feature"],
            namespace=ns,
            registry=r,
        )
        self.fair_share = {
            res: Gauge(f"queue_fair_share_{unit}", f"Fair share ({unit})", ["queue_name"], namespace=ns, registry=r)
            for res, unit in (("cpu", "cpu_cores"), ("memory", "memory_gb"), ("gpu", "gpu"))
        }
        self.usage = {
            res: Gauge(f"queue_{res}_usage", f"Allocated {res}", ["queue_name"], namespace=ns, registry=r)
            for res in ("cpu", "memory", "gpu")
        }

    def queue(self, name: str, fair_share: dict[str, float], allocated: dict[str, float]) -> None:
        """Per-queue gauges from a QueueReport (gpu devices, cpu millicores, memory MB)."""
        scale = {"cpu": 1e-3, "memory": 1e-3, "gpu": 1.0}  # -> cores, GB, devices
        for res, factor in scale.items():
            self.fair_share[res].labels(name).set(fair_share.get(res, 0.0) * factor)
            self.usage[res].labels(name).set(allocated.get(res, 0.0) * factor)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class HttpServer:
    """/metrics, /healthz, /readyz and /snapshot on one port (KAI: ``--listen-address :8080``)."""

    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        snapshot: Callable[[], dict[str, Any] | None] | None = None,
        paths: set[str] | None = None,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if outer.paths is not None and path not in outer.paths:
                    self._send(404, b"not found\n")
                elif path == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = outer.healthy()
                    self._send(200 if ok else 500, b"ok\n" if ok else b"the scheduling loop is stuck\n")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"caches not synced\n")
                elif path == "/snapshot" and outer.snapshot is not None:
                    data = outer.snapshot()
                    if data is None:
                        self._send(503, b"no cycle has run yet\n")
                    else:
                        self._send(200, json.dumps(data).encode(), "application/json")
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.metrics = metrics
        self.healthy = healthy
        self.ready = ready
        self.snapshot = snapshot
        self.paths = paths  # None: every endpoint
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, name="http", daemon=True)

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
