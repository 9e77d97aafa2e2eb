"""Shortcuts of the session's reading of its nodes, each checked against the long way and on the
decisions it feeds: the allocatable arrays read once per distinct Resources object (nodes written alike
share one), and node labels whose values are read only when some node has the label (MIG strategy for
gpusharing's mixed-strategy filter and for the MIG nodes, the GPU count for node placement)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kai.api import keys
from kai.api.timeutil import parse_time
from kai.cycle import open_session
from kai.framework.config import DEFAULT_ACTIONS, DEFAULT_PLUGINS, SchedulerConfig
from kai.model.node import label_values
from kai.snapshot.builder import build_snapshot
from tests.scenario import NOW, node, pod, podgroup, queue, run


def _session(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    result = build_snapshot(objects, now=parse_time(NOW))
    return open_session(result.snapshot, SchedulerConfig())[0]


def test_allocatable_read_once_per_shared_object_is_every_nodes_own() -> None:
    # a, c (8 GPUs) and b, d (2 GPUs, more CPU) are written alike: two Resources objects for four nodes,
    # in interleaved rows. Each row must be its own node's allocatable.
    objects: list[dict[str, Any]] = [
        node("a", gpus=8),
        node("b", gpus=2, cpu="128"),
        node("c", gpus=8),
        node("d", gpus=2, cpu="128"),
        node("e", gpus=0, cpu="16", extra={"example.com/fpga": "3"}),
        queue("q"),
    ]
    ssn = _session(objects)
    nodes = ssn.snapshot.nodes
    assert nodes[0].allocatable is nodes[2].allocatable  # the premise: shared objects
    assert len({id(n.allocatable) for n in nodes}) == 3
    want = np.array([[n.allocatable.get(name) for name in ssn.space.names] for n in nodes])
    assert np.array_equal(ssn.nodes.allocatable, want)
    assert ssn.nodes.allocatable.flags.f_contiguous
    assert "example.com/fpga" in ssn.space.names  # a name only one distinct object has
    ssn.restore()


def test_a_pod_bin_packs_onto_the_small_node_among_nodes_written_alike() -> None:
    # b and d (2 GPUs) share one Resources object, a and c (8 GPUs) another. A 2-GPU pod bin-packs onto
    # the node with the least free GPUs: b (the first of the small ones), never a.
    objects: list[dict[str, Any]] = [
        node("a", gpus=8),
        node("b", gpus=2),
        node("c", gpus=8),
        node("d", gpus=2),
        queue("q"),
        podgroup("p", "q"),
        pod("p-0", group="p", gpus=2),
    ]
    assert run(objects)["pods"]["ns/p-0"]["node"] == "b"


def test_label_values_are_none_only_when_no_node_has_the_label() -> None:
    labels = [{"zone": "z1"}, {}, {"zone": "z2", "rack": "r"}]
    assert label_values(labels, "rack") == [None, None, "r"]
    assert label_values(labels, "zone") == ["z1", None, "z2"]
    assert label_values(labels, "missing") is None
    assert label_values([], "zone") is None


def test_a_whole_gpu_pod_avoids_the_mig_mixed_node() -> None:
    # "a-mixed" sorts first and has as many free GPUs as "b-plain", but its MIG strategy is mixed: only
    # MIG slices go there, so the whole-GPU pod goes to b-plain.
    objects: list[dict[str, Any]] = [
        node("a-mixed", gpus=8, labels={keys.MIG_STRATEGY_NODE_LABEL: "mixed"}),
        node("b-plain", gpus=8),
        queue("q"),
        podgroup("w", "q"),
        pod("w-0", group="w", gpus=1),
    ]
    assert run(objects)["pods"]["ns/w-0"]["node"] == "b-plain"
    plain = [o for o in objects if o["metadata"]["name"] != "a-mixed"]
    plain.insert(0, node("a-mixed", gpus=8))
    assert run(plain)["pods"]["ns/w-0"]["node"] == "a-mixed"  # the same without the label


def _spread() -> dict[str, Any]:
    plugins = [{"name": n} for n in DEFAULT_PLUGINS]
    plugins[DEFAULT_PLUGINS.index("nodeplacement")]["arguments"] = {"gpu": "spread"}
    return {"actions": ",".join(DEFAULT_ACTIONS), "tiers": [{"plugins": plugins}]}


def test_spread_divides_by_the_gpu_count_label() -> None:
    # a: 8 GPUs allocatable but labelled 32 (a quarter free by spread's measure); b: 2 of 2 free. Spread
    # prefers the larger free share: b. Without the label both are wholly free and a (first) wins.
    objects: list[dict[str, Any]] = [
        node("a", gpus=8, labels={keys.GPU_COUNT_NODE_LABEL: "32"}),
        node("b", gpus=2),
        queue("q"),
        podgroup("s", "q"),
        pod("s-0", group="s", gpus=1),
    ]
    assert run(objects, config=_spread())["pods"]["ns/s-0"]["node"] == "b"
    objects[0] = node("a", gpus=8)
    assert run(objects, config=_spread())["pods"]["ns/s-0"]["node"] == "a"
