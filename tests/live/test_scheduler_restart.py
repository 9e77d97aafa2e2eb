"""`kai run` killed with SIGKILL in the middle of a 500-pod burst, then started again: every pod ends
bound exactly once, no node is overcommitted, and no bind was refused as a double bind."""

from __future__ import annotations

import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kai.cluster.kube import BIND_REQUESTS, EVENTS, Kube
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    create,
    fresh_nodes,
    kai_run,
    pod,
    podgroup,
    pods,
    queue,
    unique_scheduler_name,
    wait,
)

GANGS, SIZE = 100, 5  # 500 pods of 1 GPU on 64 nodes x 8 GPUs


def test_sigkill_during_a_burst_loses_nothing_and_binds_nothing_twice(
    live_cluster: LiveCluster, namespace: str, tmp_path: Path
) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q))
    nodes = fresh_nodes(live_cluster, 64, gpus=8)
    log = tmp_path / "kai-run.log"
    args = ("--lease-duration", "3s", "--schedule-period", "0.2s", "--lease-namespace", namespace)
    first = kai_run(live_cluster.kubeconfig, name, *args, log=log)
    second = None
    try:

        def submit(i: int) -> None:
            create(kube, podgroup(f"g{i}", namespace, q, min_member=SIZE))
            for j in range(SIZE):
                create(kube, pod(f"g{i}-{j}", namespace, name, group=f"g{i}", gpus=1))

        with ThreadPoolExecutor(8) as pool:
            burst = pool.map(submit, range(GANGS))
            wait("the first scheduler to bind some pods", lambda: len(bound(kube, namespace)) >= 50, timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            list(burst)
        killed_at = len(bound(kube, namespace))
        uids = {n: p["metadata"]["uid"] for n, p in pods(kube, namespace).items()}
        assert len(uids) == GANGS * SIZE
        second = kai_run(live_cluster.kubeconfig, name, *args, log=log)
        started = time.monotonic()
        placed = wait(
            "every pod to be bound",
            lambda: len(bound(kube, namespace)) == GANGS * SIZE and bound(kube, namespace),
            timeout=120,
            interval=0.5,
        )
        took = time.monotonic() - started
        time.sleep(1.0)  # and nothing moves afterwards
        final = pods(kube, namespace)
        assert {n: p["spec"]["nodeName"] for n, p in final.items()} == placed
        assert {n: p["metadata"]["uid"] for n, p in final.items()} == uids, "no pod was deleted or replaced"
        per_node = Counter(placed.values())
        assert set(per_node) <= set(nodes) and max(per_node.values()) <= 8, "no node holds more than its 8 GPUs"
        brs = {b["metadata"]["name"]: b for b in kube.get(BIND_REQUESTS.path(namespace))["items"]}
        for pname, node in placed.items():
            br = brs.get(pname)
            assert br is not None and br["spec"]["selectedNode"] == node, pname
            assert br["status"]["phase"] == "Succeeded", (pname, br["status"])
        refused = [
            e
            for e in kube.get(EVENTS.path(namespace))["items"]
            if e["reason"] == "BindingError" and "already bound" in e["message"]
        ]
        assert refused == []
        print(f"killed with {killed_at}/500 bound; the restarted scheduler bound the rest in {took:.1f}s")
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except Exception:
                    proc.kill()
        cleanup(kube, namespace, [q])
