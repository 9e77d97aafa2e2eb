"""Pods of another scheduler are load on their nodes, fractional ones included (through the real CLI).

A running gpu-fraction pod of another scheduler, placed on a GPU (label `runai-gpu-group`), holds that
GPU: a whole-GPU pod of ours cannot go on top of it, a fraction of ours may share what is left, and
its portion is taken out of the GPUs the queues divide (as KAI does)."""

from __future__ import annotations

from pathlib import Path

from tests.scenario import cli_json, node, pod, queue, write


def cluster(*pending: dict) -> list[dict]:
    unlimited = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    foreign = pod(
        "other",
        node="n1",
        scheduler="other-scheduler",
        labels={"runai-gpu-group": "g1"},
        annotations={"gpu-fraction": "0.5"},
    )
    return [
        node("n1", gpus=1, labels={"nvidia.com/gpu.memory": "40000"}),
        queue("root", gpu=unlimited),
        queue("q", "root", gpu=unlimited),
        foreign,
        *pending,
    ]


def test_whole_gpu_pod_is_not_bound_on_a_gpu_a_foreign_fraction_uses(tmp_path: Path) -> None:
    result = cli_json([write(cluster(pod("whole", queue="q", gpus=1)), tmp_path)])
    assert result["rounds"][0]["bound"] == []
    assert result["pods"]["ns/whole"]["status"] == "Pending"
    assert result["queues"]["q"]["fairShare"]["gpu"] == 0.5  # 1 GPU less the foreign half


def test_a_fraction_of_ours_shares_the_rest_of_that_gpu(tmp_path: Path) -> None:
    frac = pod("frac", queue="q", annotations={"gpu-fraction": "0.5"})
    result = cli_json([write(cluster(frac), tmp_path)])
    assert result["rounds"][0]["bound"] == [{"gpuGroups": ["g1"], "node": "n1", "pod": "ns/frac"}]


def test_a_second_foreign_half_fills_the_gpu(tmp_path: Path) -> None:
    second = pod(
        "other-2",
        node="n1",
        scheduler="other-scheduler",
        labels={"runai-gpu-group": "g1"},
        annotations={"gpu-fraction": "0.5"},
    )
    frac = pod("frac", queue="q", annotations={"gpu-fraction": "0.5"})
    result = cli_json([write([*cluster(frac), second], tmp_path)])
    assert result["rounds"][0]["bound"] == []
