"""The victim solver's shortcuts decide as the solver without them: on random small clusters (topology
and plain), the contract JSON of two rounds with a shortcut on equals the one with it switched off, and
the shortcut is taken (fewer trials simulated).

Shortcuts:
- `Solver.reuse_tried`: a walk answers a trial of chunks it already tried from that trial's answer."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

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


@pytest.fixture
def trials(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the trials the solver really runs (simulated or refused by the pre-check)."""
    count = [0]
    trial = Solver._trial

    def counted(self: Solver, *args: Any) -> int:
        count[0] += 1
        return trial(self, *args)

    monkeypatch.setattr(Solver, "_trial", counted)
    yield count


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
@pytest.mark.parametrize("switch", ["reuse_tried"])
def test_a_shortcut_decides_as_the_solver_without_it(
    kind: str, switch: str, trials: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    with_shortcut = without = 0
    for seed in range(12):
        objects = CLUSTERS[kind](seed)
        start = trials[0]
        shortcut = run(objects, rounds=2)
        with_shortcut += trials[0] - start
        with monkeypatch.context() as m:
            m.setattr(Solver, switch, False)
            start = trials[0]
            full = run(objects, rounds=2)
            without += trials[0] - start
        assert shortcut == full, f"{kind} cluster, seed {seed}"
    assert with_shortcut < without  # the shortcut was taken
