"""Host ports (kube-scheduler's NodePorts): one pod per node per (protocol, host IP, port), where
0.0.0.0 overlaps every IP; pods placed earlier in the cycle count."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scenario import bound, node, pod, podgroup, queue, run


def with_ports(obj: dict[str, Any], *ports: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["containers"][0]["ports"] = [dict(p) for p in ports]
    return obj


def solo(name: str, *ports: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    return [podgroup(name, "q", created=kw.get("created")), with_ports(pod(name, group=name, **kw), *ports)]


@pytest.mark.parametrize(
    ("theirs", "mine", "conflict"),
    [
        ({"containerPort": 80, "hostPort": 8080}, {"containerPort": 80, "hostPort": 8080}, True),
        ({"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}, {"containerPort": 80, "hostPort": 8080}, False),
        ({"containerPort": 80, "hostPort": 8080}, {"containerPort": 80, "hostPort": 8081}, False),
        (
            {"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"},
            {"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"},
            False,
        ),
        ({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}, {"containerPort": 80, "hostPort": 8080}, True),
        ({"containerPort": 8080}, {"containerPort": 8080}, False),  # no hostPort: nothing bound on the node
    ],
)
def test_host_port_conflicts(theirs: dict[str, Any], mine: dict[str, Any], conflict: bool) -> None:
    objects = [node("n0", gpus=2), node("n1", gpus=2), queue("q")]
    objects += solo("peer", theirs, gpus=1, node="n0")
    objects += solo("p", mine, gpus=1)
    assert bound(run(objects)) == {"ns/p": "n1" if conflict else "n0"}  # binpack picks n0 when it may


def test_pods_placed_in_the_cycle_hold_their_ports_and_the_third_waits() -> None:
    objects = [node("n0", gpus=0), node("n1", gpus=0), queue("q")]
    for i in range(3):
        objects += solo(f"p{i}", {"containerPort": 80, "hostPort": 9000}, cpu="1", created=f"2026-01-01T00:00:0{i}Z")
    result = run(objects)
    placed = bound(result)
    assert set(placed) == {"ns/p0", "ns/p1"} and placed["ns/p0"] != placed["ns/p1"]
    assert "2 node(s) didn't have free ports for the requested pod ports" in result["podGroups"]["ns/p2"]["message"]


def test_a_host_port_that_is_no_port_is_refused() -> None:
    from kai.api.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        run([node("n0"), queue("q"), *solo("p", {"containerPort": 80, "hostPort": 70000})])
    assert "spec.containers[0].ports[0].hostPort" in str(err.value)
