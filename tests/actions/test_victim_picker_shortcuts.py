"""The victim picker's shortcuts against its plain path, on random small clusters through whole cycles.

With one victim queue order hook (the default configuration) the picker keeps, per parent queue, the
keys of its children still giving, in key order, and computes only the changed child's key after a pop
(through the hook's per-queue key function), and reads a leaf's next job from the pool's cache;
proportion's victim queue key takes a short path when every share is above 0, and keeps each queue's
allocation as floats until it changes. The plain path (the session's generic key, every child compared
by _choose, every job looked up afresh, the general formula, the allocation converted at every key) must
hand out the same victims in the same order, for every preemptor
and every partial job (the walk restarted), and so decide the same. The clusters are small versions of
the eviction benchmarks: reclaim with victims scattered over the nodes (also with elastic victims, a
deeper queue tree, gangs grown task by task), gangs pinned to nodes, and preempt within teams.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kai.framework.session import VictimQueueOrder
from kai.framework.statement import Statement
from kai.framework.victimpool import VictimPicker
from kai.plugins.proportion.plugin import ProportionPlugin
from kai.plugins.proportion.reclaim import ReclaimRules
from tests.actions.evict_helpers import gq, job, stamp
from tests.actions.test_victim_pool import preempt_in_teams, scattered_reclaim, session
from tests.scenario import node, pod, podgroup, run

Pop = tuple[str, str, tuple[str, ...]] | None


def decide(objects: list[dict[str, Any]], shortcuts: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Pop]]:
    """Two rounds of `kai simulate` on the objects; the contract JSON and every chunk the pickers handed
    out, in order: (preemptor, victim job, victim pods), None where a walk ran dry."""
    popped: list[Pop] = []
    plain_next = VictimPicker.next_chunk

    def recording(self: VictimPicker) -> Any:
        chunk = plain_next(self)
        popped.append(None if chunk is None else (self.preemptor.key, chunk.job.key, tuple(t.key for t in chunk.tasks)))
        return chunk

    with monkeypatch.context() as patch:
        patch.setattr(VictimPicker, "shortcuts", shortcuts)
        patch.setattr(ReclaimRules, "divide_shortcut", shortcuts)
        patch.setattr(ReclaimRules, "keep_floats", shortcuts)
        patch.setattr(VictimPicker, "next_chunk", recording)
        result = run(objects, rounds=2)
    return result, popped


def with_gangs(seed: int, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scattered cluster with more gangs of 2-3 pods waiting in the poor teams (d0-t2, d1-t2), so
    that the solver grows jobs task by task and walks the pool again for each."""
    rng = random.Random(seed)
    for j in range(6):
        pods, gpus = rng.choice(((2, 1), (2, 2), (3, 2), (2, 4)))
        objects = objects + job(f"g{j}", rng.choice(("d0-t2", "d1-t2")), gpus=gpus, size=pods, age=10 + j)
    return objects


def pinned_gang(seed: int) -> list[dict[str, Any]]:
    """One-GPU nodes, each running a one-GPU victim of queue b or c (fair share 0), in shuffled ages; a
    gang of queue a whose pods may each use one given node only. The victim found for the first task is
    recorded; the next task's walk starts again and passes that victim at its place in the order."""
    rng = random.Random(seed)
    count = rng.randrange(4, 9)
    objects: list[dict[str, Any]] = [node(f"n{i}", gpus=1, labels={"slot": f"s{i}"}) for i in range(count)]
    objects += [gq("a", count), gq("b", 0), gq("c", 0)]
    for i, age in enumerate(rng.sample(range(10, 200), count)):
        objects += job(f"v{i}", rng.choice("bc"), nodes=f"n{i}", age=age)
    slots = rng.sample(range(count), rng.randrange(2, 4))
    objects.append(podgroup("p", "a", len(slots), created=stamp(1)))
    for i, slot in enumerate(slots):
        selector = {"slot": f"s{slot}"}
        objects.append(pod(f"p-{i}", group="p", queue="a", gpus=1, node_selector=selector, created=stamp(9 - i)))
    return objects


def clusters() -> list[Any]:
    rng = random.Random(23)
    out = []
    for i in range(8):
        seed, nodes = rng.randrange(10_000), rng.randrange(6, 15)
        elastic, deep = rng.random() < 0.5, rng.random() < 0.4
        objects = scattered_reclaim(seed, nodes, elastic, deep)
        if i % 2:
            objects = with_gangs(seed, objects)
        out.append(pytest.param(objects, id=f"reclaim-{i}"))
    for i in range(6):
        out.append(pytest.param(pinned_gang(rng.randrange(10_000)), id=f"pinned-{i}"))
    out.append(pytest.param(preempt_in_teams(rng.randrange(10_000)), id="preempt"))
    return out


