"""Dynamic Resource Allocation: a pod's resource claims are satisfied by devices its node can use
(ResourceSlices), selected by DeviceClass and request CEL selectors; claims are shared, pinned once
allocated, freed by evictions; DRA GPUs count in queue usage and fair share as KAI books them. Through
the contract (`kai simulate` JSON), expectations worked out from the rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import SchedulerConfig
from kai.framework.placement import Placement, find_node
from kai.framework.statement import Statement
from kai.snapshot.loader import load_snapshot
from tests.scenario import (
    NOW,
    bound,
    claim_template,
    device_class,
    device_request,
    gpu_device,
    node,
    pod,
    queue,
    resource_claim,
    resource_slice,
    run,
    running_on,
    with_claims,
    write,
)

GPU = "gpu.nvidia.com"
QUOTA = {"quota": 1, "overQuotaWeight": 1, "limit": -1}


def cluster(*slices: dict[str, Any], nodes: tuple[str, ...] = ("n1", "n2", "n3")) -> list[dict[str, Any]]:
    """Nodes without device-plugin GPUs, one queue `q`, the gpu.nvidia.com class, and the slices."""
    return [*(node(n, gpus=0) for n in nodes), queue("q"), device_class(GPU), *slices]


def claimer(name: str, claims: dict[str, str] | None = None, templates: dict[str, str] | None = None, **kw: Any):
    return with_claims(pod(name, queue=kw.pop("q", "q"), cpu=kw.pop("cpu", "1"), **kw), claims, templates)


def message(out: dict[str, Any], pod_name: str) -> str:
    return out["podGroups"][f"ns/pg-{pod_name}"]["message"]


def claims_of(out: dict[str, Any], pod_key: str, round_number: int = 1) -> list[dict[str, Any]]:
    entry = next(b for b in out["rounds"][round_number - 1]["bound"] if b["pod"] == pod_key)
    return entry.get("resourceClaims", [])


# -- where a claim fits ----------------------------------------------------------------------------
def test_a_claim_that_fits_only_one_node_goes_there_with_that_nodes_device() -> None:
    objects = cluster(resource_slice("n2", 1), resource_slice("n3", 2, driver="nic.example.com"))
    objects += [resource_claim("c", queue="q"), claimer("p", {"gpu": "c"})]
    out = run(objects)
    assert bound(out) == {"ns/p": "n2"}
    assert claims_of(out, "ns/p") == [{"name": "gpu", "claim": "ns/c", "devices": [f"{GPU}/n2/gpu-0"]}]


def test_a_pod_without_claims_is_untouched_by_slices() -> None:
    out = run([*cluster(resource_slice("n1", 1)), pod("plain", queue="q", cpu="1")])
    assert out["pods"]["ns/plain"]["status"] == "Running"
    assert "resourceClaims" not in out["rounds"][0]["bound"][0]


def test_a_claim_asking_more_devices_than_any_node_has_waits_naming_the_claim() -> None:
    objects = cluster(resource_slice("n1", 2), resource_slice("n2", 3))
    objects += [resource_claim("big", device_request(count=4), queue="q"), claimer("p", {"gpu": "big"})]
    out = run(objects, rounds=2)
    assert out["pods"]["ns/p"]["status"] == "Pending"
    assert "ns/big request gpu: 4 devices of class gpu.nvidia.com" in message(out, "p")
    assert "the most any node has is 3" in message(out, "p")


def test_devices_taken_by_an_allocated_claim_are_not_given_again() -> None:
    """n1 has 2 GPUs, one allocated to a running pod's claim: a 2-GPU claim goes to n2, a 1-GPU one fits n1."""
    objects = cluster(resource_slice("n1", 2), resource_slice("n2", 2), nodes=("n1", "n2"))
    objects += [
        resource_claim("held", queue="q", allocated={"n1": ["gpu-0"]}, reserved_for=("old",)),
        claimer("old", {"gpu": "held"}, node="n1"),
        resource_claim("two", device_request(count=2), queue="q"),
        claimer("p", {"gpu": "two"}),
    ]
    out = run(objects)
    assert bound(out) == {"ns/p": "n2"}
    assert claims_of(out, "ns/p")[0]["devices"] == [f"{GPU}/n2/gpu-0", f"{GPU}/n2/gpu-1"]


