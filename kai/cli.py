"""The `kai` command: `kai simulate` (offline decisions on a snapshot) and `kai dev-cluster`."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kai.admission.cli import admission as admission_command
from kai.api.errors import InvalidInput
from kai.api.timeutil import parse_time
from kai.cluster.cli import register as register_live
from kai.console import Output, err, fail, load_config, read_yaml, warn
from kai.devcluster.cli import app as devcluster_app
from kai.podgrouper.controller_cli import podgrouper as podgrouper_command
from kai.sim.trace_cli import simulate_trace, what_if

app = typer.Typer(
    help="kai: a scheduler for AI workloads on Kubernetes, compatible with KAI Scheduler.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(devcluster_app, name="dev-cluster")
register_live(app)  # kai run, kai binder
app.command("podgrouper")(podgrouper_command)  # kai podgrouper
app.command("admission")(admission_command)  # kai admission
app.command("simulate-trace")(simulate_trace)  # kai simulate-trace: a workload over virtual time
app.command("what-if")(what_if)  # kai what-if: when would this job start


@app.command()
def simulate(
    files: Annotated[list[Path], typer.Option("-f", "--filename", help="Snapshot YAML (repeatable).")],
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Scheduling rounds to run.")] = 1,
    config: Annotated[Path | None, typer.Option("--config", help="Scheduler configuration file.")] = None,
    now: Annotated[str | None, typer.Option("--now", help="RFC 3339 instant of every round.")] = None,
    output: Annotated[Output, typer.Option("-o", "--output", help="json or table.")] = Output.json,
) -> None:
    """Run scheduling rounds on a snapshot of plain Kubernetes YAML and print the decisions."""
    from kai.cycle import ConfigError
    from kai.sim.report import render_json, render_table
    from kai.sim.simulate import simulate as run
    from kai.snapshot.loader import load_snapshot

    try:
        moment = parse_time(now) if now else datetime.now(UTC).timestamp()
    except ValueError:
        raise fail([f"--now: {now!r} is not an RFC 3339 time such as 2026-01-01T00:00:00Z"]) from None
    try:
        cfg = load_config(read_yaml(config) if config is not None else None, f"config {config}")
        snapshot = load_snapshot(list(files), moment, cfg.params.scheduler_name)  # type: ignore[attr-defined]
        for warning in snapshot.warnings:
            warn(warning)
        result = run(snapshot, cfg, rounds)  # type: ignore[arg-type]
    except (InvalidInput, ConfigError) as problem:
        raise fail([str(p) for p in problem.problems]) from None
    if output is Output.json:
        sys.stdout.write(render_json(result))
    else:
        render_table(result, Console(width=max(Console().width, 140)))


def main() -> None:
    """Entry point: no traceback reaches a user unless KAI_DEBUG is set."""
    try:
        app()
    except (typer.Exit, SystemExit):
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("KAI_DEBUG"):
            raise
        err.print(f"[red]error:[/] internal error: {type(exc).__name__}: {escape(str(exc))} (KAI_DEBUG=1 shows more)")
        sys.exit(70)


if __name__ == "__main__":
    main()
