"""The house rules that a machine can check: ruff is clean and the core keeps its layering contract
(no I/O, clock, Kubernetes client or adapter imported by model/framework/plugins/actions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_ruff_is_clean() -> None:
    done = subprocess.run(
        [str(BIN / "ruff"), "check", "kai", "tests", "bench"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_layering_contract_holds() -> None:
    done = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
