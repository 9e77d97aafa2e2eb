"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's algorithm, in short).

Every ``retry_period`` each candidate reads the Lease:

* absent: create it naming itself (a 409 means another won the race);
* held by itself: renew ``renewTime`` (an update with the read resourceVersion, so two writers
  cannot both succeed);
* held by another: take it over only when the record has not changed for ``lease_duration``
  as measured on *this* process's monotonic clock since it last saw a change (no trust in
  other machines' clocks), incrementing ``leaseTransitions``.

A leader that has not renewed for ``renew_deadline`` stops leading at once (``is_leader`` turns
False before anyone else may take over, since ``renew_deadline < lease_duration``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kai.api.timeutil import format_time
from kai.cluster.kube import LEASES, ApiError, Kube

log = logging.getLogger("kai.cluster.leader")


def _micro_time(epoch: float) -> str:
    """A Lease MicroTime: RFC 3339 with microseconds."""
    return f"{format_time(epoch)[:-1]}.{int((epoch % 1) * 1_000_000):06d}Z"


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs retry period < renew deadline < lease duration")
        self.kube = kube
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_change = on_change
        self._leading = False
        self._last_renew = 0.0
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = 0

    @property
    def is_leader(self) -> bool:
        return self._leading and time.monotonic() - self._last_renew < self.renew_deadline

    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if release and self._leading:
            self._release()
        self._set(False)

    def _set(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.info("%s %s the lease %s/%s", self.identity, "holds" if leading else "lost", self.namespace, self.name)
            if self.on_change is not None:
                self.on_change(leading)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.try_acquire_or_renew()
            except ApiError as err:
                log.warning("leader election: %s", err)
            if self._leading and time.monotonic() - self._last_renew >= self.renew_deadline:
                self._set(False)
            self._stop.wait(self.retry_period)

    def _spec(self, transitions: int, acquire: float | None) -> dict[str, Any]:
        now = time.time()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "renewTime": _micro_time(now),
            "acquireTime": _micro_time(acquire if acquire is not None else now),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        path = LEASES.path(self.namespace, self.name)
        try:
            lease = self.kube.get(path)
        except ApiError as err:
            if err.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(0, None),
            }
            try:
                self.kube.post(LEASES.path(self.namespace), body)
            except ApiError as create_err:
                if create_err.status == 404:  # the namespace is missing: make it
                    self.kube.post("/api/v1/namespaces", {"metadata": {"name": self.namespace}})
                    return False
                if create_err.status == 409:
                    return False
                raise
            self._won()
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if now - self._observed_at < duration:
                self._set(False)
                return False
        if holder != self.identity:
            transitions += 1  # taking over (an expired or released lease)
        new_spec = self._spec(transitions, None)
        if holder == self.identity and spec.get("acquireTime"):
            new_spec["acquireTime"] = spec["acquireTime"]
        body = {**lease, "spec": new_spec}
        try:
            self.kube.put(path, body)
        except ApiError as err:
            if err.status == 409:  # someone else wrote first
                self._set(False)
                return False
            raise
        self._won()
        return True

    def _won(self) -> None:
        self._last_renew = time.monotonic()
        if not self._leading:
            self.transitions += 1
        self._set(True)

    def _release(self) -> None:
        """Give the lease up on a clean stop, so that a successor need not wait it out."""
        path = LEASES.path(self.namespace, self.name)
        try:
            lease = self.kube.get(path)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self.kube.put(path, lease)
        except ApiError as err:
            log.info("lease not released: %s", err)
