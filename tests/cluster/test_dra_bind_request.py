"""The BindRequest of a pod with DRA claims carries each claim's allocation as the binder writes it:
a resource.k8s.io/v1 AllocationResult with the devices, the class's and the claim's configuration,
and the node the node-local devices bind it to."""

from __future__ import annotations

from pathlib import Path

from kai.api.timeutil import parse_time
from kai.cluster.status import usage
from kai.cluster.writers import bind_request_body
from kai.framework.config import SchedulerConfig
from kai.model import GPU
from kai.sim.simulate import simulate
from kai.snapshot.loader import load_snapshot
from tests.scenario import NOW, device_class, node, pod, queue, resource_claim, resource_slice, with_claims, write


def test_the_bind_request_carries_the_allocation(tmp_path: Path) -> None:
    klass = device_class("gpu.nvidia.com")
    klass["spec"]["config"] = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": "none"}}}]
    claim = resource_claim("c", queue="q")
    claim["spec"]["devices"]["config"] = [
        {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {}}}
    ]
    claimer = with_claims(pod("p", queue="q", cpu="1"), {"gpu": "c"})
    claimer["metadata"]["uid"] = "uid-p"
    objects = [node("n1", gpus=0), queue("q"), klass, resource_slice("n1", 1), claim, claimer]
    snapshot = load_snapshot([write(objects, tmp_path)], parse_time(NOW))
    result = simulate(snapshot, SchedulerConfig(), 1)
    (binding,) = result.rounds[0].decisions.bindings
    body = bind_request_body(binding, claimer, None, 0, snapshot)
    (entry,) = body["spec"]["resourceClaimAllocations"]
    assert entry["name"] == "gpu"
    allocation = entry["allocation"]
    assert allocation["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}
    ]
    assert [c["source"] for c in allocation["devices"]["config"]] == ["FromClass", "FromClaim"]
    assert allocation["devices"]["config"][0]["requests"] == ["gpu"]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    ]


def test_the_pod_group_status_counts_the_claims_gpus(tmp_path: Path) -> None:
    claim = resource_claim("c", queue="q")
    objects = [node("n1", gpus=0), queue("q"), device_class(), resource_slice("n1", 2), claim]
    objects.append(with_claims(pod("p", queue="q", cpu="1", node="n1"), {"gpu": "c"}))
    snapshot = load_snapshot([write(objects, tmp_path)], parse_time(NOW))
    (pg,) = snapshot.podgroups.values()
    assert usage(pg, set(), set()).allocated.get(GPU) == 1.0
