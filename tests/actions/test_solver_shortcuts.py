"""The victim solver's shortcuts decide as the solver without them: on random small clusters (topology
and plain), the contract JSON of two rounds with a shortcut on equals the one with it switched off, and
the shortcut is taken (fewer trials simulated).

Shortcuts:
- `Solver.reuse_tried`: a walk answers a trial of chunks it already tried from that trial's answer;
- `Solver.skip_idle_watch`: a simulation skips the PlacementPossible check after a victim placed only
  on nodes that had no room for one of the job's tasks;
- `Solver.check_around`: a chunk with pods on several nodes is GPU-checked once with the chunks of all
  those nodes evicted, before each node's own check (which all fail when that one does);
- `placement.SUBSET_CACHE`: a batch placed inside a node set (a topology domain) goes through a placement
  cache of its own."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from kai.framework import placement
from kai.framework.session import Session
from kai.framework.victims import Solver
from tests.actions.evict_helpers import gq, stamp
from tests.scenario import node, pod, podgroup, run
from tests.topology.test_topology_precheck import random_cluster as topology_cluster

CLASSES = ("train", "build-preemptible", "build")


def plain_cluster(seed: int) -> list[dict[str, Any]]:
    """Full 8-GPU nodes of three queues (one with no quota): running single pods, gangs spread over
    nodes and elastic jobs, then pending gangs and elastic jobs of every queue and priority class."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [gq(q, rng.choice((0, 8, 16, 24))) for q in ("a", "b", "c")]
    names = [f"n{i}" for i in range(rng.randint(3, 8))]
    objects += [node(name, gpus=8) for name in names]
    free = dict.fromkeys(names, 8)
    for i in range(rng.randint(10, 40)):
        q, cls = rng.choice("abc"), rng.choice(CLASSES)
        size, gpus = rng.choice(((1, 1), (1, 2), (1, 4), (2, 1), (3, 2), (4, 1))), None
        gpus = size[1]
        spots = [n for n in names for _ in range(free[n] // gpus)]
        if len(spots) < size[0]:
            continue
        where = rng.sample(spots, size[0])
        for name in where:
            free[name] -= gpus
        minimum = size[0] if rng.random() < 0.7 else 1  # elastic: pods above minMember are extras
        objects.append(podgroup(f"run-{i}", q, minimum, priority_class=cls, created=stamp(500 - i)))
        objects += [
            pod(f"run-{i}-{p}", group=f"run-{i}", queue=q, gpus=gpus, node=name, created=stamp(500 - i))
            for p, name in enumerate(where)
        ]
    for g in range(rng.randint(3, 10)):
        q, cls = rng.choice("abc"), rng.choice(CLASSES)
        size, gpus = rng.choice((1, 2, 3, 4, 6)), rng.choice((1, 2, 4, 8))
        minimum = size if rng.random() < 0.8 else max(1, size // 2)
        objects.append(podgroup(f"gang-{g}", q, minimum, priority_class=cls, created=stamp(g)))
        objects += [pod(f"gang-{g}-{p}", group=f"gang-{g}", queue=q, gpus=gpus, created=stamp(g)) for p in range(size)]
    return objects


CLUSTERS: dict[str, Callable[[int], list[dict[str, Any]]]] = {"topology": topology_cluster, "plain": plain_cluster}


# switch (its owner, its name) -> the object and method whose calls the shortcut saves
SAVES: dict[tuple[Any, str], tuple[Any, str]] = {
    (Solver, "reuse_tried"): (Solver, "_trial"),  # trials run (simulated or refused by the pre-check)
    (Solver, "skip_idle_watch"): (Session, "placement_possible"),  # PlacementPossible checks
    (placement, "SUBSET_CACHE"): (placement, "find_node"),  # full node searches
    (Solver, "check_around"): (Solver, "_feasible_with"),  # GPU checks of popped chunks' nodes
}


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
@pytest.mark.parametrize("switch", list(SAVES), ids=[name for _, name in SAVES])
def test_a_shortcut_decides_as_the_solver_without_it(
    kind: str, switch: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, method = SAVES[switch]
    calls = [0]
    original = getattr(owner, method)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, method, counted)
    with_shortcut = without = 0
    for seed in range(12):
        objects = CLUSTERS[kind](seed)
        start = calls[0]
        shortcut = run(objects, rounds=2)
        with_shortcut += calls[0] - start
        with monkeypatch.context() as m:
            m.setattr(*switch, False)
            start = calls[0]
            full = run(objects, rounds=2)
            without += calls[0] - start
        assert shortcut == full, f"{kind} cluster, seed {seed}"
    if kind == "topology":  # plain clusters have no PlacementPossible hook and no node sets
        assert with_shortcut < without  # the shortcut was taken
    elif switch[1] == "reuse_tried":
        assert with_shortcut < without
