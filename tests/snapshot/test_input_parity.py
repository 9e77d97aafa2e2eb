"""Snapshots KAI takes are taken: odd queue values are warnings naming the queue and field (never a
refusal), an empty or GPU-less cluster schedules what it can and says why the rest waits, and a pod
naming a DRA claim that does not exist, or using a DRA feature kai has not built, is left Pending with a
message naming the claim (and a warning for the feature). Through the
real `kai simulate` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.scenario import NOW, node, pod, queue, run, run_cli, write


def simulate(tmp_path: Path, objects: list[dict[str, Any]], *extra: str) -> tuple[dict[str, Any], str]:
    path = write(objects, tmp_path)
    done = run_cli(["simulate", "-f", str(path), "--now", NOW, "-o", "json", *extra])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout), done.stderr


# -- empty clusters --------------------------------------------------------------------------------
def test_no_nodes_and_no_queues_everything_pends_with_a_reason(tmp_path: Path) -> None:
    gpu_pod, cpu_pod = pod("g", gpus=1), pod("c", cpu="1")
    out, err = simulate(tmp_path, [gpu_pod, cpu_pod], "--rounds", "2")
    assert {k: v["status"] for k, v in out["pods"].items()} == {"ns/c": "Pending", "ns/g": "Pending"}
    for group in ("ns/pg-g", "ns/pg-c"):
        assert "the cluster has no nodes" in out["podGroups"][group]["message"]
    assert out["queues"]["default-queue"]["fairShare"]["gpu"] == 0
    assert "default-queue" in err  # the default queues are assumed, and said so


def test_no_nodes_with_running_pods_and_a_reclaimer(tmp_path: Path) -> None:
    """Pods said to run on a node that is not in the snapshot, and a queue with quota waiting: every
    action runs on zero nodes without failing."""
    objects = [queue("dept"), queue("a", parent="dept")]
    objects.append(queue("b", parent="dept", gpu={"quota": 4, "overQuotaWeight": 1, "limit": -1}))
    objects += [pod(f"a{i}", queue="a", gpus=1, node="gone") for i in range(4)]
    objects += [pod(f"b{i}", queue="b", gpus=1) for i in range(2)]
    out, err = simulate(tmp_path, objects, "--rounds", "2")
    assert all(r["evicted"] == [] and r["bound"] == [] for r in out["rounds"])
    assert out["pods"]["ns/b0"]["status"] == "Pending"
    assert "spec.nodeName 'gone' is not a node of the snapshot" in err


def test_nodes_without_gpus_run_cpu_pods_and_say_why_gpu_pods_wait(tmp_path: Path) -> None:
    out, _ = simulate(
        tmp_path, [node("cpu-1", gpus=0), queue("q"), pod("g", queue="q", gpus=1), pod("c", queue="q", cpu="1")]
    )
    assert out["pods"]["ns/c"]["status"] == "Running"
    assert out["pods"]["ns/g"]["status"] == "Pending"
    assert "no node has nvidia.com/gpu" in out["podGroups"]["ns/pg-g"]["message"]
    assert out["queues"]["q"]["fairShare"]["gpu"] == 0


@pytest.mark.parametrize("objects", [[], [node("n1")], [queue("q")]], ids=["empty", "only-a-node", "only-a-queue"])
def test_a_snapshot_with_nothing_to_schedule(tmp_path: Path, objects: list[dict[str, Any]]) -> None:
    out, _ = simulate(tmp_path, objects)
    assert out["pods"] == {} and out["podGroups"] == {}
    assert out["rounds"][0] == {"round": 1, "bound": [], "pipelined": [], "evicted": []}


# -- odd queue values: accepted, used as KAI does, warned about -------------------------------------
@pytest.mark.parametrize(
    ("gpu", "warning"),
    [
        (
            {"quota": 0, "overQuotaWeight": -1, "limit": -1},
            "Queue q: spec.resources.gpu.overQuotaWeight: -1 is negative",
        ),
        (
            {"quota": 8, "overQuotaWeight": 1, "limit": 4},
            "Queue q: spec.resources.gpu.quota: 8 is above the limit (4): the limit wins",
        ),
        (
            {"quota": -2, "overQuotaWeight": 1, "limit": -1},
            "Queue q: spec.resources.gpu.quota: -2 is negative and not -1",
        ),
        (
            {"quota": 0, "overQuotaWeight": 1, "limit": -3},
            "Queue q: spec.resources.gpu.limit: -3 is negative and not -1",
        ),
    ],
)
def test_odd_queue_values_are_warnings(tmp_path: Path, gpu: dict[str, float], warning: str) -> None:
    _, err = simulate(tmp_path, [node("n1"), queue("q", gpu=gpu), pod("p", queue="q", gpus=1)])
    assert warning in err


def test_a_department_with_a_negative_weight_and_its_children_are_kept(tmp_path: Path) -> None:
    objects = [node("n1", gpus=8), node("n2", gpus=8)]
    objects.append(queue("dept", gpu={"quota": 0, "overQuotaWeight": -1, "limit": -1}))
    objects.append(queue("team", parent="dept"))
    objects += [pod(f"p{i}", queue="team", gpus=1) for i in range(10)]
    out, err = simulate(tmp_path, objects)
    # Alone at its level, the department's weight normalises to 1: it gets all it asks for.
    assert out["queues"]["dept"]["fairShare"]["gpu"] == 10 and out["queues"]["team"]["fairShare"]["gpu"] == 10
    assert sum(1 for v in out["pods"].values() if v["status"] == "Running") == 10
    assert "Queue dept: spec.resources.gpu.overQuotaWeight" in err


def test_quota_above_limit_the_limit_wins(tmp_path: Path) -> None:
    objects = [node("n1", gpus=8), queue("q", gpu={"quota": 6, "overQuotaWeight": 1, "limit": 2})]
    objects += [pod(f"p{i}", queue="q", gpus=1) for i in range(4)]
    out, _ = simulate(tmp_path, objects)
    assert out["queues"]["q"]["fairShare"]["gpu"] == 2
    assert sum(1 for v in out["pods"].values() if v["status"] == "Running") == 2


# -- DRA resource claims ---------------------------------------------------------------------------
def claiming(name: str, **claim: str) -> dict[str, Any]:
    obj = pod(name, queue="q", gpus=0)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", **(claim or {"resourceClaimName": f"{name}-claim"})}]
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return obj


def test_a_pod_whose_claim_or_template_does_not_exist_stays_pending_naming_it(tmp_path: Path) -> None:
    objects = [node("n1"), queue("q"), claiming("dra"), claiming("tmpl", resourceClaimTemplateName="gpus")]
    out, _ = simulate(tmp_path, objects, "--rounds", "2")
    assert out["pods"]["ns/dra"]["status"] == "Pending" and out["pods"]["ns/tmpl"]["status"] == "Pending"
    assert 'resourceclaim "dra-claim" not found' in out["podGroups"]["ns/pg-dra"]["message"]
    assert 'resourceclaimtemplate "gpus" not found' in out["podGroups"]["ns/pg-tmpl"]["message"]


def test_without_the_dynamicresources_plugin_a_claiming_pod_is_bound_as_kai_binds_it() -> None:
    config = {"tiers": [{"plugins": [{"name": "predicates"}, {"name": "proportion"}]}]}
    out = run([node("n1"), queue("q"), claiming("dra")], config=config)
    assert out["pods"]["ns/dra"]["status"] == "Running"


def test_many_pods_using_a_feature_kai_has_not_built_make_one_warning(tmp_path: Path) -> None:
    """Device requests with alternatives (firstAvailable) are not built: the pods wait, one warning."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "alt", "namespace": "ns", "labels": {"kai.scheduler/queue": "q"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]}]}},
    }
    objects = [node("n1"), queue("q"), claim, *[claiming(f"p{i}", resourceClaimName="alt") for i in range(8)]]
    out, err = simulate(tmp_path, objects)
    lines = [line for line in err.splitlines() if "DRAPrioritizedList" in line]
    assert len(lines) == 1 and "and 3 more" in lines[0]
    assert "firstAvailable" in out["podGroups"]["ns/pg-p0"]["message"]