def test_every_node_short_of_free_devices_is_said_in_the_message() -> None:
    objects = cluster(resource_slice("n1", 1), nodes=("n1",))
    objects += [resource_claim("a", queue="q"), claimer("pa", {"gpu": "a"}, created="2025-12-31T00:00:00Z")]
    objects += [resource_claim("b", queue="q"), claimer("pb", {"gpu": "b"}, created="2025-12-31T01:00:00Z")]
    out = run(objects)
    assert running_on(out) == {"ns/pa": "n1"}
    assert "1 node(s) cannot allocate all claims (no free devices for resource claim ns/b" in message(out, "pb")


# -- shared and allocated claims -------------------------------------------------------------------
def test_two_pods_sharing_a_claim_land_together_on_its_devices_and_each_books_its_gpu() -> None:
    objects = cluster(resource_slice("n1", 1), resource_slice("n2", 1), nodes=("n1", "n2"))
    objects += [resource_claim("shared", queue="q"), claimer("a", {"gpu": "shared"}), claimer("b", {"gpu": "shared"})]
    out = run(objects)
    placed = bound(out)
    assert set(placed) == {"ns/a", "ns/b"} and placed["ns/a"] == placed["ns/b"]
    assert claims_of(out, "ns/a") == claims_of(out, "ns/b")
    assert len(claims_of(out, "ns/a")[0]["devices"]) == 1
    # KAI books a claim's GPUs in every pod that uses it (kai simulate reports the last round's opening)
    out2 = run(objects, rounds=2)
    assert out2["queues"]["q"]["allocated"]["gpu"] == 2.0


def test_an_allocated_claim_pins_its_pod_to_the_allocations_node() -> None:
    objects = cluster(resource_slice("n1", 1), resource_slice("n2", 4), nodes=("n1", "n2"))
    objects += [resource_claim("c", queue="q", allocated={"n1": ["gpu-0"]}), claimer("p", {"gpu": "c"})]
    out = run(objects)
    assert bound(out) == {"ns/p": "n1"}
    assert claims_of(out, "ns/p")[0]["devices"] == [f"{GPU}/n1/gpu-0"]


def test_a_pinned_pod_whose_node_is_full_waits_saying_where_its_claim_is() -> None:
    objects = cluster(resource_slice("n1", 1), resource_slice("n2", 4), nodes=("n1", "n2"))
    objects[0] = node("n1", gpus=0, cpu="1")
    objects += [resource_claim("c", queue="q", allocated={"n1": ["gpu-0"]}), claimer("p", {"gpu": "c"}, cpu="2")]
    out = run(objects)
    assert out["pods"]["ns/p"]["status"] == "Pending"
    assert "are not where resource claim ns/c is allocated" in message(out, "p")


def test_a_shared_gpu_claim_needs_the_queue_label_of_the_pods_queue() -> None:
    objects = [*cluster(resource_slice("n1", 2), nodes=("n1",)), queue("other")]
    objects += [resource_claim("nolabel"), claimer("a", {"gpu": "nolabel"})]
    objects += [resource_claim("wrong", queue="other"), claimer("b", {"gpu": "wrong"})]
    out = run(objects)
    assert bound(out) == {}
    assert "DRA claim nolabel is a shared GPU claim but does not have a queue label" in message(out, "a")
    assert "expected queue: q, claim queue label: other" in message(out, "b")


def test_a_claim_at_its_consumer_limit_takes_no_more_pods() -> None:
    users = tuple(f"u{i}" for i in range(256))
    objects = cluster(resource_slice("n1", 1), nodes=("n1",))
    objects += [
        resource_claim("c", queue="q", allocated={"n1": ["gpu-0"]}, reserved_for=users),
        claimer("p", {"gpu": "c"}),
    ]
    out = run(objects)
    assert "has reached its maximum number of consumers (256)" in message(out, "p")


