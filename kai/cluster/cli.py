"""`kai run` (the live scheduler, with the binder in the same process unless --no-binder) and `kai binder`.

Registered in kai/cli.py. Errors become one-line messages; SIGTERM and Ctrl-C stop cleanly
(releasing the lease, so that a standby takes over at once).
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from kai.api.timeutil import parse_duration

Kubeconfig = Annotated[
    str | None, typer.Option("--kubeconfig", envvar="KUBECONFIG", help="Kubeconfig; in-cluster config when unset.")
]
Listen = Annotated[str, typer.Option("--listen-address", help="host:port for /metrics, /healthz, /readyz, /snapshot.")]
LeaderElect = Annotated[
    bool, typer.Option("--leader-elect/--no-leader-elect", help="Act only while holding the Lease.")
]
LeaseNamespace = Annotated[str, typer.Option("--lease-namespace", help="Namespace of the Lease.")]
LeaseDuration = Annotated[str, typer.Option("--lease-duration", help="Lease duration (renew deadline = 2/3 of it).")]
FakeUuids = Annotated[
    bool, typer.Option("--fake-gpu-uuids", help="Dev clusters (KWOK): write a made-up GPU UUID on reservation pods.")
]
LogLevel = Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("urllib3").setLevel(logging.ERROR)


def _duration(name: str, value: str) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as err:
        raise _fail(f"{name}: {err}") from None
    if seconds <= 0:
        raise _fail(f"{name}: must be positive, got {value!r}")
    return seconds


def _config(path: Path | None) -> Any:
    from kai.cycle import known_actions
    from kai.framework.config import parse_config

    raw = None
    if path is not None:
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise _fail(f"--config {path}: {err}") from None
    config, problems, warnings = parse_config(raw, known_actions(), f"config {path}")
    for warning in warnings:
        logging.getLogger("kai").warning("%s", warning)
    if problems:
        raise _fail("; ".join(str(p) for p in problems))
    return config


def _connect(kubeconfig: str | None) -> Any:
    from kai.cluster.kube import ApiError, Kube

    try:
        kube = Kube.connect(kubeconfig)
        kube.get("/version")
    except ApiError as err:
        raise _fail(f"cannot reach the API server: {err}") from None
    except Exception as err:  # config errors come in many types
        raise _fail(f"cannot load the Kubernetes configuration: {err}") from None
    return kube


def _serve(process: Any) -> None:
    def stop(signum: int, frame: Any) -> None:
        process.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    process.start()
    try:
        process.wait()
    finally:
        process.stop()


def run(
    kubeconfig: Kubeconfig = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Scheduler configuration file (KAI's format).")
    ] = None,
    scheduler_name: Annotated[
        str | None, typer.Option("--scheduler-name", help="Pods with this schedulerName are ours (config's default).")
    ] = None,
    schedule_period: Annotated[str, typer.Option("--schedule-period", help="Time between cycles.")] = "1s",
    binder: Annotated[bool, typer.Option("--binder/--no-binder", help="Run the binder in this process too.")] = True,
    listen: Listen = "0.0.0.0:8080",
    leader_elect: LeaderElect = True,
    lease_namespace: LeaseNamespace = "kai-scheduler",
    lease_duration: LeaseDuration = "15s",
    eviction_api: Annotated[
        bool, typer.Option("--eviction-api", help="Evict through the Eviction API (PDBs apply); KAI deletes.")
    ] = False,
    record_snapshot: Annotated[
        Path | None, typer.Option("--record-snapshot", help="Folder for snapshots that `kai simulate -f` replays.")
    ] = None,
    record_every: Annotated[int, typer.Option("--record-every", min=1, help="Record every N cycles.")] = 10,
    cycles: Annotated[int, typer.Option("--cycles", min=0, help="Stop after N cycles (0: run until stopped).")] = 0,
    binder_workers: Annotated[int, typer.Option("--binder-workers", min=1)] = 16,
    fake_gpu_uuids: FakeUuids = False,
    log_level: LogLevel = "info",
) -> None:
    """Schedule every pod with schedulerName kai-scheduler on the cluster (the live scheduler)."""
    from kai.cluster.app import LiveOptions

    _setup_logging(log_level)
    cfg = _config(config)
    if scheduler_name:
        import dataclasses

        cfg = dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, scheduler_name=scheduler_name))
    duration = _duration("--lease-duration", lease_duration)
    options = LiveOptions(
        config=cfg,
        binder=binder,
        period=_duration("--schedule-period", schedule_period),
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_duration=duration,
        renew_deadline=duration * 2 / 3,
        retry_period=min(2.0, duration / 5),
        listen=listen,
        eviction_api=eviction_api,
        record_dir=record_snapshot,
        record_every=record_every if record_snapshot else 0,
        max_cycles=cycles,
        binder_workers=binder_workers,
        fake_gpu_uuids=fake_gpu_uuids,
    )
    _start(kubeconfig, options)


def binder(
    kubeconfig: Kubeconfig = None,
    listen: Listen = "0.0.0.0:8081",
    leader_elect: LeaderElect = True,
    lease_namespace: LeaseNamespace = "kai-scheduler",
    lease_duration: LeaseDuration = "15s",
    workers: Annotated[int, typer.Option("--workers", min=1, help="Concurrent binds.")] = 16,
    fake_gpu_uuids: FakeUuids = False,
    log_level: LogLevel = "info",
) -> None:
    """Bind pods as BindRequests ask (the binder alone, as KAI deploys it)."""
    from kai.cluster.app import LiveOptions

    _setup_logging(log_level)
    duration = _duration("--lease-duration", lease_duration)
    options = LiveOptions(
        scheduler=False,
        binder=True,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_duration=duration,
        renew_deadline=duration * 2 / 3,
        retry_period=min(2.0, duration / 5),
        listen=listen,
        binder_workers=workers,
        fake_gpu_uuids=fake_gpu_uuids,
    )
    _start(kubeconfig, options)


def _start(kubeconfig: str | None, options: Any) -> None:
    """Connect, open the listener and serve until a signal; a busy address is a one-line error."""
    from kai.cluster.app import LiveProcess

    kube = _connect(kubeconfig)
    try:
        process = LiveProcess(kube, options)
    except OSError as err:
        raise _fail(f"{options.listen}: {err.strerror or err}") from None
    _serve(process)


def register(app: typer.Typer) -> None:
    """Add `kai run` and `kai binder` to the `kai` command."""
    app.command("run")(run)
    app.command("binder")(binder)
