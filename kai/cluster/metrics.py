"""Prometheus metrics with KAI's names, types, labels and buckets, and the HTTP endpoints of a live process.

Every name has the prefix ``--metrics-namespace`` (``kai_``). docs/metrics.md lists them all; in short:

* the scheduler's (KAI's ``pkg/scheduler/metrics``): gauges of the last cycle
  ``e2e_scheduling_latency_milliseconds``, ``open_session_latency_milliseconds``,
  ``close_session_latency_milliseconds``, ``action_scheduling_latency_milliseconds{action}``,
  ``plugin_scheduling_latency_milliseconds{plugin,OnSession}``; histograms (buckets 5·2^i ms)
  ``task_scheduling_latency_milliseconds``, ``usage_query_latency_milliseconds``; counters, named as
  KAI's Go client names them (no ``_total`` added): ``podgroups_scheduled_by_action{action}``,
  ``podgroups_acted_on_by_action{action}``, ``scenarios_simulation_by_action{action}``,
  ``scenarios_filtered_by_action{action}``, ``total_preemption_attempts``,
  ``pod_group_evicted_pods_total{podgroup,namespace,uid,nodepool,action}``; per-queue gauges
  ``queue_fair_share_{cpu_cores,memory_gb,gpu}{queue_name}``, ``queue_{cpu,memory,gpu}_usage{queue_name}``;
  the queue controller's ``queue_info``, ``queue_deserved_gpus``, ``queue_quota_cpu_cores``,
  ``queue_quota_memory_bytes``, ``queue_allocated_{gpus,cpu_cores,memory_bytes}`` (``{queue_name}``);
* the binder's own (KAI's binder exports controller-runtime's): ``controller_runtime_reconcile_total
  {controller,result}``, ``controller_runtime_reconcile_errors_total{controller}``,
  ``controller_runtime_reconcile_time_seconds{controller}``, ``controller_runtime_max_concurrent_reconciles
  {controller}``, ``controller_runtime_active_workers{controller}`` (no prefix, as controller-runtime), and
  kai's ``task_bind_latency_milliseconds`` (BindRequest to bound), ``pods_bound_total``, ``bind_failures_total``;
* kai's own beside the scheduler's: ``e2e_scheduling_latency_seconds``, ``pods_scheduled_total``,
  ``evictions_total{action}``, ``unsupported_feature_uses_total{feature}`` (objects using a KAI feature kai
  has not built, and configured plugins kai has not built: ``plugin/<name>``),
  ``events_dropped_total{component}`` (events not written because the event queue was full),
  ``cluster_capacity{resource}`` (the usable nodes' allocatable: ``nvidia_com_gpu`` devices, ``cpu`` cores,
  ``memory`` bytes; a capacity metric for time-based fair share where no kube-state-metrics runs); ``is_leader``
  on both.

A process with one role serves only that role's metrics (``Metrics(scheduler=..., binder=...)``).

:class:`HttpServer` serves ``/metrics``, ``/healthz`` (the loop is alive), ``/readyz`` (caches
synced) and ``/snapshot`` (the last cycle's input as a JSON ``v1 List``, which ``kai simulate -f``
reads), or the subset of them it is given.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kai.model import CPU, GPU, MEMORY

MS_BUCKETS = tuple(5.0 * 2**i for i in range(10))
# controller-runtime's reconcile_time_seconds buckets
RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip
BINDER_CONTROLLER = "bindrequest"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class GoCounter:
    """A counter exported under exactly its name, as Go's client does (prometheus_client's Counter always
    renders ``<name>_total`` and a ``_created`` series; KAI's ``podgroups_scheduled_by_action`` has neither)."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...] = (), namespace: str = "") -> None:
        self.name = f"{namespace}_{name}" if namespace else name
        self.documentation = documentation
        self.labelnames = labelnames
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def labels(self, *values: str) -> _GoCounterChild:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        return _GoCounterChild(self, tuple(str(v) for v in values))

    def inc(self, amount: float = 1.0) -> None:
        self._add((), amount)

    def _add(self, key: tuple[str, ...], amount: float) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: counters only go up")
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *values: str) -> float:
        return self._values.get(tuple(values), 0.0)

    def render(self) -> str:
        lines = [f"# HELP {self.name} {self.documentation}", f"# TYPE {self.name} counter"]
        with self._lock:
            items = sorted(self._values.items())
        if not self.labelnames and not items:
            items = [((), 0.0)]  # an unlabelled counter exists from the start, as in Go
        for key, value in items:
            labels = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(self.labelnames, key, strict=True))
            lines.append(f"{self.name}{{{labels}}} {_number(value)}" if labels else f"{self.name} {_number(value)}")
        return "\n".join(lines) + "\n"


