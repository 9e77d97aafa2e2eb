"""Typed results of predicates and checks, as in kube-scheduler: a code and a reason, never a bare bool."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class Code(IntEnum):
    SUCCESS = 0
    UNSCHEDULABLE = 1  # might fit after evictions
    UNRESOLVABLE = 2  # no eviction would help
    ERROR = 3


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reason: str = ""  # a short machine-readable reason, e.g. OverLimit
    message: str = ""
    cause: Any = None  # a kai.framework.causes.Cause with the numbers behind it, when the check has them

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS


SUCCESS = Status()


def unschedulable(reason: str, message: str, cause: Any = None) -> Status:
    return Status(Code.UNSCHEDULABLE, reason, message, cause)


def unresolvable(reason: str, message: str) -> Status:
    return Status(Code.UNRESOLVABLE, reason, message)
