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


def test_bin_packing_trusts_its_whole_number_shortcut_only_while_every_free_amount_is_whole() -> None:
    # at_row may skip comparing every other node's value when every free amount it knows is a whole number
    # (differences exact): a node with 7.5 GPUs free must switch that off, and the next answer is computed
    # in full.
    from kai.api.timeutil import parse_time
    from kai.cycle import open_session
    from kai.framework.config import SchedulerConfig
    from kai.framework.placementcache import placement_cache
    from kai.plugins.nodeplacement import _Scorer
    from kai.snapshot.builder import build_snapshot
    from tests.actions.placing import gang, used
    from tests.scenario import NOW

    objects = [node("a", gpus=8), node("b", gpus=8), queue("q"), *used("ra", "a", 5), *gang("x", 2, 1, NOW)]
    ssn, _ = open_session(build_snapshot(objects, now=parse_time(NOW)).snapshot, SchedulerConfig())
    task = ssn.jobs["ns/x"].leaves[0].pods[0]
    at = next(i for i, s in enumerate(ssn.hooks.node_scorers) if isinstance(s, _Scorer))
    with placement_cache(ssn) as cache:
        assert cache.find(task, True) == (ssn.nodes.index["a"], True)
        assert cache._held is not None
        entry = cache._held[2]
        state = entry.parts[at].state
        assert state.whole
        row = ssn.nodes.index["b"]
        ssn.nodes.idle[row, ssn.nodes.gpu_col] = 7.5
        ssn.nodes.changed.append(row)
        assert cache.find(task, True) == (ssn.nodes.index["a"], True)
        assert not state.whole
        ssn.hooks.node_scorers[at].at_row(entry.ctx, entry.parts[at], ssn.nodes.index["a"])
        assert state.others is not None and state.others[3] is None  # the shortcut is not taken
