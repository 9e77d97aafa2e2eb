"""Time-based fair share live: with usageDBConfig set, the scheduler keeps its own record of allocations
and a queue that used the GPUs so far gets no over-quota share while another waits."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator

from kai.cluster.app import LiveOptions, LiveProcess
from kai.cluster.kube import QUEUES, Kube
from kai.cycle import known_actions
from kai.devcluster.live import LiveCluster
from kai.framework.config import SchedulerParams, parse_config
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    create,
    fresh_nodes,
    pod,
    podgroup,
    queue,
    unique_scheduler_name,
    wait,
)


@contextlib.contextmanager
def usage_scheduler(kube: Kube, name: str) -> Iterator[LiveProcess]:
    raw = {"usageDBConfig": {"usageParams": {"windowSize": "60s", "fetchInterval": "1s"}}}
    config, problems, _ = parse_config(raw, known_actions())
    assert not problems
    config = dataclasses.replace(config, params=dataclasses.replace(SchedulerParams(), scheduler_name=name))
    process = LiveProcess(
        kube, LiveOptions(config=config, period=0.2, leader_elect=False, listen="127.0.0.1:0", fake_gpu_uuids=True)
    ).start()
    try:
        assert process.cache.wait_synced(30), "caches did not sync"
        yield process
    finally:
        process.stop()


def gpu_fair_share(kube: Kube, name: str) -> str | None:
    return ((kube.get(QUEUES.path(name=name)).get("status") or {}).get("fairShare") or {}).get("nvidia.com/gpu")


def test_the_queue_that_used_less_gets_the_surplus(live_cluster: LiveCluster, namespace: str) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    qa, qb = f"a-{name}", f"b-{name}"
    create(kube, queue(qa, gpu_quota=0, gpu_weight=1))
    create(kube, queue(qb, gpu_quota=0, gpu_weight=1))
    fresh_nodes(live_cluster, 1, gpus=8)
    try:
        with usage_scheduler(kube, name):
            for i in range(8):
                create(kube, podgroup(f"a-{i}", namespace, qa))
                create(kube, pod(f"a-{i}", namespace, name, group=f"a-{i}", gpus=1))
            wait("queue a to take the node", lambda: len(bound(kube, namespace)) == 8)
            time.sleep(3)  # a's usage history: the whole node, b nothing
            for i in range(8, 12):
                create(kube, podgroup(f"a-{i}", namespace, qa))
                create(kube, pod(f"a-{i}", namespace, name, group=f"a-{i}", gpus=1))
            for i in range(8):
                create(kube, podgroup(f"b-{i}", namespace, qb))
                create(kube, pod(f"b-{i}", namespace, name, group=f"b-{i}", gpus=1))
            # Plain weights give b at most 4 of the 8 GPUs (a asks for 12, b for up to 8, equal weights). a's
            # usage of about 1 (the whole cluster so far) gives it a weight of max(0, 0.5 + (0.5 - 1)) = 0, so b's
            # share goes above 4 (to all 8 once its pods are all in; it drifts back as b's own usage grows).
            wait("queue b's fair share to pass the plain split", lambda: float(gpu_fair_share(kube, qb) or 0) > 4)
    finally:
        cleanup(kube, namespace, [qa, qb])
