"""The plugin interface and registry. A plugin registers hooks on the session when it opens."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kai.framework.session import Session
    from kai.model import ClusterSnapshot


class Plugin(Protocol):
    name: str

    def on_session_open(self, ssn: Session) -> None: ...


class TimeAwarePlugin(Protocol):
    """A plugin whose answers may change as time passes with nothing else changing (it reads `now`)."""

    def time_matters(self, snapshot: ClusterSnapshot) -> bool:
        """Whether a cycle on this snapshot at a later `now` could decide otherwise because of time alone."""
        ...


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
