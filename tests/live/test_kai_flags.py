"""`kai run --no-binder` and `kai binder` started with the arguments KAI's operator renders (Go style:
``--flag=value``, ``--flag value``, ``--bool=true|false``): they parse, and they take effect —
a pod whose queue is named by a custom ``--queue-label-key`` is scheduled into that queue (under the
default key it names a queue that does not exist), metric names carry ``--metrics-namespace``, and the
binder serves metrics and probes on KAI's two addresses."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def test_kai_style_arguments_parse_and_take_effect(live_cluster: LiveCluster, namespace: str, tmp_path: Path) -> None:
    from kai.cluster.kube import Kube

    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q))
    fresh_nodes(live_cluster, 1, gpus=4)
    conf = tmp_path / "config.yaml"
    conf.write_text("actions: allocate, consolidation, reclaim, preempt, stalegangeviction\n")
    scheduler_port, metrics_port, probe_port = free_port(), free_port(), free_port()
    scheduler_args = [
        f"--scheduler-conf={conf}",
        f"--scheduler-name={name}",
        f"--namespace={namespace}",
        "--nodepool-label-key=kai.scheduler/node-pool",
        "--partition-label-value=",
        "--resource-reservation-app-label=kai-resource-reservation",
        "--queue-label-key=example.com/team",
        f"--listen-address=:{scheduler_port}",
        "--metrics-namespace=acme",
        "--full-hierarchy-fairness=true",
        "--update-pod-eviction-condition=true",
        "--default-staleness-grace-period=60s",
        "--leader-elect=false",
        "--schedule-period=200ms",
        "--v=2",
    ]
    binder_args = [
        "--scheduler-name",
        name,
        "--resource-reservation-namespace",
        "kai-resource-reservation",
        "--resource-reservation-service-account",
        "kai-resource-reservation",
        "--resource-reservation-app-label",
        "kai-resource-reservation",
        "--resource-reservation-pod-image",
        "registry.example/resource-reservation:v1",
        "--scale-adjust-namespace",
        "kai-scale-adjust",
        "--health-probe-bind-address",
        f"127.0.0.1:{probe_port}",
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--cdi-enabled=false",
        "--max-concurrent-reconciles=4",
        "--fake-gpu-nodes",
        "--qps",
        "50",
        "--burst",
        "300",
    ]
    kubeconfig = ["--kubeconfig", str(live_cluster.kubeconfig)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kai.cli", *argv, *kubeconfig],
            stdout=(tmp_path / f"{argv[0]}.log").open("wb"),
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        for argv in (["run", "--no-binder", *scheduler_args], ["binder", *binder_args])
    ]
    try:
        wait("the scheduler ready", lambda: get(scheduler_port, "/readyz")[0] == 200, timeout=30)
        wait("the binder ready", lambda: get(probe_port, "/readyz")[0] == 200, timeout=30)
        lone = pod("lone", namespace, name, gpus=1, labels={"example.com/team": q, "kai.scheduler/queue": "missing"})
        create(kube, lone)
        wait("the pod bound", lambda: "lone" in bound(kube, namespace), timeout=30)
        status, text = get(scheduler_port, "/metrics")
        assert status == 200
        assert "acme_e2e_scheduling_latency_milliseconds " in text
        assert "\nkai_" not in text  # every name carries --metrics-namespace
        assert f'acme_queue_fair_share_gpu{{queue_name="{q}"}}' in text
        status, text = get(metrics_port, "/metrics")
        assert status == 200 and "task_bind_latency_milliseconds" in text
        assert get(metrics_port, "/healthz")[0] == 404  # probes live on their own address, as KAI's
        assert get(probe_port, "/healthz")[0] == 200
        assert get(probe_port, "/metrics")[0] == 404
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(15)
        cleanup(kube, namespace, [q])
    for proc in procs:
        assert proc.returncode == 0, (tmp_path / "run.log").read_text()[-2000:]


def test_a_partition_schedules_only_its_nodes_and_pod_groups(live_cluster: LiveCluster, namespace: str) -> None:
    """--nodepool-label-key + --partition-label-value: the scheduler sees the labelled nodes, queues and
    PodGroups."""
    from kai.cluster.kube import Kube
    from tests.live.scheduler_helpers import podgroup, scheduler

    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q = f"q-{name}"
    pool_queue = queue(q)
    pool_queue["metadata"]["labels"] = {"example.com/pool": "x"}  # a partition sees only its own queues
    create(kube, pool_queue)
    live_cluster.delete_nodes()
    (inside,) = live_cluster.create_gpu_nodes(1, gpus=4, labels={"example.com/pool": "x"}, name_prefix="px")
    live_cluster.create_gpu_nodes(1, gpus=4, name_prefix="py")
    try:
        with scheduler(kube, name, nodepool_label_key="example.com/pool", partition_label_value="x"):
            for group, labels in (("ours", {"example.com/pool": "x"}), ("theirs", {})):
                pg = podgroup(group, namespace, q)
                pg["metadata"]["labels"] = labels
                create(kube, pg)
            for i in range(3):  # one GPU each: all fit the partition's node
                create(kube, pod(f"ours-{i}", namespace, name, group="ours", gpus=1))
            create(kube, pod("theirs-0", namespace, name, group="theirs", gpus=1))
            wait("the partition's pods bound", lambda: len(bound(kube, namespace)) == 3, timeout=30)
            time.sleep(1.0)  # a few more cycles: the other pod group is never seen
            placed = bound(kube, namespace)
        assert placed == {f"ours-{i}": inside for i in range(3)}
    finally:
        cleanup(kube, namespace, [q])
