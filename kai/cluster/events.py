"""Kubernetes events, written in the background and never twice for the same thing.

``EventRecorder.record(obj, type, reason, message)`` queues a ``v1 Event`` about ``obj``; a
small pool of threads posts them. The same (object UID, reason, message) is written at most
once per ``dedupe_seconds``, so a pod that stays unschedulable for an hour gets one event per
message change, not one per cycle. ``routine=False`` leaves out the Normal events of routine
success (``Scheduled``, ``Bound``: two API writes per pod that KAI makes), for throughput.
When the queue is full, events are dropped: events are advice, never worth slowing the scheduler
down. Every drop is counted (``dropped``, and ``on_dropped`` — the ``kai_events_dropped_total``
metric of a live process), and a warning is logged when the queue overflows: the first drop, then
at most one line a minute with the count since the last line.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kai.api.timeutil import format_time
from kai.cluster.kube import EVENTS, ApiError, Kube

log = logging.getLogger("kai.cluster.events")

ROUTINE_REASONS = frozenset({"Scheduled", "Bound"})


class EventRecorder:
    def __init__(
        self,
        kube: Kube,
        component: str,
        workers: int = 2,
        dedupe_seconds: float = 600.0,
        capacity: int = 10000,
        routine: bool = True,
        on_dropped: Callable[[], None] | None = None,
    ) -> None:
        self.routine = routine  # False: skip Normal events about routine success (Scheduled, Bound)
        self.kube = kube
        self.component = component
        self.dedupe_seconds = dedupe_seconds
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(capacity)
        self._seen: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self.dropped = 0
        self.written = 0
        self.on_dropped = on_dropped
        self._capacity = capacity
        self._last_warning = -math.inf
        self._dropped_at_warning = 0
        for i in range(workers):
            threading.Thread(target=self._work, name=f"events-{component}-{i}", daemon=True).start()

    def record(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> bool:
        """Queue an event; returns False if it was a duplicate or dropped."""
        if not self.routine and event_type == "Normal" and reason in ROUTINE_REASONS:
            return False
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or meta.get("name"))
        key = (uid, reason, message)
        now = time.monotonic()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last < self.dedupe_seconds:
                return False
            self._seen[key] = now
            if len(self._seen) > 100_000:
                cutoff = now - self.dedupe_seconds
                self._seen = {k: t for k, t in self._seen.items() if t >= cutoff}
        stamp = format_time(time.time())
        namespace = meta.get("namespace") or "default"
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._drop(event)
            return False
        return True

    def _drop(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.dropped += 1
            now = time.monotonic()
            warn = now - self._last_warning >= 60.0
            if warn:
                since, self._dropped_at_warning, self._last_warning = (
                    self.dropped - self._dropped_at_warning,
                    self.dropped,
                    now,
                )
        if self.on_dropped is not None:
            self.on_dropped()
        if warn:
            log.warning(
                "%s: event queue full (%d events waiting): dropped %d event(s) since the last warning, "
                "%d in all (latest: %s %s)",
                self.component,
                self._capacity,
                since,
                self.dropped,
                event["reason"],
                event["involvedObject"].get("name"),
            )

    def _work(self) -> None:
        while True:
            event = self._queue.get()
            try:
                self.kube.post(EVENTS.path(event["metadata"]["namespace"]), event)
                self.written += 1
            except ApiError as err:
                log.debug("event %s not written: %s", event["reason"], err)
            finally:
                self._queue.task_done()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued event is written (or failed); False if some still were at the timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self._queue.unfinished_tasks
