"""Count fuzz outcomes (ok / clean / internal / crash) over many cases, without stopping at the first failure.

    python -m tests.fuzz.census --cases 2000                    # every suite, in-process
    python -m tests.fuzz.census --suite snapshot --cases 10000 --cli 200

Cases run in a forked worker under a 1 GiB address-space limit, so that a signal, an allocation
beyond the limit or a case running over 60 s (KAI_FUZZ_CASE_SECONDS) is counted as a crash (the
worker is started again) instead of ending the run. `--cli
N` also sends N snapshot cases through the real `kai` binary. Every failing case is saved under
`--save` (default `.fuzz-failures/`) with its outcome, to be replayed with `python -m tests.fuzz.outcome`.
Exits 1 when any case ended in an internal error or a crash.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import logging
import multiprocessing as mp
import os
import resource
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.fuzz import mutate, outcome

SUITES = ("snapshot", "config", "admission")
CASE_SECONDS = float(os.environ.get("KAI_FUZZ_CASE_SECONDS", "60"))  # longer than this is a hang


def _strategy(suite: str) -> Any:
    return {
        "snapshot": mutate.snapshot_files(),
        "config": mutate.config_files(),
        "admission": mutate.admission_requests(),
    }[suite]


def _run(suite: str, case: Any, cli: bool) -> outcome.Outcome:
    if suite == "snapshot":
        return outcome.snapshot_case(case, cli=cli)
    if suite == "config":
        return outcome.config_case(case, cli=cli)
    path, data = case
    return outcome.admission_case(path, data)


def _worker(suite: str, cases: int, cli: bool, run_seed: int, conn: Any) -> None:
    limit = outcome.MEMORY_LIMIT
    if not cli:  # the CLI cases limit their own subprocess
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    logging.getLogger("kai").setLevel(logging.CRITICAL)  # the webhook logs every failure it answers

    @seed(run_seed)
    @settings(
        max_examples=cases,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(_strategy(suite))
    def one(case: Any) -> None:
        conn.send(("start", case))
        result = _run(suite, case, cli)
        conn.send(("done", result.kind, result.detail))

    one()
    conn.send(("end",))


def census(suite: str, cases: int, cli: bool, save: Path, run_seed: int) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    details: collections.Counter[str] = collections.Counter()
    context = mp.get_context("fork")
    done = 0
    attempt = 0
    while done < cases:
        parent, child = context.Pipe()
        worker = context.Process(target=_worker, args=(suite, cases - done, cli, run_seed + attempt, child))
        worker.start()
        child.close()
        current: Any = None
        hung = False
        while True:
            if current is not None and not parent.poll(CASE_SECONDS):
                hung = True  # one case has run for CASE_SECONDS: a hang, counted as a crash
                worker.kill()
                break
            try:
                message = parent.recv()
            except EOFError:
                break
            if message[0] == "start":
                current = message[1]
            elif message[0] == "done":
                kind, detail = message[1], message[2]
                counts[kind] += 1
                done += 1
                if kind in ("internal", "crash"):
                    details[f"{kind}: {detail[:160]}"] += 1
                    _save(save, suite, current, kind, detail)
                current = None
            else:
                done = cases
                break
        worker.join()
        if current is not None:  # the worker died (or hung) on this case
            detail = f"worker ended by signal {-worker.exitcode}" if worker.exitcode else "worker ended"
            detail = f"no answer in {CASE_SECONDS:.0f} s" if hung else detail
            counts["crash"] += 1
            done += 1
            details[f"crash: {detail}"] += 1
            _save(save, suite, current, "crash", detail)
        attempt += 1
    for line, n in details.most_common(25):
        print(f"  {n:5d}  {line}", file=sys.stderr)
    return counts


def _save(save: Path, suite: str, case: Any, kind: str, detail: str) -> None:
    if case is None:
        return
    save.mkdir(parents=True, exist_ok=True)
    path, data = case if suite == "admission" else ("", case)
    digest = hashlib.sha1(data).hexdigest()[:12]
    (save / f"{suite}-{digest}.bin").write_bytes(data)
    (save / f"{suite}-{digest}.json").write_text(json.dumps({"path": path, "outcome": kind, "detail": detail}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default=",".join(SUITES), help="comma-separated: snapshot, config, admission")
    parser.add_argument("--cases", type=int, default=int(os.environ.get("KAI_FUZZ_CASES", "2000")))
    parser.add_argument("--cli", type=int, default=0, help="snapshot cases to send through the real kai binary")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, default=Path(".fuzz-failures"))
    args = parser.parse_args()
    failed = False
    plan = [(s, args.cases, False) for s in args.suite.split(",")]
    if args.cli:
        plan.append(("snapshot", args.cli, True))
    for suite, cases, cli in plan:
        counts = census(suite, cases, cli, args.save, args.seed)
        label = f"{suite}{' (real CLI, 1 GiB limit)' if cli else ''}"
        print(f"{label}: {cases} cases: " + ", ".join(f"{k} {counts[k]}" for k in ("ok", "clean", "internal", "crash")))
        failed = failed or counts["internal"] > 0 or counts["crash"] > 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
