"""`kai dev-cluster up|down|status`: a throw-away real control plane for a person trying kai.

``up`` builds the pinned binaries if they are missing (see :mod:`kai.devcluster.build`),
starts etcd + kube-apiserver + kube-controller-manager + KWOK + Prometheus in the background
with kai's CRDs, KAI's PriorityClasses, the default queues and the ``nvidia`` RuntimeClass
installed and a few fake GPU nodes, and prints the kubeconfig path and Prometheus's URL.
``status`` tells whether it is running; ``down`` stops it and removes its folder (everything
lives on tmpfs).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from kai.console import WholeHelpGroup
from kai.devcluster import build
from kai.devcluster.controlplane import ControlPlane, ControlPlaneError, stop_process_group

app = typer.Typer(
    cls=WholeHelpGroup,
    help="A throw-away control plane (etcd, kube-apiserver, kube-controller-manager, KWOK GPU nodes, Prometheus).",
    no_args_is_help=True,
    rich_markup_mode=None,  # as kai's own (kai.cli)
)
PROCESSES = ("prometheus", "kwok", "kube-controller-manager", "kube-apiserver", "etcd")

DEFAULT_FOLDER = Path("/dev/shm/kai-dev-cluster")
DEFAULT_DIR = Path(os.environ.get("KAI_DEV_CLUSTER_DIR", str(DEFAULT_FOLDER)))
PROMETHEUS_PORT = 9090

DirOption = Annotated[
    Path, typer.Option("--dir", help="Folder of the dev cluster's state, certificates and data.")
]


def _fail(message: str) -> None:
    typer.echo(f"error: {message.splitlines()[0] if message else 'unknown error'}", err=True)
    raise typer.Exit(1)


def _read_state(folder: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((folder / "state.json").read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _pid_runs(pid: int, binary_name: str) -> bool:
    """True when ``pid`` is alive and is the named binary (guards against recycled pids)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return Path(cmdline).name == binary_name


def _alive(state: dict[str, Any]) -> dict[str, bool]:
    return {name: _pid_runs(int(pid), name) for name, pid in state.get("pids", {}).items()}


