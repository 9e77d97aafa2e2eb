"""Fixtures for tests against the real control plane (etcd + kube-apiserver + KWOK).

Every test in this folder is marked ``live``. The session-scoped ``live_cluster``
fixture starts the control plane once and stops it at the end of the session, also
when tests fail. When the binaries are missing (``make controlplane`` could not build
them), the tests that need the cluster are skipped with the build error as reason, or
fail with it when ``CI`` is set: CI must never turn a broken build into a green run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kai.devcluster import build
from kai.devcluster.controlplane import ControlPlane
from kai.devcluster.live import LiveCluster

LIVE_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if LIVE_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.live)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def require_binaries(names: tuple[str, ...]) -> dict[str, Path]:
    """Paths of every built binary; skips (or, under CI, fails) when one of `names` could not be built."""
    missing = build.missing_binaries(names=names)
    if missing:
        error = (build.recorded_build_error() or "").strip()
        reason = (
            f"control-plane binaries missing ({', '.join(missing)}); "
            + (f"last build failed: {error}" if error else "run `make controlplane` to build them")
        )
        if _in_ci():
            pytest.fail(f"CI requires the live control plane: {reason}", pytrace=False)
        pytest.skip(reason)
    return build.binaries()


@pytest.fixture(scope="session")
def controlplane_binaries() -> dict[str, Path]:
    """Paths of etcd, kube-apiserver and kwok; skips (or, under CI, fails) when they could not be built."""
    return require_binaries(build.CORE)


@pytest.fixture(scope="session")
def live_cluster(controlplane_binaries: dict[str, Path]) -> Iterator[LiveCluster]:
    """A running etcd + kube-apiserver + KWOK with kai's CRDs, for the whole session."""
    cp = ControlPlane(binaries=controlplane_binaries)
    cp.start(timeout=120)
    try:
        yield LiveCluster(control_plane=cp, api=cp.api_client())
    finally:
        cp.stop()


@pytest.fixture
def namespace(live_cluster: LiveCluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    live_cluster.core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        live_cluster.core.delete_namespace(name)
