"""Reclaim on the live cluster: two queues with 50/50 quota on 16 GPUs; A fills the cluster, B gets its half."""

from __future__ import annotations

import time

from kai.cluster.kube import EVENTS, QUEUES, Kube
from kai.devcluster.live import LiveCluster
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


def test_queue_b_gets_its_half_back_by_reclaim(live_cluster: LiveCluster, namespace: str) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    qa, qb = f"a-{name}", f"b-{name}"
    create(kube, queue(qa, gpu_quota=8, gpu_weight=1))
    create(kube, queue(qb, gpu_quota=8, gpu_weight=1))
    fresh_nodes(live_cluster, 2, gpus=8)
    try:
        with scheduler(kube, name) as process:
            for i in range(16):
                create(kube, podgroup(f"a-{i}", namespace, qa))
                create(kube, pod(f"a-{i}", namespace, name, group=f"a-{i}", gpus=1))
            wait("queue A to fill the cluster", lambda: len(bound(kube, namespace)) == 16)
            wait(
                "queue A's status to show 16 GPUs allocated",
                lambda: (
                    ((kube.get(QUEUES.path(name=qa)).get("status") or {}).get("allocated") or {}).get("nvidia.com/gpu")
                    == "16"
                ),
            )
            for i in range(8):
                create(kube, podgroup(f"b-{i}", namespace, qb))
                create(kube, pod(f"b-{i}", namespace, name, group=f"b-{i}", gpus=1))

            def halves() -> dict[str, str] | None:
                placed = bound(kube, namespace)
                b = [p for p in placed if p.startswith("b-")]
                a = [p for p in placed if p.startswith("a-")]
                return placed if len(b) == 8 and len(a) == 8 else None

            placed = wait("B to get its half by reclaim", halves, timeout=60)
            time.sleep(1.0)  # and it stays so: no eviction ping-pong
            assert bound(kube, namespace) == placed
            assert process.scheduler is not None
        per_node: dict[str, int] = {}
        for node in placed.values():
            per_node[node] = per_node.get(node, 0) + 1
        assert sorted(per_node.values()) == [8, 8]
        events = kube.get(EVENTS.path(namespace))["items"]
        evicted = [e for e in events if e["reason"] == "Evicted"]
        assert len(evicted) == 8 and all(e["involvedObject"]["name"].startswith("a-") for e in evicted)
        assert all("reclaim" in e["message"] for e in evicted), evicted[0]["message"]
        group_events = [e for e in events if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "PodGroup"]
        assert len(group_events) == 8 and all("reclaim" in e["message"] for e in group_events)
        fair = kube.get(QUEUES.path(name=qb))["status"]["fairShare"]
        assert fair["nvidia.com/gpu"] == "8"
    finally:
        cleanup(kube, namespace, [qa, qb])
