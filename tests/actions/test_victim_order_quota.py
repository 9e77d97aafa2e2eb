"""Victim queue order: whether a victim queue is within its deserved quota is judged on its allocation
as the session has it, not with the victims already picked from it in the walk removed (those count
only in its dominant share). Checked with KAI's code.
"""

from __future__ import annotations

from typing import Any

from tests.scenario import node, pod, podgroup, queue, run


def _job(name: str, q: str, gpus: int, host: str, second: int) -> list[dict[str, Any]]:
    stamp = f"2026-01-01T00:01:{second:02d}Z"
    return [
        podgroup(name, q, 1, created=stamp),
        pod(f"{name}-0", group=name, queue=q, gpus=gpus, node=host, created=stamp),
    ]


def picked_victims_still_count() -> list[dict[str, Any]]:
    # Five 8-GPU nodes; other schedulers' pods take 4 GPUs on n3 and n5, so the queues divide 32 GPUs.
    # qx (quota 14, no over-quota weight) runs xa 8 (n1), xm 6 (n2), xb 4 (n3): 18 GPUs.
    # qy (quota 2, weight 1) runs ya 4 (n5), yb 4 (n4): 8 GPUs. qr (quota 8) wants one 8-GPU pod.
    # Fair shares: deserved 14 + 2 + 8 = 24, the 8 left go to qy (up to its request): qx 14, qy 8, qr 8.
    # Free: 2 GPUs on n2, 4 on n4: no node has 8, so qr reclaims (0 + 8 within its share).
    return [
        queue("qx", gpu={"quota": 14, "overQuotaWeight": 0, "limit": -1}, created="2026-01-01T00:00:01Z"),
        queue("qy", gpu={"quota": 2, "overQuotaWeight": 1, "limit": -1}, created="2026-01-01T00:00:02Z"),
        queue("qr", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1}, created="2026-01-01T00:00:03Z"),
        *(node(f"n{i}", gpus=8) for i in range(1, 6)),
        *_job("xa", "qx", 8, "n1", 1), *_job("xm", "qx", 6, "n2", 2), *_job("xb", "qx", 4, "n3", 3),
        *_job("ya", "qy", 4, "n5", 4), *_job("yb", "qy", 4, "n4", 5),
        pod("foreign-3", node="n3", gpus=4, scheduler="default-scheduler"),
        pod("foreign-5", node="n5", gpus=4, scheduler="default-scheduler"),
        podgroup("r", "qr", 1, created="2026-01-01T00:02:00Z"),
        pod("r-0", group="r", queue="qr", gpus=8),
    ]


def test_a_queue_stays_over_its_quota_while_its_victims_are_only_picked() -> None:
    # Both victim queues are above their quota (qx 18 > 14, qy 8 > 2); first the larger dominant share
    # once the next victim is gone: qx (18 - 4) / 14 = 1.0 against qy (8 - 4) / 8 = 0.5, so xb (the
    # newest of qx) is picked; alone it frees only 4 GPUs on n3: no room. Next: qx is still above its
    # quota (18, though 14 once xb is taken away), so again the dominant shares decide: qx
    # (18 - 4 - 6) / 14 = 0.57 against qy 0.5: xm is picked and frees n2 (6 + 2 idle): r is pipelined
    # there and xm evicted (qx is above its share of 14). Judging qx without xb would have made it
    # within its quota and sent the walk to qy's yb first.
    result = run(picked_victims_still_count())
    assert [e["pod"] for e in result["rounds"][0]["evicted"]] == ["ns/xm-0"]
    assert {p["pod"]: p["node"] for p in result["rounds"][0]["pipelined"]} == {"ns/r-0": "n2"}
