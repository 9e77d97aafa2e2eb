"""The house rules that a machine can check: ruff is clean, the core keeps its layering contract
(no I/O, clock, Kubernetes client or adapter imported by model/framework/plugins/actions), and the
repository explains itself: no file names a path outside it, and every relative link resolves inside."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_ruff_is_clean() -> None:
    done = subprocess.run(
        [str(BIN / "ruff"), "check", "kai", "tests", "bench", "tools"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_layering_contract_holds() -> None:
    done = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# What a clone of the repository does not have: documents beside it, the machine it was written on.
OUTSIDE = [
    (re.compile(r"\.\./shared\b|\bshared/(?:spec|kai-examples)\b"), "a folder beside the repository"),
    (re.compile(r"(?<![\w.])/work/"), "an absolute path of the machine it was written on"),
    (re.compile(r"(?<![\w.~])/(?:home|Users)/[A-Za-z]"), "a home folder"),
    (re.compile(r"behaviou?r (?:note|reference)", re.IGNORECASE), "a document outside the repository"),
    # No document of the repository has numbered sections: "section 4.3" cites one that is not here.
    (re.compile(r"\b[Ss]ections? \d+(?:\.\d+)*\b|§ ?\d"), "a section of a document outside the repository"),
]
# Fixtures that stand for other people's machines on purpose (a container's paths in a workload).
ALLOWED = {"tests/podgrouper/manifests/kubeflow.yaml": {"a home folder"}}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".tpl", ".json", ".sh", ""}


def tracked_files() -> list[Path]:
    """The repository's files: git's list, or every file outside generated folders when not a checkout."""
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode == 0 and done.stdout:
        paths = [ROOT / name for name in done.stdout.split("\0") if name]
    else:
        skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", "build", "dist"}
        paths = [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    return [p for p in paths if p.exists() and (p.suffix in TEXT_SUFFIXES or p.name == "Makefile")]


def this_file(path: Path) -> bool:
    return path.resolve() == Path(__file__).resolve()


def test_no_file_names_a_path_outside_the_repository() -> None:
    found = []
    for path in tracked_files():
        if this_file(path):
            continue
        name = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8", errors="replace")
        for pattern, what in OUTSIDE:
            if what in ALLOWED.get(name, set()):
                continue
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{name}:{line}: {match.group(0)!r} names {what}")
    assert not found, "\n".join(found)


def test_relative_links_in_documents_stay_inside_the_repository_and_resolve() -> None:
    problems = []
    root = ROOT.resolve()
    for path in tracked_files():
        if path.suffix != ".md":
            continue
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor of the same page
            resolved = (path.parent / target.split("#", 1)[0]).resolve()
            where = f"{path.relative_to(ROOT)}: ({target})"
            if not resolved.is_relative_to(root):
                problems.append(f"{where} leads out of the repository")
            elif not resolved.exists():
                problems.append(f"{where} names a file that does not exist")
    assert not problems, "\n".join(problems)
