"""The live scheduler's per-cycle cost in memory: bench-live's workload without an API server.

A :class:`~kai.cluster.cache.ClusterCache` whose reflectors are not started is fed the watch events
bench-live's cluster sends (default 500 nodes x 8 GPUs, 5,000 pods in gangs of 10 with a PodGroup
each, every other gang 1 GPU a pod): the first cycle places every pod and its BindRequests land in
the store; then, each cycle, the binder's work of one second is delivered (``--bind`` pods get their
node and run, their BindRequests succeed), with the status updater's own writes coming back as
PodGroup and Queue watch events, and the real loop (``Scheduler.run_once`` with the real
:class:`~kai.cluster.status.StatusUpdater` over a recording client) runs. Printed: the CPU of a
steady cycle (mean over ``--cycles``) by step, and the status writes. Deterministic: for valgrind's
instruction counts (``PYTHONHASHSEED=0 valgrind --tool=callgrind ... bench/live_cycle.py``) or
``--profile FILE`` (cProfile of the steady cycles).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kai.api.timeutil import parse_time
from kai.cluster.cache import SCHEDULER_KINDS, ClusterCache
from kai.cluster.kube import DRA_KINDS
from kai.cluster.scheduler import Scheduler
from kai.cluster.status import StatusUpdater
from kai.framework.config import SchedulerConfig

NS = "bench"
NOW = "2026-01-01T00:00:00Z"


class Recorder:
    """The client (patches recorded, answered with ``{}``) and the event recorder in one."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []
        self.events = 0

    def patch(self, path: str, body: Any, kind: str = "merge") -> dict[str, Any]:
        self.patches.append((path, body))
        return {}

    def record(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> bool:
        self.events += 1
        return True

    # the scheduler's BindRequest and eviction ports
    def write(self, bindings: list[Any], pods: dict, snapshot: Any) -> list[Any]:
        self.bindings = list(bindings)
        return bindings

    def delete_stale(self, stale: list[Any]) -> int:
        return 0

    def evict(self, evictions: list[Any], pods: dict, podgroups: dict, snapshot: Any) -> list[Any]:
        return []


def gangs(pods: int, gang: int, created: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """bench-live's jobs: ``pods`` pods in gangs of ``gang``, a PodGroup each, every other gang 1 GPU a pod.
    With ``created``, the fields the API server would fill in (creation time, the Pending phase)."""
    groups: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for g in range((pods + gang - 1) // gang):
        size = min(gang, pods - g * gang)
        name = f"g{g:05d}"
        group_meta: dict[str, Any] = {"name": name, "namespace": NS}
        if created:
            group_meta["creationTimestamp"] = created
        groups.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": group_meta,
                "spec": {"minMember": size, "queue": "bench"},
            }
        )
        resources: dict[str, Any] = {"requests": {"cpu": "100m" if g % 2 == 0 else "1", "memory": "256Mi"}}
        if g % 2 == 0:
            resources["limits"] = {"nvidia.com/gpu": "1"}
        for i in range(size):
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "namespace": NS, "annotations": {"pod-group-name": name}},
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                },
            }
            if created:
                pod["metadata"]["creationTimestamp"] = created
                pod["status"] = {"phase": "Pending"}
            items.append(pod)
    return groups, items


def workload(nodes: int, gpus: int, pods: int, gang: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(nodes):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"bench-{i:04d}", "labels": {"type": "kwok"}},
                "spec": {},
                "status": {
                    "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    unlimited = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    out.append(
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "bench"},
            "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
        }
    )
    groups, items = gangs(pods, gang, created=NOW)
    out += groups
    out += items
    return out


