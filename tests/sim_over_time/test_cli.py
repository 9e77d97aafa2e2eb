"""The commands, run as a user runs them: `kai simulate-trace` (report files, --compare, JSON, bad input)
and `kai what-if` (when a job would start on a snapshot, and whom it would displace)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.scenario import NOW, node, pod, podgroup, queue, write

KAI = Path(sys.executable).parent / "kai"
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "workloads"


def kai(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KAI), *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_simulate_trace_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = kai("simulate-trace", EXAMPLES / "two-queue-oscillation.yaml", "--report", out, "-o", "json")
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)
    assert metrics["jobs"]["finished"] == 12 and metrics["simulation"]["timeBasedFairShare"] is True
    for name in ("report.html", "metrics.json", "jobs.csv", "allocation.png", "queues.png", "usage.png"):
        assert (out / name).stat().st_size > 0, name
    assert json.loads((out / "metrics.json").read_text())["waitSeconds"] == metrics["waitSeconds"]
    assert "Traceback" not in done.stderr


def test_simulate_trace_compare_runs_both_configs(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("actions: allocate\n")
    timed = tmp_path / "timed.yaml"
    timed.write_text(yaml.safe_dump({"actions": "allocate", "usageDBConfig": {"usageParams": {"windowSize": "1h"}}}))
    out = tmp_path / "cmp"
    done = kai("simulate-trace", EXAMPLES / "two-queue-oscillation.yaml", "--report", out, "--compare", plain, timed)
    assert done.returncode == 0, done.stderr
    saved = json.loads((out / "metrics.json").read_text())
    assert set(saved["runs"]) == {"plain", "timed"}
    assert saved["runs"]["timed"]["simulation"]["timeBasedFairShare"] is True
    assert (out / "plain-queues.png").exists() and (out / "timed-usage.png").exists()
    assert "plain" in done.stdout and "timed" in done.stdout  # the side-by-side summary table


def test_simulate_trace_bad_input_is_one_line_naming_object_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "cluster": {"nodes": [{"count": 1, "gpus": 8}]},
                "queues": [{"name": "team-a"}],
                "jobs": [{"name": "train", "queue": "team-z", "gpusPerPod": 1, "duration": "1h"}],
            }
        )
    )
    done = kai("simulate-trace", bad)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "job train" in lines[0] and "queue" in lines[0] and "team-z" in lines[0]
    missing = kai("simulate-trace", tmp_path / "nope.yaml")
    assert missing.returncode != 0 and "cannot be read" in missing.stderr and "Traceback" not in missing.stderr


def cluster(tmp_path: Path) -> Path:
    """One 8-GPU node, busy for another 30 minutes with team-a's training job."""
    objects = [
        node("n1", gpus=8),
        queue("dept", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1}),
        queue("team-a", parent="dept", gpu={"quota": 8, "overQuotaWeight": 1, "limit": -1}),
        podgroup("long", "team-a", created=NOW),
        pod("long-0", group="long", gpus=8, node="n1", created=NOW),
    ]
    objects[3]["metadata"]["annotations"] = {"kai.sim/remaining": "30m"}
    return write(objects, tmp_path)


def test_what_if_says_when_the_job_starts(tmp_path: Path) -> None:
    snapshot = cluster(tmp_path)
    job = write([podgroup("mine", "team-a"), pod("mine-0", group="mine", gpus=4)], tmp_path, "job.yaml")
    done = kai("what-if", "-f", snapshot, "--job", job, "--now", NOW, "-o", "json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["job"] == "ns/mine"
    assert answer["starts"] == "2026-01-01T00:30:00Z" and answer["waitSeconds"] == 1800.0
    assert answer["nodes"] == ["n1"] and answer["displaces"] == []
    table = kai("what-if", "-f", snapshot, "--job", job, "--now", NOW)
    assert table.returncode == 0 and "after 30 min" in table.stdout and "n1" in table.stdout


def test_what_if_takes_a_workload_job_and_the_default_duration(tmp_path: Path) -> None:
    snapshot = cluster(tmp_path)
    snapshot_obj = list(yaml.safe_load_all(snapshot.read_text()))
    del snapshot_obj[3]["metadata"]["annotations"]  # no estimate: --default-duration applies
    snapshot.write_text(yaml.safe_dump_all(snapshot_obj))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"name": "mine", "queue": "team-a", "gpusPerPod": 8, "duration": "2h"}))
    done = kai("what-if", "-f", snapshot, "--job", job, "--now", NOW, "--default-duration", "45m", "-o", "json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["job"] == "default/mine" and answer["waitSeconds"] == 2700.0


def test_what_if_names_the_jobs_it_would_displace(tmp_path: Path) -> None:
    # A non-preemptible (build) job in the same queue preempts the lower-priority training job at once.
    snapshot = cluster(tmp_path)
    job = write(
        [podgroup("urgent", "team-a", priority_class="build"), pod("urgent-0", group="urgent", gpus=8)],
        tmp_path,
        "job.yaml",
    )
    done = kai("what-if", "-f", snapshot, "--job", job, "--now", NOW, "-o", "json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["waitSeconds"] is not None and answer["waitSeconds"] < 60
    assert [d["podGroup"] for d in answer["displaces"]] == ["ns/long"]
    assert answer["displaces"][0]["action"] == "preempt"


def test_what_if_never_starting_job_explains_why(tmp_path: Path) -> None:
    snapshot = cluster(tmp_path)
    job = write([podgroup("huge", "team-a"), pod("huge-0", group="huge", gpus=16)], tmp_path, "job.yaml")
    done = kai("what-if", "-f", snapshot, "--job", job, "--now", NOW, "--horizon", "2h", "-o", "json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["starts"] is None and "GPU" in answer["message"]


def test_what_if_bad_job_file(tmp_path: Path) -> None:
    snapshot = cluster(tmp_path)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"name": "mine", "queue": "team-q", "gpusPerPod": 1, "duration": "1h"}))
    done = kai("what-if", "-f", snapshot, "--job", job, "--now", NOW)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "team-q" in done.stderr and "queue" in done.stderr
