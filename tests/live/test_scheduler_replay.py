"""Record live, replay offline: every snapshot the live scheduler recorded, given to `kai simulate`, decides
exactly what the live cycle decided (binds, pipelines and evictions, node for node)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from kai.cluster.kube import EVENTS, Kube
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    REPO,
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


def test_recorded_snapshots_replay_to_the_same_decisions(
    live_cluster: LiveCluster, namespace: str, tmp_path: Path
) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    qa, qb = f"a-{name}", f"b-{name}"
    create(kube, queue(qa, gpu_quota=4))
    create(kube, queue(qb, gpu_quota=4))
    fresh_nodes(live_cluster, 1, gpus=8)
    record = tmp_path / "record"
    try:
        with scheduler(kube, name, record_dir=record, record_every=1):
            # A pod the builder rejects: live, it is left out (with an event); the recording leaves it out too,
            # since `kai simulate` refuses a snapshot with a bad object.
            create(kube, pod("orphan", namespace, name, group="no-such-group", gpus=1))
            create(kube, podgroup("a-gang", namespace, qa, min_member=2))
            for i in range(2):
                create(kube, pod(f"a-gang-{i}", namespace, name, group="a-gang", gpus=2))
            for i in range(4):
                create(kube, podgroup(f"a-{i}", namespace, qa))
                create(kube, pod(f"a-{i}", namespace, name, group=f"a-{i}", gpus=1))
            wait("queue A to fill the node", lambda: len(bound(kube, namespace)) == 6)
            for i in range(4):
                create(kube, podgroup(f"b-{i}", namespace, qb))
                create(kube, pod(f"b-{i}", namespace, name, group=f"b-{i}", gpus=1, annotations={}))
            wait(
                "B to take GPUs back by reclaim",
                lambda: any(p.startswith("b-") for p in bound(kube, namespace)),
                timeout=60,
            )
            time.sleep(2.0)  # more reclaims and quiet cycles, recorded too
        events = kube.get(EVENTS.path(namespace))["items"]
        assert any(e["reason"] == "InvalidObject" and e["involvedObject"]["name"] == "orphan" for e in events)
    finally:
        cleanup(kube, namespace, [qa, qb])
    config = tmp_path / "config.yaml"
    config.write_text(f"schedulerParams:\n  schedulerName: {name}\n")
    decided = sorted(record.glob("decisions-*.json"))
    interesting = [d for d in decided if any(json.loads(d.read_text())[k] for k in ("bound", "pipelined", "evicted"))]
    kinds = {k for d in interesting for k in ("bound", "evicted") if json.loads(d.read_text())[k]}
    assert kinds == {"bound", "evicted"}, "the recording holds binds and a reclaim"
    for path in interesting[:6]:
        live = json.loads(path.read_text())
        snapshot = path.with_name(path.name.replace("decisions-", "snapshot-").replace(".json", ".yaml"))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "kai.cli",
                "simulate",
                "-f",
                str(snapshot),
                "--now",
                live["now"],
                "--config",
                str(config),
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        (offline,) = json.loads(done.stdout)["rounds"]
        for key in ("bound", "pipelined", "evicted"):
            assert offline[key] == live[key], (path.name, key, offline[key], live[key])