class _GoCounterChild:
    def __init__(self, parent: GoCounter, key: tuple[str, ...]) -> None:
        self.parent, self.key = parent, key

    def inc(self, amount: float = 1.0) -> None:
        self.parent._add(self.key, amount)


class Metrics:
    def __init__(self, namespace: str = "kai", *, scheduler: bool = True, binder: bool = True) -> None:
        self.registry = CollectorRegistry()
        self.namespace = namespace
        ns = namespace
        s = self.registry if scheduler else None  # the scheduler's families
        b = self.registry if binder else None  # the binder's families
        r = self.registry  # both
        self.go_counters: list[GoCounter] = []

        def go_counter(
            name: str, doc: str, labels: tuple[str, ...] = (), prefix: str = ns, on: bool = True
        ) -> GoCounter:
            counter = GoCounter(name, doc, labels, prefix)
            if on:
                self.go_counters.append(counter)
            return counter

        # -- the scheduler's (KAI's names) --
        self.e2e = Gauge("e2e_scheduling_latency_milliseconds", "Last cycle, end to end", namespace=ns, registry=s)
        self.open_session = Gauge("open_session_latency_milliseconds", "Last open session", namespace=ns, registry=s)
        self.close_session = Gauge("close_session_latency_milliseconds", "Last close session", namespace=ns, registry=s)
        self.action = Gauge(
            "action_scheduling_latency_milliseconds", "Last cycle, per action", ["action"], namespace=ns, registry=s
        )
        self.plugin = Gauge(
            "plugin_scheduling_latency_milliseconds",
            "Last cycle, per plugin",
            ["plugin", "OnSession"],
            namespace=ns,
            registry=s,
        )
        self.task_scheduling = Histogram(
            "task_scheduling_latency_milliseconds",
            "Pod creation to BindRequest",
            namespace=ns,
            registry=s,
            buckets=MS_BUCKETS,
        )
        self.usage_query = Histogram(
            "usage_query_latency_milliseconds",
            "Queue usage query latency",
            namespace=ns,
            registry=s,
            buckets=MS_BUCKETS,
        )
        self.podgroups_scheduled = go_counter(
            "podgroups_scheduled_by_action", "Count of podgroups scheduled per action", ("action",), on=scheduler
        )
        self.podgroups_acted_on = go_counter(
            "podgroups_acted_on_by_action", "Count of podgroups tried per action", ("action",), on=scheduler
        )
        self.scenarios_simulated = go_counter(
            "scenarios_simulation_by_action", "Count of scenarios simulated per action", ("action",), on=scheduler
        )
        self.scenarios_filtered = go_counter(
            "scenarios_filtered_by_action", "Count of scenarios filtered per action", ("action",), on=scheduler
        )
        self.preemption_attempts = go_counter(
            "total_preemption_attempts", "Total preemption attempts in the cluster till now", on=scheduler
        )
        self.evicted_pods = go_counter(
            "pod_group_evicted_pods_total",
            "Total number of pods evicted per pod group",
            ("podgroup", "namespace", "uid", "nodepool", "action"),
            on=scheduler,
        )
        self.fair_share = {
            res: Gauge(f"queue_fair_share_{unit}", f"Fair share ({unit})", ["queue_name"], namespace=ns, registry=s)
            for res, unit in (("cpu", "cpu_cores"), ("memory", "memory_gb"), ("gpu", "gpu"))
        }
        self.usage = {
            res: Gauge(f"queue_{res}_usage", f"Usage of {res}", ["queue_name"], namespace=ns, registry=s)
            for res in ("cpu", "memory", "gpu")
        }
        # -- KAI's queue controller (from Queue status, see kai/cluster/status.py) --
        def queue_gauge(name: str, text: str) -> Gauge:
            return Gauge(name, text, ["queue_name"], namespace=ns, registry=s)

        self.queue_info = queue_gauge("queue_info", "Queue info")
        self.queue_deserved_gpus = queue_gauge("queue_deserved_gpus", "Queue deserved GPUs")
        self.queue_quota_cpu = queue_gauge("queue_quota_cpu_cores", "Queue quota CPU cores")
        self.queue_quota_memory = queue_gauge("queue_quota_memory_bytes", "Queue quota memory bytes")
        self.queue_allocated_gpus = queue_gauge("queue_allocated_gpus", "Queue allocated GPUs")
        self.queue_allocated_cpu = queue_gauge("queue_allocated_cpu_cores", "Queue allocated CPU cores")
        self.queue_allocated_memory = queue_gauge("queue_allocated_memory_bytes", "Queue allocated memory bytes")
        # kai's own: the capacity that time-based fair share divides by, for a usage DB without
        # kube-state-metrics (the dev cluster's Prometheus): resource nvidia_com_gpu (devices), cpu (cores),
        # memory (bytes), as kube_node_status_capacity names them.
        self.cluster_capacity = Gauge(
            "cluster_capacity",
            "Allocatable resources of the usable nodes the scheduler sees",
            ["resource"],
            namespace=ns,
            registry=s,
        )
        # -- kai's own, beside the scheduler's --
        self.cycle_seconds = Histogram(
            "e2e_scheduling_latency_seconds",
            "Cycle latency distribution",
            namespace=ns,
            registry=s,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.evictions = Counter("evictions_total", "Evictions by action", ["action"], namespace=ns, registry=s)
        self.pods_scheduled = Counter("pods_scheduled_total", "BindRequests created", namespace=ns, registry=s)
        self.events_dropped = Counter(
            "events_dropped_total", "Events dropped: the event queue was full", ["component"], namespace=ns, registry=r
        )
        self.unsupported = Counter(
            "unsupported_feature_uses",
            "Objects and configured plugins using a KAI feature kai has not built",
            ["feature"],
            namespace=ns,
            registry=s,
        )
        # -- the binder's --
        self.task_bind = Histogram(
            "task_bind_latency_milliseconds",
            "Binder: BindRequest to bound",
            namespace=ns,
            registry=b,
            buckets=MS_BUCKETS,
        )
        self.pods_bound = Counter("pods_bound_total", "Pods bound by the binder", namespace=ns, registry=b)
        self.bind_failures = Counter("bind_failures_total", "Failed binds", namespace=ns, registry=b)
        self.reconcile_total = go_counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ("controller", "result"),
            prefix="",
            on=binder,
        )
        self.reconcile_errors = go_counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ("controller",),
            prefix="",
            on=binder,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            registry=b,
            buckets=RECONCILE_BUCKETS,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=b,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=b,
        )
        self.is_leader = Gauge("is_leader", "1 while this process leads", namespace=ns, registry=r)

    def reconciled(self, result: str, seconds: float) -> None:
        """One BindRequest reconcile: result success, error or requeue (controller-runtime's)."""
        self.reconcile_total.labels(BINDER_CONTROLLER, result).inc()
        if result == "error":
            self.reconcile_errors.labels(BINDER_CONTROLLER).inc()
        self.reconcile_time.labels(BINDER_CONTROLLER).observe(seconds)

    def queue(self, name: str, fair_share: dict[str, float], usage: dict[str, float]) -> None:
        """Per-queue gauges: the fair share from a QueueReport (gpu devices, cpu millicores, memory MB), and
        the queue's usage as time-based fair share reads it (KAI: "units depend on UsageDB configuration":
        the usage database's value, a share of the cluster's capacity; 0 without a usage database)."""
        scale = {"cpu": 1e-3, "memory": 1e-3, "gpu": 1.0}  # -> cores, GB, devices
        for res, factor in scale.items():
            self.fair_share[res].labels(name).set(fair_share.get(res, 0.0) * factor)
        for res, key in (("gpu", GPU), ("cpu", CPU), ("memory", MEMORY)):
            self.usage[res].labels(name).set(usage.get(key, 0.0))

    def render(self) -> bytes:
        return generate_latest(self.registry) + "".join(c.render() for c in self.go_counters).encode()


class HttpServer:
    """/metrics, /healthz, /readyz (and /snapshot when given `snapshot`) on one port, or the `paths` subset."""

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
