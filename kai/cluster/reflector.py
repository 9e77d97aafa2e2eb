"""One reflector design for every kind: list, then watch from the list's resourceVersion.

What it does (the kube-rs watcher -> reflector -> store pipeline, or client-go's Reflector):

* **list** the collection in pages (``limit`` / ``continue``) and replace the :class:`Store`
  with it, emitting ADDED / MODIFIED / DELETED for what changed since the previous list;
* **watch** from the list's ``resourceVersion`` with ``allowWatchBookmarks=true``; each event
  updates the store and calls ``on_event``; BOOKMARK events only advance the resourceVersion;
* when the server ends a watch (``timeoutSeconds``) or the connection drops, **re-watch** from
  the last resourceVersion seen, after an exponential **backoff** with jitter (reset by any
  successful event);
* on **410 Gone** (as an HTTP status or as an ERROR event, the resourceVersion was compacted
  away) **relist** and diff the store against the new list, so that nothing is missed.

The API, small on purpose::

    store = Store()
    r = Reflector(kube, PODS, store=store, on_event=lambda kind, obj, old: ...,
                  label_selector="app=x", namespace=None)
    r.start()                      # a daemon thread running r.run()
    r.wait_synced(timeout=30)      # True once the first list is in the store
    store.list(); store.get("ns/name"); store.version
    r.stop()

``on_event(event_type, obj, old)``: ``event_type`` is ADDED, MODIFIED or DELETED; ``old`` is
the previous object for MODIFIED and DELETED (None for ADDED). It runs on the reflector's
thread after the store is updated; keep it short. Objects in the store are the parsed JSON
dicts, never mutated by the reflector (each event replaces the object): callers must not
mutate them either. With ``drop_managed_fields=True`` they come without
``metadata.managedFields`` (the scheduler's cache: it reads them and patches, never writes one
back whole).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import urllib3

from kai.cluster.kube import ApiError, Kube, Resource, iter_lines, object_key
from kai.cluster.wire import Stream

log = logging.getLogger("kai.cluster.reflector")

EventHandler = Callable[[str, dict[str, Any], dict[str, Any] | None], None]

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


class Store:
    """A thread-safe map of ``namespace/name`` (or ``name``) to the latest object dict.

    ``version`` counts changes, so a reader can tell cheaply whether anything changed.
    ``list()`` returns a new list of the current objects: a consistent view of the kind.
    ``changes()`` gives a :class:`ChangeLog`: the keys changed since its last ``take()``, for a reader
    that keeps something derived per object and updates only what changed.
    """

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.version = 0
        self._logs: list[ChangeLog] = []

    def changes(self) -> ChangeLog:
        """A new change log of this store (it starts with every key: nothing has been seen yet)."""
        log_ = ChangeLog(self)
        with self._lock:
            log_._keys.update(self._items)
            self._logs.append(log_)
        return log_

    def items_and_changes(self, log_: ChangeLog) -> tuple[dict[str, dict[str, Any]], set[str]]:
        """A copy of the items and the keys changed since the log's last take, in one consistent step."""
        with self._lock:
            keys, log_._keys = log_._keys, set()
            return dict(self._items), keys

    def _changed(self, key: str) -> None:  # under the lock
        for log_ in self._logs:
            log_._keys.add(key)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._items.get(key)

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.values())

    def items(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._items)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def put(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Insert or replace; returns the previous object."""
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            self.version += 1
            if self._logs:
                self._changed(key)
        return old

    def remove(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        key = object_key(obj)
        with self._lock:
            old = self._items.pop(key, None)
            self.version += 1
            if self._logs:
                self._changed(key)
        return old

    def replace(self, objects: Iterable[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
        """Make the store hold exactly ``objects``; return the events that describe the change."""
        fresh = {object_key(o): o for o in objects}
        events: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        with self._lock:
            for key, old in self._items.items():
                if key not in fresh:
                    events.append((DELETED, old, old))
            for key, obj in fresh.items():
                old = self._items.get(key)
                if old is None:
                    events.append((ADDED, obj, None))
                elif _rv(old) != _rv(obj):
                    events.append((MODIFIED, obj, old))
            for log_ in self._logs:  # every key that is not the very same object as before
                log_._keys.update(k for k, o in self._items.items() if fresh.get(k) is not o)
                log_._keys.update(k for k, o in fresh.items() if self._items.get(k) is not o)
            self._items = fresh
            self.version += 1
        return events


class ChangeLog:
    """The keys of one :class:`Store` that changed (put, removed, replaced) since the last :meth:`take`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._keys: set[str] = set()

    def take(self) -> set[str]:
        with self.store._lock:
            keys, self._keys = self._keys, set()
        return keys


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Backoff:
    """Exponential backoff with full jitter: 0..min(cap, base * 2**n) seconds."""

    def __init__(self, base: float = 0.2, cap: float = 10.0, rng: random.Random | None = None) -> None:
        self.base, self.cap = base, cap
        self.failures = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        delay = min(self.cap, self.base * (2**self.failures))
        self.failures = min(self.failures + 1, 30)
        return delay * (0.5 + 0.5 * self._rng.random())

    def reset(self) -> None:
        self.failures = 0


class Reflector:
    """Keeps a :class:`Store` equal to one collection on the API server (see the module doc)."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        store: Store | None = None,
        on_event: EventHandler | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        name: str | None = None,
        drop_managed_fields: bool = False,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.store = store if store is not None else Store()
        self.on_event = on_event
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff()
        self.name = name or resource.plural
        # Leave out `metadata.managedFields` (server-side apply's bookkeeping, often the larger part of an
        # object) as each object arrives, for a reader that never writes a stored object back whole.
        self.drop_managed_fields = drop_managed_fields
        self.resource_version = ""
        self.synced = threading.Event()
        # Counters (read by tests and metrics).
        self.lists = 0
        self.watches = 0
        self.gone = 0  # 410s seen
        self.errors = 0
        self.events = 0
        self.last_error: str = ""
        self._stop = threading.Event()
        self._resp: urllib3.BaseHTTPResponse | Stream | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Reflector:
        """Run in a daemon thread (again after :meth:`stop`, resuming from the last resourceVersion)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=f"reflector-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):  # best effort; the thread also checks the flag
                resp.shutdown()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.synced.wait(timeout)

    def run(self) -> None:
        """List and watch until :meth:`stop`; never raises."""
        while not self._stop.is_set():
            try:
                if not self.resource_version:
                    self._list()
                started, events = time.monotonic(), self.events
                self._watch()
                if not self._stop.is_set() and self.events == events and time.monotonic() - started < 1.0:
                    self._stop.wait(self.backoff.next())  # a watch that ends at once: do not spin
            except ApiError as err:
                self.errors += 1
                self.last_error = str(err)
                if err.status == 410:
                    self.gone += 1
                    log.info("%s: resourceVersion %s is gone; relisting", self.name, self.resource_version)
                    self.resource_version = ""
                    continue
                self._sleep(err)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
                if self._stop.is_set():
                    break
                self.errors += 1
                self.last_error = f"{type(err).__name__}: {err}"
                self._sleep(None)

    def _sleep(self, err: ApiError | None) -> None:
        delay = self.backoff.next()
        if err is not None and err.retry_after:
            delay = max(delay, err.retry_after)
        log.warning("%s: %s; retrying in %.2fs", self.name, self.last_error, delay)
        self._stop.wait(delay)

    # -- list -------------------------------------------------------------------------------
    def _query(self) -> dict[str, Any]:
        query: dict[str, Any] = {}
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        return query

    def _list(self) -> None:
        result = self.kube.list_all(self.resource.path(self.namespace), self._query(), self.page_size)
        api_version, kind = self.resource.api_version, self.resource.kind
        items = result["items"]
        drop = self.drop_managed_fields
        for item in items:  # list items carry no kind; the builder needs it
            item["apiVersion"] = api_version
            item["kind"] = kind
            if drop:
                (item.get("metadata") or {}).pop("managedFields", None)
        events = self.store.replace(items)
        self.resource_version = str(result["metadata"].get("resourceVersion") or "")
        self.lists += 1
        self.synced.set()
        self.backoff.reset()
        for event_type, obj, old in events:
            self._emit(event_type, obj, old)

    # -- watch ------------------------------------------------------------------------------
    def _watch(self) -> None:
        query = self._query()
        query.update(
            {
                "watch": "true",
                "resourceVersion": self.resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": self.watch_timeout,
            }
        )
        resp = self.kube.stream(self.resource.path(self.namespace), query)
        self._resp = resp
        self.watches += 1
        finished = False
        try:
            if self._stop.is_set():
                return
            for line in iter_lines(resp):
                if self._stop.is_set():
                    return
                self._handle(json.loads(line))
            finished = True
        finally:
            self._resp = None
            if not finished:  # a watch cut short: its connection must not go back to the pool
                resp.close()
            resp.release_conn()

    def _handle(self, event: dict[str, Any]) -> None:
        event_type = event.get("type")
        obj = event.get("object") or {}
        if event_type == ERROR:
            code = int(obj.get("code") or 0)
            raise ApiError(code or 500, str(obj.get("reason") or "watch error"), obj)
        rv = _rv(obj)
        if event_type == BOOKMARK:
            if rv:
                self.resource_version = rv
            return
        if event_type not in (ADDED, MODIFIED, DELETED):
            return
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        if self.drop_managed_fields:
            (obj.get("metadata") or {}).pop("managedFields", None)
        if event_type == DELETED:
            old = self.store.remove(obj)
            self._emit(DELETED, obj, old)
        else:
            old = self.store.put(obj)
            self._emit(ADDED if old is None else MODIFIED, obj, old)
        if rv:
            self.resource_version = rv
        self.events += 1
        self.backoff.reset()

    def _emit(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event_type, obj, old)
        except Exception:  # a faulty handler must not stop the reflector
            log.exception("%s: event handler failed", self.name)


def wait_all_synced(reflectors: Iterable[Reflector], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    return all(r.wait_synced(max(0.0, deadline - time.monotonic())) for r in reflectors)
