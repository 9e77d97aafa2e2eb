"""The plugin interface and registry. A plugin registers hooks on the session when it opens."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kai.framework.session import Session


class Plugin(Protocol):
    name: str

    def on_session_open(self, ssn: Session) -> None: ...


PluginFactory = Callable[[dict[str, str]], Plugin]
_REGISTRY: dict[str, PluginFactory] = {}


def register_plugin(name: str) -> Callable[[PluginFactory], PluginFactory]:
    def decorate(factory: PluginFactory) -> PluginFactory:
        _REGISTRY[name] = factory
        return factory

    return decorate


def plugin_factory(name: str) -> PluginFactory | None:
    return _REGISTRY.get(name)


def registered_plugins() -> list[str]:
    return sorted(_REGISTRY)
