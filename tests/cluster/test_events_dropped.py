"""Events dropped when the event queue overflows are counted (metric) and logged."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from kai.cluster.events import EventRecorder
from kai.cluster.metrics import Metrics


class StuckKube:
    """An API server that never answers an event post (until released)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def post(self, path: str, body: dict[str, Any]) -> None:
        self.release.wait(10)


def test_overflow_counts_every_drop_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    kube = StuckKube()
    metrics = Metrics()
    drops = metrics.events_dropped.labels("kai-scheduler")
    recorder = EventRecorder(kube, "kai-scheduler", workers=1, capacity=2, on_dropped=drops.inc)  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.WARNING, logger="kai.cluster.events"):
            results = [
                recorder.record({"metadata": {"name": f"p{i}", "uid": f"u{i}"}}, "Normal", "Scheduled", "ok")
                for i in range(10)
            ]
        # one event taken by the stuck worker (or still queued), two queued: at least 7 of 10 dropped
        assert results.count(False) == recorder.dropped >= 7
        assert metrics.registry.get_sample_value("kai_events_dropped_total", {"component": "kai-scheduler"}) == float(
            recorder.dropped
        )
        warnings = [r for r in caplog.records if "event queue full" in r.getMessage()]
        assert len(warnings) == 1 and "kai-scheduler" in warnings[0].getMessage()
        assert b"kai_events_dropped_total" in metrics.render()
    finally:
        kube.release.set()
