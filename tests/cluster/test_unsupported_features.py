"""Nothing silent, live: a pod that uses a feature kai has not built (a DRA device request with
alternatives, `firstAvailable`) stays Pending, gets one warning event and is counted once in
`kai_unsupported_feature_uses_total`; KAI plugins the configuration names but kai lacks are counted at
start. Runs the real scheduling loop (`Scheduler.run_once`) on an in-memory cache, with ports that
record what they are given."""

from __future__ import annotations

from typing import Any

from kai.api.timeutil import parse_time
from kai.cluster.cache import CacheView
from kai.cluster.metrics import Metrics
from kai.cluster.scheduler import Scheduler
from kai.framework.config import SchedulerConfig
from tests.cluster.ports import Ports
from tests.scenario import NOW, node, pod, queue


class Cache:
    synced = True

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def view(self) -> CacheView:
        def by(kind: str) -> dict[str, dict[str, Any]]:
            out = {}
            for obj in self.objects:
                if obj["kind"] == kind:
                    meta = obj["metadata"]
                    out[f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]] = obj
            return out

        return CacheView(list(self.objects), by("Pod"), by("PodGroup"), by("Queue"), by("Node"), {})


def claiming_pod() -> dict[str, Any]:
    obj = pod("dra", queue="q", gpus=0)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    return obj


def alternatives_claim() -> dict[str, Any]:
    request = {"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.nvidia.com"}]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim", "namespace": "ns", "labels": {"kai.scheduler/queue": "q"}},
        "spec": {"devices": {"requests": [request]}},
    }


def scheduler(config: SchedulerConfig, ports: Ports, metrics: Metrics) -> Scheduler:
    objects = [node("n1"), queue("q"), alternatives_claim(), claiming_pod(), pod("plain", queue="q", gpus=1)]
    return Scheduler(
        Cache(objects),  # type: ignore[arg-type]
        config,
        bind_requests=ports,
        evictor=ports,
        status=ports,
        events=ports,  # type: ignore[arg-type]
        metrics=metrics,
        clock=lambda: parse_time(NOW),
    )


def counter(metrics: Metrics, feature: str) -> float:
    value = metrics.registry.get_sample_value("kai_unsupported_feature_uses_total", {"feature": feature})
    return value or 0.0


def test_a_pod_using_an_unbuilt_dra_feature_is_not_bound_and_is_reported_once() -> None:
    ports, metrics = Ports(), Metrics()
    loop = scheduler(SchedulerConfig(), ports, metrics)
    report = loop.run_once()
    loop.run_once()
    assert {b.pod for b in ports.bound} == {"ns/plain"}  # the claiming pod is never bound (the cache stays as it is)
    outcome = report.decisions.jobs["ns/pg-dra"]
    assert outcome.status == "Pending" and "ns/gpu-claim request gpu" in outcome.message
    assert "firstAvailable" in outcome.message
    unsupported = [e for e in ports.events if e[2] == "UnsupportedFeature"]
    assert unsupported == [
        (
            "dra",
            "Warning",
            "UnsupportedFeature",
            "spec.resourceClaims: uses ResourceClaim ns/gpu-claim request gpu (firstAvailable): device requests "
            "with alternatives (firstAvailable) are not built in kai yet (the dynamicresources plugin leaves such "
            "pods Pending)",
        )
    ]
    assert counter(metrics, "DRAPrioritizedList") == 1.0


def test_configured_plugins_kai_lacks_are_counted_at_start() -> None:
    ports, metrics = Ports(), Metrics()
    scheduler(SchedulerConfig(not_built=("podaffinity", "snapshot")), ports, metrics).run_once()
    assert counter(metrics, "plugin/podaffinity") == 1.0
    assert counter(metrics, "plugin/snapshot") == 1.0
    assert counter(metrics, "plugin/proportion") == 0.0
