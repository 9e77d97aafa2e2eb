"""allocate keeps what node ordering computed for a kind of pod across placements (the placement cache)
and updates it on the nodes that changed: it must pick exactly the nodes the full computation picks.

The hand-worked cases place pods one after another where every placement changes what bin-packing
compares against (the least free amount among candidate nodes), where a gang that does not fit is
rolled back, and where spread orders nodes. The comparison runs random clusters through allocate with
the cache and with it switched off, and asks for the same decisions."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest

import kai.actions.allocate as allocate_action
from tests.actions.placing import SPREAD, gang, nodes_of, used
from tests.scenario import bound, node, pod, podgroup, queue, run


def config(strategy: dict[str, str] | None = None, actions: str = "allocate") -> dict[str, Any]:
    plugins: list[dict[str, Any]] = [
        {"name": n}
        for n in ("predicates", "proportion", "priority", "nodeavailability", "resourcetype", "elastic", "gpupack")
    ]
    plugins.append({"name": "nodeplacement", "arguments": strategy or {}})
    return {"actions": actions, "tiers": [{"plugins": plugins}]}


def test_bin_packing_follows_every_placement() -> None:
    # Free GPUs: a 1, b 2, c 4. Gang x (3 x 1 GPU): a (least free, 1 -> 0), then b twice (2 -> 1 -> 0).
    # Gang y (2 x 1 GPU) then finds only c: both there.
    objects = [
        node("a", gpus=4),
        node("b", gpus=4),
        node("c", gpus=4),
        queue("q"),
        *used("ra", "a", 3),
        *used("rb", "b", 2),
        *gang("x", 3, 1, "2026-01-01T00:00:01Z"),
        *gang("y", 2, 1, "2026-01-01T00:00:02Z"),
    ]
    result = run(objects, config=config())
    assert nodes_of(result, "x") == {"a": 1, "b": 2}
    assert nodes_of(result, "y") == {"c": 2}


def test_a_gang_that_does_not_fit_leaves_the_nodes_as_they_were() -> None:
    # Free GPUs: a 2, b 3. Gang big (3 x 2 GPUs) places two pods (a, b) and fails on the third: rolled
    # back. Job one (1 x 1 GPU, younger) then sees a 2, b 3 again and takes a (least free).
    objects = [
        node("a", gpus=4),
        node("b", gpus=4),
        queue("q"),
        *used("ra", "a", 2),
        *used("rb", "b", 1),
        *gang("big", 3, 2, "2026-01-01T00:00:01Z"),
        *gang("one", 1, 1, "2026-01-01T00:00:02Z"),
    ]
    result = run(objects, config=config())
    assert nodes_of(result, "big") == {}
    assert bound(result)["ns/one-0"] == "a"


def test_spread_follows_every_placement() -> None:
    # Spread takes the largest free share: free GPUs a 4, b 3, c 2 (of 4). Four 1-GPU pods: a (4 -> 3),
    # then a and b tie at 3 (a first by name: 3 -> 2), then b (3), then a, b and c tie at 2: a.
    objects = [
        node("a", gpus=4),
        node("b", gpus=4),
        node("c", gpus=4),
        queue("q"),
        *used("rb", "b", 1),
        *used("rc", "c", 2),
        *gang("x", 4, 1, "2026-01-01T00:00:01Z"),
    ]
    result = run(objects, config=config(SPREAD))
    assert nodes_of(result, "x") == {"a": 3, "b": 1}


def random_cluster(seed: int) -> list[dict[str, Any]]:
    """Nodes of 0-8 GPUs (some tainted or labelled), running pods (some being deleted: their resources
    are releasing, so pods are pipelined), and pending gangs of GPU and CPU-only pods, some with a node
    selector or a toleration."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [queue("q")]
    names = [f"n{i:02d}" for i in range(rng.randint(3, 14))]
    for name in names:
        taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.15 else None
        objects.append(
            node(
                name,
                gpus=rng.choice((0, 2, 4, 8, 8)),
                cpu=str(rng.choice((16, 32, 64))),
                labels={"zone": rng.choice(("z1", "z2"))},
                taints=taints,
            )
        )
    for i in range(rng.randint(0, 12)):
        objects.append(podgroup(f"run{i}", "q"))
        objects.append(
            pod(
                f"run{i}",
                group=f"run{i}",
                gpus=rng.choice((0, 1, 1, 2)),
                cpu=str(rng.choice((1, 2, 4))),
                node=rng.choice(names),
                deleting=rng.random() < 0.2,
                tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            )
        )
    for g in range(rng.randint(1, 10)):
        size, gpus = rng.choice(((1, 1), (2, 1), (3, 1), (4, 2), (1, 0), (2, 0), (5, 1)))
        cpu = str(rng.choice((1, 2, 8)))
        selector = {"zone": "z1"} if rng.random() < 0.2 else None
        tolerations = (
            [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}] if rng.random() < 0.3 else None
        )
        created = f"2026-01-01T00:{g // 60:02d}:{g % 60:02d}Z"
        objects.append(podgroup(f"g{g}", "q", size, created=created))
        objects += [
            pod(
                f"g{g}-{i}",
                group=f"g{g}",
                gpus=gpus,
                cpu=cpu,
                node_selector=selector,
                tolerations=tolerations,
                created=created,
            )
            for i in range(size)
        ]
    return objects


@pytest.mark.parametrize("strategy", [None, SPREAD, {"gpu": "binpack", "cpu": "spread"}])
def test_same_nodes_with_and_without_the_cache(strategy: dict[str, str] | None, monkeypatch) -> None:
    compared = 0
    for seed in range(40):
        objects = random_cluster(seed)
        cfg = config(strategy, actions="allocate,consolidation,reclaim,preempt")
        cached = run(objects, rounds=2, config=cfg)
        with monkeypatch.context() as patch:
            patch.setattr(allocate_action, "placement_cache", lambda ssn: contextlib.nullcontext())
            plain = run(objects, rounds=2, config=cfg)
        assert cached == plain, f"seed {seed}"
        compared += len(bound(plain)) + len(bound(plain, 2))
    assert compared > 100  # the clusters do place pods
