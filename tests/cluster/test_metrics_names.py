"""The scheduler's and the binder's metric families have KAI's names, types, labels and buckets."""

from __future__ import annotations

from kai.cluster.metrics import Metrics
from tests.cluster.kai_metrics_table import BINDER, SCHEDULER, mismatches, parse


def exercised(metrics: Metrics) -> str:
    """Every family with a sample, so that its labels show."""
    m = metrics
    m.plugin.labels("proportion", "OnSessionOpen").set(1)
    m.action.labels("allocate").set(1)
    m.task_scheduling.observe(12)
    m.usage_query.observe(3)
    for counter in (m.podgroups_scheduled, m.podgroups_acted_on, m.scenarios_simulated, m.scenarios_filtered):
        counter.labels("reclaim").inc()
    m.preemption_attempts.inc()
    m.evicted_pods.labels("pg", "ns", "uid-1", "default", "reclaim").inc(2)
    m.queue("q", {"gpu": 1, "cpu": 1000, "memory": 1000}, {"gpu": 1, "cpu": 1000, "memory": 1000})
    for gauge in (
        m.queue_info,
        m.queue_deserved_gpus,
        m.queue_quota_cpu,
        m.queue_quota_memory,
        m.queue_allocated_gpus,
        m.queue_allocated_cpu,
        m.queue_allocated_memory,
    ):
        gauge.labels("q").set(1)
    m.reconciled("success", 0.01)
    m.reconciled("error", 0.02)
    m.max_concurrent_reconciles.labels("bindrequest").set(10)
    m.active_workers.labels("bindrequest").set(0)
    m.task_bind.observe(7)
    return m.render().decode()


def test_the_scheduler_s_families_are_kai_s() -> None:
    text = exercised(Metrics(scheduler=True, binder=False))
    assert mismatches(text, SCHEDULER, "kai") == []
    families = parse(text)
    assert "kai_podgroups_scheduled_by_action_total" not in text  # Go's name, no suffix added
    assert 'kai_podgroups_scheduled_by_action{action="reclaim"} 1.0' in text
    labels = 'podgroup="pg",namespace="ns",uid="uid-1",nodepool="default",action="reclaim"'
    assert f"kai_pod_group_evicted_pods_total{{{labels}}} 2.0" in text
    assert not [n for n in families if n.startswith("controller_runtime_")]  # not the binder's


def test_the_binder_has_metrics_of_its_own() -> None:
    text = exercised(Metrics(scheduler=False, binder=True))
    assert mismatches(text, BINDER, "kai") == []
    families = parse(text)
    assert not [short for short in SCHEDULER if f"kai_{short}" in families]  # none of the scheduler's
    assert 'controller_runtime_reconcile_total{controller="bindrequest",result="error"} 1.0' in text
    assert 'controller_runtime_reconcile_errors_total{controller="bindrequest"} 1.0' in text
    assert {"kai_task_bind_latency_milliseconds", "kai_pods_bound_total", "kai_is_leader"} <= set(families)


def test_the_prefix_is_the_metrics_namespace() -> None:
    text = Metrics("acme").render().decode()
    assert mismatches(text, {k: v for k, v in SCHEDULER.items() if not v[1]}, "acme") == []
    assert "kai_" not in text
