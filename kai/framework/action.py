"""The action interface and registry: an action is one step of the cycle, run on the session."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kai.framework.session import Session

Action = Callable[["Session"], None]
_ACTIONS: dict[str, Action] = {}


def register_action(name: str) -> Callable[[Action], Action]:
    def decorate(fn: Action) -> Action:
        _ACTIONS[name] = fn
        return fn

    return decorate


def action(name: str) -> Action | None:
    return _ACTIONS.get(name)


def registered_actions() -> set[str]:
    return set(_ACTIONS)
