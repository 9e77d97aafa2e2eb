"""reclaim: a queue below its fair share takes resources back from queues above theirs.

Every expected result below is worked out by hand from KAI's reclaim rules; the arithmetic is in the
comments. Queues are GPU-only (CPU and memory unlimited) unless a test says otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

from kai.cycle import close_session, open_session
from kai.framework.config import PluginOption, SchedulerConfig
from kai.framework.statement import Statement
from kai.framework.victims import Chunk, Scenario
from kai.plugins.proportion.plugin import _factory as proportion_factory
from tests.actions.evict_helpers import evictions, gq, job, placed, status
from tests.scenario import node, run, write

ONLY_RECLAIM = {"actions": "allocate, reclaim"}


def two_queues_full_node() -> list[dict]:
    """One 8-GPU node full of queue a's eight 1-GPU jobs (a0 oldest ... a7 newest); queue b waits
    with one 4-GPU job. Quotas 4 and 4, weights 1: fair shares a = min(4, 8) = 4, b = min(4, 4) = 4,
    nothing left over."""
    objects = [node("n1", gpus=8), gq("a", 4), gq("b", 4)]
    for i in range(8):
        objects += job(f"a{i}", "a", nodes="n1", age=100 - i)
    return [*objects, *job("b0", "b", gpus=4, age=1)]


def test_queue_below_fair_share_reclaims_the_newest_jobs_of_the_queue_above_it() -> None:
    # b: 0 + 4 <= 4 (fair share) -> may reclaim. a: 8 allocated > 4 (its allocatable share), and stays
    # above while losing 4 one-GPU chunks (8, 7, 6, 5 > 4); the fifth would not be allowed.
    # Victim order inside a: lowest priority first (all equal), then newest: a7, a6, a5, a4.
    result = run(two_queues_full_node(), rounds=2)
    assert evictions(result) == {f"ns/a{i}": ("reclaim", "ns/b0") for i in (4, 5, 6, 7)}
    assert placed(result) == {"ns/b0": "n1"}
    assert result["rounds"][0]["pipelined"] == [{"pod": "ns/b0", "node": "n1"}]  # waits for the releases
    # Round 2: the released GPUs are free, b0 is bound; a's evicted jobs wait (a is at its fair share).
    assert result["rounds"][1]["bound"] == [{"pod": "ns/b0", "node": "n1", "gpuGroups": []}]
    assert result["rounds"][1]["evicted"] == []
    assert status(result, "ns/b0") == "Running"
    assert [status(result, f"ns/a{i}") for i in range(8)] == ["Running"] * 4 + ["Pending"] * 4


def test_victim_pod_group_is_told_who_took_its_place_and_why() -> None:
    result = run(two_queues_full_node(), config=ONLY_RECLAIM)
    message = result["podGroups"]["ns/a7"]["message"]
    assert "reclaim" in message and "ns/b0" in message
    # The reclaimer's queue with its quota, fair share and allocation, and the victim's queue.
    assert "queue b (quota 4 GPUs, fair share 4 GPUs, allocated" in message
    assert "queue a (quota 4 GPUs, fair share 4 GPUs, allocated" in message
    assert result["podGroups"]["ns/a0"]["message"] == ""  # untouched jobs get nothing


def test_queue_at_its_fair_share_is_never_reclaimed_from() -> None:
    # n1 (pool x): queue a's four 1-GPU jobs and queue c's three; 1 GPU free. n2 (pool y): 8 of c's.
    # b wants a gang of five 1-GPU pods on pool x.
    # Fair shares (16 GPUs): deserved a 4, b 5, c 0; 7 left over go to c (the only one still asking):
    # a = 4, b = 5, c = 7. b: 0 + 5 <= 5 may reclaim. c holds 11 > 7: may lose pods; but on n1 it has
    # only 3, and 1 GPU is free: 4 < 5. a holds exactly its share (4 = max(deserved 4, fair share 4))
    # and is not above its deserved quota either, so neither strategy lets b take from a: nothing is
    # evicted at all (the gang would not fit without a's pods).
    objects = [
        node("n1", gpus=8, labels={"pool": "x"}),
        node("n2", gpus=8, labels={"pool": "y"}),
        gq("a", 4),
        gq("b", 5),
        gq("c", 0),
    ]
    for i in range(4):
        objects += job(f"a{i}", "a", nodes="n1", age=100 - i)
    for i in range(3):
        objects += job(f"c{i}", "c", nodes="n1", age=90 - i)
    objects += job("cy", "c", size=8, nodes="n2", age=95)
    gang = job("b0", "b", size=5, age=1)
    for obj in gang[1:]:
        obj["spec"]["nodeSelector"] = {"pool": "x"}
    result = run([*objects, *gang], rounds=2, config=ONLY_RECLAIM)
    assert result["rounds"][0]["evicted"] == [] and result["rounds"][1]["evicted"] == []
    assert all(status(result, f"ns/a{i}") == "Running" for i in range(4))
    assert result["podGroups"]["ns/b0"]["status"] == "Pending"


def test_reclaimer_over_its_fair_share_may_not_reclaim() -> None:
    # a: quota 6 runs six 1-GPU jobs; b: quota 2 runs two and wants one more. 8 GPUs, all used.
    # Fair shares: deserved a min(6, 6) = 6, b min(2, 3) = 2, nothing left: b 2 + 1 > 2 -> no reclaim.
    objects = [node("n1", gpus=8), gq("a", 6), gq("b", 2)]
    for i in range(6):
        objects += job(f"a{i}", "a", nodes="n1", age=100 - i)
    objects += job("b0", "b", nodes="n1", age=50) + job("b1", "b", nodes="n1", age=49) + job("b2", "b", age=1)
    result = run(objects, config=ONLY_RECLAIM)
    assert result["rounds"][0]["evicted"] == []


def test_hierarchy_compares_the_queues_where_their_paths_diverge() -> None:
    # dept1 (quota 4): t1a (quota 2) waits with a 2-GPU job, t1b (quota 2) runs four 1-GPU jobs.
    # dept2 (quota 4): t2 (quota 0) runs four 1-GPU jobs, t3 (quota 4) waits with a 2-GPU job.
    # Top level (8 GPUs): dept1 asks 6, dept2 asks 6, both deserve 4 -> 4 and 4.
    # In dept1: t1a min(2, 2) = 2, t1b min(2, 4) = 2. In dept2: t3 min(4, 2) = 2, t2 gets the other 2.
    # t1a (0 + 2 <= 2) may reclaim. Against t1b (siblings): t1b 4 > 2 -> two chunks (4, 3 > 2).
    # Against t2 the paths diverge at dept1 / dept2: dept2 holds 4 = its share, and dept1 + 2 = 6 > its
    # quota 4, so neither strategy holds -> t2 is not a victim of t1a even though the leaf t2 is over
    # its own fair share. t3 (0 + 2 <= 2) reclaims from its sibling t2 (4 > 2): two chunks.
    objects = [
        node("n1", gpus=8),
        gq("dept1", 4),
        gq("dept2", 4),
        gq("t1a", 2, parent="dept1"),
        gq("t1b", 2, parent="dept1"),
        gq("t2", 0, parent="dept2"),
        gq("t3", 4, parent="dept2"),
    ]
    for i in range(4):
        objects += job(f"x{i}", "t1b", nodes="n1", age=100 - i)
        objects += job(f"y{i}", "t2", nodes="n1", age=100 - i)
    objects += job("want1", "t1a", gpus=2, age=1) + job("want3", "t3", gpus=2, age=2)
    result = run(objects, rounds=3)
    evicted = evictions(result)
    assert evicted == {
        "ns/x3": ("reclaim", "ns/want1"),
        "ns/x2": ("reclaim", "ns/want1"),
        "ns/y3": ("reclaim", "ns/want3"),
        "ns/y2": ("reclaim", "ns/want3"),
    }
    assert status(result, "ns/want1") == "Running" and status(result, "ns/want3") == "Running"
    assert result["rounds"][1]["evicted"] == [] and result["rounds"][2]["evicted"] == []


def test_non_preemptible_reclaimer_stays_within_its_deserved_quota() -> None:
    # a: quota 2 weight 1 runs eight 1-GPU jobs; b: quota 2 weight 3 waits with a 4-GPU job.
    # Fair shares: deserved a 2, b 2, 4 left. Over quota, weights 1:3 -> 0.25/0.75, with kValue 1 the
    # share weights are 0.5 and 1.5: slices 1 and 3; b wants 2 <= 3 and is sated, a gets 1; the last
    # GPU goes to a: a = 4, b = 4.
    # A preemptible b job (train): 0 + 4 <= 4 -> reclaims 4 of a's pods (8, 7, 6, 5 > 4).
    # A non-preemptible one (build): non-preemptible use 0 + 4 > quota 2 -> no reclaim at all.
    def objects(priority_class: str) -> list[dict]:
        objs = [node("n1", gpus=8), gq("a", 2), gq("b", 2, weight=3)]
        for i in range(8):
            objs += job(f"a{i}", "a", nodes="n1", age=100 - i)
        return objs + job("b0", "b", gpus=4, priority_class=priority_class, age=1)

    preemptible = run(objects("train"), config=ONLY_RECLAIM)
    assert sorted(evictions(preemptible)) == [f"ns/a{i}" for i in (4, 5, 6, 7)]
    non_preemptible = run(objects("build"), config=ONLY_RECLAIM)
    assert non_preemptible["rounds"][0]["evicted"] == []
    assert "quota" in non_preemptible["podGroups"]["ns/b0"]["message"]


def test_non_preemptible_jobs_are_never_victims() -> None:
    # Same as the first test, but a's jobs are non-preemptible (build): nothing may be reclaimed.
    objects = [node("n1", gpus=8), gq("a", 8), gq("b", 4)]
    for i in range(8):
        objects += job(f"a{i}", "a", nodes="n1", priority_class="build", age=100 - i)
    result = run([*objects, *job("b0", "b", gpus=4)], config=ONLY_RECLAIM)
    assert result["rounds"][0]["evicted"] == []


def test_gang_victims_are_evicted_whole() -> None:
    # a runs one 4-pod gang (1 GPU each) and four 1-GPU jobs on one 8-GPU node; b needs 2 GPUs.
    # Fair shares: a min(4, 8) = 4, b min(4, 2) = 2, the 2 left go to a: a = 6. b may reclaim
    # (0 + 2 <= 2). a holds 8 > 6. Newest first: the gang (age 1) comes first; the strategy is checked
    # before each chunk (8 > 6 holds), so the whole gang (4 GPUs) goes as one chunk - a gang is never
    # half-evicted, and it cannot be placed again (b0 takes 2 of its 4 GPUs).
    objects = [node("n1", gpus=8), gq("a", 4), gq("b", 4)]
    objects += job("gang", "a", size=4, nodes="n1", age=1)
    for i in range(4):
        objects += job(f"a{i}", "a", nodes="n1", age=100 - i)
    result = run([*objects, *job("b0", "b", gpus=2, age=0)], config=ONLY_RECLAIM)
    evicted = evictions(result)
    assert set(evicted) == {f"ns/gang-{i}" for i in range(4)}


def test_reclaim_cli_subprocess(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.scenario import cli_json

    path = write(two_queues_full_node(), tmp_path)
    result = cli_json([path], "--rounds", "2")
    first = result["rounds"][0]["evicted"]
    assert {e["pod"] for e in first} == {f"ns/a{i}" for i in (4, 5, 6, 7)}
    assert all(e["action"] == "reclaim" and e["by"] == "ns/b0" for e in first)
    assert result["pods"]["ns/b0"]["status"] == "Running"


# -- the saturation-ratio rule, on the validator itself -----------------------------------------------


def _session_with_victim(multiplier: str | None):  # type: ignore[no-untyped-def]
    """Queues p and q; q's job v runs 2 GPUs, p's job w waits for 2. Returns session, plugin, scenario
    with v evicted and w placed in its stead."""
    from kai.snapshot.builder import build_snapshot

    objects = [node("n1", gpus=4), gq("p", 2), gq("q", 2)]
    objects += job("v", "q", gpus=2, nodes="n1", age=10) + job("w", "p", gpus=2, age=1)
    snapshot = build_snapshot(objects, now=1_767_225_600.0).snapshot
    args = {} if multiplier is None else {"relcaimerSaturationMultiplier": multiplier}
    config = SchedulerConfig(plugins=(PluginOption("predicates"), PluginOption("proportion", args)))
    ssn, _ = open_session(snapshot, config)
    plugin = ssn.accounting
    stmt = Statement(ssn)
    victim = ssn.jobs["ns/v"]
    task = next(iter(victim.pods))
    stmt.evict(task, "reclaim")
    preemptor = ssn.jobs["ns/w"]
    mine = next(iter(preemptor.pods))
    stmt.pipeline(mine, "n1")
    scenario = Scenario("reclaim", preemptor, [mine], [mine], [Chunk(victim, [task], [0])])
    return ssn, plugin, scenario


@pytest.mark.parametrize(
    ("multiplier", "ok"),
    [(None, False), ("1", False), ("0.5", True)],
)
def test_saturation_rule_and_its_multiplier(multiplier: str | None, ok: bool) -> None:
    # The rule only bites when the reclaimer side ends above its fair share, which plain weights rarely
    # produce: set the numbers by hand. p's fair share 1.6 GPUs; q holds 3 GPUs (one more than the
    # snapshot's victim), deserved 0, fair share 1.
    ssn, plugin, scenario = _session_with_victim(multiplier)
    p, q = plugin.attrs["p"], plugin.attrs["q"]
    p.fair_share = np.array([1.6, p.fair_share[1], p.fair_share[2]])
    # q keeps 1 of 3 GPUs after losing 2: q holds 3 before (pretend one more pod of q elsewhere).
    q.allocated = q.allocated + np.array([1.0, 0.0, 0.0])
    q.deserved = np.array([0.0, -1.0, -1.0])
    q.fair_share = np.array([1.0, q.fair_share[1], q.fair_share[2]])
    # Before the chunk: q holds 3 > allocatable max(0, 1) = 1 -> MaintainFairShare holds.
    # After: p ratio (0 + 2) / 1.6 = 1.25; q ratio (3 - 2) / 1 = 1.0.
    # multiplier 1: 1.25 >= 1.0 -> rejected; 0.5: 0.625 < 1.0 -> accepted.
    status = ssn.validate_scenario("reclaim", scenario)
    assert status.ok is ok, status
    if not ok:
        assert status.reason == "ReclaimSaturation"
    close_session(ssn)


def test_multiplier_accepts_both_spellings_and_rejects_nonsense() -> None:
    assert proportion_factory({"relcaimerSaturationMultiplier": "2"}).saturation_multiplier == 2.0
    assert proportion_factory({"reclaimerUtilizationMultiplier": "1.5"}).saturation_multiplier == 1.5
    assert proportion_factory({}).saturation_multiplier == 1.0
    with pytest.raises(ValueError):
        proportion_factory({"relcaimerSaturationMultiplier": "lots"})
    with pytest.raises(ValueError):
        proportion_factory({"relcaimerSaturationMultiplier": "0"})


KEEP_SHARE = {"reclaimKeepsVictimShare": True}


def big_gang_over_by_one() -> list[dict]:
    """a (quota 4) holds one 8-GPU gang; b (quota 4) wants 1 GPU. Fair shares (8): deserved b min(4, 1)
    = 1, a min(4, 8) = 4; the 3 left go to a (b is sated): a 7, b 1."""
    objects = [node("n1", gpus=8), gq("a", 4), gq("b", 4)]
    return objects + job("gang", "a", size=8, nodes="n1", age=10) + job("small", "b", age=1)


def test_one_big_gang_may_take_its_queue_from_over_its_share_to_below_its_quota() -> None:
    # b: 0 + 1 <= 1 may reclaim. The victim queue is judged before the chunk only: a holds 8 > 7, so the
    # whole gang (8 GPUs) goes, and a ends at 0, below its quota of 4. The re-allocation (b first: within
    # its quota) places small; the gang (8) no longer fits beside it. small is pipelined, bound next round.
    result = run(big_gang_over_by_one(), rounds=2, config=ONLY_RECLAIM)
    assert evictions(result) == {f"ns/gang-{i}": ("reclaim", "ns/small") for i in range(8)}
    assert result["rounds"][0]["pipelined"] == [{"pod": "ns/small", "node": "n1"}]
    assert status(result, "ns/small") == "Running"


def test_opt_in_a_reclaim_never_takes_the_victim_queue_below_its_share_or_quota() -> None:
    # reclaimKeepsVictimShare: after the chunk a would hold 0 < its share 7 (and < its quota 4): refused.
    config = {**ONLY_RECLAIM, "schedulerParams": KEEP_SHARE}
    result = run(big_gang_over_by_one(), rounds=2, config=config)
    assert result["rounds"][0]["evicted"] == [] and result["rounds"][1]["evicted"] == []
    assert status(result, "ns/small") == "Pending"


def test_a_victim_queue_that_would_win_the_freed_gpus_back_keeps_its_pods() -> None:
    # n0 is full of queue a's jobs (quota 0, weight 1); on n1, queue c (quota 6, weight 0, queue priority
    # 200) runs rc1 (1 GPU) and rc4 (4 GPUs): 5 < 6 when the cycle starts.
    # Fair shares (16): a asks 8 + 1 + 1 = 10, c 5 + 2 = 7 -> c min(6, 7) = 6, a the other 10.
    # Allocate: neither queue stays within its quota with its next job; c has the higher priority:
    # w3 (2 GPUs) goes on n1 -> c holds 7; then a's w0 takes n1's last GPU -> a holds 9.
    # a's w1 (1 GPU) waits: 9 + 1 <= 10, so a may reclaim, and c holds 7 > 6: rc1 may go. But the
    # re-allocation runs in queue order, c (priority 200) before a: rc1 goes back on its own node, w1
    # finds no place, and the scenario fails. Nothing is evicted, in this round or the next.
    objects = [node("n0", gpus=8), node("n1", gpus=8), gq("a", 0), gq("c", 6, weight=0, priority=200)]
    for i, gpus in enumerate([1, 2, 1, 2, 2]):
        objects += job(f"r{i}", "a", gpus=gpus, nodes="n0", age=500 - i)
    objects += job("rc1", "c", gpus=1, nodes="n1", age=300) + job("rc4", "c", gpus=4, nodes="n1", age=400)
    objects += job("w3", "c", gpus=2, age=3) + job("w0", "a", age=5) + job("w1", "a", age=4)
    result = run(objects, rounds=2)
    assert placed(result) == {"ns/w3": "n1", "ns/w0": "n1"}
    assert result["rounds"][0]["evicted"] == [] and result["rounds"][1]["evicted"] == []


def leaf_within_quota_under_a_parent_over_its_share() -> list[dict]:
    """n0 (8 GPUs). Parent p (quota 0, weight 0) holds leaf a (quota 6) running r0 (1 GPU) and r1 (2 x 2
    GPUs); top-level c (quota 0, weight 1) waits with a gang of 2 x 2 GPUs. Fair shares (8): at the top,
    nothing deserved; only c has weight: c gets its 4, p 0. Inside p, a gets min(6, 5) = 5."""
    objects = [node("n0", gpus=8), gq("p", 0, weight=0), gq("a", 6, parent="p", weight=0)]
    objects += [gq("b", 0, parent="p", weight=0), gq("c", 0)]
    objects += job("r0", "a", nodes="n0", age=500) + job("r1", "a", gpus=2, size=2, nodes="n0", age=499)
    return objects + job("w0", "c", gpus=2, size=2, age=0)


def test_a_leaf_within_its_quota_loses_pods_when_its_parent_is_over_its_share() -> None:
    # c: 0 + 4 <= 4 may reclaim. The queues are compared where their paths meet: p against c. p holds 5 >
    # its allocatable share max(0, 0) = 0: r1 (the newest, a gang of 4 GPUs) goes, though a holds 5 < 6.
    result = run(leaf_within_quota_under_a_parent_over_its_share(), config=ONLY_RECLAIM)
    assert evictions(result) == {"ns/r1-0": ("reclaim", "ns/w0"), "ns/r1-1": ("reclaim", "ns/w0")}


def test_opt_in_a_queue_within_its_quota_at_cycle_start_keeps_its_pods() -> None:
    # reclaimSparesQueuesWithinQuota: a holds 5 <= 6 when the cycle starts, so nothing of a's may go.
    config = {**ONLY_RECLAIM, "schedulerParams": {"reclaimSparesQueuesWithinQuota": True}}
    result = run(leaf_within_quota_under_a_parent_over_its_share(), config=config)
    assert result["rounds"][0]["evicted"] == []


def placed_this_cycle() -> list[dict]:
    """n1 (8 GPUs): queue c (quota 0) runs c0..c5 (1 GPU each, c5 the newest); 2 GPUs free. a (quota 4)
    waits with one 4-GPU pod, c with cs (1 GPU, the newest job). Fair shares: a 4, c 4 (the surplus)."""
    objects = [node("n1", gpus=8), gq("a", 4), gq("c", 0)]
    for i in range(6):
        objects += job(f"c{i}", "c", nodes="n1", age=100 - i)
    return objects + job("big", "a", gpus=4, age=10) + job("cs", "c", age=5)


def test_a_pod_placed_earlier_in_the_cycle_may_be_reclaimed() -> None:
    # Allocate: a first (0 + 4 within its quota) but 2 GPUs are not enough; c's cs takes one (c holds 7).
    # Reclaim: a 0 + 4 <= 4. Victims newest first: cs (just placed), c5, c4: 1 free + 3 = 4; c stays above
    # its share 4 before each chunk (7, 6, 5). a ranks first in the re-allocation: big takes the 4.
    result = run(placed_this_cycle(), config=ONLY_RECLAIM)
    assert result["rounds"][0]["bound"] == [{"pod": "ns/cs", "node": "n1", "gpuGroups": []}]
    assert set(evictions(result)) == {"ns/cs", "ns/c5", "ns/c4"}
    assert result["rounds"][0]["pipelined"] == [{"pod": "ns/big", "node": "n1"}]


def test_opt_in_pods_placed_earlier_in_the_cycle_are_never_victims() -> None:
    # spareJobsPlacedThisCycle: cs is not a candidate; c5, c4, c3 go instead (c: 7, 6, 5 > 4 before each).
    config = {**ONLY_RECLAIM, "schedulerParams": {"spareJobsPlacedThisCycle": True}}
    result = run(placed_this_cycle(), config=config)
    assert set(evictions(result)) == {"ns/c5", "ns/c4", "ns/c3"}


def test_victims_that_turn_out_unneeded_are_spared() -> None:
    # n1 is full of queue a's jobs (quota 0): big (4 GPUs), v1 (1 GPU, the newest) and three older
    # 1-GPU jobs. b (quota 4) wants 4 GPUs; fair shares a 4, b 4. Victims come newest first: v1 alone
    # frees 1 GPU (not enough), then big: together 5 GPUs. big alone is enough, so v1 is spared.
    objects = [node("n1", gpus=8), gq("a", 0), gq("b", 4)]
    objects += job("big", "a", gpus=4, nodes="n1", age=50) + job("v1", "a", nodes="n1", age=5)
    for i in range(3):
        objects += job(f"o{i}", "a", nodes="n1", age=100 - i)
    result = run([*objects, *job("want", "b", gpus=4, age=1)], config=ONLY_RECLAIM)
    assert evictions(result) == {"ns/big": ("reclaim", "ns/want")}


def consolidating_case() -> list[dict]:
    """n1: a's a0..a3 (1 GPU each, the newest); n2: a's a4, a5 and 2 free GPUs. b wants one 4-GPU pod.
    Fair shares (8): deserved a 0, b min(2, 4) = 2; the 6 left split 1:1 (slices of 3): b wants 2 more
    (sated), a takes 3, then a the last 1: b 4, a 4. a holds 6 > 4. b would exceed its quota (4 > 2), so
    only MaintainFairShare can let it reclaim: a must be above 4 before each chunk."""
    objects = [node("n1", gpus=4), node("n2", gpus=4), gq("a", 0), gq("b", 2)]
    for i in range(4):
        objects += job(f"a{i}", "a", nodes="n1", age=10 - i)
    objects += job("a4", "a", nodes="n2", age=50) + job("a5", "a", nodes="n2", age=40)
    return [*objects, *job("want", "b", gpus=4, age=0)]


def test_consolidating_reclaim_places_victims_again_and_counts_only_the_lost_ones() -> None:
    # Newest first: a3, a2, a1, a0 on n1. Clearing n1 frees 4 GPUs; two of the four fit n2's free GPUs
    # again (pipelined there), so a really loses 2: 6 -> 4, still >= its share before each chunk.
    result = run(consolidating_case(), config=ONLY_RECLAIM)
    assert set(evictions(result)) == {"ns/a0", "ns/a1", "ns/a2", "ns/a3"}
    pipelined = {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]}
    assert pipelined.pop("ns/want") == "n1"
    assert len(pipelined) == 2 and set(pipelined.values()) == {"n2"}


def test_without_consolidating_reclaim_every_victim_counts() -> None:
    # Clearing n1 now costs a 4 GPUs, moved ones included: 6 > 4, 5 > 4, then 4 > 4 fails -> rejected;
    # n1 is not cleared. (KAI then takes nothing at all; kai goes on to n2: a5 and a4, 6 -> 5 -> 4.)
    config = {**ONLY_RECLAIM, "schedulerParams": {"allowConsolidatingReclaim": False}}
    result = run(consolidating_case(), config=config)
    assert not {"ns/a0", "ns/a1", "ns/a2", "ns/a3"} & set(evictions(result))


def too_big_first() -> list[dict]:
    """One node of 8 GPUs, quotas 4/4. Queue a runs three 1-GPU jobs and a 2 x 2-GPU gang (the newest: 7
    GPUs); b runs 1 and waits with three 1-GPU jobs. Fair shares: a 4, b 4."""
    from tests.scenario import pod, podgroup, queue

    quota = {"quota": 4, "overQuotaWeight": 1, "limit": -1}
    objects = [node("n1", gpus=8), queue("a", gpu=quota), queue("b", gpu=quota)]
    for i in range(3):
        objects += [podgroup(f"a-{i}", "a"), pod(f"a-{i}", group=f"a-{i}", gpus=1, node="n1")]
    objects += [podgroup("a-gang", "a", min_member=2)]
    objects += [pod(f"a-gang-{i}", group="a-gang", gpus=2, node="n1") for i in range(2)]
    objects += [podgroup("b-3", "b"), pod("b-3", group="b-3", gpus=1, node="n1")]
    for i in range(3):
        objects += [podgroup(f"b-{i}", "b"), pod(f"b-{i}", group=f"b-{i}", gpus=1)]
    return objects


def test_the_first_victim_goes_whole_even_when_it_takes_its_queue_below_quota() -> None:
    # b-0 (0 + 1 after b-3's 1: 2 <= 4) may reclaim. The gang is the newest victim: a holds 7 > 4 before
    # it, so all 4 GPUs go (a ends at 3 < 4); b-0, b-1 and b-2 fit the freed GPUs (b first: within quota).
    result = run(too_big_first(), rounds=3)
    evicted = sorted(e["pod"] for e in result["rounds"][0]["evicted"])
    assert evicted == ["ns/a-gang-0", "ns/a-gang-1"]
    assert {q: v["allocated"]["gpu"] for q, v in result["queues"].items()} == {"a": 3.0, "b": 4.0}


def test_opt_in_a_victim_too_big_to_take_does_not_block_the_small_ones_behind_it() -> None:
    # reclaimKeepsVictimShare: taking the gang would leave a with 3 GPUs, below its quota of 4: it is
    # passed over, and a's three single jobs make room for b instead.
    result = run(too_big_first(), rounds=3, config={"schedulerParams": KEEP_SHARE})
    evicted = sorted(e["pod"] for e in result["rounds"][0]["evicted"])
    assert evicted == ["ns/a-0", "ns/a-1", "ns/a-2"]
    assert {q: v["allocated"]["gpu"] for q, v in result["queues"].items()} == {"a": 4.0, "b": 4.0}


def test_pods_sharing_a_gpu_are_reclaimed_together_to_free_it_whole() -> None:
    # n1 has 2 GPUs, each shared by two half-GPU pods of queue a (quota 0): f0, f1 on g0, f2, f3 (newest)
    # on g1. b (quota 2) wants one whole GPU: fair shares b 1, a 1 (a holds 2). Newest first: f3 frees
    # half of g1, f2 the other half (a: 2 > 1, then 1.5 > 1 before each chunk); then g1 is free whole.
    from tests.scenario import pod, podgroup

    objects = [node("n1", gpus=2), gq("a", 0), gq("b", 2)]
    for i in range(4):
        made = f"2025-12-31T0{i}:00:00Z"
        shared = pod(f"f{i}", group=f"f{i}", gpus=0, node="n1", created=made)
        shared["metadata"]["annotations"]["gpu-fraction"] = "0.5"
        shared["metadata"]["labels"]["runai-gpu-group"] = f"g{i // 2}"
        objects += [podgroup(f"f{i}", "a", created=made), shared]
    objects += [podgroup("w", "b"), pod("w", group="w", gpus=1)]
    result = run(objects, rounds=2, config=ONLY_RECLAIM)
    assert evictions(result) == {"ns/f2": ("reclaim", "ns/w"), "ns/f3": ("reclaim", "ns/w")}
    assert status(result, "ns/w") == "Running"


def test_an_elastic_gang_that_must_shrink_below_its_min_member_is_reclaimed_whole() -> None:
    # One 4-GPU node. Queue a runs j0 (1 GPU) and j2 (3 pods of 1 GPU, minMember 2); queue c waits with
    # j3 (2 GPUs). Quotas 0, weights 1: fair shares a = 2, c = 2; a holds 4 > 2, so c may reclaim 2.
    # Victim order in a: the newest job first, j2: its one extra pod (1 GPU) is not enough, so the rest
    # of the gang goes too (3 GPUs freed). j3 takes 2; the one GPU left could hold j2's extra pod again,
    # but alone it would run j2 below its minMember of 2: j2 stays evicted whole, j0 keeps running.
    objects = [node("n0", gpus=4), gq("a", 0), gq("c", 0)]
    objects += job("j0", "a", nodes="n0", age=100)
    objects += job("j2", "a", nodes="n0", size=3, min_member=2, age=50)
    objects += job("j3", "c", gpus=2, age=1)
    result = run(objects, config=ONLY_RECLAIM)
    assert evictions(result) == {f"ns/j2-{i}": ("reclaim", "ns/j3") for i in range(3)}
    assert status(result, "ns/j0") == "Running"
    assert placed(result) == {"ns/j3": "n0"}


def queue_led_by_a_job(first_gpus: int) -> list[dict]:
    """n0 (4 GPUs) is full of queue a's j0 (1 GPU) and j2 (3 x 1 GPU, minMember 2). Queue c waits with j1
    (`first_gpus`, older, so first in c's line) and j3 (2 GPUs). Quotas 2 and 2: fair shares 2 and 2."""
    objects = [node("n0", gpus=4), gq("a", 2), gq("c", 2)]
    objects += job("j0", "a", nodes="n0", age=100) + job("j2", "a", size=3, min_member=2, nodes="n0", age=90)
    return objects + job("j1", "c", gpus=first_gpus, age=20) + job("j3", "c", gpus=2, age=10)


def test_a_queue_whose_first_job_would_take_it_far_over_its_share_reclaims_nothing() -> None:
    # j1 (4 GPUs) may not reclaim (0 + 4 > c's fair share 2); j3 may (0 + 2 <= 2), and evicting j2 whole
    # frees 3 GPUs. The re-allocation after the eviction runs in queue order, and a queue is ranked by
    # the first job in its line, pending jobs that are not part of the scenario included: c by j1,
    # (0 + 4) / 4 = 1 of the cluster; a by j2's next batch, its minMember of 2 pods, (1 + 2) / 4 = 0.75.
    # a goes first, j2 takes 2 GPUs back, 1 GPU is left for j3's 2: no scenario, nothing evicted.
    result = run(queue_led_by_a_job(4), rounds=2)
    assert result["rounds"][0]["evicted"] == [] and result["rounds"][1]["evicted"] == []
    assert status(result, "ns/j2-0") == status(result, "ns/j2-2") == "Running"


def test_a_queue_whose_first_job_is_smaller_reclaims_for_the_next_one() -> None:
    # The same with j1 asking for 3 GPUs: c with j1 is (0 + 3) / 4 = 0.75, a tie with a; without the
    # jobs c holds 0 and a 1: c goes first, j1 is not placed (it is no part of the scenario), j3 takes 2
    # of the 3 freed GPUs and j2 (2 GPUs) finds 1. j2 is reclaimed whole, for j3.
    result = run(queue_led_by_a_job(3), rounds=1)
    assert evictions(result) == {f"ns/j2-{i}": ("reclaim", "ns/j3") for i in range(3)}


def test_a_victim_placed_back_for_the_first_pod_is_no_victim_of_the_next() -> None:
    # n1 (8 GPUs): t (6) and s (1) of q0 under d0, 1 GPU idle; n2 (8): gang g (8 x 1, minMember 8) of q1.
    # d0 and d1 deserve 8 each; inside d1, q1 deserves 2 and q2 6, where r waits (2 x 1 GPU).
    # Victim order: d0 without s keeps 6/8 of its share, d1 without g 0: s comes first.
    # r's first pod: with s evicted, r-0 takes n1's idle GPU and s goes back on its node: solved, s is
    # no victim. r's second pod: s alone is refused (d0, 7 of its 8, may not give up), so is t; g
    # (q1 holds 8 > 2) is taken whole: r on n1's idle GPU and n2, g finds 7 GPUs for its 8 and stays
    # evicted. s is not part of that scenario: it keeps running.
    objects = [node("n1", gpus=8), node("n2", gpus=8), gq("d0", 8), gq("d1", 8)]
    objects += [gq("q0", 8, parent="d0"), gq("q1", 2, parent="d1"), gq("q2", 6, parent="d1")]
    objects += job("t", "q0", gpus=6, nodes="n1", age=300) + job("s", "q0", nodes="n1", age=200)
    objects += job("g", "q1", size=8, nodes="n2", age=250) + job("r", "q2", size=2, age=10)
    result = run(objects, rounds=1)
    assert evictions(result) == {f"ns/g-{i}": ("reclaim", "ns/r") for i in range(8)}
    assert status(result, "ns/s") == status(result, "ns/t") == "Running"


def test_a_victim_placed_back_for_the_first_pod_is_tried_first_for_the_next() -> None:
    # n1 (4 GPUs): A2 (2) and x1 (1) of a (quota 3), 1 idle; n2 (4): gang big (4 x 1) of b (quota 1).
    # c (quota 4) waits with r (2 x 1 GPU). big comes first in victim order (b holds 4, its share 1).
    # r's first pod goes on n1's idle GPU and big back on n2: solved without a victim. For the second
    # pod big is tried again first: r-1 on n2, big finds 3 GPUs for its 4 and is evicted (b over its
    # share may lose it). a keeps its pods (3, exactly its share).
    objects = [node("n1", gpus=4), node("n2", gpus=4), gq("a", 3), gq("b", 1), gq("c", 4)]
    objects += job("A2", "a", gpus=2, nodes="n1", age=300) + job("x1", "a", nodes="n1", age=200)
    objects += job("big", "b", size=4, nodes="n2", age=250) + job("r", "c", size=2, age=10)
    result = run(objects, rounds=1)
    assert evictions(result) == {f"ns/big-{i}": ("reclaim", "ns/r") for i in range(4)}


def test_a_pipelined_victim_leaves_its_queue_ranked_as_if_it_lost_nothing() -> None:
    # n1: v (4 x 1 GPU, queue q) and h (4 x 1, hq); n2: h2 (5 x 1, hq), 3 GPUs idle; n3 and n4: d (16 x 1,
    # r, quota 0). e (s, 2 x 4 GPUs) and p (q, 8 x 1) wait; quotas q 12, hq 9, s 8: every share is its quota.
    # Reclaim for e takes d whole: e is pipelined on n3, n4's 8 GPUs are being released.
    # Reclaim for p (4 + 8 <= 12): s holds 8 (e, pipelined) = its share, hq 9 = its share. Victim order
    # ranks each queue by what it holds once its next victim is gone, counting only pods that are
    # allocated, not pipelined: s keeps 8/8, hq would keep 4/9. s gives first: with e evicted, p takes
    # n2's 3 idle GPUs and 5 of n4's, and e goes back on n3: nothing is lost, h2 keeps running.
    objects = [node(f"n{i}", gpus=8) for i in range(1, 5)] + [gq("q", 12), gq("hq", 9), gq("r", 0), gq("s", 8)]
    objects += job("v", "q", size=4, nodes="n1", age=300) + job("h", "hq", size=4, nodes="n1", age=400)
    objects += job("h2", "hq", size=5, nodes="n2", age=400)
    objects += job("d", "r", size=16, nodes=["n3"] * 8 + ["n4"] * 8, age=200)
    objects += job("e", "s", gpus=4, size=2, age=20) + job("p", "q", size=8, priority_class="build-preemptible", age=10)
    result = run(objects, rounds=1)
    assert evictions(result) == {f"ns/d-{i}": ("reclaim", "ns/e") for i in range(16)}
    pipelined = {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]}
    assert pipelined == {"ns/e-0": "n3", "ns/e-1": "n3"} | {f"ns/p-{i}": "n2" if i < 3 else "n4" for i in range(8)}
