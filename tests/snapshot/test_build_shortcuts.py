"""The snapshot builder's short paths (issue 12's build speed): each is checked by what it must not
change. A pod spec without any of the rarer parts skips reading them, so a pod with just one of them
must still have it read; pods written alike share their GPU request unless they share a GPU; nodes of
one pool share one parsed allocatable, but a value that only equals another (1 == True) is still its
own problem; a PodGroup spec is keyed by its items and minMember's type, so other values that only
look alike are still read as written; objects are sorted by kind and apiVersion through a two-level
map, so a known kind of an unknown API group is still ignored."""

from __future__ import annotations

from typing import Any

import pytest

from kai.model import PodStatus
from kai.snapshot.builder import ConversionMemo, build_snapshot
from tests.scenario import device_request, node, pod, podgroup, queue, resource_claim, run, with_claims

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def pods_by_name(result: Any) -> dict[str, Any]:
    return {p.name: p for pg in result.snapshot.podgroups.values() for p in pg.pods}


def placed(objects: list[dict[str, Any]]) -> dict[str, tuple[str, str | None]]:
    out = run(objects)
    return {k: (v["status"], v["node"]) for k, v in out["pods"].items()}


def one_part(part: str) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str | None]]]:
    """A scenario whose pod `p` has `part` as its spec's only rarer part, and where `p` goes because of it.
    Nodes n1 and n2 (4 GPUs each); a plain pod `ref` beside it shows where pods go without the part."""
    nodes = [node("n1", gpus=4, labels={"zone": "a"}), node("n2", gpus=4, labels={"zone": "b"})]
    ref = pod("ref", queue="q", gpus=4)
    target = pod("p", queue="q", gpus=1)
    spec = target["spec"]
    expected = {"ns/ref": ("Running", "n1")}
    if part == "nodeSelector":
        spec["nodeSelector"] = {"zone": "b"}
        expected["ns/p"] = ("Running", "n2")
    elif part == "tolerations":  # only p tolerates n1's taint
        nodes = [node("n1", gpus=4, taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}])]
        ref = pod("ref", queue="q", gpus=1)
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
        expected = {"ns/ref": ("Pending", None), "ns/p": ("Running", "n1")}
    elif part == "affinity":
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
                }
            }
        }
        expected["ns/p"] = ("Running", "n2")
    elif part == "schedulingGates":
        spec["schedulingGates"] = [{"name": "example.com/wait"}]
        expected["ns/p"] = ("Gated", None)
    elif part == "initContainers":  # an init container of 8 GPUs: more than a node has
        spec["initContainers"] = [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]
        expected["ns/p"] = ("Pending", None)
    elif part == "overhead":  # 100 CPUs of overhead: more than a node has
        spec["overhead"] = {"cpu": "100"}
        expected["ns/p"] = ("Pending", None)
    else:
        raise AssertionError(part)
    if part in ("initContainers", "overhead"):  # a pod whose one container is written as p's: its requests
        expected["ns/twin"] = ("Running", "n2")  # are parsed before p's, which must not be taken for them
        return [*nodes, queue("q"), ref, pod("twin", queue="q", gpus=1), target], expected
    return [*nodes, queue("q"), ref, target], expected


@pytest.mark.parametrize(
    "part",
    ["nodeSelector", "tolerations", "affinity", "schedulingGates", "initContainers", "overhead"],
)
def test_a_pod_with_one_rarer_spec_part_has_it_read(part: str) -> None:
    objects, expected = one_part(part)
    assert placed(objects) == expected


def test_a_pod_with_only_a_priority_class_has_its_priority() -> None:
    target = pod("p", queue="q", priority_class="urgent")
    urgent = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"}}
    urgent["value"] = 1000
    result = build_snapshot([node("n1"), queue("q"), urgent, target], NOW)
    assert result.problems == []
    job = result.snapshot.podgroups["ns/pg-p"]
    assert (job.priority_class_name, job.priority) == ("urgent", 1000)
    assert pods_by_name(result)["p"].priority_class_name == "urgent"


def test_a_pod_with_only_volumes_has_its_claims() -> None:
    target = pod("p", queue="q")
    target["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
    ]
    converted = pods_by_name(build_snapshot([node("n1"), queue("q"), target], NOW))
    assert converted["p"].claims == ("data", "p-scratch")


