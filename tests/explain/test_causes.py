"""`kai explain`: each cause the core records, in its rank, with numbers worked out by hand.

NOW is 2026-01-01T00:00:00Z. Nodes have 8 GPUs unless a test says otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kai.api.timeutil import parse_time
from kai.cycle import known_actions
from kai.explain.report import explain_objects
from kai.framework.config import DEFAULT_PLUGINS, parse_config
from tests.actions.evict_helpers import gq, job
from tests.scenario import NOW, node, pod, podgroup, run_cli, write

TEN_MIN_AGO = "2025-12-31T23:50:00Z"


def explain(objects: list[dict[str, Any]], config: dict[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    cfg, problems, _ = parse_config(config, known_actions())
    assert not problems, problems
    report = explain_objects(objects, parse_time(NOW), cfg, storage_listed=True)
    return {key: entry["causes"] for key, entry in report["podGroups"].items()}


def codes(causes: list[dict[str, Any]]) -> list[str]:
    return [c["code"] for c in causes]


def pinned(name: str, q: str, gpus: int, on: str) -> list[dict[str, Any]]:
    """A running one-pod job that may run only on node `on` (so consolidation cannot move it)."""
    objects = job(name, q, gpus=gpus, nodes=on)
    objects[1]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": on}
    return objects


def host(name: str, gpus: int = 8) -> dict[str, Any]:
    return node(name, gpus=gpus, labels={"kubernetes.io/hostname": name})


def test_queue_limit_comes_first_with_its_numbers() -> None:
    # Queue a may hold at most 6 GPUs; the job asks for 8 on one node of 8: only the limit stops it.
    objects = [host("n1"), gq("a", 4, limit=6), *job("big", "a", gpus=8)]
    (first,) = explain(objects)["ns/big"]
    assert first["code"] == "OverLimit" and first["kaiReason"] == "OverLimit"
    assert first["subject"] == "Queue a"
    assert first["numbers"] == {"resource": "nvidia.com/gpu", "cap": 6.0, "inUse": 0.0, "requested": 8.0}
    assert first["remedy"].startswith("ask for at most 6 GPUs")
    assert first["queue"]["limit"]["gpu"] == 6.0 and first["queue"]["podGroupRequested"]["gpu"] == 8.0


def test_limit_ranks_before_a_job_larger_than_its_nodes() -> None:
    # 16 GPUs in one pod: over the limit of 6, and larger than any 8-GPU node. Both, the limit first.
    objects = [host("n1"), host("n2"), gq("a", 4, limit=6), *job("huge", "a", gpus=16)]
    causes = explain(objects)["ns/huge"]
    assert codes(causes) == ["OverLimit", "LargerThanCluster"]
    assert causes[1]["numbers"] == {"pods": 1, "fitOnEmptyNodes": 0, "matchingNodes": 2}
    assert "16 GPUs" in causes[1]["message"]


def test_non_preemptible_job_over_quota() -> None:
    # build (priority 100) is non-preemptible; quota 2, the job asks for 4 on an empty 8-GPU node.
    objects = [host("n1"), gq("a", 2), *job("np", "a", gpus=4, priority_class="build")]
    first = explain(objects)["ns/np"][0]
    assert first["code"] == "NonPreemptibleOverQuota"
    assert first["numbers"] == {"resource": "nvidia.com/gpu", "cap": 2.0, "inUse": 0.0, "requested": 4.0}
    assert first["queue"]["podGroupRequestedNonPreemptible"]["gpu"] == 4.0
    assert "preemptible" in first["remedy"]


def test_job_above_its_queue_fair_share_says_no_reclaim_will_help() -> None:
    # 4 nodes = 32 GPUs. Queue b runs four 8-GPU jobs; queue a (same quota, 16 each) asks for 3 x 8 = 24.
    # Fair share: 16 each. a holds 0, so 0 + 24 > 16: reclaim can never take 24 for it; at most 16.
    objects = [host(f"n{i}") for i in range(4)] + [gq("a", 16), gq("b", 16)]
    for i in range(4):
        objects += job(f"b{i}", "b", gpus=8, nodes=f"n{i}")
    objects += job("llama", "a", gpus=8, size=3)
    causes = explain(objects)["ns/llama"]
    assert codes(causes)[:2] == ["OverFairShare", "GangShort"]
    share = causes[0]
    assert share["numbers"] == {"fairShare": 16.0, "allocated": 0.0, "requested": 24.0, "deserved": 16.0}
    assert share["remedy"] == "ask for at most 16 GPUs"
    gang = causes[1]
    assert gang["numbers"]["pods"] == 3 and gang["numbers"]["podsThatFit"] == 0
    assert gang["numbers"]["short"] == {"nvidia.com/gpu": 24.0}
    assert gang["numbers"]["reasons"] == {"node(s) had insufficient nvidia.com/gpu": 4}


def test_fragmentation_counts_the_gpus_consolidation_would_move() -> None:
    # n1 and n2 each run a pinned 3-GPU job: 5 + 5 = 10 free, the pending pod needs 8 on one node.
    # Topping one node up from 5 to 8 free means moving 3 GPUs.
    objects = [host("n1"), host("n2"), gq("a", 16)]
    objects += pinned("r1", "a", 3, "n1") + pinned("r2", "a", 3, "n2") + job("eight", "a", gpus=8)
    causes = explain(objects)["ns/eight"]
    first = causes[0]
    assert first["code"] == "Fragmentation"
    assert first["numbers"] == {
        "freeGpus": 10.0,
        "neededGpus": 8.0,
        "mostFreeGpusOnOneNode": 5.0,
        "podsThatFit": 0,
        "pods": 1,
        "gpusToMove": 3.0,
    }
    assert first["remedy"] == "starts when 8 GPUs free up on one node; consolidation would have to move 3 GPUs"


def test_gang_short_by_k_of_m() -> None:
    # One queue alone: 12 of 16 GPUs run (pinned, same priority); a gang of 2 x 4 finds room for 1.
    objects = [host("n1"), host("n2"), gq("a", 16)]
    objects += pinned("r1", "a", 8, "n1") + pinned("r2", "a", 4, "n2") + job("gang", "a", gpus=4, size=2)
    causes = explain(objects)["ns/gang"]
    first = causes[0]
    assert first["code"] == "GangShort"
    assert first["numbers"]["pods"] == 2 and first["numbers"]["podsThatFit"] == 1
    assert first["numbers"]["short"] == {"nvidia.com/gpu": 4.0}  # 8 needed, 4 free
    assert first["message"].startswith("Resources were found for 1 of the 2 pods")
    assert first["remedy"] == "starts when another 4 GPUs free up"
    assert "OverFairShare" not in codes(causes)  # no other queue holds anything a reclaim could take


def min_runtime_config() -> dict[str, Any]:
    plugins = [
        {"name": n, "arguments": {"defaultReclaimMinRuntime": "1h"}} if n == "minruntime" else {"name": n}
        for n in DEFAULT_PLUGINS
    ]
    return {"tiers": [{"plugins": plugins}]}


def test_min_runtime_protection_names_the_victim_and_until_when() -> None:
    # One 8-GPU node held by b's gang (8 x 1 GPU), started 10 minutes ago; a (fair share 4) wants 4.
    # Reclaim would take 4 of b's pods, but b is protected for 1 h: until 00:50.
    objects = [host("n1"), gq("a", 4), gq("b", 4)]
    objects += job("train", "b", gpus=1, size=8, nodes="n1", last_start=TEN_MIN_AGO)
    objects += job("want", "a", gpus=4)
    causes = explain(objects, min_runtime_config())["ns/want"]
    first = causes[0]
    assert first["code"] == "MinRuntime"
    assert first["numbers"] == {"victims": {"ns/train": "2026-01-01T00:50:00Z"}, "gpus": 8.0}
    assert first["remedy"] == "waits for job ns/train's min-runtime until 2026-01-01T00:50:00Z"
    assert codes(causes).index("MinRuntime") < codes(causes).index("GangShort")


def test_without_min_runtime_the_same_job_reclaims_and_the_victim_says_by_whom() -> None:
    objects = [host("n1"), gq("a", 4), gq("b", 4)]
    objects += job("train", "b", gpus=1, size=8, nodes="n1", min_member=1, last_start=TEN_MIN_AGO)
    objects += job("want", "a", gpus=4)
    report = explain(objects)
    (evicted,) = [c for c in report["ns/train"] if c["code"] == "Evicted"]
    assert evicted["numbers"] == {"pods": 4, "action": "reclaim", "by": "ns/want"}
    assert evicted["subject"] == "PodGroup ns/want"
    assert "fair share" in evicted["message"]


def test_disruption_budget() -> None:
    # As above (b elastic, 8 x 1 GPU), but b may lose at most 2 GPUs a cycle: the 4 a needs are too many.
    objects = [host("n1"), gq("a", 4), gq("b", 4)]
    objects += job("train", "b", gpus=1, size=8, nodes="n1", min_member=1)
    objects += job("want", "a", gpus=4)
    config = {"schedulerParams": {"maxEvictedGpusPerQueuePerCycle": 2}}
    causes = explain(objects, config)["ns/want"]
    assert causes[0]["code"] == "DisruptionBudget"
    assert "maxEvictedGpusPerQueuePerCycle" in causes[0]["message"]
    assert codes(causes).index("DisruptionBudget") < codes(causes).index("GangShort")


def test_topology_level() -> None:
    # Two racks of one 4-GPU node each; the gang (2 x 4) must sit in one rack: one rack holds 1 of 2.
    topology = {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
    }
    nodes = [
        node(f"n{i}", gpus=4, labels={"rack": f"r{i}", "kubernetes.io/hostname": f"n{i}"}) for i in range(2)
    ]
    group = podgroup("ring", "a", 2)
    group["spec"]["topologyConstraint"] = {"topology": "dc", "requiredTopologyLevel": "rack"}
    pods = [pod(f"ring-{i}", group="ring", queue="a", gpus=4) for i in range(2)]
    causes = explain([*nodes, topology, gq("a", 8), group, *pods])["ns/ring"]
    first = causes[0]
    assert first["code"] == "Topology" and first["subject"] == "Topology dc"
    assert first["numbers"]["pods"] == 2 and first["numbers"]["podsThatFit"] == 1
    assert first["numbers"]["level"] == "rack"
    assert codes(causes) == ["Topology"]  # 8 GPUs free for 8 needed: no other cause


def test_node_predicates() -> None:
    objects = [host("n1"), host("n2"), gq("a", 8), *job("sel", "a", gpus=1)]
    objects[-1]["spec"]["nodeSelector"] = {"gpu": "h100"}
    (first,) = explain(objects)["ns/sel"]
    assert first["code"] == "NodePredicates"
    assert first["numbers"]["passing"] == 0 and first["numbers"]["nodes"] == 2
    assert sum(first["numbers"]["reasons"].values()) == 2


def test_missing_queue_is_kai_queue_does_not_exist(tmp_path: Path) -> None:
    # Through the real command: a PodGroup naming a queue that is not there.
    objects = [host("n1"), gq("a", 8), *job("lost", "nowhere", gpus=1)]
    done = run_cli(["explain", "-f", str(write(objects, tmp_path)), "--now", NOW, "--job", "ns/lost", "-o", "json"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schemaVersion"] == 1
    (first,) = report["podGroups"]["ns/lost"]["causes"]
    assert first["code"] == "QueueDoesNotExist" and first["kaiReason"] == "QueueDoesNotExist"
    assert first["subject"] == "Queue nowhere"


def test_pod_naming_a_missing_pod_group() -> None:
    objects = [host("n1"), gq("a", 8), pod("orphan", group="ghost", queue="a", gpus=1)]
    (first,) = explain(objects)["ns/ghost"]
    assert first["code"] == "PodGroupDoesNotExist" and first["subject"] == "PodGroup ns/ghost"


def test_explain_table_and_job_filter(tmp_path: Path) -> None:
    objects = [host("n1"), gq("a", 4, limit=6), *job("big", "a", gpus=8), *job("ok", "a", gpus=1)]
    path = write(objects, tmp_path)
    done = run_cli(["explain", "-f", str(path), "--now", NOW, "ns/big"])
    assert done.returncode == 0, done.stderr
    assert "OverLimit" in done.stdout and "ask for at most 6 GPUs" in done.stdout
    missing = run_cli(["explain", "-f", str(path), "--now", NOW, "--job", "ns/ok"])
    assert missing.returncode == 3 and "not waiting" in missing.stderr
    table = run_cli(["simulate", "-f", str(path), "--now", NOW, "-o", "table"])
    assert table.returncode == 0 and "OverLimit" in table.stdout


def test_a_recorded_snapshot_is_explained_at_its_own_instant(tmp_path: Path) -> None:
    # The live scheduler's record: a JSON v1 List with the cycle's instant; no --now needed.
    objects = [host("n1"), gq("a", 4, limit=6), *job("big", "a", gpus=8)]
    recorded = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"annotations": {"kai.scheduler/snapshot-time": "2026-02-03T04:05:06Z"}},
        "items": objects,
    }
    path = tmp_path / "snapshot-000001.yaml"
    path.write_text(json.dumps(recorded))
    done = run_cli(["explain", "-f", str(path), "-o", "json"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["now"] == "2026-02-03T04:05:06Z"
    assert report["podGroups"]["ns/big"]["causes"][0]["code"] == "OverLimit"


def test_a_pod_group_that_ran_and_lost_its_pods_says_so() -> None:
    group = podgroup("gone", "a")
    group["metadata"]["annotations"] = {"kai.scheduler/last-start-timestamp": TEN_MIN_AGO}
    (first,) = explain([host("n1"), gq("a", 8), group])["ns/gone"]
    assert first["code"] == "NotReady"
    assert "it ran before" in first["message"] and "no pods yet" not in first["message"]


def test_a_feature_kai_has_not_built_comes_before_placement() -> None:
    claiming = pod("dra", group="dra", queue="a", gpus=0)
    claiming["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    causes = explain([host("n1"), gq("a", 8), podgroup("dra", "a"), claiming])["ns/dra"]
    assert causes[0]["code"] == "NotBuilt" and causes[0]["subject"] == "Pod ns/dra"


def test_a_refused_queue_is_named_with_its_own_problem() -> None:
    # The queue exists but its quota is not a number: it is left out, and its job says why.
    bad = gq("a", 8)
    bad["spec"]["resources"]["gpu"]["quota"] = "lots"
    causes = explain([host("n1"), bad, *job("j", "a", gpus=1)])["ns/j"]
    assert causes[0]["code"] == "InvalidObject" and causes[0]["subject"] == "Queue a"
    assert "quota" in causes[0]["message"]
