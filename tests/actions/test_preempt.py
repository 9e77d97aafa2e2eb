"""preempt: within one queue, a pending job evicts preemptible jobs of strictly lower priority.

Priority classes: train 50 (preemptible), build-preemptible 75, build 100 and inference 125
(non-preemptible). A job's priority is its PodGroup's priorityClassName.
"""

from __future__ import annotations

from tests.actions.evict_helpers import evictions, gq, job, placed, status
from tests.scenario import node, run

ONLY_PREEMPT = {"actions": "allocate, preempt"}


def full_queue(waiting_class: str, running_class: str = "train") -> list[dict]:
    """n1 (8 GPUs): queue q (quota 4) runs four 1-GPU jobs l0 (oldest) .. l3 (newest); queue r (quota 4)
    runs four 1-GPU train jobs too. q waits with a 2-GPU job of `waiting_class`."""
    objects = [node("n1", gpus=8), gq("q", 4), gq("r", 4)]
    for i in range(4):
        objects += job(f"l{i}", "q", nodes="n1", priority_class=running_class, age=100 - i)
        objects += job(f"o{i}", "r", nodes="n1", age=200 - i)
    return objects + job("hi", "q", gpus=2, priority_class=waiting_class, age=1)


def test_higher_priority_job_preempts_the_newest_lower_priority_jobs_of_its_queue() -> None:
    # Reclaim cannot help: q's fair share is min(4, 6) = 4 and 4 + 2 > 4. Preempt: victims are q's
    # preemptible jobs of priority < 100: l0..l3 (50). Newest first: l3, then l2 - two GPUs freed.
    # Queue r's jobs (same priority 50, another queue) are never preempt victims.
    result = run(full_queue("build"), rounds=2)
    assert evictions(result) == {"ns/l3": ("preempt", "ns/hi"), "ns/l2": ("preempt", "ns/hi")}
    assert placed(result) == {"ns/hi": "n1"}
    assert status(result, "ns/hi") == "Running"
    assert result["rounds"][1]["evicted"] == []
    # After the round that evicted it, the victim says by whom (a later round says why it waits).
    message = run(full_queue("build"))["podGroups"]["ns/l3"]["message"]
    assert "preempt" in message and "ns/hi" in message and "queue q" in message


def test_equal_priority_job_is_never_preempted() -> None:
    result = run(full_queue("train"), rounds=2, config=ONLY_PREEMPT)
    assert result["rounds"][0]["evicted"] == [] and result["rounds"][1]["evicted"] == []
    assert result["podGroups"]["ns/hi"]["status"] == "Pending"


def test_preemptible_higher_priority_job_also_preempts() -> None:
    # build-preemptible (75) > train (50).
    result = run(full_queue("build-preemptible"), config=ONLY_PREEMPT)
    assert set(evictions(result)) == {"ns/l3", "ns/l2"}


def test_non_preemptible_jobs_are_never_preempted() -> None:
    # The running jobs are build (100, non-preemptible); the waiting one is inference (125).
    result = run(full_queue("inference", running_class="build"), config=ONLY_PREEMPT)
    assert result["rounds"][0]["evicted"] == []


def test_lower_priority_waiting_job_does_not_preempt_higher_priority_running_ones() -> None:
    result = run(full_queue("train", running_class="build-preemptible"), config=ONLY_PREEMPT)
    assert result["rounds"][0]["evicted"] == []


def test_non_preemptible_preemptor_must_stay_within_its_queue_quota() -> None:
    # q's quota is 1: a non-preemptible 2-GPU job would take q's non-preemptible use to 0 + 2 > 1,
    # so it may not preempt (nor be allocated), however low the running jobs' priority.
    objects = [node("n1", gpus=4), gq("q", 1)]
    for i in range(4):
        objects += job(f"l{i}", "q", nodes="n1", age=100 - i)
    result = run([*objects, *job("hi", "q", gpus=2, priority_class="build")], config=ONLY_PREEMPT)
    assert result["rounds"][0]["evicted"] == []
    assert "quota" in result["podGroups"]["ns/hi"]["message"]


def test_preemption_takes_the_lowest_priority_victims_first() -> None:
    # q runs one build-preemptible (75) job and one train (50) job, 2 GPUs each, on a 4-GPU node.
    # An inference (125) 2-GPU job arrives: the train job goes first even though it is older.
    objects = [node("n1", gpus=4), gq("q", 4)]
    objects += job("mid", "q", gpus=2, nodes="n1", priority_class="build-preemptible", age=10)
    objects += job("low", "q", gpus=2, nodes="n1", priority_class="train", age=20)
    result = run([*objects, *job("top", "q", gpus=2, priority_class="inference")], config=ONLY_PREEMPT)
    assert evictions(result) == {"ns/low": ("preempt", "ns/top")}


def test_a_job_no_node_could_ever_hold_evicts_nothing() -> None:
    # hi asks for more CPU than any node has: no eviction can help, nothing is touched.
    objects = full_queue("build")
    objects[-1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000"
    result = run(objects, config=ONLY_PREEMPT)
    assert result["rounds"][0]["evicted"] == []
    assert "more than any single node has" in result["podGroups"]["ns/hi"]["message"]


def test_the_scenario_that_completes_the_job_places_all_of_its_pods_before_the_victims() -> None:
    # n1: v (4 x 1 GPU, queue q, train) and h (4 x 1, hq); n2: h2 (5 x 1, hq), 3 GPUs idle; n3 and n4:
    # d (16 x 1, r, quota 0). e (s, 2 x 4 GPUs) and p (q, 8 x 1, build-preemptible) wait. Quotas: q 4
    # (weight 0), hq 9, s 8. Reclaim for e takes d: e is pipelined on n3, n4's 8 GPUs are being released.
    # p may not reclaim (q would hold 12 > 4); it preempts v (lower priority, same queue). The scenario
    # that completes p simulates its 8 pods first (p ranks before v in q): n2's 3 idle GPUs, then the
    # fullest nodes with released GPUs, n1 (v's 4) and 1 of n4's; v's gang goes to n4, all 4 pods moved.
    # (Placing p's first pod, then v, then p's other pods put half of v back on n1 and half on n2.)
    objects = [node(f"n{i}", gpus=8) for i in range(1, 5)]
    objects += [gq("q", 4, weight=0), gq("hq", 9), gq("r", 0), gq("s", 8)]
    objects += job("v", "q", size=4, nodes="n1", age=300) + job("h", "hq", size=4, nodes="n1", age=400)
    objects += job("h2", "hq", size=5, nodes="n2", age=400)
    objects += job("d", "r", size=16, nodes=["n3"] * 8 + ["n4"] * 8, age=200)
    objects += job("e", "s", gpus=4, size=2, age=20) + job("p", "q", size=8, priority_class="build-preemptible", age=10)
    result = run(objects, rounds=1)
    evicted = {e["pod"]: e["action"] for e in result["rounds"][0]["evicted"]}
    assert {k: a for k, a in evicted.items() if not k.startswith("ns/d-")} == {f"ns/v-{i}": "preempt" for i in range(4)}
    pipelined = {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]}
    assert {k: n for k, n in pipelined.items() if k.startswith("ns/p-")} == {
        f"ns/p-{i}": "n2" if i < 3 else "n1" if i < 7 else "n4" for i in range(8)
    }
    assert {pipelined[f"ns/v-{i}"] for i in range(4)} == {"n4"}
