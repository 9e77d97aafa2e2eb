"""The disruption budget (kai's own, off by default): per cycle, cap the GPUs evicted for one
preemptor relative to the GPUs it asks for, and the GPUs one queue loses."""

from __future__ import annotations

import json

from kai.cycle import known_actions
from kai.framework.config import parse_config
from tests.actions.evict_helpers import evictions, gq, job, status
from tests.scenario import cli_json, node, run, write


def gang_victim() -> list[dict]:
    """Queue a (quota 0) runs one 8-pod gang (1 GPU each) filling an 8-GPU node; queue b (quota 4)
    wants 1 GPU. Fair shares: b min(4, 1) = 1, a gets the other 7 over quota. b may reclaim
    (0 + 1 <= 1) and a is above its share (8 > 7), so without a budget the whole gang (8 GPUs) goes
    to make room for 1 GPU (a does not drop below its quota of 0)."""
    objects = [node("n1", gpus=8), gq("a", 0), gq("b", 4)]
    objects += job("gang", "a", size=8, nodes="n1", age=10)
    return objects + job("small", "b", age=1)


def ratio(value: float) -> dict:
    return {"schedulerParams": {"maxEvictedToRequestedGpuRatio": value}}


def test_without_a_budget_a_gang_is_evicted_for_one_gpu() -> None:
    result = run(gang_victim())
    assert set(evictions(result)) == {f"ns/gang-{i}" for i in range(8)}


def test_ratio_budget_stops_the_eviction_and_says_so() -> None:
    result = run(gang_victim(), config=ratio(2))  # 8 evicted for 1 requested: 8 > 2 x 1
    assert result["rounds"][0]["evicted"] == []
    message = result["podGroups"]["ns/small"]["message"]
    assert "disruption budget" in message and "maxEvictedToRequestedGpuRatio" in message
    assert "8 GPUs for 1 requested" in message


def test_ratio_budget_allows_evictions_within_it() -> None:
    result = run(gang_victim(), config=ratio(8))  # 8 <= 8 x 1
    assert len(evictions(result)) == 8


def full_of_a() -> list[dict]:
    """Queue a (quota 4) runs eight 1-GPU jobs on an 8-GPU node; queue b (quota 4) waits with two
    2-GPU jobs, b1 older than b2. Fair shares 4 and 4: b may take back four GPUs in all."""
    objects = [node("n1", gpus=8), gq("a", 4), gq("b", 4)]
    for i in range(8):
        objects += job(f"a{i}", "a", nodes="n1", age=100 - i)
    return objects + job("b1", "b", gpus=2, age=2) + job("b2", "b", gpus=2, age=1)


def test_per_queue_budget_spreads_evictions_over_cycles() -> None:
    config = {"schedulerParams": {"maxEvictedGpusPerQueuePerCycle": 2}}
    result = run(full_of_a(), rounds=3, config=config)
    # Round 1: b1 takes a7 and a6 (2 GPUs, the budget of queue a); b2 is stopped by the budget.
    assert evictions(result, 1) == {"ns/a7": ("reclaim", "ns/b1"), "ns/a6": ("reclaim", "ns/b1")}
    # Round 2: b1 is bound on the freed GPUs; a new cycle, a new budget: b2 takes a5 and a4.
    assert evictions(result, 2) == {"ns/a5": ("reclaim", "ns/b2"), "ns/a4": ("reclaim", "ns/b2")}
    assert evictions(result, 3) == {}
    assert status(result, "ns/b1") == "Running" and status(result, "ns/b2") == "Running"
    first = run(full_of_a(), config=config)
    message = first["podGroups"]["ns/b2"]["message"]
    # Queue a already lost 2 GPUs this cycle; the first candidate victim (1 GPU) would make it 3 > 2.
    assert "disruption budget" in message and "queue a would lose 3 GPUs" in message


def test_without_the_per_queue_budget_both_reclaim_at_once() -> None:
    result = run(full_of_a())
    assert set(evictions(result)) == {f"ns/a{i}" for i in (4, 5, 6, 7)}


def test_budget_keys_are_read_from_the_config_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    snapshot = write(gang_victim(), tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps(ratio(2)))
    result = cli_json([snapshot], "--config", str(config))
    assert result["rounds"][0]["evicted"] == []
    assert "disruption budget" in result["podGroups"]["ns/small"]["message"]


def test_budget_values_are_checked() -> None:
    _, problems, _ = parse_config({"schedulerParams": {"maxEvictedToRequestedGpuRatio": "lots"}}, known_actions())
    assert [p.field for p in problems] == ["schedulerParams.maxEvictedToRequestedGpuRatio"]
    cfg, problems, _ = parse_config(None, known_actions())
    assert cfg.params.max_evicted_gpu_ratio < 0 and cfg.params.max_evicted_gpus_per_queue < 0  # off
