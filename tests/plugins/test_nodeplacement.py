"""Node order: bin-pack by default, spread as an option, separately for GPU and CPU; deterministic ties."""

from __future__ import annotations

from tests.scenario import bound, node, pod, podgroup, queue, run

SPREAD_GPU = {
    "tiers": [
        {
            "plugins": [
                {"name": n}
                for n in ("predicates", "proportion", "priority", "nodeavailability", "resourcetype", "elastic")
            ]
            + [{"name": "nodeplacement", "arguments": {"gpu": "spread", "cpu": "binpack"}}]
        }
    ]
}


def scene() -> list[dict]:
    return [
        node("a", gpus=8),
        node("b", gpus=8),
        node("c", gpus=8),
        queue("q"),
        podgroup("r", "q"),
        pod("r", group="r", gpus=4, node="b"),
        podgroup("r2", "q"),
        pod("r2", group="r2", gpus=2, node="c"),
        podgroup("p", "q"),
        pod("p", group="p", gpus=1),
    ]


def test_binpack_prefers_the_fullest_gpu_node() -> None:
    assert bound(run(scene())) == {"ns/p": "b"}


def test_spread_prefers_the_emptiest_gpu_node() -> None:
    assert bound(run(scene(), config=SPREAD_GPU)) == {"ns/p": "a"}


def test_ties_go_to_the_first_node_by_name() -> None:
    objects = [node("n3"), node("n1"), node("n2"), queue("q"), podgroup("p", "q"), pod("p", group="p", gpus=1)]
    assert bound(run(objects)) == {"ns/p": "n1"}


def test_cpu_only_pods_are_packed_on_cpu_and_kept_off_gpu_nodes() -> None:
    objects = [
        node("gpu-node", gpus=8, cpu="64"),
        node("cpu-big", gpus=0, cpu="64"),
        node("cpu-small", gpus=0, cpu="64"),
        queue("q"),
        podgroup("r", "q"),
        pod("r", group="r", cpu="60", node="cpu-small"),
        podgroup("p", "q"),
        pod("p", group="p", cpu="2"),
        podgroup("g", "q"),
        pod("g", group="g", gpus=1),
    ]
    assert bound(run(objects)) == {"ns/p": "cpu-small", "ns/g": "gpu-node"}


def test_spread_spreads_a_gang() -> None:
    objects = [
        node("a", gpus=8),
        node("b", gpus=8),
        queue("q"),
        podgroup("g", "q", min_member=2),
        pod("g-0", group="g", gpus=1),
        pod("g-1", group="g", gpus=1),
    ]
    assert sorted(bound(run(objects)).values()) == ["a", "a"]
    assert sorted(bound(run(objects, config=SPREAD_GPU)).values()) == ["a", "b"]
