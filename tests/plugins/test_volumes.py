"""Persistent volume claims (kube-scheduler's VolumeBinding, with KAI's default of no storage-capacity
scheduling): a missing claim, an unbound Immediate claim, a volume's node affinity."""

from __future__ import annotations

from typing import Any

from tests.scenario import bound, node, pod, podgroup, queue, run

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def nodes() -> list[dict[str, Any]]:
    return [
        node("n0", gpus=2, labels={HOST: "n0", ZONE: "za"}),
        node("n1", gpus=2, labels={HOST: "n1", ZONE: "zb"}),
    ]


def using(name: str, *claims: str, **kw: Any) -> list[dict[str, Any]]:
    obj = pod(name, group=name, gpus=1, **kw)
    obj["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return [podgroup(name, "q"), obj]


def claim(name: str, volume: str = "", storage_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
    }


def volume(name: str, key: str = "", values: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "hostPath": {"path": "/d"},
    }
    if key:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": values}]}]
            }
        }
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def storage_class(name: str, mode: str, default: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": "csi.example.com",
        "volumeBindingMode": mode,
    }


def why(result: dict[str, Any], group: str) -> str:
    return result["podGroups"][f"ns/{group}"]["message"]


def test_a_pod_whose_claim_does_not_exist_waits_and_the_message_names_the_claim() -> None:
    result = run([*nodes(), queue("q"), *using("p", "data")], rounds=2)
    assert bound(result) == {} and bound(result, 2) == {}
    assert 'persistentvolumeclaim "data" not found' in why(result, "p")


def test_a_claim_in_another_namespace_is_not_the_pods() -> None:
    other = claim("data", volume="v")
    other["metadata"]["namespace"] = "other"
    result = run([*nodes(), queue("q"), other, volume("v"), *using("p", "data")])
    assert 'persistentvolumeclaim "data" not found' in why(result, "p")


def test_a_bound_volumes_node_affinity_restricts_the_pod() -> None:
    objects = [*nodes(), queue("q"), claim("data", volume="v"), volume("v", HOST, ["n1"])]
    objects += [podgroup("busy", "q"), pod("busy", group="busy", gpus=1, node="n0")]  # binpack would pick n0
    objects += using("p", "data")
    assert bound(run(objects)) == {"ns/p": "n1"}


def test_a_volume_in_a_zone_with_no_room_leaves_the_pod_pending_with_the_reason() -> None:
    objects = [*nodes(), queue("q"), claim("data", volume="v"), volume("v", ZONE, ["zb"])]
    objects += [podgroup("full", "q", priority_class="build"), pod("full", group="full", gpus=2, node="n1")]
    objects += using("p", "data")
    result = run(objects)
    assert bound(result) == {}
    assert "1 node(s) had volume node affinity conflict" in why(result, "p")


def test_a_claim_bound_to_a_volume_that_does_not_exist() -> None:
    result = run([*nodes(), queue("q"), claim("data", volume="gone"), *using("p", "data")])
    assert bound(result) == {}
    assert "2 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)" in why(result, "p")


def test_an_unbound_immediate_claim_waits_for_its_volume() -> None:
    for objects in (
        [claim("data", storage_class="fast"), storage_class("fast", "Immediate")],
        [claim("data")],  # no class and no default class: bound immediately (by the volume controller)
    ):
        result = run([*nodes(), queue("q"), *objects, *using("p", "data")])
        assert bound(result) == {}
        assert "unbound immediate PersistentVolumeClaims" in why(result, "p")


def test_an_unbound_wait_for_first_consumer_claim_is_provisioned_where_the_pod_goes() -> None:
    for objects in (
        [claim("data", storage_class="late"), storage_class("late", "WaitForFirstConsumer")],
        [claim("data"), storage_class("late", "WaitForFirstConsumer", default=True)],  # the default class
    ):
        result = run([*nodes(), queue("q"), *objects, *using("p", "data")])
        assert set(bound(result)) == {"ns/p"}


def test_a_claim_naming_a_missing_storage_class_waits() -> None:
    result = run([*nodes(), queue("q"), claim("data", storage_class="nope"), *using("p", "data")])
    assert bound(result) == {}
    assert 'storageclass.storage.k8s.io "nope"' in why(result, "p")


def test_volume_kinds_the_api_server_rejects_are_refused_naming_the_field() -> None:
    from kai.api.errors import InvalidInput

    bad_class = storage_class("odd", "Sometimes")
    bad_volume = volume("v", HOST, ["n0"])
    bad_volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] = "Near"
    try:
        run([*nodes(), queue("q"), bad_class, bad_volume])
    except InvalidInput as err:
        text = str(err)
    else:
        raise AssertionError("refused nothing")
    assert "StorageClass odd: volumeBindingMode" in text
    assert "PersistentVolume v: spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions" in text


def test_a_source_that_does_not_list_claims_checks_none() -> None:
    """A source that does not read claims (storage_listed False) says so, and claims are then not checked."""
    from kai.cycle import run_cycle
    from kai.framework.config import SchedulerConfig
    from kai.snapshot.builder import build_snapshot

    result = build_snapshot([*nodes(), queue("q"), *using("p", "data")], now=0.0)
    assert not result.problems
    decisions = run_cycle(result.snapshot, SchedulerConfig())
    assert [b.pod for b in decisions.bindings] == ["ns/p"]
