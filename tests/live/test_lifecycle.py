"""Starting and stopping the control plane: nothing is left running, failures are loud, the CLI works."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kai.devcluster import build
from kai.devcluster.cli import app
from kai.devcluster.controlplane import DEFAULT_CRD_DIR, ControlPlane, ControlPlaneError

REPO = Path(__file__).resolve().parents[2]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0); it is dead all the same
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_stop_ends_every_process_and_removes_the_workdir(controlplane_binaries: dict[str, Path]) -> None:
    started = time.monotonic()
    cp = ControlPlane(binaries=controlplane_binaries).start()
    elapsed = time.monotonic() - started
    pids = cp.pids()
    workdir = cp.workdir
    assert set(pids) == {"etcd", "kube-apiserver", "kwok"}
    assert workdir is not None and workdir.exists()
    assert str(workdir).startswith("/dev/shm/"), "etcd data belongs on tmpfs"
    assert all(not _gone(pid) for pid in pids.values())
    cp.stop()
    assert all(_gone(pid) for pid in pids.values())
    assert not workdir.exists()
    assert elapsed < 30, f"a cached start took {elapsed:.1f}s"


def test_a_failed_start_stops_what_it_started(controlplane_binaries: dict[str, Path], tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    broken = yaml.safe_load((DEFAULT_CRD_DIR / "scheduling.run.ai_queues.yaml").read_text())
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"] = "nonsense"
    (crds / "broken.yaml").write_text(yaml.safe_dump(broken))
    cp = ControlPlane(binaries=controlplane_binaries, crd_dir=crds)
    with pytest.raises(ControlPlaneError, match="rejected"):
        cp.start()
    assert not cp.processes
    assert cp.workdir is not None and not cp.workdir.exists()


def test_missing_binaries_are_a_clear_error(tmp_path: Path) -> None:
    fake = {"etcd": tmp_path / "etcd", "kube-apiserver": tmp_path / "x", "kwok": tmp_path / "y"}
    cp = ControlPlane(binaries=fake)
    with pytest.raises(ControlPlaneError, match="missing control-plane binaries"):
        cp.start()


def test_build_for_tests_records_a_failure_and_exits_zero(tmp_path: Path) -> None:
    env = {**os.environ, "KAI_CONTROLPLANE_CACHE": str(tmp_path), "PATH": "/nonexistent"}
    run = [sys.executable, "-m", "kai.devcluster.build"]
    soft = subprocess.run([*run, "--for-tests"], env=env, capture_output=True, text=True, timeout=60)
    assert soft.returncode == 0, soft.stderr
    assert "BUILD FAILED" in soft.stderr
    assert "'go') is not on PATH" in (tmp_path / build.BUILD_ERROR_FILE).read_text()
    hard = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert hard.returncode == 1


@pytest.mark.parametrize("ci", [True, False])
def test_missing_control_plane_fails_under_ci_and_skips_otherwise(tmp_path: Path, ci: bool) -> None:
    (tmp_path / build.BUILD_ERROR_FILE).write_text("go build exploded\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["KAI_CONTROLPLANE_CACHE"] = str(tmp_path)
    if ci:
        env["CI"] = "true"
    target = "tests/live/test_kwok.py::test_pod_with_a_fail_annotation_fails"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", target, "-rs", "-p", "no:cacheprovider"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    output = result.stdout + result.stderr
    assert "go build exploded" in output
    if ci:
        assert result.returncode == 1, output
        assert "CI requires the live control plane" in output
    else:
        assert result.returncode == 0, output
        assert "1 skipped" in output


def test_dev_cluster_cli_up_status_down(controlplane_binaries: dict[str, Path]) -> None:
    folder = Path("/dev/shm") / f"kai-dev-cluster-test-{os.getpid()}"
    runner = CliRunner()
    up = runner.invoke(app, ["up", "--dir", str(folder), "--nodes", "3", "--gpus-per-node", "4"])
    try:
        assert up.exit_code == 0, up.output
        assert f"kubeconfig: {folder / 'kubeconfig'}" in up.output
        status = runner.invoke(app, ["status", "--dir", str(folder)])
        assert status.exit_code == 0, status.output
        assert "nodes: 3 (3 Ready)" in status.output
        if not build.missing_binaries(names=("kube-controller-manager", "prometheus")):
            assert "prometheus: http://127.0.0.1:" in up.output
            assert "kube-controller-manager running" in " ".join(status.output.split())
            assert "prometheus running" in " ".join(status.output.split())
        again = runner.invoke(app, ["up", "--dir", str(folder)])
        assert "already running" in again.output
    finally:
        down = runner.invoke(app, ["down", "--dir", str(folder)])
    assert down.exit_code == 0 and "stopped" in down.output
    assert not folder.exists()
    status = runner.invoke(app, ["status", "--dir", str(folder)])
    assert status.exit_code == 1 and "no dev cluster" in status.output


def test_helm_chart_carries_the_same_crds() -> None:
    chart = REPO / "deploy" / "helm" / "kai-scheduler"
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert meta["name"] == "kai-scheduler" and meta["apiVersion"] == "v2"
    chart_crds = sorted(p.name for p in (chart / "crds").glob("*.yaml"))
    assert chart_crds == sorted(p.name for p in DEFAULT_CRD_DIR.glob("*.yaml"))
    for name in chart_crds:
        assert (chart / "crds" / name).read_text() == (DEFAULT_CRD_DIR / name).read_text()
    roles = sorted(p.name for p in (chart / "files" / "clusterroles").glob("*.yaml"))
    assert roles == sorted(p.name for p in (REPO / "deploy" / "rbac").glob("*-clusterrole.yaml"))
    for name in roles:
        in_chart = (chart / "files" / "clusterroles" / name).read_text()
        assert in_chart == (REPO / "deploy" / "rbac" / name).read_text()
