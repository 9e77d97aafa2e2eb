"""Two `kai run` processes: exactly one acts; SIGKILL it and the other takes over within the lease
duration. Also the HTTP endpoints: /metrics with KAI's names, /healthz, /readyz, /snapshot."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

from kai.cluster.kube import LEASES, Kube
from kai.devcluster.controlplane import free_port
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    REPO,
    bound,
    cleanup,
    create,
    fresh_nodes,
    pod,
    queue,
    unique_scheduler_name,
    wait,
)

LEASE = 3.0
RETRY = min(2.0, LEASE / 5)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_one_leader_acts_and_a_standby_takes_over(live_cluster: LiveCluster, namespace: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q))
    fresh_nodes(live_cluster, 2, gpus=8)
    config = tmp_path / "config.yaml"
    config.write_text(f"schedulerParams:\n  schedulerName: {name}\n")
    ports = [free_port(), free_port()]
    snapshot_ports = [free_port(), free_port()]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kai.cli",
                "run",
                "--kubeconfig",
                str(live_cluster.kubeconfig),
                "--config",
                str(config),
                "--listen-address",
                f"127.0.0.1:{port}",
                "--lease-duration",
                f"{LEASE:g}s",
                "--lease-namespace",
                namespace,
                "--schedule-period",
                "0.2s",
                "--leader-elect",
                "--snapshot-port",
                str(snapshot),
            ],
            stdout=(tmp_path / f"run-{port}.log").open("wb"),
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        for port, snapshot in zip(ports, snapshot_ports, strict=True)
    ]
    try:
        wait("both processes ready", lambda: all(_get(p, "/readyz")[0] == 200 for p in ports), timeout=30)
        assert all(_get(p, "/healthz")[0] == 200 for p in ports)

        def leaders() -> list[int]:
            return [p for p in ports if _metric(_get(p, "/metrics")[1], "kai_is_leader") == 1.0]

        (leader,) = wait("exactly one leader", lambda: len(leaders()) == 1 and leaders(), timeout=15)
        standby = next(p for p in ports if p != leader)
        create(kube, pod("first", namespace, name, queue_name=q, gpus=1))
        wait("the leader to schedule", lambda: "first" in bound(kube, namespace))
        time.sleep(1.0)
        assert leaders() == [leader]
        texts = {p: _get(p, "/metrics")[1] for p in ports}
        assert _metric(texts[leader], "kai_pods_scheduled_total") >= 1
        assert _metric(texts[standby], "kai_pods_scheduled_total") == 0, "the standby never acts"
        for metric in (
            "kai_e2e_scheduling_latency_milliseconds",
            "kai_open_session_latency_milliseconds",
            "kai_action_scheduling_latency_milliseconds",
            "kai_queue_fair_share_gpu",
            "kai_queue_gpu_usage",
            "kai_task_scheduling_latency_milliseconds_bucket",
            "kai_task_bind_latency_milliseconds_bucket",
            'kai_podgroups_scheduled_by_action{action="allocate"}',
        ):
            assert metric in texts[leader], metric
        assert _get(leader, "/snapshot")[0] == 404  # not on the metrics port: only on its own loopback port
        code, body = _get(snapshot_ports[ports.index(leader)], "/snapshot")
        assert code == 200 and json.loads(body)["kind"] == "List"
        holder = kube.get(LEASES.path(namespace, "kai-scheduler"))["spec"]["holderIdentity"]
        victim = procs[ports.index(leader)]
        assert holder.endswith(f"-{victim.pid}-" + holder.rsplit("-", 1)[1])

        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed = time.monotonic()
        wait("the standby to lead", lambda: leaders() == [standby], timeout=LEASE + 4 * RETRY + 2, interval=0.05)
        took = time.monotonic() - killed
        assert took <= LEASE + 2 * RETRY + 1.5, f"takeover took {took:.1f}s"  # lease + one retry + slack
        create(kube, pod("second", namespace, name, queue_name=q, gpus=1))
        wait("the new leader to schedule", lambda: "second" in bound(kube, namespace), timeout=10)
        lease = kube.get(LEASES.path(namespace, "kai-scheduler"))["spec"]
        assert lease["holderIdentity"] != holder and lease["leaseTransitions"] >= 1
        print(f"takeover {took:.2f}s after SIGKILL (lease {LEASE:g}s)")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        cleanup(kube, namespace, [q])
