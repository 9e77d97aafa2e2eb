"""Same decisions: the benchmark generator's clusters, at reduced sizes, through `kai simulate`'s whole
path (a JSON `v1 List` file, the reader, the shape checks, the builder, the rounds, the contract JSON),
compared byte for byte with golden files.

The golden files in `tests/sim/golden/` were generated from the code of `main` as it stood BEFORE the
speed work of issue 12 (commit 766abd0), by this module's `write_golden()`, and committed before any
optimisation; they are not produced by the code under test. Any change in a decision (a pod on another
node, a different victim, a changed message or fair share) fails the test. Regenerate them only for a
change that is meant to alter decisions, and say so in the commit.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kai.framework.config import SchedulerConfig
from kai.sim.report import render_json
from kai.sim.simulate import simulate
from kai.snapshot.loader import load_snapshot

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z

# name -> (bench size spec, rounds)
CASES: dict[str, tuple[dict[str, Any], int]] = {
    "S": (
        {"nodes": 100, "gpus_per_node": 8, "running_pods": 150, "pending_pods": 300, "max_gang": 4,
         "departments": 2, "teams_per_department": 3},
        1,
    ),
    "over-subscribed-rounds": (
        {"nodes": 40, "gpus_per_node": 8, "running_pods": 200, "pending_pods": 400, "max_gang": 16,
         "departments": 2, "teams_per_department": 3},
        3,
    ),
    "M-fractions-small": (
        {"nodes": 100, "gpus_per_node": 8, "running_pods": 200, "pending_pods": 300, "fraction_share": 0.5,
         "max_gang": 16, "departments": 2, "teams_per_department": 5},
        2,
    ),
    "M-topology-small": (
        {"scenario": "topology", "nodes": 64, "blocks": 2, "racks_per_block": 4, "gpus_per_node": 8,
         "running_pods": 128, "pending_gangs": 30, "max_gang": 16, "subgroup_share": 0.2, "teams": 4},
        2,
    ),
    "M-reclaim-small": (
        {"scenario": "reclaim", "nodes": 60, "gpus_per_node": 8, "free_nodes": 2, "free_jobs": 10,
         "victim_jobs": 12, "poor_teams": 2, "departments": 2, "teams_per_department": 3},
        3,
    ),
    "M-reclaim-scattered-small": (
        {"scenario": "reclaim", "scatter": True, "nodes": 60, "gpus_per_node": 8, "free_nodes": 2,
         "free_jobs": 10, "victim_jobs": 12, "poor_teams": 2, "departments": 2, "teams_per_department": 3},
        2,
    ),
    "M-preempt-small": (
        {"scenario": "preempt", "nodes": 60, "gpus_per_node": 8, "free_nodes": 2, "free_jobs": 10,
         "victim_jobs": 12, "departments": 2, "teams_per_department": 3},
        3,
    ),
}


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("kai_bench_generate", ROOT / "bench" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kai_bench_generate", module)
    spec.loader.exec_module(module)
    return module


def render(name: str, directory: Path) -> str:
    """The contract JSON of `kai simulate -f <case>.json --rounds N` on the case's cluster."""
    spec, rounds = CASES[name]
    objects = _generator().cluster(spec)
    path = directory / f"{name}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    snapshot = load_snapshot([path], NOW)
    return render_json(simulate(snapshot, SchedulerConfig(), rounds))


def write_golden(directory: Path = GOLDEN) -> None:
    import tempfile

    directory.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            (directory / f"{name}.golden.json").write_text(render(name, Path(tmp)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_decisions_match_golden(name: str, tmp_path: Path) -> None:
    expected = (GOLDEN / f"{name}.golden.json").read_text()
    got = render(name, tmp_path)
    if got != expected:
        exp, out = json.loads(expected), json.loads(got)
        for section in ("rounds", "pods", "podGroups", "queues"):
            assert out[section] == exp[section], f"{name}: {section} differs from the golden file"
    assert got == expected


if __name__ == "__main__":
    write_golden()