@pytest.mark.parametrize("with_memo", [False, True])
def test_a_pod_with_only_resource_claims_has_them_attached(with_memo: bool) -> None:
    objects = [
        node("n1"),
        queue("q"),
        resource_claim("gpu-claim", device_request()),
        with_claims(pod("p", queue="q"), claims={"gpu": "gpu-claim"}),
        pod("plain", queue="q"),
    ]
    memo = ConversionMemo() if with_memo else None
    for _ in range(2 if with_memo else 1):  # with the memo, the second build reuses the conversion
        converted = pods_by_name(build_snapshot(objects, NOW, memo=memo))
        assert [(c.name, c.claim) for c in converted["p"].resource_claims] == [("gpu", "ns/gpu-claim")]
        assert converted["plain"].resource_claims == ()


def test_a_pod_written_as_others_but_sharing_a_gpu_gets_its_own_gpu_request() -> None:
    """Pods whose one container is written alike share their requests and, without GPU-sharing
    annotations, their GPU request; one with a gpu-fraction annotation has its own."""
    alike = [pod(f"p{i}", queue="q", cpu="1") for i in range(3)]
    shared = pod("shared", queue="q", cpu="1", annotations={"gpu-fraction": "0.5"})
    after = pod("after", queue="q", cpu="1")
    converted = pods_by_name(build_snapshot([node("n1"), queue("q"), *alike, shared, after], NOW))
    assert [(converted[n].gpu.whole, converted[n].gpu.fraction) for n in ("p0", "p2", "shared", "after")] == [
        (0, 0.0),
        (0, 0.0),
        (0, 0.5),
        (0, 0.0),
    ]
    assert converted["shared"].requests is converted["p0"].requests


def test_nodes_of_one_pool_share_their_allocatable_but_a_lookalike_value_is_its_own_problem() -> None:
    pool = [node(f"n{i}", gpus=2) for i in range(3)]
    counted = node("counted", gpus=0, extra={"example.com/dev": 1})  # a number: read, not kept
    counted["status"]["allocatable"] = {"example.com/dev": 1}
    flagged = node("flagged", gpus=0)
    flagged["status"]["allocatable"] = {"example.com/dev": True}  # equals 1, and is no quantity
    result = build_snapshot([*pool, counted, flagged, queue("q")], NOW)
    assert [(p.obj, p.field, p.message) for p in result.problems] == [
        ("Node flagged", "status.allocatable.example.com/dev", "is not a quantity: True")
    ]
    nodes = {n.name: n for n in result.snapshot.nodes}
    assert set(nodes) == {"n0", "n1", "n2", "counted"}
    assert nodes["counted"].allocatable.amounts == {"example.com/dev": 1.0, "pods": 110.0}
    assert nodes["n0"].allocatable.amounts == {
        "cpu": 64000.0,
        "memory": 512 * 2.0**30,
        "pods": 110.0,
        "nvidia.com/gpu": 2.0,
    }
    # and each node of the pool still takes its own pods
    jobs = [pod(f"j{i}", queue="q", gpus=2) for i in range(4)]
    assert sorted(placed([*pool, queue("q"), *jobs]).values(), key=str) == [
        ("Pending", None),
        ("Running", "n0"),
        ("Running", "n1"),
        ("Running", "n2"),
    ]


def test_podgroup_specs_that_only_look_alike_are_read_as_written() -> None:
    """A queue named "1": a spec naming it as the number 1 reads as "1"; one naming True reads as "True"
    (no such queue), though 1 == True."""
    number = podgroup("number", "q")
    number["spec"]["queue"] = 1
    boolean = podgroup("boolean", "q")
    boolean["spec"]["queue"] = True
    again = podgroup("again", "q")
    again["spec"]["queue"] = 1
    result = build_snapshot([node("n1"), queue("1"), number, boolean, again], NOW)
    assert [(p.obj, p.message) for p in result.problems] == [
        ("PodGroup ns/boolean", "names queue 'True', which does not exist")
    ]
    assert {k: g.queue for k, g in result.snapshot.podgroups.items()} == {"ns/again": "1", "ns/number": "1"}


def test_a_known_kind_of_another_api_group_is_still_ignored() -> None:
    foreign = pod("foreign", queue="q")
    foreign["apiVersion"] = "example.com/v1"
    late = podgroup("late", "q")
    late["apiVersion"] = "scheduling.run.ai/v2"  # another version of a kind already seen: read
    result = build_snapshot([node("n1"), queue("q"), pod("p", queue="q"), foreign, podgroup("g", "q"), late], NOW)
    assert result.problems == []
    assert "ignored 1 object(s) of kind Pod (example.com/v1)" in result.snapshot.warnings
    assert set(result.snapshot.podgroups) == {"ns/g", "ns/late", "ns/pg-p"}
    assert pods_by_name(result)["p"].status is PodStatus.PENDING