class LiveCluster:
    """The cache, the loop and the status updater, with the watch events delivered by hand."""

    def __init__(self) -> None:
        self.cache = ClusterCache(None, [k for k in SCHEDULER_KINDS if k not in DRA_KINDS])  # type: ignore[arg-type]
        self.version = 0
        self.now = parse_time(NOW)
        self.ports = Recorder()
        self.status = StatusUpdater(self.ports, self.ports, workers=1)  # type: ignore[arg-type]
        self.scheduler = Scheduler(
            self.cache,
            SchedulerConfig(),
            bind_requests=self.ports,
            evictor=self.ports,
            status=self.status,
            events=self.ports,  # type: ignore[arg-type]
            clock=lambda: self.now,
        )
        for resource in self.cache.reflectors.values():
            resource.synced.set()

    def put(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        self.cache.stores[obj["kind"]].put(obj)

    def written_back(self) -> int:
        """The status updater's writes, finished, delivered as the watch delivers them."""
        self.status.pool.submit(lambda: None).result()
        n = 0
        for path, body in self.ports.patches:
            parts = path.strip("/").split("/")
            if parts[-1] != "status" or "pods" in parts:
                continue
            n += 1
            if "podgroups" in parts:
                kind, key = "PodGroup", f"{parts[-4]}/{parts[-2]}"
            else:
                kind, key = "Queue", parts[-2]
            obj = copy.copy(self.cache.stores[kind].get(key))
            obj["metadata"] = dict(obj["metadata"])
            obj["status"] = {**(obj.get("status") or {}), **body["status"]}
            self.put(obj)
        self.ports.patches.clear()
        return n


def bind_request(pod_key: str, node: str) -> dict[str, Any]:
    ns, name = pod_key.split("/")
    return {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [{"kind": "Pod", "uid": f"uid-{name}"}]},
        "spec": {"podName": name, "selectedNode": node},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--gang", type=int, default=10)
    parser.add_argument("--bind", type=int, default=30, help="pods the binder binds between two cycles")
    parser.add_argument("--cycles", type=int, default=40, help="steady cycles measured")
    parser.add_argument("--profile", type=Path, help="cProfile of the steady cycles into this file")
    args = parser.parse_args()
    gc.disable()
    c = LiveCluster()
    for obj in workload(args.nodes, args.gpus, args.pods, args.gang):
        c.put(obj)
    first = c.scheduler.run_once()
    placed = [(b.pod, b.node) for b in first.decisions.bindings]
    for key, node in placed:
        c.put(bind_request(key, node))
    c.written_back()
    c.scheduler.run_once()  # the requests landed: every pod Binding
    c.written_back()
    print(f"first cycle placed {len(placed)} pods", flush=True)
    profile = cProfile.Profile(time.thread_time) if args.profile else None
    steps: dict[str, float] = {}
    total = 0.0
    writes = 0
    at = 0
    for _ in range(args.cycles):
        for key, node in placed[at : at + args.bind]:
            pod = copy.deepcopy(c.cache.stores["Pod"].get(key))
            pod["spec"]["nodeName"] = node
            pod["status"] = {"phase": "Running"}
            c.put(pod)
            br = copy.deepcopy(c.cache.stores["BindRequest"].get(key))
            br["status"] = {"phase": "Succeeded"}
            c.put(br)
        at += args.bind
        c.now += 1.0
        if profile is not None:
            profile.enable()
        report = c.scheduler.run_once()
        if profile is not None:
            profile.disable()
        total += report.cpu
        for name, seconds in report.steps_cpu.items():
            steps[name] = steps.get(name, 0.0) + seconds
        writes += c.written_back()
    n = args.cycles
    print(f"steady cycle CPU: {1000 * total / n:.2f} ms (mean of {n}, {args.bind} pods bound between cycles)")
    for name, seconds in sorted(steps.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {1000 * seconds / n:7.2f} ms")
    print(f"status writes: {writes} ({writes / n:.1f} a cycle); events: {c.ports.events}")
    print(f"snapshots patched {c.scheduler.incremental.patched}, from scratch {c.scheduler.incremental.full}")
    if profile is not None and args.profile is not None:
        profile.dump_stats(args.profile)
    c.status.shutdown()


if __name__ == "__main__":
    main()