@pytest.mark.parametrize("objects", clusters())
def test_the_shortcuts_hand_out_what_the_plain_path_does(
    objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_result, fast = decide(objects, True, monkeypatch)
    plain_result, plain = decide(objects, False, monkeypatch)
    assert len(plain) > 4  # the pickers were used
    assert fast == plain
    assert fast_result == plain_result


def test_the_clusters_restart_walks_and_leave_queues_with_nothing_to_give(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above covers the paths the shortcuts change: walks started again for the next
    partial job with victims recorded, and walks that ran dry."""
    restarts: list[int] = []
    plain_restart = VictimPicker.restart

    def counting(self: VictimPicker, recorded: Any) -> VictimPicker:
        recorded = list(recorded)
        restarts.append(len(recorded))
        return plain_restart(self, recorded)

    monkeypatch.setattr(VictimPicker, "restart", counting)
    dry = 0
    for param in clusters():
        (objects,) = param.values
        _, popped = decide(objects, True, monkeypatch)
        dry += popped.count(None)
    assert sum(1 for n in restarts if n) >= 10
    assert dry > 0


def test_the_victim_queue_key_short_path_gives_the_general_formula(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every queue's key, with picked pods and a next victim drawn at random from what queues really run
    (and arbitrary amounts), is the same with the short path as with the general formula."""
    objects = scattered_reclaim(7, 10, elastic=True, deep=True)
    keys: dict[bool, list[Any]] = {}
    for short in (True, False):
        rng = random.Random(5)
        monkeypatch.setattr(ReclaimRules, "divide_shortcut", short)  # read when a queue's first key is made
        ssn = session(objects)
        (order,) = ssn.hooks.victim_queue_order
        vectors = [order.vector(p) for j in ssn.jobs.values() for p in j.pods if p.node]
        out = keys[short] = []
        for name in sorted(ssn.queues):
            for _ in range(40):
                picked = [rng.choice(vectors) for _ in range(rng.randrange(0, 6))]
                removed = [sum(v[i] for v in picked) for i in range(3)] if picked else []
                # Arbitrary amounts too, either sign (the test pods ask for GPUs only: this is how CPU and
                # memory get to decide the dominant share).
                if rng.random() < 0.4:
                    removed = [rng.uniform(-40, 40), rng.uniform(-1e6, 1e6), rng.uniform(-8e12, 8e12)]
                arbitrary = (rng.uniform(-8, 8), rng.uniform(-1e6, 1e6), rng.uniform(-8e12, 8e12))
                following = rng.choice([(), rng.choice(vectors), arbitrary])
                out.append(order.key(ssn.queues[name], removed, following))
    assert len(keys[True]) >= 400
    assert keys[True] == keys[False]


def test_an_order_hook_without_for_queue_ties_queues_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A victim queue order hook that gives no per-queue key functions (`for_queue`), and whose keys tie
    between queues: the picker's shortcut path breaks ties by queue name, as the plain path's session key
    does, and hands out the same victims in the same order."""
    plain_register = ReclaimRules.register

    def coarse(self: ReclaimRules) -> None:
        plain_register(self)
        hooks = self.ssn.hooks
        (order,) = hooks.victim_queue_order
        # Whole GPUs picked so far only, so that sibling queues often tie.
        hooks.victim_queue_order[0] = VictimQueueOrder(
            order.vector, lambda queue, removed, _: (round(removed[0]) if removed else 0,)
        )

    monkeypatch.setattr(ReclaimRules, "register", coarse)
    for seed in (3, 11, 19):
        objects = with_gangs(seed, scattered_reclaim(seed, 10, elastic=seed == 11, deep=seed == 19))
        fast_result, fast = decide(objects, True, monkeypatch)
        plain_result, plain = decide(objects, False, monkeypatch)
        assert len(plain) > 4
        assert fast == plain
        assert fast_result == plain_result


def test_a_queue_key_reads_the_allocation_as_it_is_after_a_change() -> None:
    """The victim queue key keeps a queue's allocation as floats between calls: once a pod of the queue is
    evicted or placed, the next key reads the new allocation (the key as computed afresh)."""
    ssn = session(scattered_reclaim(5, 8))
    (order,) = ssn.hooks.victim_queue_order
    assert order.for_queue is not None
    victim = next(j for j in ssn.jobs.values() if j.queue.startswith("d0-") and any(p.node for p in j.pods))
    queue = ssn.queues[victim.queue]
    keyer = order.for_queue(queue)
    before = keyer([], ())
    stmt = Statement(ssn)
    stmt.evict(next(p for p in victim.pods if p.node), "reclaim")
    after = keyer([], ())
    plugin = ssn.accounting
    assert isinstance(plugin, ProportionPlugin)
    for attrs in plugin.attrs.values():
        attrs.floats = None  # nothing kept: the key from the allocation as it now is
    assert keyer([], ()) == after != before
    stmt.discard()
    assert keyer([], ()) == before
