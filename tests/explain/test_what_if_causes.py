"""`kai what-if` with the cause model: lost GPU-hours "unknown" when a displaced job's start is not known,
counted from its start when it is; a job that never starts says its first cause."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scenario import NOW, node, pod, podgroup, queue, run_cli, write

ONE_HOUR_AGO = "2025-12-31T23:00:00Z"


def snapshot(tmp_path: Path, last_start: str | None) -> Path:
    """One 8-GPU node busy with team-a's 8-GPU training job (priority 50)."""
    group = podgroup("long", "team-a", created=NOW)
    if last_start:
        group["metadata"]["annotations"] = {"kai.scheduler/last-start-timestamp": last_start}
    objects = [
        node("n1", gpus=8),
        queue("team-a", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1}),
        group,
        pod("long-0", group="long", gpus=8, node="n1", created=NOW),
    ]
    return write(objects, tmp_path)


def urgent(tmp_path: Path) -> Path:
    # build (100) preempts the train job of the same queue at once.
    return write(
        [podgroup("urgent", "team-a", priority_class="build"), pod("urgent-0", group="urgent", gpus=8)],
        tmp_path,
        "job.yaml",
    )


def test_lost_gpu_hours_unknown_without_a_start_time(tmp_path: Path) -> None:
    args = ["what-if", "-f", str(snapshot(tmp_path, None)), "--job", str(urgent(tmp_path)), "--now", NOW]
    done = run_cli([*args, "-o", "json"])
    assert done.returncode == 0, done.stderr
    (displaced,) = json.loads(done.stdout)["displaces"]
    assert displaced["podGroup"] == "ns/long" and displaced["lostGpuHours"] is None
    table = run_cli(args)
    assert table.returncode == 0 and "unknown" in table.stdout


def test_lost_gpu_hours_from_the_known_start(tmp_path: Path) -> None:
    # Started an hour ago, 8 GPUs, no checkpoints, preempted at once: 8 x 1 h = 8 GPU-hours lost.
    args = ["what-if", "-f", str(snapshot(tmp_path, ONE_HOUR_AGO)), "--job", str(urgent(tmp_path)), "--now", NOW]
    done = run_cli([*args, "-o", "json"])
    assert done.returncode == 0, done.stderr
    (displaced,) = json.loads(done.stdout)["displaces"]
    assert displaced["lostGpuHours"] == 8.0


def test_a_job_that_never_starts_gives_its_first_cause(tmp_path: Path) -> None:
    job = write([podgroup("huge", "team-a"), pod("huge-0", group="huge", gpus=16)], tmp_path, "job.yaml")
    args = ["what-if", "-f", str(snapshot(tmp_path, None)), "--job", str(job), "--now", NOW, "--horizon", "1h"]
    done = run_cli([*args, "-o", "json"])
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["starts"] is None
    first = answer["causes"][0]
    assert first["code"] == "LargerThanCluster"
    assert first["numbers"] == {"resource": "nvidia.com/gpu", "requested": 16.0, "largestNode": 8.0}
    assert answer["message"] == (
        "Pod ns/huge-0 requests 16 GPUs, more than any single node has (the largest has 8 GPUs). "
        "What would change it: ask for at most 8 GPUs per pod, or add a larger node."
    )
