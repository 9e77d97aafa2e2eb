"""minruntime: a job that started less than its queue's minimum runtime ago survives preempt and
reclaim. NOW is 2026-01-01T00:00:00Z; "5 minutes ago" is 2025-12-31T23:55:00Z."""

from __future__ import annotations

from typing import Any

import pytest

from kai.framework.config import DEFAULT_PLUGINS
from kai.plugins.minruntime import _factory as minruntime_factory
from tests.actions.evict_helpers import evictions, gq, job
from tests.scenario import node, run

FIVE_MIN_AGO = "2025-12-31T23:55:00Z"
TWENTY_MIN_AGO = "2025-12-31T23:40:00Z"


def with_runtimes(queue: dict[str, Any], preempt: str | None = None, reclaim: str | None = None) -> dict[str, Any]:
    if preempt is not None:
        queue["spec"]["preemptMinRuntime"] = preempt
    if reclaim is not None:
        queue["spec"]["reclaimMinRuntime"] = reclaim
    return queue


def preempt_case(started: str, queue_runtime: str | None = "10m", parent_runtime: str | None = None) -> list[dict]:
    """Queue q (under dept) runs two 2-GPU train jobs on a 4-GPU node, both started at `started`;
    a build (100) job of q needs 2 GPUs: the newest train job is the victim unless protected."""
    objects = [
        node("n1", gpus=4),
        with_runtimes(gq("dept", 4), preempt=parent_runtime),
        with_runtimes(gq("q", 4, parent="dept"), preempt=queue_runtime),
    ]
    objects += job("old", "q", gpus=2, nodes="n1", last_start=started, age=20)
    objects += job("new", "q", gpus=2, nodes="n1", last_start=started, age=10)
    return objects + job("hi", "q", gpus=2, priority_class="build", age=1)


def test_protected_job_survives_preemption() -> None:
    # 5 minutes < 10 minutes: neither train job may be preempted.
    assert run(preempt_case(FIVE_MIN_AGO))["rounds"][0]["evicted"] == []


def test_job_past_its_min_runtime_is_preempted() -> None:
    assert evictions(run(preempt_case(TWENTY_MIN_AGO))) == {"ns/new": ("preempt", "ns/hi")}


def test_job_without_a_start_time_is_not_protected() -> None:
    objects = preempt_case(FIVE_MIN_AGO)
    for obj in objects:
        if obj["kind"] == "PodGroup":
            obj["metadata"].pop("annotations", None)
    assert evictions(run(objects)) == {"ns/new": ("preempt", "ns/hi")}


def test_min_runtime_is_inherited_from_the_parent_queue() -> None:
    assert run(preempt_case(FIVE_MIN_AGO, queue_runtime=None, parent_runtime="10m"))["rounds"][0]["evicted"] == []
    # The nearest value wins: the leaf's 1m overrides the parent's 10m.
    result = run(preempt_case(FIVE_MIN_AGO, queue_runtime="1m", parent_runtime="10m"))
    assert evictions(result) == {"ns/new": ("preempt", "ns/hi")}


def config_with_minruntime(**arguments: str) -> dict[str, Any]:
    plugins = [{"name": n, "arguments": arguments} if n == "minruntime" else {"name": n} for n in DEFAULT_PLUGINS]
    return {"tiers": [{"plugins": plugins}]}


def test_plugin_default_applies_when_no_queue_sets_one() -> None:
    objects = preempt_case(FIVE_MIN_AGO, queue_runtime=None)
    assert run(objects, config=config_with_minruntime(defaultPreemptMinRuntime="1h"))["rounds"][0]["evicted"] == []
    assert evictions(run(objects)) == {"ns/new": ("preempt", "ns/hi")}  # default 0s


