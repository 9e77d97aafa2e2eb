"""Where each pod sits during the session, for rules that depend on other pods (pod affinity, host ports).

A pod counts on its node while it holds it: running, releasing (being evicted: KAI keeps counting an
evicted pod on its node until it is gone, so an eviction does not free its place for an anti-affine
pod in the same cycle), and allocated or pipelined in this session. The tracker follows the
statement's allocate / deallocate events lazily: an event only marks the pod, and the next query
reads where the marked pods are then (after a rollback has restored them), so undoing any part of a
statement needs no bookkeeping here.

One tracker per session, shared by the plugins that need it; a plugin subscribes with `watch`.
"""

from __future__ import annotations

from collections.abc import Callable
from weakref import WeakKeyDictionary

from kai.framework.session import Session
from kai.model import HOLDS_NODE, PodInfo

Mover = Callable[[PodInfo, int, int], None]  # (pod, old row or -1, new row or -1)

_TRACKERS: WeakKeyDictionary[Session, PlacedPods] = WeakKeyDictionary()


class PlacedPods:
    """The node row of every pod that holds a node, kept up to date through the session's events."""

    def __init__(self, ssn: Session) -> None:
        self.index = ssn.nodes.index
        self.row: dict[int, int] = {}  # id(pod) -> node row, for pods that count on a node
        self.pods: dict[int, PodInfo] = {}
        self._dirty: dict[int, PodInfo] = {}
        self._movers: list[Mover] = []
        self.version = 0  # changes whenever a pod moves
        pods = [*ssn.pods, *ssn.snapshot.foreign_pods]
        for pod in pods:
            row = self._where(pod)
            if row >= 0:
                self.row[id(pod)] = row
                self.pods[id(pod)] = pod
        ssn.hooks.on_allocate.append(self._mark)
        ssn.hooks.on_deallocate.append(self._mark)

    def _where(self, pod: PodInfo) -> int:
        if pod.status not in HOLDS_NODE:
            return -1
        return self.index.get(pod.node, -1)

    def _mark(self, pod: PodInfo) -> None:
        self._dirty[id(pod)] = pod

    def watch(self, mover: Mover) -> None:
        """Call `mover` for every later move of a pod (placed, removed, or moved to another node)."""
        self._movers.append(mover)

    def flush(self) -> None:
        """Apply the moves of the pods marked since the last query."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, {}
        for key, pod in dirty.items():
            old, new = self.row.get(key, -1), self._where(pod)
            if old == new:
                continue
            if new >= 0:
                self.row[key] = new
                self.pods[key] = pod
            else:
                self.row.pop(key, None)
                self.pods.pop(key, None)
            self.version += 1
            for mover in self._movers:
                mover(pod, old, new)


def placed_pods(ssn: Session) -> PlacedPods:
    """The session's tracker (made on first use)."""
    tracker = _TRACKERS.get(ssn)
    if tracker is None:
        tracker = _TRACKERS[ssn] = PlacedPods(ssn)
    return tracker
