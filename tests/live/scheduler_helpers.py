"""Helpers for the live scheduler tests: a scheduler process per test, and object builders.

Each test runs its own in-process scheduler (or `kai run` subprocess) with a scheduler name of
its own, so that pods other tests left behind in the shared control plane are never its
business, and starts from fake nodes of its own (every other fake node is deleted first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kai.cluster.app import LiveOptions, LiveProcess
from kai.cluster.kube import BIND_REQUESTS, PODGROUPS, PODS, QUEUES, ApiError, Kube
from kai.devcluster.live import LiveCluster
from kai.framework.config import SchedulerConfig, SchedulerParams

REPO = Path(__file__).resolve().parents[2]


def unique_scheduler_name() -> str:
    return f"kai-test-{uuid.uuid4().hex[:6]}"


def config_for(scheduler_name: str, **params: Any) -> SchedulerConfig:
    return SchedulerConfig(params=dataclasses.replace(SchedulerParams(), scheduler_name=scheduler_name, **params))


def fresh_nodes(live: LiveCluster, count: int, gpus: int = 8, prefix: str | None = None, **kw: Any) -> list[str]:
    """Delete every fake node, then create `count` new ones."""
    live.delete_nodes()
    return live.create_gpu_nodes(count, gpus=gpus, name_prefix=prefix or f"n{uuid.uuid4().hex[:4]}", **kw)


@contextlib.contextmanager
def scheduler(kube: Kube, scheduler_name: str, **options: Any) -> Iterator[LiveProcess]:
    """An in-process scheduler + binder (no leader election, fast cycles) for one test."""
    params = options.pop("params", {})
    opts = LiveOptions(
        config=config_for(scheduler_name, **params),
        period=options.pop("period", 0.2),
        leader_elect=options.pop("leader_elect", False),
        listen=options.pop("listen", "127.0.0.1:0"),
        fake_gpu_uuids=options.pop("fake_gpu_uuids", True),
        **options,
    )
    process = LiveProcess(kube, opts).start()
    try:
        assert process.cache.wait_synced(30), "caches did not sync"
        yield process
    finally:
        process.stop()


def kai_run(kubeconfig: Path, scheduler_name: str, *args: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    """`kai run` as a subprocess (for SIGKILL and leader election tests), with a config file for its name."""
    config = Path(f"/tmp/kai-test-config-{scheduler_name}.yaml")
    config.write_text(f"schedulerParams:\n  schedulerName: {scheduler_name}\n")
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kai.cli",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--config",
            str(config),
            "--listen-address",
            "127.0.0.1:0",
            "--fake-gpu-uuids",
            "--leader-elect",
            "--qps=-1",
            *args,
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def queue(name: str, gpu_quota: float = -1, gpu_weight: float = 1, gpu_limit: float = -1) -> dict[str, Any]:
    unlimited = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "resources": {
                "gpu": {"quota": gpu_quota, "overQuotaWeight": gpu_weight, "limit": gpu_limit},
                "cpu": unlimited,
                "memory": unlimited,
            }
        },
    }


def podgroup(name: str, namespace: str, queue_name: str, min_member: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "queue": queue_name, **spec},
    }


def pod(
    name: str,
    namespace: str,
    scheduler_name: str,
    *,
    group: str | None = None,
    queue_name: str | None = None,
    gpus: int = 0,
    cpu: str = "100m",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if group:
        ann["pod-group-name"] = group
    lab = dict(labels or {})
    if queue_name:
        lab["kai.scheduler/queue"] = queue_name
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": ann, "labels": lab},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


def create(kube: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    kind = obj["kind"]
    ns = obj["metadata"].get("namespace")
    path = {"Pod": PODS, "PodGroup": PODGROUPS, "Queue": QUEUES}[kind].path(ns)
    return kube.post(path, obj)


def pods(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in kube.get(PODS.path(namespace))["items"]}


def bound(kube: Kube, namespace: str) -> dict[str, str]:
    return {n: p["spec"]["nodeName"] for n, p in pods(kube, namespace).items() if p["spec"].get("nodeName")}


def wait(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def cleanup(kube: Kube, namespace: str, queues: list[str] = ()) -> None:  # type: ignore[assignment]
    """Delete what a test made (no namespace controller runs here to do it)."""
    for resource in (PODS, BIND_REQUESTS, PODGROUPS):
        with contextlib.suppress(ApiError):
            kube.delete(resource.path(namespace), query={"gracePeriodSeconds": 0})
    for name in queues:
        with contextlib.suppress(ApiError):
            kube.delete(QUEUES.path(name=name))


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None
