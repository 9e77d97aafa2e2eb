"""`kai simulate -o table`: the queue table shows what each queue holds once the last round's
decisions are applied (and says so), while the JSON keeps the contract's figures as the round opened."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.scenario import KAI, NOW, node, pod, queue, write


def table_rows(path: Path, *extra: str) -> tuple[list[str], dict[str, list[str]]]:
    """(column headings, queue -> cells) of the queue table."""
    done = subprocess.run(
        [str(KAI), "simulate", "-f", str(path), "--now", NOW, "-o", "table", *extra],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if "GPU quota" in line)
    headings = [cell.strip() for cell in header.strip("┃ ").split("┃")]
    rows = {}
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("│"):
            break
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        rows[cells[0]] = cells
    return headings, rows


def test_queue_table_shows_allocation_after_the_round(tmp_path: Path) -> None:
    objects = [
        node("n1", gpus=8),
        queue("team", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1}),
        pod("runs", queue="team", gpus=2, cpu="4", node="n1"),  # held before and after
        pod("starts", queue="team", gpus=3, cpu="2"),  # bound in round 1
        pod("too-big", queue="team", gpus=16),  # never fits
    ]
    path = write(objects, tmp_path)

    headings, rows = table_rows(path)
    gpu = rows["team"][headings.index("GPU allocated after round 1")]
    cpu = rows["team"][headings.index("CPU allocated after round 1 (cores)")]
    assert (gpu, cpu) == ("5", "6")  # 2 + 3 GPUs, 4 + 2 cores

    done = subprocess.run(
        [str(KAI), "simulate", "-f", str(path), "--now", NOW, "-o", "json"], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout)["queues"]["team"]["allocated"]["gpu"] == 2  # the contract: as the round opened


def test_queue_table_names_the_last_round(tmp_path: Path) -> None:
    path = write([node("n1", gpus=8), queue("team"), pod("p", queue="team", gpus=1)], tmp_path)
    headings, rows = table_rows(path, "--rounds", "3")
    assert rows["team"][headings.index("GPU allocated after round 3")] == "1"
