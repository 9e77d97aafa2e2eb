"""Validation problems found in user input, each naming the object and the field."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with one object: `Pod team-a/train-0: spec.containers[0].resources.requests.cpu: ...`."""

    obj: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.obj}: {self.field}" if self.field else self.obj
        return f"{where}: {self.message}"


class InvalidInput(Exception):
    """Raised with every problem found, so that a user fixes them in one pass."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))
