"""The `kai` command: `kai simulate` (offline decisions on a snapshot) and the commands around it.

Only `kai simulate` lives here; every other command is imported when it is run (`LAZY_COMMANDS`),
so that the offline core starts without the Kubernetes client, cryptography or matplotlib, which
come with the extras `kai[live]` and `kai[report]`.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from kai import __version__
from kai.api.errors import InvalidInput
from kai.api.timeutil import parse_time
from kai.console import Output, WholeHelpGroup, err, fail, load_config, read_yaml, warn

# name -> (module, attribute: a command function or a Typer app, the one-line help `kai --help` shows)
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": (
        "kai.cluster.cli",
        "run",
        "Schedule every pod with schedulerName kai-scheduler on the cluster (the live scheduler).",
    ),
    "binder": ("kai.cluster.cli", "binder", "Bind pods as BindRequests ask (the binder alone, as KAI deploys it)."),
    "podgrouper": (
        "kai.podgrouper.controller_cli",
        "podgrouper",
        "Group pods into PodGroups by their workload (top owner), as KAI's podgrouper does.",
    ),
    "admission": (
        "kai.admission.cli",
        "admission",
        "Serve the admission webhooks (GPU-sharing validation, GPU runtime class, Queue and PodGroup checks).",
    ),
    "simulate-trace": (
        "kai.sim.trace_cli",
        "simulate_trace",
        "Replay a workload over virtual time through kai's own scheduling cycle and report what happened.",
    ),
    "what-if": (
        "kai.sim.trace_cli",
        "what_if",
        "When would this job start on the cluster in the snapshot, and which running jobs would it displace?",
    ),
    "explain": (
        "kai.explain.command",
        "explain",
        "Why does this pod group wait, or why was it evicted? Ranked causes, offline (-f) or live (--kubeconfig).",
    ),
    "dev-cluster": (
        "kai.devcluster.cli",
        "app",
        "A throw-away control plane (etcd, kube-apiserver, kube-controller-manager, KWOK GPU nodes, Prometheus).",
    ),
}


# Packages of the extras (pyproject.toml): a command that needs a missing one says which extra to install.
EXTRAS = {
    "kubernetes": "live",
    "urllib3": "live",
    "prometheus_client": "live",
    "cryptography": "live",
    "matplotlib": "report",
}


def load_command(name: str) -> Any:
    """The command behind lazy command `name`, importing its module now."""
    module, attribute, _ = LAZY_COMMANDS[name]
    target: Any = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(pretty_exceptions_enable=False, add_completion=False, rich_markup_mode=None)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:  # a command may name its click class (kai run: Go-style boolean flags)
        holder.command(name, cls=getattr(target, "command_class", None))(target)
    holder.command("-")(lambda: None)  # a second command, so that typer builds a group around the first
    group = typer.main.get_command(holder)
    assert isinstance(group, TyperGroup)
    command = group.commands[name]
    command.name = name
    return command


class LazyGroup(WholeHelpGroup):
    """The `kai` group: its own commands, then the lazy ones, listed by name (with the text of
    LAZY_COMMANDS) and imported when run."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*LAZY_COMMANDS, *(name for name in super().list_commands(ctx) if name not in LAZY_COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in LAZY_COMMANDS:  # for listing only: name and help, nothing imported
            text = LAZY_COMMANDS[cmd_name][2]
            return TyperCommand(cmd_name, help=text, short_help=text)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in LAZY_COMMANDS:
            return args[0], load_command(args[0]), args[1:]
        return super().resolve_command(ctx, args)


# Help and usage errors as click writes them (rich_markup_mode=None): typer's rich rendering imports
# rich's markdown and traceback modules, which doubled what `kai --help` costs (issue 12: < 0.3 s).
app = typer.Typer(
    cls=LazyGroup,
    help="kai: a scheduler for AI workloads on Kubernetes, compatible with KAI Scheduler.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kai {__version__}")
        raise typer.Exit()


@app.callback()
def _kai(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print kai's version and exit.")
    ] = False,
) -> None:
    """kai: a scheduler for AI workloads on Kubernetes, compatible with KAI Scheduler."""


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
        gc.freeze()  # the snapshot lives to the end: spare it the collector's rescans (seconds at 50,000 pods)
        for warning in snapshot.warnings:
            warn(warning)
        result = run(snapshot, cfg, rounds)  # type: ignore[arg-type]
    except (InvalidInput, ConfigError) as problem:
        raise fail([str(p) for p in problem.problems]) from None
    if output is Output.json:
        sys.stdout.write(render_json(result))
    else:
        render_table(result, Console(width=max(Console().width, 140)))
    global _EXIT_AT_ONCE
    _EXIT_AT_ONCE = True


# Set once `kai simulate` has written its answer: the command's process then ends without taking the
# snapshot apart object by object (a tenth of a second or more at 50,000 pods). Only `main`, the
# console script, reads it; the command run in-process (tests) returns as usual.
_EXIT_AT_ONCE = False


def _exit_at_once() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: the interpreter ends as it always does
        return
    os._exit(0)


def main() -> None:
    """Entry point: no traceback reaches a user unless KAI_DEBUG is set."""
    try:
        app()
    except SystemExit as stop:
        if _EXIT_AT_ONCE and stop.code in (0, None):
            _exit_at_once()
        raise
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None or os.environ.get("KAI_DEBUG"):
            raise
        needs = f"this command needs {exc.name}, which comes with kai[{extra}]: pip install 'kai[{extra}]'"
        err.print(f"[red]error:[/] {escape(needs)}", soft_wrap=True)
        sys.exit(1)
    except Exception as exc:
        if os.environ.get("KAI_DEBUG"):
            raise
        err.print(f"[red]error:[/] internal error: {type(exc).__name__}: {escape(str(exc))} (KAI_DEBUG=1 shows more)")
        sys.exit(70)


if __name__ == "__main__":
    main()
