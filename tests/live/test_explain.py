"""Why-pending live: the PodGroup's scheduling condition with KAI's reason codes and queueDetails, the
pods' PodScheduled condition with the first cause, QueueDoesNotExist for a PodGroup whose queue is
missing, and `kai explain --kubeconfig` on the same cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kai.cluster.kube import PODGROUPS, Kube
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    cleanup,
    condition,
    create,
    fresh_nodes,
    pod,
    podgroup,
    pods,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)


def conditions(kube: Kube, namespace: str, name: str) -> list[dict]:
    return (kube.get(PODGROUPS.path(namespace, name)).get("status") or {}).get("schedulingConditions") or []


def test_conditions_and_kai_explain_live(live_cluster: LiveCluster, namespace: str, tmp_path: Path) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q, gpu_quota=4, gpu_limit=4))
    fresh_nodes(live_cluster, 1, gpus=8)
    # 6 GPUs on an empty 8-GPU node, in a queue limited to 4: only the limit stops it.
    create(kube, podgroup("over", namespace, q))
    create(kube, pod("over-0", namespace, name, group="over", gpus=6))
    create(kube, podgroup("lost", namespace, f"missing-{name}"))
    create(kube, pod("lost-0", namespace, name, group="lost", gpus=1))
    try:
        with scheduler(kube, name):
            (cond,) = wait("the OverLimit condition", lambda: conditions(kube, namespace, "over"))
            assert cond["type"] == "UnschedulableOnNodePool" and cond["reason"] == "Unschedulable"
            first = cond["reasons"][0]
            assert first["reason"] == "OverLimit"
            details = first["details"]["queueDetails"]
            assert details["name"] == q
            assert details["queueResourceLimits"]["nvidia.com/gpu"] == "4"
            assert details["queueDeservedResources"]["nvidia.com/gpu"] == "4"
            assert details["podGroupRequestedResources"]["nvidia.com/gpu"] == "6"
            scheduled = wait(
                "the pod's PodScheduled condition", lambda: condition(pods(kube, namespace)["over-0"], "PodScheduled")
            )
            assert scheduled["reason"] == "Unschedulable"
            assert scheduled["message"] == cond["message"]
            assert "limit of 4 GPUs" in scheduled["message"] and "What would change it: ask for at most 4" in (
                scheduled["message"]
            )
            (missing,) = wait("the QueueDoesNotExist condition", lambda: conditions(kube, namespace, "lost"))
            assert missing["reasons"][0]["reason"] == "QueueDoesNotExist"
            assert missing["reasons"][0]["details"]["queueDetails"]["name"] == f"missing-{name}"

            config = tmp_path / "config.yaml"
            config.write_text(f"schedulerParams:\n  schedulerName: {name}\n")
            command = [sys.executable, "-m", "kai.cli", "explain", "--kubeconfig", str(live_cluster.kubeconfig)]
            done = subprocess.run(
                [*command, f"{namespace}/over", "--config", str(config), "-o", "json"],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            entry = report["podGroups"][f"{namespace}/over"]
            assert entry["causes"][0]["code"] == "OverLimit"
            assert entry["causes"][0]["numbers"] == {
                "resource": "nvidia.com/gpu",
                "cap": 4.0,
                "inUse": 0.0,
                "requested": 6.0,
            }
            assert entry["liveStatus"]["schedulingConditions"][0]["reasons"][0]["reason"] == "OverLimit"
            assert entry["liveStatus"]["podScheduled"][0]["pod"] == f"{namespace}/over-0"
            lost = subprocess.run(
                [*command, f"{namespace}/lost", "--config", str(config)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert lost.returncode == 0, lost.stderr
            assert "QueueDoesNotExist" in lost.stdout
    finally:
        cleanup(kube, namespace, [q])
