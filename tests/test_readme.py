"""The README says what the commands print: the demo runs as the Makefile runs it, at an instant after
everything in its snapshot, and every line the README quotes from it appears in its output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from kai.api.timeutil import parse_time

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")


def demo_now() -> str:
    (now,) = re.findall(r"^DEMO_NOW := (\S+)$", MAKEFILE, re.MULTILINE)
    return now


def demo_recipe() -> list[str]:
    """The `make demo` command line, with the Makefile's variables filled in."""
    recipe = MAKEFILE.split("\ndemo:", 1)[1].splitlines()[1].strip()
    return recipe.replace("$(VENV)/bin/kai", "kai").replace("$(DEMO_NOW)", demo_now()).split()


def demo_quotes() -> list[str]:
    """Every "quoted" text of the README's paragraph on what the demo shows, whitespace collapsed."""
    section = README.split("**What the demo shows.**", 1)[1].split("\n## ", 1)[0]
    return [" ".join(quote.split()) for quote in re.findall(r'"([^"]+)"', section, re.DOTALL)]


def test_readme_states_the_demo_command_the_makefile_runs() -> None:
    assert f"```sh\n{' '.join(demo_recipe())}\n```" in README


def test_the_demo_happens_after_everything_in_its_snapshot() -> None:
    objects = [o for o in yaml.safe_load_all((ROOT / "examples" / "cluster.yaml").read_text()) if o]
    created = [parse_time(o["metadata"]["creationTimestamp"]) for o in objects if "creationTimestamp" in o["metadata"]]
    assert len(created) > 20
    assert parse_time(demo_now()) > max(created)


def test_every_demo_line_the_readme_quotes_is_printed() -> None:
    command = [str(BIN / "kai"), *demo_recipe()[1:]]
    # A wide terminal, so that no table cell wraps and each quoted message is one line of output.
    wide = {**os.environ, "COLUMNS": "400"}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=wide)
    assert done.returncode == 0, done.stderr
    output = " ".join(done.stdout.split())
    quotes = demo_quotes()
    assert len(quotes) >= 5
    for quote in quotes:
        for fragment in quote.split("…"):
            assert fragment.strip() in output, f"the README quotes {fragment.strip()!r}; the demo does not print it"



def test_the_readme_shows_the_kubeconfig_path_dev_cluster_up_prints() -> None:
    from kai.devcluster.cli import DEFAULT_FOLDER

    section = README.split("## Trying kai on a real control plane", 1)[1].split("\n## ", 1)[0]
    kubeconfig = DEFAULT_FOLDER / "kubeconfig"
    assert f"\nkubeconfig: {kubeconfig}\n" in section  # `up` prints "kubeconfig: <workdir>/kubeconfig"
    assert section.count(f"export KUBECONFIG={kubeconfig}") == 2
    assert "export KUBECONFIG=" not in section.replace(f"export KUBECONFIG={kubeconfig}", "")
