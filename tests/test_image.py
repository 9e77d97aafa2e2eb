"""kai's OCI image (`make image`, deploy/image): built with Debian's tools (buildah or podman, and
mmdebstrap for the root filesystem), it runs `kai --version` and `kai simulate` on the demo cluster
as its own user, and it is the image the Helm chart deploys by default.

The tools are installed when missing (apt-get, as root); without them the test skips with the
reason. Under CI (``CI`` set) a tool that cannot be installed or a build that fails is a failure.
The base root filesystem is cached in ~/.cache/kai/image, the image in a private store there, and
it is rebuilt only when kai's sources, pins or the builder changed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "helm" / "kai-scheduler"
DEMO_NOW = "2026-01-01T01:00:00Z"

pytestmark = pytest.mark.image


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kai_image_build", REPO / "deploy" / "image" / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _skip_or_fail(reason: str) -> None:
    if _ci():
        pytest.fail(f"CI requires kai's image: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def image() -> Iterator[dict[str, Any]]:
    builder = _builder()
    try:
        builder.install_tools()
        tool = builder.find_tool()
    except builder.ImageError as err:
        _skip_or_fail(str(err))
    root = builder.cache_root() / "test-store"
    tag = builder.default_tag()
    with builder._locked(builder.cache_root() / "test-store.lock"):  # one build at a time on this machine
        try:
            if builder.built_digest(tag, tool, root) != builder.source_digest():
                builder.build(tag, tool, sys.executable, root)
        except builder.ImageError as err:
            _skip_or_fail(f"the image did not build: {err}")
        yield {"builder": builder, "tool": tool, "root": root, "tag": tag}


def test_kai_runs_in_the_image_and_simulates_the_demo_as_here(image: dict[str, Any]) -> None:
    builder = image["builder"]
    demo = REPO / "examples" / "cluster.yaml"
    version, simulated, whoami, live = builder.run(
        image["tag"],
        [
            ["--version"],
            ["simulate", "-f", "/tmp/cluster.yaml", "--now", DEMO_NOW, "-o", "json"],
            ["--help"],
            ["run", "--kubeconfig", "/nonexistent"],  # the live extra is there: the Kubernetes client reads it
        ],
        image["tool"],
        image["root"],
        copies=((demo, "/tmp/cluster.yaml"),),
    )
    assert version.returncode == 0, version.stderr[-2000:]
    import kai

    assert version.stdout.strip() == f"kai {kai.__version__}"
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    here = subprocess.run(
        [sys.executable, "-m", "kai.cli", "simulate", "-f", str(demo), "--now", DEMO_NOW, "-o", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=True,
    )
    # The same decisions as the source tree: the image holds this kai, with working numpy wheels.
    assert json.loads(simulated.stdout) == json.loads(here.stdout)
    assert whoami.returncode == 0 and "simulate" in whoami.stdout
    assert live.returncode == 1 and "cannot load the Kubernetes configuration" in live.stderr, live.stderr[-2000:]
    assert "Invalid kube-config file" in live.stderr  # the kubernetes package's own message


def test_the_image_runs_as_the_chart_s_user_and_is_the_chart_s_default(image: dict[str, Any]) -> None:
    builder = image["builder"]
    store = builder._store(image["tool"], image["root"])
    inspect = ["inspect", "--type", "image"] if image["tool"] == "buildah" else ["image", "inspect"]
    done = subprocess.run(
        [image["tool"], *store, *inspect, image["tag"]], capture_output=True, text=True, timeout=120, check=True
    )
    info = json.loads(done.stdout)
    config = (info[0] if isinstance(info, list) else info)["OCIv1"]["config"] if image["tool"] == "buildah" else None
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    if config is not None:
        assert (
            config["User"]
            == f"{values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}"
        )
        assert config["Entrypoint"] == ["/usr/local/bin/kai"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert f"{values['image']['repository']}:{values['image']['tag'] or chart['appVersion']}" == image["tag"]


def test_the_chart_s_default_image_is_the_tag_make_image_gives() -> None:
    """Without any image tool: the builder's default tag and the chart's default image agree."""
    builder = _builder()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    import kai

    assert chart["appVersion"] == kai.__version__
    assert builder.default_tag() == f"{values['image']['repository']}:{values['image']['tag'] or chart['appVersion']}"
