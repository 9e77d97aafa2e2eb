"""Differential check: random small clusters through kai and through KAI's own scheduling code.

KAI's code is not part of this repository. Build or obtain a binary of it that reads snapshots and
prints the `kai simulate` JSON contract (same command line: ``-f FILE --rounds N [--config C] --now T
-o json``) and pass its path with ``--oracle``. The script writes a random cluster, runs both, and
compares every pod's final status. KAI is not deterministic (Go map order), so a disagreement is
re-run on the oracle a few times and counts as agreement if any run matches.

    python tools/differential.py --oracle PATH [--kai PATH] [--count 30] [--seed 1] [--rounds 2]
        [--actions allocate,reclaim] [--topology] [--save DIR] [--show N]

``--topology`` puts the nodes in blocks and racks (a Topology over them) and gives most pending jobs a
topology constraint; the report then also counts the clusters where every running pod ends in the same
rack on both sides (KAI's domain choice is deterministic where it is not a tie).

Not part of ``make test``: it needs the oracle, which the repository does not ship.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

NOW = "2026-06-01T00:00:00Z"
NAMESPACE = "diff"
PRIORITIES = [("train", 6), ("build-preemptible", 1), ("build", 2), ("inference", 1)]

# KAI's operator default plugin list (one tier), used when --actions narrows the action list so that
# both schedulers run the same plugins.
DEFAULT_PLUGINS = [
    "predicates", "proportion", "priority", "nodeavailability", "resourcetype", "podaffinity", "elastic",
    "kubeflow", "ray", "subgrouporder", "taskorder", "nominatednode", "dynamicresources", "minruntime",
    "topology", "snapshot", "gpupack", "nodeplacement", "gpusharingorder",
]


def _resources(gpu_quota: float, gpu_weight: float, gpu_limit: float = -1) -> dict[str, Any]:
    return {
        "gpu": {"quota": gpu_quota, "overQuotaWeight": gpu_weight, "limit": gpu_limit},
        "cpu": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
        "memory": {"quota": -1, "overQuotaWeight": 1, "limit": -1},
    }


def _queue(name: str, parent: str | None, resources: dict[str, Any], created: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": resources}
    if parent:
        spec["parentQueue"] = parent
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": _stamp(created)},
        "spec": spec,
    }


def _stamp(seconds: int) -> str:
    day, rest = divmod(seconds, 86400)
    return f"2026-05-{1 + day:02d}T{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}Z"


BLOCK, RACK = "topo/block", "topo/rack"
CONSTRAINTS: list[dict[str, str]] = [
    {},
    {"requiredTopologyLevel": RACK},
    {"requiredTopologyLevel": BLOCK, "preferredTopologyLevel": RACK},
    {"preferredTopologyLevel": RACK},
    {"preferredTopologyLevel": BLOCK},
    {"requiredTopologyLevel": BLOCK},
]


def random_cluster(rng: random.Random, topo: random.Random | None = None) -> list[dict[str, Any]]:
    """Two departments, ten leaf queues, 8-16 nodes x 8 GPUs, running gangs and pending gangs of 1-64.
    With `topo` (its own generator, so that the clusters without topology stay as they were), the nodes
    sit in 2 blocks of racks of 2-4 nodes and pending jobs draw a topology constraint."""
    n_nodes = rng.randint(8, 16)
    gpus_per_node = 8
    total = n_nodes * gpus_per_node
    objects: list[dict[str, Any]] = []
    nodes = []
    per_rack = topo.choice([2, 3, 4]) if topo is not None else 0
    if topo is not None:
        objects.append({
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]},
        })
    for i in range(n_nodes):
        name = f"node-{i:02d}"
        nodes.append([name, gpus_per_node])
        labels = {"nvidia.com/gpu.count": str(gpus_per_node)}
        if topo is not None:
            rack = i // per_rack
            labels.update({BLOCK: f"b{int(rack >= (n_nodes // per_rack + 1) // 2)}", RACK: f"r{rack}"})
        objects.append({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {
                "allocatable": {"cpu": "128", "memory": "1024Gi", "pods": "110", "nvidia.com/gpu": str(gpus_per_node)},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        })

    dept_quota = [rng.choice([0, total // 4, total // 2]) for _ in range(2)]
    leaves: list[str] = []
    created = 0
    for d in range(2):
        dept = f"dept-{d}"
        objects.append(_queue(dept, None, _resources(dept_quota[d], rng.choice([1, 1, 2])), created))
        created += 60
        for q in range(5):
            name = f"q{d}{q}"
            leaves.append(name)
            quota = rng.choice([0, 0, 4, 8, 16, 24])
            objects.append(_queue(name, dept, _resources(quota, rng.choice([0, 1, 1, 2, 3])), created))
            created += 60

    job_id = 0

    def gang_size() -> int:
        return rng.choice([1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 32, 64])

    def add_job(queue: str, running: bool) -> None:
        nonlocal job_id, created
        job_id += 1
        size = gang_size()
        per_pod = rng.choice([1, 1, 1, 2, 4, 8]) if size <= 4 else 1
        priority = rng.choices([p for p, _ in PRIORITIES], weights=[w for _, w in PRIORITIES])[0]
        group = f"job-{job_id:03d}"
        placement: list[str] = []
        if running:
            free = sorted(nodes, key=lambda n: -n[1])
            for _ in range(size):
                target = next((n for n in free if n[1] >= per_pod), None)
                if target is None:
                    return
                placement.append(target[0])
                target[1] -= per_pod
        created += rng.randint(1, 300)
        stamp = _stamp(created)
        pg: dict[str, Any] = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": NAMESPACE, "creationTimestamp": stamp},
            "spec": {"minMember": size, "queue": queue, "priorityClassName": priority},
        }
        if running:
            pg["metadata"]["annotations"] = {"kai.scheduler/last-start-timestamp": stamp}
        elif topo is not None:
            constraint = topo.choice(CONSTRAINTS)
            if constraint:
                pg["spec"]["topologyConstraint"] = {"topology": "dc", **constraint}
        objects.append(pg)
        for i in range(size):
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{group}-{i}",
                    "namespace": NAMESPACE,
                    "creationTimestamp": stamp,
                    "labels": {"kai.scheduler/queue": queue},
                    "annotations": {"pod-group-name": group},
                },
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "priorityClassName": priority,
                    "containers": [{
                        "name": "main",
                        "resources": {
                            "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": str(per_pod)},
                            "limits": {"nvidia.com/gpu": str(per_pod)},
                        },
                    }],
                },
                "status": {"phase": "Running" if running else "Pending"},
            }
            if running:
                pod["spec"]["nodeName"] = placement[i]
            objects.append(pod)

    for _ in range(rng.randint(4, 12)):
        add_job(rng.choice(leaves), running=True)
    for _ in range(rng.randint(4, 12)):
        add_job(rng.choice(leaves), running=False)
    return objects


def run(command: list[str], snapshot: Path, rounds: int, config: Path | None) -> dict[str, Any] | str:
    """Run one scheduler's simulate command line; the contract JSON, or the failure as text."""
    cmd = [*command, "-f", str(snapshot), "--rounds", str(rounds), "--now", NOW, "-o", "json"]
    if config is not None:
        cmd += ["--config", str(config)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"
    return json.loads(proc.stdout)


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {key: pod["status"] for key, pod in result["pods"].items()}


def racks(result: dict[str, Any], rack_of: dict[str, str]) -> dict[str, str]:
    """The rack of every running pod."""
    return {key: rack_of[pod["node"]] for key, pod in result["pods"].items() if pod["status"] == "Running"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle", required=True, help="path of KAI's scheduling code behind the simulate CLI")
    parser.add_argument("--kai", default=str(Path(sys.executable).parent / "kai"), help="the kai command")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--retries", type=int, default=3, help="oracle runs for a disagreeing cluster")
    parser.add_argument("--actions", help="comma list of actions (default: KAI's default configuration)")
    parser.add_argument("--topology", action="store_true", help="blocks and racks, topology-constrained jobs")
    parser.add_argument("--save", type=Path, help="write each disagreeing snapshot (and both outputs) here")
    parser.add_argument("--show", type=int, default=5, help="pods to list per disagreement")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kai-diff-"))
    config: Path | None = None
    if args.actions:
        config = work / "config.yaml"
        config.write_text(yaml.safe_dump({
            "actions": args.actions,
            "tiers": [{"plugins": [{"name": p} for p in DEFAULT_PLUGINS]}],
        }))
    agree = same_racks = 0
    kinds: Counter[str] = Counter()
    oracle: dict[str, Any] | str = ""
    for case in range(args.count):
        seed = args.seed + case
        objects = random_cluster(random.Random(seed), random.Random(-seed) if args.topology else None)
        rack_of = {o["metadata"]["name"]: o["metadata"]["labels"].get(RACK, "") for o in objects if o["kind"] == "Node"}
        snapshot = work / f"cluster-{seed}.yaml"
        snapshot.write_text(yaml.safe_dump_all(objects, sort_keys=False))
        ours = run([args.kai, "simulate"], snapshot, args.rounds, config)
        if isinstance(ours, str):
            print(f"seed {seed}: kai failed: {ours}")
            kinds["kai failed"] += 1
            continue
        mine = statuses(ours)
        theirs: dict[str, str] = {}
        matched = False
        for _ in range(max(1, args.retries)):
            oracle = run([args.oracle], snapshot, args.rounds, config)
            if isinstance(oracle, str):
                print(f"seed {seed}: oracle failed: {oracle}")
                break
            theirs = statuses(oracle)
            if theirs == mine:
                matched = True
                break
        if matched:
            agree += 1
            if args.topology and not isinstance(oracle, str):
                same = racks(ours, rack_of) == racks(oracle, rack_of)
                for _ in range(max(1, args.retries) - 1):
                    if same:
                        break
                    again = run([args.oracle], snapshot, args.rounds, config)
                    same = not isinstance(again, str) and racks(ours, rack_of) == racks(again, rack_of)
                same_racks += same
                if not same:
                    print(f"seed {seed}: every status the same, some running pod in another rack")
            continue
        diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        groups = Counter(k.rsplit("-", 1)[0] for k in diff)
        for key in diff:
            kinds[f"kai {mine.get(key)} / KAI {theirs.get(key)}"] += 1
        print(f"seed {seed}: {len(diff)} pod(s) differ in {len(groups)} job(s)")
        for key in diff[: args.show]:
            print(f"    {key}: kai {mine.get(key)}, KAI {theirs.get(key)}")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / snapshot.name).write_text(snapshot.read_text())
            (args.save / f"cluster-{seed}.kai.json").write_text(json.dumps(ours, indent=1))
            if not isinstance(oracle, str):
                (args.save / f"cluster-{seed}.kai-oracle.json").write_text(json.dumps(oracle, indent=1))
    share = 100.0 * agree / args.count if args.count else 0.0
    print(f"agreement: {agree} of {args.count} clusters ({share:.0f}%) — every pod's status the same")
    if args.topology:
        print(f"same racks: {same_racks} of {args.count} clusters — every running pod in the same rack as well")
    if kinds:
        print("pod differences by kind: " + ", ".join(f"{k}: {n}" for k, n in kinds.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
