"""A work queue for controllers, after client-go's: deduplicated keys, delayed adds, per-key backoff.

* A key added several times before a worker takes it is processed once.
* A key added while a worker processes it is processed again after `done` (never by
  two workers at once).
* `add_rate_limited` re-adds a key after an exponential per-key delay (`base` doubling
  up to `cap`), also bounded by a token bucket shared by all keys (`qps`, `burst`), so a
  storm of failures cannot hammer the API server; `forget` resets a key's delay.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable


class WorkQueue:
    """Thread-safe; `get` blocks until a key is ready or the queue shuts down (then returns None)."""

    def __init__(
        self,
        base: float = 0.05,
        cap: float = 300.0,
        qps: float = 10.0,
        burst: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base, self.cap = base, cap
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._waiting: list[tuple[float, int, Hashable]] = []
        self._counter = itertools.count()
        self._failures: dict[Hashable, int] = {}
        self._qps, self._burst = qps, burst
        self._tokens = float(burst)
        self._bucket_time = clock()
        self._bucket_next = 0.0  # when the bucket's last reservation is due
        self._shutdown = False

    # -- adding ---------------------------------------------------------------------------------
    def add(self, key: Hashable) -> None:
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: Hashable) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            heapq.heappush(self._waiting, (self._clock() + delay, next(self._counter), key))
            self._cond.notify()

    def when(self, key: Hashable) -> float:
        """The delay the next rate-limited add of `key` waits (and count the failure)."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            per_key = min(self.cap, self.base * (2 ** min(failures, 40)))
            # Token bucket: each rate-limited add takes one token; an empty bucket delays by 1/qps each.
            now = self._clock()
            self._tokens = min(float(self._burst), self._tokens + (now - self._bucket_time) * self._qps)
            self._bucket_time = now
            self._tokens -= 1
            bucket = 0.0 if self._tokens >= 0 else -self._tokens / self._qps
            return max(per_key, bucket)

    def add_rate_limited(self, key: Hashable) -> float:
        """Re-add `key` after its backoff; returns the delay."""
        delay = self.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    # -- taking ---------------------------------------------------------------------------------
    def get(self, timeout: float | None = None) -> Hashable | None:
        """The next ready key (mark it processing), or None on shutdown or after `timeout` seconds."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if self._shutdown:
                    return None
                now = self._clock()
                waits = [w for w in (self._waiting[0][0] - now if self._waiting else None,
                                     None if deadline is None else deadline - now) if w is not None]
                if deadline is not None and now >= deadline:
                    return None
                self._cond.wait(max(0.001, min(waits)) if waits else None)

    def _promote_due(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            self._add_locked(key)

    def done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def pending_delayed(self) -> int:
        with self._cond:
            return len(self._waiting)
