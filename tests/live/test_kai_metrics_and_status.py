"""After a reclaim on the live cluster: Queue status as KAI's queue controller writes it (the CHILDREN
column, allocations rolled up the tree), PodGroup resourcesStatus, and both endpoints' metrics
compared by name, type and labels with a table written from KAI's definitions."""

from __future__ import annotations

import urllib.request
from typing import Any

from kai.cluster.app import LiveOptions, LiveProcess
from kai.cluster.kube import PODGROUPS, QUEUES, Kube
from kai.devcluster.live import LiveCluster
from tests.cluster.kai_metrics_table import BINDER, SCHEDULER, mismatches, parse
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    create,
    fresh_nodes,
    pod,
    podgroup,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)

GPU = "nvidia.com/gpu"


def scrape(process: LiveProcess) -> str:
    assert process.http is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{process.http.port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def queue_status(kube: Kube, name: str) -> dict[str, Any]:
    return kube.get(QUEUES.path(name=name)).get("status") or {}


def test_queue_status_and_metrics_after_a_reclaim(live_cluster: LiveCluster, namespace: str) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    parent, qa, qb = f"p-{name}", f"a-{name}", f"b-{name}"
    create(kube, queue(parent))
    for child in (qa, qb):
        q = queue(child, gpu_quota=4, gpu_weight=1)
        q["spec"]["parentQueue"] = parent
        create(kube, q)
    fresh_nodes(live_cluster, 1, gpus=8)
    binder = LiveProcess(
        kube, LiveOptions(scheduler=False, binder=True, leader_elect=False, listen="127.0.0.1:0", fake_gpu_uuids=True)
    ).start()
    try:
        with scheduler(kube, name, binder=False) as process:
            for i in range(8):
                create(kube, podgroup(f"a-{i}", namespace, qa))
                create(kube, pod(f"a-{i}", namespace, name, group=f"a-{i}", gpus=1))
            wait("queue A to fill the node", lambda: len(bound(kube, namespace)) == 8)
            for i in range(4):
                create(kube, podgroup(f"b-{i}", namespace, qb))
                create(kube, pod(f"b-{i}", namespace, name, group=f"b-{i}", gpus=1))

            def halves() -> bool:
                placed = bound(kube, namespace)
                return sum(p.startswith("b-") for p in placed) == 4 and sum(p.startswith("a-") for p in placed) == 4

            wait("B to get its quota by reclaim", halves, timeout=60)

            def rolled_up() -> bool:
                p, a, b = (queue_status(kube, q) for q in (parent, qa, qb))
                return (
                    p.get("childQueues") == sorted([qa, qb])
                    and (a.get("allocated") or {}).get(GPU) == "4"
                    and (b.get("allocated") or {}).get(GPU) == "4"
                    and (p.get("allocated") or {}).get(GPU) == "8"
                    and (p.get("requested") or {}).get(GPU) == "8"
                )

            wait("Queue status rolled up the tree", rolled_up, timeout=30)
            assert queue_status(kube, qa).get("childQueues") in (None, [])
            pg = kube.get(PODGROUPS.path(namespace, "b-0"))
            assert pg["status"]["resourcesStatus"]["allocated"][GPU] == "1"
            assert pg["status"]["resourcesStatus"]["requested"][GPU] == "1"

            def evictions_counted() -> str | None:
                text = scrape(process)
                return text if f'namespace="{namespace}"' in text and "kai_queue_allocated_gpus" in text else None

            text = wait("the eviction counted", evictions_counted, timeout=30)
            assert mismatches(text, SCHEDULER, "kai") == []
            families = parse(text)
            assert not [n for n in families if n.startswith("controller_runtime_")]
            evicted = [line for line in text.splitlines() if line.startswith("kai_pod_group_evicted_pods_total{")]
            assert len(evicted) == 4, evicted  # one series per evicted pod group (one pod each)
            assert all('action="reclaim"' in line and 'uid=""' not in line for line in evicted), evicted
            assert f'kai_queue_allocated_gpus{{queue_name="{parent}"}} 8.0' in text
            assert f'kai_queue_deserved_gpus{{queue_name="{qa}"}} 4.0' in text
            scheduled = {
                line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("kai_podgroups_scheduled_by_action{")
            }
            assert scheduled.get('action="allocate"', 0) >= 8
            assert scheduled.get('action="reclaim"', 0) >= 1
            assert 'kai_scenarios_simulation_by_action{action="reclaim"}' in text

            binder_text = scrape(binder)
            assert mismatches(binder_text, BINDER, "kai") == []
            assert not [short for short in SCHEDULER if f"kai_{short}" in parse(binder_text)]
            assert 'controller_runtime_reconcile_total{controller="bindrequest",result="success"}' in binder_text
    finally:
        binder.stop()
        cleanup(kube, namespace, [qa, qb, parent])
