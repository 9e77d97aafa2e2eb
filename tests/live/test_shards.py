"""Two SchedulingShards scheduling at once, as the Helm chart runs them: each scheduler is started with
the arguments and the files of its rendered Deployment and ConfigMap, sees only its node pool's
nodes, queues and PodGroups (the default shard: those without a node-pool label), and places pods
with its shard's placement strategy; neither ever touches the other's nodes."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

from kai.api import keys
from kai.cluster.kube import BIND_REQUESTS, Kube
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    REPO,
    bound,
    cleanup,
    create,
    pod,
    podgroup,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)
from tests.live.test_helm import helm, render  # noqa: F401 - the helm fixture

POOL = keys.NODE_POOL_LABEL


def _start(docs: list[dict], deployment: str, kubeconfig: Path, folder: Path) -> subprocess.Popen[bytes]:
    """`kai <the Deployment's args>`, with its ConfigMap's files, on this machine."""
    config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == deployment)
    files = {}
    for key, text in config["data"].items():
        files[key] = folder / f"{deployment}-{key}"
        files[key].write_text(text)
    spec = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == deployment)
    args = [
        a.replace("/etc/kai/config.yaml", str(files["config.yaml"])).replace(
            "/etc/kai/shard.yaml", str(files["shard.yaml"])
        )
        for a in spec["spec"]["template"]["spec"]["containers"][0]["args"]
    ]
    args += ["--kubeconfig", str(kubeconfig), "--listen-address=127.0.0.1:0", "--schedule-period=200ms", "--qps=-1"]
    log = open(folder / f"{deployment}.log", "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen([sys.executable, "-m", "kai.cli", *args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO)


def test_two_shards_schedule_at_once_each_on_its_own_nodes(
    helm: Path,  # noqa: F811
    live_cluster: LiveCluster,
    namespace: str,
    tmp_path: Path,
) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    docs = render(
        helm,
        f"global.schedulerName={name}",
        "shards.pool-a.partitionLabelValue=pool-a",
        "shards.pool-a.placementStrategy.gpu=spread",
        namespace=namespace,  # the schedulers' Leases land in the test's namespace
    )
    live_cluster.delete_nodes()
    pool_nodes = set(live_cluster.create_gpu_nodes(2, gpus=4, labels={POOL: "pool-a"}, name_prefix=f"{name}-a"))
    default_nodes = set(live_cluster.create_gpu_nodes(2, gpus=2, name_prefix=f"{name}-d"))
    qa, qd = f"qa-{name}", f"qd-{name}"
    pool_queue = queue(qa)
    pool_queue["metadata"]["labels"] = {POOL: "pool-a"}
    create(kube, pool_queue)
    create(kube, queue(qd))
    procs = [_start(docs, f"{name}-{shard}", live_cluster.kubeconfig, tmp_path) for shard in ("default", "pool-a")]
    try:
        with scheduler(kube, name, scheduler=False):  # the binder (one for every shard, as in the chart)
            pool_group = podgroup("ga", namespace, qa)
            pool_group["metadata"]["labels"] = {POOL: "pool-a"}
            create(kube, pool_group)
            create(kube, podgroup("gd", namespace, qd))  # no node-pool label: the default shard's
            for i in range(4):
                create(kube, pod(f"a{i}", namespace, name, group="ga", gpus=1))
            for i in range(5):  # one more than the default pool's 4 GPUs
                create(kube, pod(f"d{i}", namespace, name, group="gd", gpus=1))
            labelled: dict[str, str | None] = {}  # BindRequest -> its node-pool label, as seen

            def all_bound() -> bool:
                for r in kube.get(BIND_REQUESTS.path(namespace))["items"]:
                    labelled[r["metadata"]["name"]] = (r["metadata"].get("labels") or {}).get(POOL)
                return len(bound(kube, namespace)) == 8

            wait("both shards' pods bound", all_bound, timeout=90, interval=0.3)
            time.sleep(2.0)  # several more cycles of both: the fifth default pod stays out of pool-a
            placed = bound(kube, namespace)

            def scheduled(pod_name: str) -> str:
                events = kube.get(f"/api/v1/namespaces/{namespace}/events")["items"]
                return next(
                    (
                        e["message"]
                        for e in events
                        if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == pod_name
                    ),
                    "",
                )

            # KAI's Scheduled event names the node pool ("default": the unlabelled one).
            assert wait("a0's event", lambda: scheduled("a0")).endswith("at node-pool pool-a")
            placed_default = next(p for p in sorted(placed) if p.startswith("d"))  # any four of the five
            assert wait("a default pod's event", lambda: scheduled(placed_default)).endswith("at node-pool default")
            leases = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases")["items"]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
        cleanup(kube, namespace, [qa, qd])
    logs = "\n".join((tmp_path / f"{name}-{s}.log").read_text()[-1500:] for s in ("default", "pool-a"))
    assert {p: n for p, n in placed.items() if p.startswith("a")}.keys() == {"a0", "a1", "a2", "a3"}, logs
    assert all(placed[f"a{i}"] in pool_nodes for i in range(4)), placed
    assert sorted(placed.values()).count(sorted(pool_nodes)[0]) == 2  # the pool's shard spreads: 2 and 2
    default_placed = {p: n for p, n in placed.items() if p.startswith("d")}
    assert len(default_placed) == 4 and set(default_placed.values()) <= default_nodes, placed
    # The BindRequests seen carry the shard's node-pool label (the default shard's: none).
    assert any(p.startswith("a") for p in labelled), labelled
    assert all(v == "pool-a" for p, v in labelled.items() if p.startswith("a")), labelled
    assert all(v is None for p, v in labelled.items() if p.startswith("d")), labelled
    assert {"kai-scheduler", "kai-scheduler-pool-a"} <= {lease["metadata"]["name"] for lease in leases}
    for proc in procs:
        assert proc.returncode == 0, logs