# -- templates -------------------------------------------------------------------------------------
def test_pods_of_a_template_get_a_claim_each_and_wait_when_devices_run_out() -> None:
    objects = cluster(resource_slice("n1", 1), resource_slice("n2", 1), nodes=("n1", "n2"))
    objects.append(claim_template("one-gpu"))
    objects += [claimer(f"p{i}", templates={"gpu": "one-gpu"}, created=f"2025-12-2{i}T00:00:00Z") for i in range(3)]
    out = run(objects)
    assert set(bound(out)) == {"ns/p0", "ns/p1"} and bound(out)["ns/p0"] != bound(out)["ns/p1"]
    assert claims_of(out, "ns/p0")[0]["claim"] == "ns/p0-gpu"  # the claim the controller makes for it
    assert out["pods"]["ns/p2"]["status"] == "Pending"
    assert "no free devices for resource claim ns/p2-gpu" in message(out, "p2")


def test_a_template_claim_the_pod_already_has_is_used() -> None:
    claim = resource_claim("p-gpu-x7k2q", queue=None, allocated={"n2": ["gpu-0"]})
    claim["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "apiVersion": "v1", "uid": "u"}]
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    objects = [*cluster(resource_slice("n1", 1), resource_slice("n2", 1), nodes=("n1", "n2")), claim_template("t")]
    objects += [claim, claimer("p", templates={"gpu": "t"})]
    out = run(objects)
    assert bound(out) == {"ns/p": "n2"} and claims_of(out, "ns/p")[0]["claim"] == "ns/p-gpu-x7k2q"


# -- allocation modes, selectors, constraints ---------------------------------------------------------
def test_allocation_mode_all_takes_every_device_of_a_node_where_none_is_taken() -> None:
    objects = cluster(resource_slice("n1", 2), resource_slice("n2", 3), nodes=("n1", "n2"))
    objects += [
        resource_claim("held", queue="q", allocated={"n1": ["gpu-1"]}),
        claimer("old", {"gpu": "held"}, node="n1"),
    ]
    objects += [resource_claim("all", device_request(mode="All"), queue="q"), claimer("p", {"gpu": "all"})]
    out = run(objects)
    assert bound(out) == {"ns/p": "n2"}
    assert claims_of(out, "ns/p")[0]["devices"] == [f"{GPU}/n2/gpu-{i}" for i in range(3)]


def test_request_selectors_on_string_int_and_capacity() -> None:
    slices = [
        resource_slice("n1", [gpu_device("a", "A100", "40Gi", index=0), gpu_device("b", "A100", "40Gi", index=1)]),
        resource_slice("n2", [gpu_device("c", "H100", "80Gi", index=0)]),
        resource_slice("n3", [gpu_device("d", "H100", "80Gi", index=0), gpu_device("e", "H100", "80Gi", index=1)]),
    ]
    by_model = device_request(selectors=('device.attributes["gpu.nvidia.com"].model == "H100"',))
    by_memory = device_request(selectors=('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("50Gi")) > 0',))
    by_index = device_request(selectors=('device.attributes["gpu.nvidia.com"].index == 1',), count=1)
    small = device_request(selectors=('device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("64Gi"))',))
    objects = cluster(*slices)
    objects += [resource_claim("m", by_model, queue="q"), claimer("pm", {"gpu": "m"}, created="2025-12-30T00:00:00Z")]
    objects += [resource_claim("x", by_memory, queue="q"), claimer("px", {"gpu": "x"}, created="2025-12-30T01:00:00Z")]
    objects += [resource_claim("i", by_index, queue="q"), claimer("pi", {"gpu": "i"}, created="2025-12-30T02:00:00Z")]
    objects += [resource_claim("s", small, queue="q"), claimer("ps", {"gpu": "s"}, created="2025-12-30T03:00:00Z")]
    out = run(objects)
    placed = bound(out)
    assert placed["ns/pm"] in ("n2", "n3") and placed["ns/px"] in ("n2", "n3")
    assert placed["ns/pi"] in ("n1", "n3") and claims_of(out, "ns/pi")[0]["devices"][0].split("/")[-1] in ("b", "e")
    assert placed["ns/ps"] == "n1"


def test_device_class_selectors_apply_to_every_request_of_the_class() -> None:
    h100 = device_class(
        "h100", 'device.driver == "gpu.nvidia.com"', 'device.attributes["gpu.nvidia.com"].model == "H100"'
    )
    slices = [resource_slice("n1", [gpu_device("a", "A100")]), resource_slice("n2", [gpu_device("b", "H100")])]
    objects = [*cluster(*slices, nodes=("n1", "n2")), h100]
    objects += [resource_claim("c", device_request(device_class_name="h100"), queue="q"), claimer("p", {"gpu": "c"})]
    out = run(objects)
    assert bound(out) == {"ns/p": "n2"}


def test_a_missing_class_or_a_selector_that_does_not_compile_keeps_the_pod_pending_with_the_reason() -> None:
    objects = cluster(resource_slice("n1", 1), nodes=("n1",))
    objects += [
        resource_claim("c", device_request(device_class_name="tpu.example.com"), queue="q"),
        claimer("a", {"gpu": "c"}),
    ]
    objects += [
        resource_claim("d", device_request(selectors=("device.driver ==",)), queue="q"),
        claimer("b", {"gpu": "d"}),
    ]
    out = run(objects)
    assert "device class tpu.example.com does not exist" in message(out, "a")
    assert "does not compile" in message(out, "b")


def test_a_selector_naming_a_missing_attribute_matches_no_device() -> None:
    objects = cluster(resource_slice("n1", 1), nodes=("n1",))
    request = device_request(selectors=('device.attributes["gpu.nvidia.com"].vendor == "x"',))
    objects += [resource_claim("c", request, queue="q"), claimer("p", {"gpu": "c"})]
    out = run(objects)
    assert out["pods"]["ns/p"]["status"] == "Pending"
    assert "no node has that many (the most any node has is 0)" in message(out, "p")


def test_a_match_attribute_constraint_keeps_a_claims_devices_alike() -> None:
    slices = [
        resource_slice("n1", [gpu_device("a", "A100"), gpu_device("b", "H100")]),
        resource_slice("n2", [gpu_device("c", "H100"), gpu_device("d", "H100")]),
    ]
    constraint = [{"matchAttribute": "gpu.nvidia.com/model"}]
    objects = cluster(*slices, nodes=("n1", "n2"))
    objects += [
        resource_claim("c", device_request(count=2), queue="q", constraints=constraint),
        claimer("p", {"gpu": "c"}),
    ]
    assert bound(run(objects)) == {"ns/p": "n2"}


def test_two_requests_of_one_claim_get_distinct_devices() -> None:
    """The first request could take either device; the second only `b`: the search backtracks."""
    slices = [resource_slice("n1", [gpu_device("a", "A100"), gpu_device("b", "H100")])]
    anything = device_request("any")
    h100 = device_request("h100", selectors=('device.attributes["gpu.nvidia.com"].model == "H100"',))
    objects = [
        *cluster(*slices, nodes=("n1",)),
        resource_claim("c", anything, h100, queue="q"),
        claimer("p", {"gpu": "c"}),
    ]
    out = run(objects)
    assert bound(out) == {"ns/p": "n1"}
    assert sorted(claims_of(out, "ns/p")[0]["devices"]) == [f"{GPU}/n1/a", f"{GPU}/n1/b"]


# -- queue accounting ---------------------------------------------------------------------------------
def test_dra_gpus_count_in_the_fair_share_total_and_in_queue_usage() -> None:
    objects = cluster(resource_slice("n1", 4), nodes=("n1",))
    objects += [resource_claim(f"c{i}", device_request(count=2), queue="q") for i in range(3)]
    objects += [claimer(f"p{i}", {"gpu": f"c{i}"}) for i in range(3)]
    out = run(objects, rounds=2)
    assert out["queues"]["q"]["fairShare"]["gpu"] == 4.0  # the slice's 4 devices; 6 are asked for
    assert out["queues"]["q"]["allocated"]["gpu"] == 4.0
    assert sum(v["status"] == "Running" for v in out["pods"].values()) == 2


def test_reclaim_frees_a_claimed_gpu_for_the_queue_below_its_quota() -> None:
    """Queue `greedy` (no quota) holds the only DRA GPU; queue `owed` (quota 1) asks for it: reclaim
    evicts the holder, whose claim is freed, and the claimant gets that device in the next round."""
    objects = [
        node("n1", gpus=0),
        queue("greedy"),
        queue("owed", gpu=QUOTA),
        device_class(GPU),
        resource_slice("n1", 1),
    ]
    objects += [
        resource_claim("held", queue="greedy", allocated={"n1": ["gpu-0"]}, reserved_for=("holder",)),
        claimer("holder", {"gpu": "held"}, q="greedy", node="n1"),
        resource_claim("want", queue="owed"),
        claimer("claimant", {"gpu": "want"}, q="owed"),
    ]
    out = run(objects, rounds=2)
    first = out["rounds"][0]
    assert [(e["pod"], e["action"]) for e in first["evicted"]] == [("ns/holder", "reclaim")]
    assert [p["pod"] for p in first["pipelined"]] == ["ns/claimant"]
    assert bound(out, 2) == {"ns/claimant": "n1"}
    assert claims_of(out, "ns/claimant", 2)[0]["devices"] == [f"{GPU}/n1/gpu-0"]
    assert out["pods"]["ns/holder"]["status"] == "Pending"


def test_an_undone_eviction_gives_the_claim_its_devices_back(tmp_path: Path) -> None:
    """The statement's undo: evicting the holder frees its device for the waiting pod; rolling the
    eviction back takes it again."""
    objects = cluster(resource_slice("n1", 1), nodes=("n1",))
    objects += [
        resource_claim("held", queue="q", allocated={"n1": ["gpu-0"]}, reserved_for=("holder",)),
        claimer("holder", {"gpu": "held"}, node="n1"),
        resource_claim("want", queue="q"),
        claimer("waiting", {"gpu": "want"}),
    ]
    snapshot = load_snapshot([write(objects, tmp_path)], parse_time(NOW))
    ssn, _ = open_session(snapshot, SchedulerConfig())
    pods = {p.name: p for job in ssn.jobs.values() for p in job.pods}
    assert find_node(ssn, pods["waiting"]) is None
    stmt = Statement(ssn)
    mark = stmt.checkpoint()
    stmt.evict(pods["holder"], "reclaim")
    assert find_node(ssn, pods["waiting"]) == Placement(0, pipelined=True)  # it waits for the holder to go
    stmt.pipeline(pods["waiting"], "n1")
    stmt.rollback(mark)
    assert find_node(ssn, pods["waiting"]) is None
    stmt.evict(pods["holder"], "reclaim")  # and again: the same device is free once more
    assert find_node(ssn, pods["waiting"]) == Placement(0, pipelined=True)


def test_the_v1beta1_shapes_are_read_too() -> None:
    """v1beta1: a request's class beside its name, a device's attributes under `basic`."""
    klass = device_class(GPU)
    klass["apiVersion"] = "resource.k8s.io/v1beta1"
    sl = resource_slice("n2", 0)
    sl["apiVersion"] = "resource.k8s.io/v1beta1"
    sl["spec"]["devices"] = [{"name": "g0", "basic": {"attributes": {"model": {"string": "H100"}}}}]
    claim = resource_claim("c", queue="q")
    claim["apiVersion"] = "resource.k8s.io/v1beta1"
    selector = [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].model == "H100"'}}]
    claim["spec"]["devices"]["requests"] = [{"name": "gpu", "deviceClassName": GPU, "count": 1, "selectors": selector}]
    objects = [node("n1", gpus=0), node("n2", gpus=0), queue("q"), klass, sl, claim, claimer("p", {"gpu": "c"})]
    out = run(objects)
    assert bound(out) == {"ns/p": "n2"} and claims_of(out, "ns/p")[0]["devices"] == [f"{GPU}/n2/g0"]


def test_a_claim_for_another_kind_of_device_books_no_gpu() -> None:
    nic = device_class("nic.example.com")
    objects = [*cluster(resource_slice("n1", 2, driver="nic.example.com"), nodes=("n1",)), nic]
    request = device_request(device_class_name="nic.example.com")
    objects += [resource_claim("c", request), claimer("p", {"nic": "c"})]  # not a GPU claim: no queue label needed
    out = run(objects, rounds=2)
    assert out["pods"]["ns/p"]["status"] == "Running"
    assert out["queues"]["q"]["allocated"]["gpu"] == 0.0 and out["queues"]["q"]["fairShare"]["gpu"] == 0.0


def test_preempt_frees_a_lower_priority_pods_claimed_gpu_in_its_queue() -> None:
    """One DRA GPU, held by a `train` pod (priority 50); a `build-preemptible` pod (75) of the same queue
    asks for it: preempt evicts the holder, and the claimant gets the device in the next round. (A
    non-preemptible claimant would not: its claim's GPU counts against the queue's quota of 0.)"""
    objects = cluster(resource_slice("n1", 1), nodes=("n1",))
    objects += [
        resource_claim("held", queue="q", allocated={"n1": ["gpu-0"]}, reserved_for=("holder",)),
        claimer("holder", {"gpu": "held"}, node="n1", priority_class="train"),
        resource_claim("want", queue="q"),
        claimer("urgent", {"gpu": "want"}, priority_class="build-preemptible"),
    ]
    out = run(objects, rounds=2)
    assert [(e["pod"], e["action"]) for e in out["rounds"][0]["evicted"]] == [("ns/holder", "preempt")]
    assert bound(out, 2) == {"ns/urgent": "n1"}
    assert claims_of(out, "ns/urgent", 2)[0]["devices"] == [f"{GPU}/n1/gpu-0"]


def test_devices_of_a_slice_for_every_node_can_be_used_anywhere_once() -> None:
    """A network-attached device (`allNodes`) serves a pod on any node, and only one claim at a time;
    a slice with a node selector serves the nodes it selects."""
    shared = resource_slice("n1", 1, driver="gpu.nvidia.com", name="fabric")
    del shared["spec"]["nodeName"]
    shared["spec"]["allNodes"] = True
    shared["spec"]["pool"]["name"] = "fabric"
    zoned = resource_slice("n1", [gpu_device("z0")], name="zoned")
    del zoned["spec"]["nodeName"]
    zoned["spec"]["pool"]["name"] = "zone-b"
    zoned["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
    }
    objects = [node("n1", gpus=0), node("n2", gpus=0, labels={"zone": "b"}), queue("q"), device_class(GPU)]
    objects += [shared, zoned]
    h100 = device_request(selectors=('device.attributes["gpu.nvidia.com"].model == "H100"',))
    objects += [resource_claim(f"c{i}", h100, queue="q") for i in range(3)]
    objects += [claimer(f"p{i}", {"gpu": f"c{i}"}, created=f"2025-12-2{i}T00:00:00Z") for i in range(3)]
    out = run(objects)
    placed = bound(out)
    assert len(placed) == 2 and out["pods"]["ns/p2"]["status"] == "Pending"  # two devices for three claims
    devices = {claims_of(out, p)[0]["devices"][0]: n for p, n in placed.items()}
    assert set(devices) == {f"{GPU}/fabric/gpu-0", f"{GPU}/zone-b/z0"}
    assert devices[f"{GPU}/zone-b/z0"] == "n2"
