"""Validation problems found in user input, each naming the object and the field."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any

MAX_PART = 400  # characters of an object name, field path or message shown; hostile values can be huge

_short = reprlib.Repr()
_short.maxlevel, _short.maxdict, _short.maxlist, _short.maxtuple, _short.maxset = 3, 4, 4, 4, 4
_short.maxstring, _short.maxother, _short.maxlong = 60, 60, 40


def show(value: Any, width: int = 80) -> str:
    """`repr(value)`, cut short: never deeper than 3 levels nor longer than `width` characters."""
    text = _short.repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _cut(text: str) -> str:
    return text if len(text) <= MAX_PART else f"{text[: MAX_PART - 30]}... ({len(text)} characters)"


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with one object: `Pod team-a/train-0: spec.containers[0].resources.requests.cpu: ...`."""

    obj: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{_cut(self.obj)}: {_cut(self.field)}" if self.field else _cut(self.obj)
        return f"{where}: {_cut(self.message)}"


class InvalidInput(Exception):
    """Raised with every problem found, so that a user fixes them in one pass."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))