def reclaim_case() -> list[dict]:
    """Top-level A (reclaimMinRuntime 1h) with leaf a1 (reclaimMinRuntime 0s) runs eight 1-GPU jobs
    started 5 minutes ago on an 8-GPU node; top-level B's leaf b1 waits with a 4-GPU job.
    Fair shares: A and B deserve 4 each and ask 8 and 4 -> 4 and 4; a1 4, b1 4. b1 may reclaim
    (0 + 4 <= 4) and A is above its share (8 > 4): four of a1's jobs would go, unless protected."""
    objects = [
        node("n1", gpus=8),
        with_runtimes(gq("A", 4), reclaim="1h"),
        with_runtimes(gq("a1", 4, parent="A"), reclaim="0s"),
        gq("B", 4),
        gq("b1", 4, parent="B"),
    ]
    for i in range(8):
        objects += job(f"a{i}", "a1", nodes="n1", last_start=FIVE_MIN_AGO, age=100 - i)
    return objects + job("want", "b1", gpus=4, age=1)


def test_reclaim_lca_method_uses_the_victims_top_level_queue_across_trees() -> None:
    # Default method lca: the two queues are in different trees -> the victim's top-level queue A
    # decides: 1h -> protected, nothing is reclaimed.
    assert run(reclaim_case())["rounds"][0]["evicted"] == []


def test_reclaim_queue_method_walks_up_from_the_victims_queue() -> None:
    # Method queue: a1's own 0s is found first -> not protected -> the four newest jobs go.
    result = run(reclaim_case(), config=config_with_minruntime(reclaimResolveMethod="queue"))
    assert evictions(result) == {f"ns/a{i}": ("reclaim", "ns/want") for i in (4, 5, 6, 7)}


def test_reclaim_lca_method_within_one_tree_starts_below_the_common_ancestor() -> None:
    # Move the reclaimer under A too (leaf a2): the lowest common ancestor is A, one level down toward
    # the victim is a1, whose 0s applies -> not protected. Fair shares inside A (8): a1 min(4, 8) = 4,
    # a2 min(4, 4) = 4 -> a2 may reclaim four of a1's jobs (8 > 4).
    objects = [o for o in reclaim_case() if o["metadata"]["name"] not in ("B", "b1", "want")]
    objects.append(gq("a2", 4, parent="A"))
    objects += job("want", "a2", gpus=4, age=1)
    assert evictions(run(objects)) == {f"ns/a{i}": ("reclaim", "ns/want") for i in (4, 5, 6, 7)}


def elastic_case(started: str, wanted_gpus: int) -> list[dict]:
    """Elastic job e (minMember 2, four 1-GPU pods) fills a 4-GPU node; q's min runtime 10m."""
    objects = [node("n1", gpus=4), with_runtimes(gq("q", 4), preempt="10m")]
    objects += job("e", "q", size=4, min_member=2, nodes="n1", last_start=started, age=10)
    return objects + job("hi", "q", gpus=wanted_gpus, priority_class="build", age=1)


def test_protected_elastic_job_loses_only_pods_above_its_minimum() -> None:
    # 2 GPUs wanted: the two extra pods go (newest in task order first), e keeps its minimum of 2.
    result = run(elastic_case(FIVE_MIN_AGO, 2))
    assert evictions(result) == {"ns/e-3": ("preempt", "ns/hi"), "ns/e-2": ("preempt", "ns/hi")}
    assert result["podGroups"]["ns/e"]["message"].startswith("preempt evicted 2 pod(s) to make room for ns/hi")
    # 4 GPUs wanted: only breaking the gang would do, and e is protected: nothing is evicted.
    assert run(elastic_case(FIVE_MIN_AGO, 4))["rounds"][0]["evicted"] == []


def test_unprotected_elastic_job_can_lose_everything() -> None:
    result = run(elastic_case(TWENTY_MIN_AGO, 4))
    assert set(evictions(result)) == {f"ns/e-{i}" for i in range(4)}


def test_arguments_are_checked() -> None:
    plugin = minruntime_factory({"defaultPreemptMinRuntime": "90s", "reclaimResolveMethod": "queue"})
    assert plugin.default_preempt == 90.0 and plugin.method == "queue"
    with pytest.raises(ValueError):
        minruntime_factory({"reclaimResolveMethod": "nearest"})
    with pytest.raises(ValueError):
        minruntime_factory({"defaultReclaimMinRuntime": "soon"})
