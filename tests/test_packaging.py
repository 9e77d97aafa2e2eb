"""Packaging: the wheel installs the offline core alone (numpy, PyYAML, typer, rich, cel-python) into a fresh
virtual environment, where `kai simulate` and `kai --version` work and a live command says which
extra it needs; and `kai simulate` never imports the extras' packages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kai
from kai.cli import LAZY_COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXTRAS = ("kubernetes", "urllib3", "prometheus_client", "cryptography", "matplotlib")
DEMO = ["simulate", "-f", str(ROOT / "examples" / "cluster.yaml"), "--now", "2026-01-01T01:00:00Z", "-o", "json"]


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=300, check=False)


def wrapped_text(text: str) -> str:
    """Help text with its wrapping undone (a line broken after a hyphen joins without a space)."""
    return " ".join(re.sub(r"-\n\s+", "-", text).split())


def modules(*args: str) -> set[str]:
    """Modules `python -m kai.cli ARGS` imports (from -X importtime's report)."""
    done = run(sys.executable, "-X", "importtime", "-m", "kai.cli", *args, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "kai" in names
    return names


def imported(*args: str) -> set[str]:
    """Top-level packages `python -m kai.cli ARGS` imports."""
    return {name.split(".")[0] for name in modules(*args)}


@pytest.mark.parametrize("args", [DEMO, ["--help"], ["--version"]], ids=["simulate", "help", "version"])
def test_the_offline_commands_import_no_extra(args: list[str]) -> None:
    assert imported(*args).isdisjoint(EXTRAS)


def test_kai_help_lists_every_command_whole_without_typers_rich_rendering() -> None:
    # typer's rich help (typer.rich_utils) imports rich's markdown parser and tracebacks: most of what
    # `kai --help` cost (issue 12's start-up target)
    assert modules("--help").isdisjoint({"typer.rich_utils", "rich.markdown", "markdown_it", "rich.traceback"})
    shown = run(BIN / "kai", "--help")
    assert shown.returncode == 0, shown.stderr
    listed = wrapped_text(shown.stdout)
    for name, (_, _, text) in LAZY_COMMANDS.items():
        assert f"{name} {text}" in listed  # whole: not cut at the terminal's width
    assert "simulate Run scheduling rounds on a snapshot of plain Kubernetes YAML and print the decisions." in listed


def test_a_lazy_commands_listed_text_is_the_first_paragraph_of_its_own_help() -> None:
    # `kai --help` lists the lazy commands from LAZY_COMMANDS without importing them: the text must not
    # drift from what the command says of itself
    for name, (_, _, text) in LAZY_COMMANDS.items():
        own = load_command(name).help or ""
        assert " ".join(own.strip().split("\n\n")[0].split()) == text, name


def test_dev_cluster_help_lists_each_subcommand_whole() -> None:
    shown = run(BIN / "kai", "dev-cluster", "--help")
    assert shown.returncode == 0, shown.stderr
    listed = wrapped_text(shown.stdout)
    group = load_command("dev-cluster")
    assert sorted(group.commands) == ["down", "status", "up"]
    for name, command in group.commands.items():
        first = " ".join((command.help or "").strip().split("\n\n")[0].split())
        assert first and f"{name} {first}" in listed, name


def test_a_live_command_imports_its_extras_only_when_run() -> None:
    assert "kubernetes" in imported("dev-cluster", "--help")


@pytest.fixture(scope="module")
def core_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment (no system site-packages) holding the wheel and the core's dependencies only,
    at the versions of constraints.txt (from pip's cache or wheel folder when it has them)."""
    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "source"  # a copy, so that the build leaves nothing in the repository
    shutil.copytree(ROOT / "kai", source / "kai", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = run(BIN / "pip", "wheel", source, "--no-deps", "--quiet", "-w", folder)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = folder.glob("kai-*.whl")
    venv = folder / "venv"
    created = run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert created.returncode == 0, created.stderr
    installed = run(
        BIN / "pip", "--python", venv / "bin" / "python", "install", "--quiet", "-c", ROOT / "constraints.txt", wheel
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    return venv


def test_wheel_installs_a_core_that_simulates_the_demo(core_install: Path) -> None:
    kai_command = core_install / "bin" / "kai"
    version = run(kai_command, "--version")
    assert (version.returncode, version.stdout) == (0, f"kai {kai.__version__}\n")

    outside = Path(os.sep)  # not the repository: the installed package must not need it
    from_wheel = run(kai_command, *DEMO, cwd=outside)
    from_repo = run(BIN / "kai", *DEMO)
    assert from_wheel.returncode == 0, from_wheel.stderr
    assert from_wheel.stdout == from_repo.stdout  # the same decisions, byte for byte

    packages = run(core_install / "bin" / "python", "-c", "import importlib.util as u, sys; "
                   f"print(' '.join(m for m in {EXTRAS!r} if u.find_spec(m)))")
    assert packages.stdout.split() == []


def test_a_live_command_without_its_extra_says_which_to_install(core_install: Path) -> None:
    done = run(core_install / "bin" / "kai", "run", "--kubeconfig", "/nonexistent/kubeconfig")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "pip install 'kai[live]'" in done.stderr
