"""Where the live scheduler's queue usage comes from: a Prometheus usage DB, as KAI's, or its own record.

With ``usageDBConfig.clientType: prometheus`` and a connection string (``connectionString``, or the
environment variable named by ``connectionStringEnvVar``), :class:`PrometheusUsage` does what KAI's
usage lister does: a background thread asks Prometheus's HTTP query API every ``fetchInterval``
(the queries and the arithmetic are :func:`kai.usage.prometheus_queries` and
:func:`kai.usage.usage_from_answers`), the cycle reads the last answer and never waits for one,
except that the first cycle waits up to ``waitTimeout`` for the first fetch (KAI waits for it
before it starts scheduling: without it, a restarted scheduler's first decisions would ignore the
history). A failed fetch keeps the last usage; usage older than ``stalenessPeriod`` is still used,
with a warning. Prometheus answering with no capacity sample in the window is a fetch of no usage,
not a failure: kai's own scheduler exports the queue and capacity metrics (KAI's queue controller
and kube-state-metrics do), so on a fresh cluster they appear only after its first cycle. The
history is Prometheus's, so it survives a restart or a failover of the scheduler.

Without a connection string (or with the ``fake`` clients) the scheduler keeps its own record
(:class:`kai.usage.UsageTracker`), which starts empty at every start.

Only the standard library speaks HTTP here (``urllib``): Prometheus's query API is one GET.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

from kai.cluster.metrics import Metrics
from kai.framework.config import UsageDBConfig
from kai.model import ClusterSnapshot
from kai.usage import (
    UsageAnswerError,
    UsageQuery,
    UsageTracker,
    prometheus_queries,
    query_timeout,
    usage_from_answers,
)

log = logging.getLogger("kai.cluster.usagedb")


class UsageSource(Protocol):
    """What the scheduler asks every cycle."""

    def observe(self, snapshot: ClusterSnapshot) -> None: ...

    def queue_usage(self, now: float) -> dict[str, dict[str, float]]: ...

    def close(self) -> None: ...


class UsageDBError(RuntimeError):
    """Prometheus could not be asked, or its answer gives no usage."""


def connection_string(config: UsageDBConfig, environ: dict[str, str] | None = None) -> str:
    """``connectionString``, else the value of the ``connectionStringEnvVar`` variable, else empty."""
    if config.connection_string:
        return config.connection_string
    if config.connection_string_env_var:
        return (environ if environ is not None else dict(os.environ)).get(config.connection_string_env_var, "")
    return ""


class PrometheusUsage:
    """Queue usage from Prometheus, fetched in the background (KAI's usage lister + Prometheus client)."""

    def __init__(
        self,
        url: str,
        config: UsageDBConfig,
        *,
        metrics_namespace: str = "kai",
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url.rstrip("/")
        self.params = config.params
        self.metrics_namespace = metrics_namespace
        self.metrics = metrics
        self.clock = clock
        self.timeout = query_timeout(self.params)
        self._lock = threading.Lock()
        self._usage: dict[str, dict[str, float]] = {}
        self._fetched_at: float | None = None
        self._first = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned_stale = False
        self._warned_empty = False
        self.last_error = ""

    # -- asking Prometheus ------------------------------------------------------------------------
    def _ask(self, query: UsageQuery, at: float) -> Any:
        body = urllib.parse.urlencode({"query": query.promql, "time": f"{at:.3f}"})
        request = urllib.request.Request(
            f"{self.url}/api/v1/query?{body}", headers={"Accept": "application/json"}, method="GET"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:  # Prometheus answers 400/422 with a JSON error body
            try:
                return json.loads(err.read())
            except ValueError:
                raise UsageDBError(f"{self.url}: HTTP {err.code} for {query.promql!r}") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise UsageDBError(f"{self.url}: {getattr(err, 'reason', err)}") from None

    def fetch(self, now: float | None = None) -> dict[str, dict[str, float]]:
        """Ask every query at `now` (the clock by default) and return each queue's usage; UsageDBError."""
        at = self.clock() if now is None else now
        answers = [(q, self._ask(q, at)) for q in prometheus_queries(at, self.params, self.metrics_namespace)]
        try:
            usage, empty = usage_from_answers(answers)
        except UsageAnswerError as err:
            raise UsageDBError(str(err)) from None
        if empty and not self._warned_empty:  # a fresh cluster, or a capacity metric that does not exist
            log.warning("usage DB: no capacity history yet for %s: no usage of it", ", ".join(empty))
            self._warned_empty = True
        return usage

    def fetch_and_store(self) -> bool:
        started = time.perf_counter()
        try:
            usage = self.fetch()
        except UsageDBError as err:
            if str(err) != self.last_error:
                log.warning("usage DB: %s (keeping the last usage)", err)
            self.last_error = str(err)
            return False
        if self.metrics is not None:
            self.metrics.usage_query.observe((time.perf_counter() - started) * 1000)
        with self._lock:
            self._usage = usage
            self._fetched_at = time.monotonic()
        self.last_error = ""
        self._warned_stale = False
        self._first.set()
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            self.fetch_and_store()
            self._stop.wait(self.params.fetch_interval)

    def start(self) -> PrometheusUsage:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="usage-db", daemon=True)
            self._thread.start()
        return self

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once a fetch has succeeded; waits up to `timeout` (``waitTimeout`` by default)."""
        return self._first.wait(self.params.wait_timeout if timeout is None else timeout)

    # -- what the cycle asks ----------------------------------------------------------------------
    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Nothing to record: Prometheus scrapes the allocation from the queue metrics."""

    def queue_usage(self, now: float) -> dict[str, dict[str, float]]:
        if self._thread is None:
            self.start()
            if not self.wait_synced():
                log.warning("usage DB: no usage after waiting %.0fs; scheduling with none", self.params.wait_timeout)
        with self._lock:
            usage, fetched = self._usage, self._fetched_at
        if fetched is not None and time.monotonic() - fetched > self.params.staleness_period and not self._warned_stale:
            log.warning("usage DB: usage is stale (last fetched %.0fs ago)", time.monotonic() - fetched)
            self._warned_stale = True
        return usage

    def close(self) -> None:
        self._stop.set()


def usage_source(
    config: UsageDBConfig | None, *, metrics_namespace: str = "kai", metrics: Metrics | None = None
) -> UsageSource | None:
    """The scheduler's usage source for `usageDBConfig` (None: time-based fair share is off)."""
    if config is None:
        return None
    url = connection_string(config)
    if config.client_type == "prometheus" and url:
        return PrometheusUsage(url, config, metrics_namespace=metrics_namespace, metrics=metrics)
    if config.client_type == "prometheus" and config.connection_string_env_var:
        log.warning(
            "usage DB: %s is not set; the scheduler keeps its own usage record", config.connection_string_env_var
        )
    return UsageTracker(config.params)
