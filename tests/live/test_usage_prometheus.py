"""Time-based fair share from a real Prometheus, as KAI's: Prometheus scrapes the scheduler's queue metrics,
the scheduler reads each queue's usage back from it (usageDBConfig with a connection string), and a
restarted scheduler sees the usage its predecessor left, where its own record would start empty."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from kai.cluster.app import LiveOptions, LiveProcess
from kai.cluster.kube import NAMESPACES, PODS, QUEUES, Kube
from kai.cluster.usagedb import PrometheusUsage
from kai.cycle import known_actions
from kai.devcluster import build
from kai.devcluster.controlplane import ControlPlane, free_port
from kai.devcluster.live import LiveCluster
from kai.framework.config import SchedulerParams, parse_config
from kai.model import GPU
from tests.live.conftest import require_binaries
from tests.live.scheduler_helpers import bound, create, pod, podgroup, queue, unique_scheduler_name, wait


@dataclasses.dataclass
class PromCluster:
    live: LiveCluster
    metrics_port: int
    """Where the schedulers of a test listen, and Prometheus scrapes."""

    @property
    def prometheus(self) -> str:
        return self.live.control_plane.prometheus_url


@pytest.fixture(scope="module")
def prom_cluster() -> Iterator[PromCluster]:
    bins = require_binaries((*build.CORE, "prometheus"))
    port = free_port()
    cp = ControlPlane(
        binaries=bins, prometheus=True, prometheus_targets=(f"127.0.0.1:{port}",), prometheus_scrape_interval="1s"
    )
    cp.start(timeout=120)
    try:
        yield PromCluster(LiveCluster(control_plane=cp, api=cp.api_client()), port)
    finally:
        cp.stop()


def promql(url: str, query: str) -> list[dict]:
    body = urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(f"{url}/api/v1/query?{body}", timeout=5) as resp:
        return list(json.loads(resp.read())["data"]["result"])


def value(url: str, query: str) -> float:
    result = promql(url, query)
    return float(result[0]["value"][1]) if result else 0.0


@contextlib.contextmanager
def usage_scheduler(kube: Kube, name: str, prometheus: str, port: int) -> Iterator[LiveProcess]:
    raw = {
        "usageDBConfig": {
            "clientType": "prometheus",
            "connectionString": prometheus,
            # KAI's default metric names; a 10 minute window read at a 1 s resolution every second
            "usageParams": {"windowSize": "10m", "fetchInterval": "1s", "extraParams": {"queryResolution": "1s"}},
        }
    }
    config, problems, warnings = parse_config(raw, known_actions())
    assert not problems and not warnings
    config = dataclasses.replace(config, params=dataclasses.replace(SchedulerParams(), scheduler_name=name))
    process = LiveProcess(
        kube, LiveOptions(config=config, period=0.2, leader_elect=False, listen=f"127.0.0.1:{port}",
                          fake_gpu_uuids=True)
    ).start()
    try:
        assert process.cache.wait_synced(30), "caches did not sync"
        yield process
    finally:
        process.stop()


def usage_of(process: LiveProcess) -> PrometheusUsage:
    assert process.scheduler is not None
    source = process.scheduler.usage
    assert isinstance(source, PrometheusUsage), "the scheduler does not read its usage from Prometheus"
    return source


def gpu_fair_share(kube: Kube, name: str) -> float:
    share = ((kube.get(QUEUES.path(name=name)).get("status") or {}).get("fairShare") or {}).get("nvidia.com/gpu")
    return float(share or 0)


def test_a_restarted_scheduler_sees_the_usage_prometheus_kept(prom_cluster: PromCluster) -> None:
    live, url = prom_cluster.live, prom_cluster.prometheus
    kube = Kube.from_kubeconfig(str(live.kubeconfig))
    name = unique_scheduler_name()
    qa, qb = f"a-{name}", f"b-{name}"
    namespace = f"t-{name}"
    kube.post(NAMESPACES.path(), {"metadata": {"name": namespace}})
    create(kube, queue(qa, gpu_quota=0, gpu_weight=1))
    create(kube, queue(qb, gpu_quota=0, gpu_weight=1))
    live.delete_nodes()
    live.create_gpu_nodes(1, gpus=8, name_prefix=f"n-{name}")

    def submit(prefix: str, queue_name: str, first: int, count: int) -> None:
        for i in range(first, first + count):
            create(kube, podgroup(f"{prefix}-{i}", namespace, queue_name))
            create(kube, pod(f"{prefix}-{i}", namespace, name, group=f"{prefix}-{i}", gpus=1))

    with usage_scheduler(kube, name, url, prom_cluster.metrics_port) as first:
        submit("a", qa, 0, 8)
        wait("queue a to take the node", lambda: len(bound(kube, namespace)) == 8)
        # Prometheus records a holding the 8 GPUs for a while (8 GPU-samples a second)...
        held = f'sum_over_time(kai_queue_allocated_gpus{{queue_name="{qa}"}}[10m])'
        wait("Prometheus to record 10 s of queue a's allocation", lambda: value(url, held) >= 80, timeout=60)
        for i in range(8):  # ... then a's jobs end
            kube.delete(PODS.path(namespace, f"a-{i}"))
        wait("a's pods to be gone", lambda: not bound(kube, namespace))
        latest = f'kai_queue_allocated_gpus{{queue_name="{qa}"}}'
        wait("Prometheus to see queue a hold nothing", lambda: promql(url, latest) and value(url, latest) == 0)
        # a used about the whole cluster so far: its usage, as the scheduler fetches it, is high
        before = wait("the scheduler to fetch a's usage", lambda: usage_of(first).queue_usage(time.time()).get(qa))
        assert before[GPU] > 0.5

    # No scheduler runs while both queues submit: 8 one-GPU jobs each.
    submit("a", qa, 8, 8)
    submit("b", qb, 0, 8)
    with usage_scheduler(kube, name, url, prom_cluster.metrics_port) as second:
        # Its first fetch (the scheduler's own first cycle may have started it: then a read does not wait)
        assert usage_of(second).wait_synced(), "the restarted scheduler fetched no usage"
        after = usage_of(second).queue_usage(time.time())
        # The same history, read again: a little lower, as a's idle time since then counts in the window.
        assert after[qa][GPU] == pytest.approx(before[GPU], abs=0.2)
        assert after[qa][GPU] > 0.5
        assert after.get(qb, {}).get(GPU, 0.0) == 0.0
        # Plain weights split the 8 GPUs 4/4. With a's usage u > 0.5, a's weight is max(0, 0.5 + (0.5 - u))
        # < 0.5 against b's 1: b's fair share is above 4. A scheduler that forgot the history splits 4/4.
        wait("queue b's fair share to pass the plain split", lambda: gpu_fair_share(kube, qb) > 4)
    kube.delete(NAMESPACES.path(None, namespace))
    for q in (qa, qb):
        kube.delete(QUEUES.path(name=q))
