"""The live scheduler's ports (BindRequest writer, evictor, status updater, event recorder) as one
object that records what it is asked to do: for cluster tests that run the scheduler without an API server."""

from __future__ import annotations

from typing import Any


class Ports:
    """BindRequest writer, evictor, status updater and event recorder in one, recording calls."""

    def __init__(self) -> None:
        self.bound: list[Any] = []
        self.events: list[tuple[str, str, str, str]] = []

    def write(self, bindings: list[Any], pods: dict, snapshot: Any) -> list[Any]:
        self.bound.extend(bindings)
        return bindings

    def delete_stale(self, stale: list[Any]) -> int:
        return 0

    def evict(self, evictions: list[Any], pods: dict, podgroups: dict, snapshot: Any) -> list[Any]:
        return []

    def update(self, decisions: Any, snapshot: Any, pods: dict, podgroups: dict, queues: dict) -> None:
        return None

    def record(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> bool:
        self.events.append((obj["metadata"]["name"], event_type, reason, message))
        return True
