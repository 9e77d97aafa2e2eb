"""Synthetic traces (shape and determinism), metrics, and the report files: the same seed gives the same
report, and the plots are real PNG images."""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from pathlib import Path

import matplotlib.image
import pytest

from kai.api.errors import InvalidInput
from kai.sim.html_report import write_report
from kai.sim.metrics import compute_metrics, jain, summary
from kai.sim.workload import parse_workload
from tests.sim_over_time.helpers import scheduler, simulate, team_queues, workload

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def synthetic(seed: int = 7, jobs: int = 120, time_based: bool = False) -> dict:
    raw = workload(
        [],
        team_queues("team-a", "team-b", "team-c"),
        gpus=8,
        nodes=4,
        sched=scheduler(actions=None, time_based=time_based, window="6h", fetch="60s"),
        until="3d",
    )
    raw["synthetic"] = {
        "jobs": jobs,
        "span": "1d",
        "seed": seed,
        "queues": {"team-a": 2, "team-b": 1, "team-c": 1},
        "sizes": {1: 0.7, 2: 0.1, 4: 0.1, 8: 0.07, 16: 0.03},
        "duration": {"median": "20m", "max": "6h"},
    }
    return raw


def test_generated_jobs_follow_the_trace_shape() -> None:
    wl = parse_workload(synthetic(jobs=2000))
    assert len(wl.jobs) == 2000
    sizes = Counter(j.gpus for j in wl.jobs)
    assert sizes.most_common(1)[0][0] == 1 and sizes[1] > 0.6 * 2000  # most jobs take one GPU
    assert sizes[16] > 0  # and a few are large gangs: 16 GPUs as 2 pods of 8
    big = next(j for j in wl.jobs if j.gpus == 16)
    assert (big.pods, big.gpus_per_pod, big.min_member) == (2, 8, 2)
    submits = [j.submit for j in wl.jobs]
    assert submits == sorted(submits) and submits[0] >= 0 and submits[-1] < 86400
    durations = sorted(j.duration for j in wl.jobs)
    median = durations[len(durations) // 2]
    assert 600 < median < 2400 and durations[-1] <= 6 * 3600  # log-normal around 20 min, clipped at 6 h
    assert durations[-1] > 10 * median  # heavy tail
    # the working day: more arrivals in the afternoon (UTC) than at night
    hours = Counter(int(s // 3600) for s in submits)
    assert sum(hours[h] for h in range(12, 18)) > 1.5 * sum(hours[h] for h in range(0, 6))


def test_same_seed_same_jobs_other_seed_other_jobs() -> None:
    first, again, other = (parse_workload(synthetic(seed=s)).jobs for s in (7, 7, 8))
    assert first == again
    assert first != other


def test_load_scales_durations_to_the_offered_share_of_gpu_time() -> None:
    raw = synthetic(jobs=500)
    raw["synthetic"]["load"] = 0.5
    raw["synthetic"]["duration"] = {"median": "20m", "max": "7d"}
    wl = parse_workload(raw)
    offered = sum(j.gpus * j.duration for j in wl.jobs) / (wl.total_gpus * 86400)
    assert offered == pytest.approx(0.5, rel=0.02)


def test_bad_synthetic_parameters_name_the_field() -> None:
    raw = synthetic()
    raw["synthetic"]["queues"] = {"nobody": 1}
    raw["synthetic"]["diurnal"] = 3
    with pytest.raises(InvalidInput) as err:
        parse_workload(raw)
    fields = {p.field for p in err.value.problems}
    assert fields == {"queues.nobody", "diurnal"}


def test_summary_and_jain_by_hand() -> None:
    assert summary([10, 20, 30, 40]) == {"count": 4, "mean": 25.0, "p50": 20.0, "p95": 40.0, "p99": 40.0, "max": 40.0}
    assert jain([1, 1, 1]) == 1.0
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain([2, 1]) == pytest.approx(9 / 10)


def test_same_seed_same_report(tmp_path: Path) -> None:
    outputs = []
    for name in ("one", "two"):
        wl, result = simulate(synthetic(time_based=True))
        files = write_report(tmp_path / name, [("run", result, compute_metrics(result))], wl)
        outputs.append({f.name: f.read_bytes() for f in files})
    assert outputs[0].keys() == outputs[1].keys()
    for name in outputs[0]:
        assert outputs[0][name] == outputs[1][name], name


def test_report_files_exist_and_plots_render(tmp_path: Path) -> None:
    wl, result = simulate(synthetic(time_based=True))
    metrics = compute_metrics(result)
    write_report(tmp_path, [("run", result, metrics)], wl)
    for stem in ("allocation", "queues", "usage", "wait", "fragmentation", "fairness"):
        path = tmp_path / f"{stem}.png"
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, stem
        image = matplotlib.image.imread(path)
        assert image.shape[0] > 200 and image.shape[1] > 600, stem
        assert image[..., :3].std() > 0.01, stem  # not a blank canvas
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 6 and all(base64.b64decode(i).startswith(PNG_MAGIC) for i in images)
    assert "http" not in page.replace("http-equiv", "")  # self-contained: nothing fetched from elsewhere
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["jobs"]["total"] == 120 and saved["jobs"]["finished"] == metrics["jobs"]["finished"]
    assert set(saved["queues"]) == {"dept", "team-a", "team-b", "team-c"}
    for key in (
        "waitSeconds",
        "completionSeconds",
        "makespanSeconds",
        "gpuUtilisation",
        "evictions",
        "fragmentation",
        "fairness",
    ):
        assert key in saved
    assert len((tmp_path / "jobs.csv").read_text().splitlines()) == 121


def test_compare_report_has_both_runs_side_by_side(tmp_path: Path) -> None:
    runs = []
    wl = None
    for label, time_based in (("plain", False), ("time-based", True)):
        wl, result = simulate(synthetic(time_based=time_based))
        runs.append((label, result, compute_metrics(result)))
    assert wl is not None
    write_report(tmp_path, runs, wl)
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert set(saved["runs"]) == {"plain", "time-based"}
    assert (tmp_path / "plain-allocation.png").exists() and (tmp_path / "time-based-usage.png").exists()
    assert not (tmp_path / "plain-usage.png").exists()  # no usage without time-based fair share
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "--n:2" in page and "time-based" in page


def test_metrics_by_hand_on_one_queue() -> None:
    # two 4-GPU jobs back to back on a 4-GPU node: waits 0 and 1800 s, completions 1800 and 3600 s
    jobs = [{"name": "j", "queue": "team-a", "count": 2, "gpusPerPod": 4, "duration": "30m"}]
    _, result = simulate(workload(jobs, team_queues("team-a"), gpus=4))
    m = compute_metrics(result)
    assert m["waitSeconds"]["p50"] == 0.0 and m["waitSeconds"]["max"] == 1800.0
    assert m["completionSeconds"]["mean"] == 2700.0
    assert m["makespanSeconds"] == 3600.0
    assert m["gpuUtilisation"] == 1.0
    assert m["queues"]["team-a"]["gpuHours"] == 4.0
