"""`queue_*_usage` carry what time-based fair share reads (the usage database's share), as KAI's do."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kai.cluster.metrics import Metrics
from kai.model import CPU, GPU


def gauges(metrics: Metrics, family: str) -> dict[str, float]:
    text = metrics.render().decode()
    return {
        s.labels["queue_name"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == family
        for s in f.samples
    }


def test_usage_gauges_carry_the_usage_share_not_the_allocation() -> None:
    m = Metrics()
    # Queue a holds 6 GPUs now (fair share 4), but over the usage window it used a quarter of the GPUs.
    m.queue("a", {"gpu": 4.0, "cpu": 8000.0, "memory": 0.0}, {GPU: 0.25, CPU: 0.5})
    m.queue("b", {"gpu": 4.0}, {})  # no usage database (or no history): 0
    assert gauges(m, "kai_queue_gpu_usage") == {"a": 0.25, "b": 0.0}
    assert gauges(m, "kai_queue_cpu_usage") == {"a": 0.5, "b": 0.0}
    assert gauges(m, "kai_queue_memory_usage") == {"a": 0.0, "b": 0.0}
    assert gauges(m, "kai_queue_fair_share_gpu") == {"a": 4.0, "b": 4.0}
    assert gauges(m, "kai_queue_fair_share_cpu_cores") == {"a": 8.0, "b": 0.0}
