"""What every `kai` command shares on the terminal side: the stderr console, one-line errors and
warnings (never a traceback), output formats, and reading YAML and the scheduler configuration."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from kai.api.errors import InvalidInput, Problem
from kai.framework.config import SchedulerConfig

err = Console(stderr=True, highlight=False)


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
    """One YAML document; an unreadable or malformed file is an InvalidInput naming the file and line."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidInput([Problem(f"file {path}", "", f"cannot be read: {e.strerror or e}")]) from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(e, "problem", None) or e
        raise InvalidInput([Problem(f"file {path}", at, f"is not valid YAML: {reason}")]) from e


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
