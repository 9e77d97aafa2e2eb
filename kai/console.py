"""What every `kai` command shares on the terminal side: the stderr console, one-line errors and
warnings (never a traceback), output formats, and reading YAML and the scheduler configuration."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from kai.api.errors import InvalidInput, Problem
from kai.framework.config import SchedulerConfig

err = Console(stderr=True, highlight=False)


class WholeHelpGroup(TyperGroup):
    """A command group that lists each command with the whole first paragraph of its help, wrapped (as
    `short_help`), where click would cut it at the terminal's width."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and not command.short_help and command.help:
            command.short_help = command.help.strip().split("\n\n")[0]
        return command


class Output(StrEnum):
    json = "json"
    table = "table"


def fail(lines: list[str], code: int = 1) -> typer.Exit:
    """Print one `error:` line each and return the Exit to raise."""
    for line in lines:
        err.print(f"[red]error:[/] {escape(line)}", soft_wrap=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)


def read_yaml(path: Path) -> Any:
    """One YAML document; an unreadable, oversized, wrongly encoded, too deeply nested or malformed file is
    an InvalidInput naming the file and the position (the snapshot reader's limits and checks)."""
    from kai.snapshot.reader import parse_text, read_text

    where = f"file {path}"
    text, problem = read_text(path, where)
    if problem is None and text is not None:
        documents, problem = parse_text(text, where)
        if problem is None:
            present = [d for d in documents if d is not None]
            if len(present) > 1:
                problem = Problem(where, "document 2", "is one document too many (a configuration is one document)")
            else:
                return present[0] if present else None
    raise InvalidInput([problem] if problem else [Problem(where, "", "cannot be read")])


def load_config(raw: Any, where: str) -> SchedulerConfig:
    """Parse a scheduler configuration (the file's content); warnings go to stderr, problems raise."""
    from kai.cycle import ConfigError, known_actions
    from kai.framework.config import parse_config

    config, problems, warnings = parse_config(raw, known_actions(), where)
    for warning in warnings:
        warn(warning)
    if problems:
        raise ConfigError(problems)
    return config
