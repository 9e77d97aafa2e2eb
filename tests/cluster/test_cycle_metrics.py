"""The live loop's per-cycle metrics follow what the cycle did: the scheduling latency of each pod bound
(now less its creation, looked up in its own group through the incremental snapshot's index)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kai.cluster.metrics import Metrics
from tests.cluster.test_incremental_snapshot import Cluster
from tests.scenario import node, pod, podgroup, queue


def latency_sum(metrics: Metrics) -> tuple[float, float]:
    """(count, sum) of kai_task_scheduling_latency_milliseconds."""
    values = {
        s.name: s.value
        for f in text_string_to_metric_families(metrics.render().decode())
        if f.name == "kai_task_scheduling_latency_milliseconds"
        for s in f.samples
    }
    name = "kai_task_scheduling_latency_milliseconds"
    return values[f"{name}_count"], values[f"{name}_sum"]


def test_each_bound_pod_adds_its_latency_since_creation() -> None:
    c = Cluster()
    metrics = c.scheduler.metrics = Metrics()
    c.put(node("n0", gpus=4))
    c.put(queue("q"))
    c.put(podgroup("g", "q"))
    c.put(pod("g-0", group="g", gpus=1, created="2025-12-31T23:59:50Z"))  # 10 s before the cycle
    c.put(pod("lone", queue="q", gpus=1, created="2025-12-31T23:59:58Z"))  # 2 s
    first = c.scheduler.run_once()
    assert latency_sum(metrics) == (2, 12_000)
    for binding in first.bound:  # the binder binds them
        bound = c.get("Pod", binding.pod)
        bound["spec"]["nodeName"], bound["status"]["phase"] = binding.node, "Running"
        c.put(bound)
    c.put(pod("g-1", group="g", gpus=1, created="2025-12-31T23:59:59Z"))  # joins g: a patched build
    c.now += 4
    c.scheduler.run_once()
    assert c.scheduler.incremental.patched == 1
    assert latency_sum(metrics) == (3, 12_000 + 5_000)
