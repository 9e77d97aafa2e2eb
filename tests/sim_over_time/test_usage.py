"""Queue usage history (time-based fair share): windows and half-life decay, checked by hand,
and the usageDBConfig section of the scheduler configuration."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kai.cycle import known_actions
from kai.framework.config import UsageParams, parse_config
from kai.model import CPU, GPU, MEMORY
from kai.usage import UsageHistory, window_start

CAP = {GPU: 8.0, CPU: 64000.0, MEMORY: 1e12}


def gpus(**queues: float) -> dict[str, dict[str, float]]:
    return {q: {GPU: v} for q, v in queues.items()}


def history() -> UsageHistory:
    """team-a holds all 8 GPUs for 600 s, then team-b holds them."""
    h = UsageHistory()
    h.record(0.0, gpus(a=8, b=0), CAP)
    h.record(600.0, gpus(a=0, b=8), CAP)
    return h


def test_sliding_window_without_decay_is_the_share_of_gpu_time() -> None:
    usage = history().usage(900.0, UsageParams(window_size=3600.0))
    # a: 8 GPUs x 600 s of 8 GPUs x 900 s; b: 8 x 300 of 8 x 900. Time before the first record counts for nobody.
    assert usage["a"][GPU] == pytest.approx(600 / 900)
    assert usage["b"][GPU] == pytest.approx(300 / 900)
    assert usage["a"][CPU] == 0.0


def test_sliding_window_forgets_what_is_older_than_the_window() -> None:
    usage = history().usage(900.0, UsageParams(window_size=300.0))
    assert usage["a"][GPU] == pytest.approx(0.0)
    assert usage["b"][GPU] == pytest.approx(1.0)
    usage = history().usage(900.0, UsageParams(window_size=450.0))  # [450, 900]: a 150 s, b 300 s
    assert usage["a"][GPU] == pytest.approx(150 / 450)


def test_half_life_decay_weighs_recent_usage_more() -> None:
    h = UsageHistory()
    h.record(0.0, gpus(a=8), CAP)
    h.record(100.0, gpus(a=0), CAP)
    usage = h.usage(200.0, UsageParams(window_size=10_000.0, half_life_period=100.0))
    # numerator ∫0..100 0.5^((200-t)/100) = (100/ln2)(0.5 - 0.25); denominator ∫0..200 = (100/ln2)(1 - 0.25)
    assert usage["a"][GPU] == pytest.approx(0.25 / 0.75)
    no_decay = h.usage(200.0, UsageParams(window_size=10_000.0))
    assert no_decay["a"][GPU] == pytest.approx(0.5)


def test_tumbling_window_starts_at_the_last_multiple_of_its_size() -> None:
    params = UsageParams(window_size=600.0, window_type="tumbling", tumbling_window_start_time=0.0)
    assert window_start(900.0, params) == 600.0
    assert window_start(1200.0, params) == 1200.0
    h = UsageHistory()
    h.record(0.0, gpus(a=8), CAP)
    h.record(700.0, gpus(a=0), CAP)
    assert h.usage(900.0, params)["a"][GPU] == pytest.approx(100 / 300)
    assert h.usage(1300.0, params)["a"][GPU] == pytest.approx(0.0)  # a new window: the past is forgotten


def test_records_in_the_future_do_not_count_and_order_is_enforced() -> None:
    h = history()
    assert h.usage(600.0, UsageParams())["b"][GPU] == 0.0
    with pytest.raises(ValueError):
        h.record(10.0, gpus(a=1), CAP)
    h.record(600.0, gpus(a=0, b=4), CAP)  # the same instant again replaces the record
    assert h.usage(900.0, UsageParams())["b"][GPU] == pytest.approx(4 * 300 / (8 * 900))


def test_forget_before_keeps_what_a_window_still_sees() -> None:
    h = UsageHistory()
    for step in range(100):
        h.record(step * 60.0, gpus(a=step % 2 * 8, b=8 - step % 2 * 8), CAP)
    params = UsageParams(window_size=1800.0, half_life_period=600.0)
    before = h.usage(6000.0, params)
    h.forget_before(6000.0 - 1800.0)
    assert len(h) < 100
    after = h.usage(6000.0, params)
    assert after["a"][GPU] == pytest.approx(before["a"][GPU])
    assert after["b"][GPU] == pytest.approx(before["b"][GPU])
    assert before["a"][GPU] + before["b"][GPU] == pytest.approx(1.0)


def test_usage_db_config_is_read_from_the_scheduler_config() -> None:
    raw = {
        "usageDBConfig": {
            "clientType": "prometheus",
            "connectionString": "http://prometheus:9090",
            "usageParams": {
                "halfLifePeriod": "30m",
                "windowSize": "1w",
                "windowType": "tumbling",
                "tumblingWindowStartTime": "2026-01-05T00:00:00Z",
                "fetchInterval": "2m",
            },
        }
    }
    config, problems, warnings = parse_config(raw, known_actions())
    assert not problems and not warnings
    assert config.usage_db is not None
    params = config.usage_db.params
    assert (params.half_life_period, params.window_size, params.window_type) == (1800.0, 604800.0, "tumbling")
    assert params.fetch_interval == 120.0
    assert params.tumbling_window_start_time == 1767571200.0
    assert parse_config({}, known_actions())[0].usage_db is None


def test_bad_usage_params_name_the_field() -> None:
    _, problems, _ = parse_config(
        {"usageDBConfig": {"usageParams": {"windowType": "hourly", "halfLifePeriod": "soon"}}}, known_actions()
    )
    fields = sorted(p.field for p in problems)
    assert fields == ["usageDBConfig.usageParams.halfLifePeriod", "usageDBConfig.usageParams.windowType"]
    _, problems, warnings = parse_config({"usageDBConfig": {"usageParams": {"windowType": "cron"}}}, known_actions())
    assert not problems and any("cron" in w for w in warnings)
    assert math.isclose(UsageParams().window_size, 7 * 86400)


def test_usage_tracker_feeds_time_based_fair_share_from_snapshots(tmp_path: Path) -> None:
    """The live scheduler's path: observe each cycle's snapshot, read usage back (no Prometheus)."""
    from kai.api.timeutil import parse_time
    from kai.snapshot.loader import load_snapshot
    from kai.usage import UsageTracker
    from tests.scenario import NOW, node, pod, podgroup, queue, write

    t0 = parse_time(NOW)
    base = [node("n1", gpus=8), queue("dept"), queue("team-a", parent="dept"), queue("team-b", parent="dept")]
    busy = write([*base, podgroup("a", "team-a"), pod("a-0", group="a", gpus=8, node="n1")], tmp_path, "busy.yaml")
    idle = write(base, tmp_path, "idle.yaml")
    tracker = UsageTracker(UsageParams(window_size=3600.0, fetch_interval=60.0))
    tracker.observe(load_snapshot([busy], t0))
    tracker.observe(load_snapshot([idle], t0 + 600))
    usage = tracker.queue_usage(t0 + 900)
    assert usage["team-a"][GPU] == pytest.approx(600 / 900)
    assert usage["dept"][GPU] == pytest.approx(600 / 900)  # ancestors carry their children's usage
    assert usage["team-b"][GPU] == 0.0
    assert tracker.queue_usage(t0 + 930) is usage  # refreshed only every fetchInterval
    tracker.observe(load_snapshot([idle], t0 + 100))  # a clock that steps back is ignored
    assert tracker.queue_usage(t0 + 960)["team-a"][GPU] == pytest.approx(600 / 960)
