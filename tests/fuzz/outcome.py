"""Running one fuzz case and sorting what happened into an outcome.

Outcomes: ``ok`` (exit 0 with contract-valid JSON, or an allowed AdmissionReview), ``clean`` (a
non-zero exit whose every error line names an object and a field, or an AdmissionReview denial),
``internal`` (exit 70, an exception, a malformed answer, JSON with NaN/Infinity or without the
contract's keys, an error line naming nothing) and ``crash`` (a signal, or more memory than allowed).

In-process runs call the real command (`kai.cli.app`) with redirected streams; `run_cli` starts the
real `kai` binary under a memory limit.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import traceback
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.scenario import KAI, NOW

CONTRACT_KEYS = {"rounds", "pods", "podGroups", "queues"}
MEMORY_LIMIT = 1 << 30  # bytes of address space for a CLI case
MAX_LINE = 2000  # an error line longer than this echoes a hostile value in full


@dataclass
class Outcome:
    kind: str  # ok | clean | internal | crash
    detail: str = ""


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def judge_simulate(code: int, stdout: str, stderr: str) -> Outcome:
    """Sort a `kai simulate -o json` run by its exit code and streams."""
    if code < 0:
        return Outcome("crash", f"signal {-code}")
    if code == 0:
        try:
            result = json.loads(stdout, parse_constant=_no_constants)
        except ValueError as err:
            return Outcome("internal", f"stdout is not contract JSON: {err}")
        if not isinstance(result, dict) or not set(result) >= CONTRACT_KEYS:
            return Outcome("internal", f"stdout lacks the contract's keys: {sorted(result)[:8]}")
        return Outcome("ok")
    if code == 70 or "Traceback" in stderr or "internal error" in stderr:
        line = next((x for x in stderr.splitlines() if "internal error" in x or "Error" in x), stderr[-300:])
        return Outcome("internal", line.strip())
    lines = [x for x in stderr.splitlines() if x.startswith("error:")]
    if not lines:
        return Outcome("internal", f"exit {code} without an error line: {stderr[-300:]!r}")
    for line in lines:
        parts = line[len("error:") :].strip().split(": ")
        if len(parts) < 3 or not parts[0].strip() or not parts[1].strip():
            return Outcome("internal", f"error line names no object and field: {line[:300]}")
        if len(line) > MAX_LINE:
            return Outcome("internal", f"error line of {len(line)} characters: {line[:200]}")
    return Outcome("clean")


def run_inprocess(args: list[str]) -> Outcome:
    """`kai ARGS` in this process: the real command, its streams captured, its exceptions caught."""
    from kai.cli import app

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            app(args, prog_name="kai")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except RecursionError:
            return Outcome("internal", "RecursionError: " + traceback.format_exc(limit=-1).splitlines()[-3].strip())
        except MemoryError:
            return Outcome("crash", "MemoryError")
        except Exception as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            where = next((f for f in reversed(frames) if "/kai/" in f.filename), frames[-1])
            here = f"{Path(where.filename).name}:{where.lineno} {where.line}"
            return Outcome("internal", f"{type(exc).__name__}: {str(exc)[:200]} at {here}")
    return judge_simulate(code, out.getvalue(), err.getvalue())


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(args: list[str], timeout: float = 300) -> Outcome:
    """The real `kai` binary under a 1 GiB address-space limit."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("KAI_DEBUG", None)
    try:
        done = subprocess.run(
            [str(KAI), *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            preexec_fn=_limit_memory,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return Outcome("crash", f"no answer in {timeout:.0f} s")
    if "MemoryError" in done.stderr:
        return Outcome("crash", "over 1 GiB: MemoryError")
    return judge_simulate(done.returncode, done.stdout, done.stderr)


def simulate_args(snapshot: Path, config: Path | None = None) -> list[str]:
    args = ["simulate", "-f", str(snapshot), "--now", NOW, "-o", "json"]
    return [*args, "--config", str(config)] if config is not None else args


def snapshot_case(data: bytes, cli: bool = False, config: bytes | None = None) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.yaml"
        path.write_bytes(data)
        config_path = None
        if config is not None:
            config_path = Path(tmp) / "config.yaml"
            config_path.write_bytes(config)
        args = simulate_args(path, config_path)
        return run_cli(args) if cli else run_inprocess(args)


SMALL_SNAPSHOT: bytes | None = None


def config_case(data: bytes, cli: bool = False) -> Outcome:
    """A mutated config with a small valid snapshot."""
    global SMALL_SNAPSHOT
    if SMALL_SNAPSHOT is None:
        from tests.fuzz.mutate import SNAPSHOTS, dump

        SMALL_SNAPSHOT = dump(SNAPSHOTS[1], "yaml").encode()
    return snapshot_case(SMALL_SNAPSHOT, cli, config=data)


def judge_admission(path: str, status: int, body: Any, limit: int = MAX_LINE) -> Outcome:
    """An answer is an AdmissionReview with a response (uid, allowed), its message bounded; or 404 off the paths."""
    from kai.admission.review import PATHS

    if path not in PATHS:
        return Outcome("ok" if status == 404 else "internal", f"HTTP {status} off the webhook paths")
    if status != 200:
        return Outcome("internal", f"HTTP {status}: {json.dumps(body)[:300]}")
    response = body.get("response") if isinstance(body, dict) else None
    if body.get("kind") != "AdmissionReview" or not isinstance(response, dict):
        return Outcome("internal", f"not an AdmissionReview: {json.dumps(body)[:300]}")
    if not isinstance(response.get("allowed"), bool) or not isinstance(response.get("uid"), str):
        return Outcome("internal", f"response without allowed/uid: {json.dumps(response)[:300]}")
    if response["allowed"]:
        return Outcome("ok")
    message = (response.get("status") or {}).get("message", "")
    if not message or len(message) > limit:
        return Outcome("internal", f"denial message of {len(message)} characters")
    return Outcome("clean")


def admission_case(path: str, data: bytes) -> Outcome:
    from kai.admission.rules import PodRules
    from kai.admission.server import respond

    try:
        status, body = respond(path, data, PodRules(gpu_sharing=True))
    except RecursionError:
        return Outcome("internal", "RecursionError")
    except Exception as exc:
        return Outcome("internal", f"{type(exc).__name__}: {str(exc)[:200]}")
    return judge_admission(path, status, body)


if __name__ == "__main__":  # pragma: no cover - run one saved case by hand
    print(snapshot_case(Path(sys.argv[1]).read_bytes(), cli="--cli" in sys.argv))