@app.command()
def up(
    directory: DirOption = DEFAULT_DIR,
    nodes: Annotated[int, typer.Option(help="Fake GPU nodes to create.")] = 4,
    gpus: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node.")] = 8,
    gpu_product: Annotated[str, typer.Option(help="nvidia.com/gpu.product label.")] = "NVIDIA-A100-SXM4-80GB",
    gpu_memory: Annotated[int, typer.Option(help="nvidia.com/gpu.memory label, MiB per GPU.")] = 81920,
    cpu: Annotated[str, typer.Option(help="CPU of each node.")] = "64",
    memory: Annotated[str, typer.Option(help="Memory of each node.")] = "512Gi",
    controller_manager: Annotated[
        bool, typer.Option(help="Run kube-controller-manager (Jobs, Deployments, garbage collection).")
    ] = True,
    prometheus: Annotated[
        bool, typer.Option(help="Run Prometheus scraping kai's metrics (time-based fair share's usage DB).")
    ] = True,
    scrape: Annotated[
        list[str] | None,
        typer.Option("--scrape", help="host:port of a kai /metrics endpoint for Prometheus (repeatable)."),
    ] = None,
    prometheus_port: Annotated[
        int, typer.Option(help="Prometheus's port on 127.0.0.1 (a free one if this one is taken; 0: any).")
    ] = PROMETHEUS_PORT,
) -> None:
    """Start the dev cluster (building the binaries first if needed) and print its kubeconfig path."""
    from kai.devcluster.nodes import GpuNodeSpec, create_gpu_nodes

    state = _read_state(directory)
    if state and all(_alive(state).values()):
        typer.echo(f"dev cluster already running at {state['server']}")
        typer.echo(f"kubeconfig: {state['kubeconfig']}")
        return
    if state:
        _stop(directory, state)
    shutil.rmtree(directory, ignore_errors=True)  # leftovers of a crashed start: never reuse old etcd data
    extras = (("kube-controller-manager",) if controller_manager else ()) + (("prometheus",) if prometheus else ())
    try:
        bins = build.ensure_binaries(names=(*build.CORE, *extras))
    except (build.BuildError, OSError) as exc:
        if build.missing_binaries(names=build.CORE):
            _fail(f"could not build the control plane: {exc}")
        missing = build.missing_binaries(names=extras)
        typer.echo(f"warning: starting without {', '.join(missing)}, which could not be built: "
                   f"{str(exc).splitlines()[0]}", err=True)
        controller_manager = controller_manager and "kube-controller-manager" not in missing
        prometheus = prometheus and "prometheus" not in missing
        bins = build.binaries()
    if prometheus and prometheus_port and not _port_free(prometheus_port):
        typer.echo(f"  port {prometheus_port} is taken: Prometheus gets a free one")
        prometheus_port = 0
    started = time.monotonic()
    cp = ControlPlane(
        workdir=directory, binaries=bins, detach=True, log=lambda m: typer.echo(f"  {m}"),
        controller_manager=controller_manager, prometheus=prometheus, kai_defaults=True,
        prometheus_targets=tuple(scrape) if scrape else ("127.0.0.1:8080",), prometheus_listen_port=prometheus_port,
    )
    try:
        cp.start()
        if nodes > 0:
            spec = GpuNodeSpec(
                gpus=gpus, gpu_product=gpu_product, gpu_memory_mib=gpu_memory, cpu=cpu, memory=memory
            )
            names = create_gpu_nodes(cp.api_client(), nodes, spec, timeout=60)
            typer.echo(f"  {len(names)} fake GPU nodes Ready ({gpus} x {gpu_product} each)")
    except (ControlPlaneError, TimeoutError, OSError) as exc:
        cp.stop()
        _fail(str(exc))
    except Exception as exc:  # an API error while creating nodes: still no traceback for the user
        cp.stop()
        shutil.rmtree(directory, ignore_errors=True)
        _fail(f"{type(exc).__name__}: {exc}")
    typer.echo(f"dev cluster up in {time.monotonic() - started:.1f}s at {cp.server}")
    typer.echo(f"kubeconfig: {cp.kubeconfig}")
    typer.echo(f"  export KUBECONFIG={cp.kubeconfig}")
    if cp.prometheus_url:
        typer.echo(f"prometheus: {cp.prometheus_url} (scraping {', '.join(cp.prometheus_targets)})")
    typer.echo("stop it with: kai dev-cluster down")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stop(directory: Path, state: dict[str, Any]) -> None:
    for name in PROCESSES:
        pid = state.get("pids", {}).get(name)
        if pid is not None and _pid_runs(int(pid), name):
            stop_process_group(int(pid))
    shutil.rmtree(directory, ignore_errors=True)


@app.command()
def down(directory: DirOption = DEFAULT_DIR) -> None:
    """Stop the dev cluster and delete its folder."""
    state = _read_state(directory)
    if state is None:
        typer.echo("no dev cluster is running")
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        return
    _stop(directory, state)
    typer.echo("dev cluster stopped")


@app.command()
def status(directory: DirOption = DEFAULT_DIR) -> None:
    """Tell whether the dev cluster is running, where, and how many nodes it has."""
    state = _read_state(directory)
    if state is None:
        typer.echo("no dev cluster is running (start one with: kai dev-cluster up)")
        raise typer.Exit(1)
    alive = _alive(state)
    for name, ok in alive.items():
        typer.echo(f"  {name:15} {'running' if ok else 'NOT running'} (pid {state['pids'][name]})")
    if not all(alive.values()):
        typer.echo("dev cluster is broken; run `kai dev-cluster down` then `kai dev-cluster up`")
        raise typer.Exit(1)
    try:
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config

        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=state["kubeconfig"]))
        node_list = core.list_node().items
        ready = sum(
            1 for n in node_list
            if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
        )
        typer.echo(f"  nodes: {len(node_list)} ({ready} Ready)")
    except Exception as exc:
        _fail(f"the API server does not answer: {exc}")
    typer.echo(f"dev cluster running at {state['server']}")
    typer.echo(f"kubeconfig: {state['kubeconfig']}")
    if state.get("prometheus"):
        typer.echo(f"prometheus: {state['prometheus']}")
