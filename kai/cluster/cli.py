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
from typer.core import TyperCommand

from kai.api import keys
from kai.api.timeutil import parse_duration

Kubeconfig = Annotated[
    str | None, typer.Option("--kubeconfig", envvar="KUBECONFIG", help="Kubeconfig; in-cluster config when unset.")
]
Listen = Annotated[str, typer.Option("--listen-address", help="host:port (or :port) for /metrics, /healthz, /readyz.")]
LeaderElect = Annotated[
    bool, typer.Option("--leader-elect/--no-leader-elect", help="Act only while holding the Lease.")
]
LeaseDuration = Annotated[str, typer.Option("--lease-duration", help="Lease duration (renew deadline = 2/3 of it).")]
LeaseNamespace = Annotated[
    str | None, typer.Option("--lease-namespace", help="Namespace of the Lease (default: --namespace).")
]
Namespace = Annotated[str, typer.Option("--namespace", help="KAI's namespace (the Lease's by default).")]
FakeUuids = Annotated[
    bool, typer.Option("--fake-gpu-uuids", help="Dev clusters (KWOK): write a made-up GPU UUID on reservation pods.")
]
FeatureGates = Annotated[str, typer.Option("--feature-gates", help="Accepted (kai has no feature gates).")]
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


def _duration(name: str, value: str, negative: bool = False) -> float:
    """A Go duration (``1s``, ``500ms``, ``-1s`` where `negative` is allowed)."""
    sign = 1.0
    if negative and value.startswith("-"):
        sign, value = -1.0, value[1:]
    try:
        seconds = parse_duration(value)
    except ValueError as err:
        raise _fail(f"{name}: {err}") from None
    if negative:
        return sign * seconds
    if seconds <= 0:
        raise _fail(f"{name}: must be positive, got {value!r}")
    return seconds


def _read_yaml(flag: str, path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise _fail(f"{flag} {path}: {err}") from None


def _config(path: Path | None, shard: Path | None = None) -> Any:
    """The scheduler's configuration: a SchedulingShard's (when given), with the file's keys over it."""
    from kai.cycle import known_actions
    from kai.framework.config import parse_config

    raw = _read_yaml("--scheduler-conf", path) if path is not None else None
    if shard is not None:
        from kai.cluster.shard import shard_config

        base, problems, notes = shard_config(_read_yaml("--scheduling-shard", shard), f"SchedulingShard {shard}")
        for note in notes:
            logging.getLogger("kai").warning("%s", note)
        if problems:
            raise _fail("; ".join(str(p) for p in problems))
        if raw is not None and not isinstance(raw, dict):
            raise _fail(f"--scheduler-conf {path}: must be a mapping (actions, tiers, schedulerParams, ...)")
        raw = {**base, **(raw or {})}
    config, problems, warnings = parse_config(raw, known_actions(), f"config {path or shard}")
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


def _go_bool(name: str, help: str) -> Any:
    return typer.Option(f"--{name}/--no-{name}", help=help + " (`--X=true|false` too).")


ReservationNote = "Binder: resource reservation pods (KAI's flag)."


def run(
    kubeconfig: Kubeconfig = None,
    scheduler_conf: Annotated[
        Path | None,
        typer.Option(
            "--scheduler-conf", "--config", help="Scheduler configuration (KAI's format; --config: old name)."
        ),
    ] = None,
    scheduling_shard: Annotated[
        Path | None,
        typer.Option(
            "--scheduling-shard",
            help="A SchedulingShard (kai.scheduler/v1, or its spec) that makes the configuration"
            " (--scheduler-conf's keys override it).",
        ),
    ] = None,
    scheduler_name: Annotated[
        str | None, typer.Option("--scheduler-name", help="Pods with this schedulerName are ours (config's default).")
    ] = None,
    schedule_period: Annotated[str, typer.Option("--schedule-period", help="Time between cycles.")] = "1s",
    binder: Annotated[bool, typer.Option("--binder/--no-binder", help="Run the binder in this process too.")] = True,
    listen: Listen = ":8080",
    leader_elect: LeaderElect = False,
    lease_namespace: LeaseNamespace = None,
    namespace: Namespace = "kai-scheduler",
    lease_duration: LeaseDuration = "15s",
    qps: Annotated[float, typer.Option("--qps", help="API requests per second (client-go's; < 0: unlimited).")] = 50,
    burst: Annotated[int, typer.Option("--burst", help="API request burst (client-go's).")] = 300,
    metrics_namespace: Annotated[str, typer.Option("--metrics-namespace", help="Metric name prefix.")] = "kai",
    queue_label_key: Annotated[
        str, typer.Option("--queue-label-key", help="Label naming a pod's queue (pods without a PodGroup).")
    ] = keys.QUEUE_LABEL,
    nodepool_label_key: Annotated[str, typer.Option("--nodepool-label-key", help="Node-pool label.")] = (
        keys.NODE_POOL_LABEL
    ),
    partition_label_value: Annotated[
        str,
        typer.Option(
            "--partition-label-value",
            help="The node pool (shard): only nodes, Queues and PodGroups whose node-pool label has this value"
            " (empty: those without the label).",
        ),
    ] = "",
    full_hierarchy_fairness: Annotated[
        bool, _go_bool("full-hierarchy-fairness", "Fair share over the whole queue tree")
    ] = True,
    default_staleness_grace_period: Annotated[
        str,
        typer.Option("--default-staleness-grace-period", help="Evict a gang below minMember after this (< 0: never)."),
    ] = "60s",
    detailed_fit_errors: Annotated[
        bool, _go_bool("detailed-fit-errors", "Per-node fit errors (accepted; kai gives the summary)")
    ] = False,
    update_pod_eviction_condition: Annotated[
        bool,
        _go_bool("update-pod-eviction-condition", "DisruptionTarget=True (PreemptionByScheduler) before deleting"),
    ] = False,
    max_consolidation_preemptees: Annotated[
        int, typer.Option("--max-consolidation-preemptees", help="Victims per consolidation (0: off, -1: any).")
    ] = 16,
    use_scheduling_signatures: Annotated[
        bool, _go_bool("use-scheduling-signatures", "Skip jobs equal to one that failed")
    ] = True,
    allow_consolidating_reclaim: Annotated[
        bool, _go_bool("allow-consolidating-reclaim", "Reclaim may move pods instead of evicting")
    ] = True,
    verbosity: Annotated[int, typer.Option("--v", "-v", help="klog verbosity (>= 4: debug log).")] = 0,
    feature_gates: FeatureGates = "",
    resource_reservation_app_label: Annotated[
        str, typer.Option("--resource-reservation-app-label", help=ReservationNote)
    ] = "kai-resource-reservation",
    eviction_api: Annotated[
        bool, typer.Option("--eviction-api", help="Evict through the Eviction API (PDBs apply); KAI deletes.")
    ] = False,
    record_snapshot: Annotated[
        Path | None, typer.Option("--record-snapshot", help="Folder for snapshots that `kai simulate -f` replays.")
    ] = None,
    record_every: Annotated[int, typer.Option("--record-every", min=1, help="Record every N cycles.")] = 10,
    cycles: Annotated[int, typer.Option("--cycles", min=0, help="Stop after N cycles (0: run until stopped).")] = 0,
    snapshot_port: Annotated[
        int,
        typer.Option(
            "--snapshot-port",
            min=0,
            max=65535,
            help="Serve /snapshot (the last cycle's input) on 127.0.0.1:PORT; 0: not served.",
        ),
    ] = 0,
    binder_workers: Annotated[int, typer.Option("--binder-workers", min=1)] = 16,
    fake_gpu_uuids: FakeUuids = False,
    log_level: LogLevel = "info",
) -> None:
    """Schedule every pod with schedulerName kai-scheduler on the cluster (the live scheduler)."""
    import dataclasses

    from kai.cluster.app import LiveOptions

    _setup_logging("debug" if verbosity >= 4 else log_level)
    cfg = _config(scheduler_conf, scheduling_shard)
    if scheduling_shard is not None and not partition_label_value:  # the shard's pool, unless the flag names one
        from kai.cluster.shard import shard_spec

        spec = shard_spec(_read_yaml("--scheduling-shard", scheduling_shard)) or {}
        partition_label_value = str(spec.get("partitionLabelValue") or "") if isinstance(spec, dict) else ""
    params = dataclasses.replace(
        cfg.params,
        full_hierarchy_fairness=full_hierarchy_fairness,
        staleness_grace_period=_duration("--default-staleness-grace-period", default_staleness_grace_period, True),
        max_consolidation_preemptees=max_consolidation_preemptees,
        use_scheduling_signatures=use_scheduling_signatures,
        allow_consolidating_reclaim=allow_consolidating_reclaim,
    )
    if scheduler_name:
        params = dataclasses.replace(params, scheduler_name=scheduler_name)
    cfg = dataclasses.replace(cfg, params=params)
    if detailed_fit_errors:
        logging.getLogger("kai").warning("--detailed-fit-errors: kai writes KAI's summary fit messages only")
    duration = _duration("--lease-duration", lease_duration)
    options = LiveOptions(
        config=cfg,
        binder=binder,
        period=_duration("--schedule-period", schedule_period),
        leader_elect=leader_elect,
        lease_namespace=lease_namespace or namespace,
        lease_duration=duration,
        renew_deadline=duration * 2 / 3,
        retry_period=min(2.0, duration / 5),
        listen=_address("--listen-address", listen),
        eviction_api=eviction_api,
        record_dir=record_snapshot,
        record_every=record_every if record_snapshot else 0,
        max_cycles=cycles,
        binder_workers=binder_workers,
        fake_gpu_uuids=fake_gpu_uuids,
        metrics_namespace=metrics_namespace,
        queue_label_key=queue_label_key,
        nodepool_label_key=nodepool_label_key,
        partition_label_value=partition_label_value,
        update_pod_eviction_condition=update_pod_eviction_condition,
        binder_settings={"reservation_app_label": resource_reservation_app_label},
        snapshot_listen=f"127.0.0.1:{snapshot_port}" if snapshot_port else "",
    )
    _start(kubeconfig, options, qps, burst)


def binder(
    kubeconfig: Kubeconfig = None,
    metrics_bind_address: Annotated[
        str, typer.Option("--metrics-bind-address", help="host:port for /metrics (KAI's).")
    ] = ":8080",
    health_probe_bind_address: Annotated[
        str, typer.Option("--health-probe-bind-address", help="host:port for /healthz and /readyz (KAI's).")
    ] = ":8081",
    listen: Annotated[
        str | None,
        typer.Option("--listen-address", help="Old: one host:port for every endpoint (replaces the two above)."),
    ] = None,
    leader_elect: LeaderElect = False,
    lease_namespace: LeaseNamespace = None,
    namespace: Namespace = "kai-scheduler",
    lease_duration: LeaseDuration = "15s",
    workers: Annotated[
        int, typer.Option("--max-concurrent-reconciles", "--workers", min=1, help="Concurrent binds (--workers: old).")
    ] = 10,
    qps: Annotated[float, typer.Option("--qps", help="API requests per second (client-go's; < 0: unlimited).")] = 50,
    burst: Annotated[int, typer.Option("--burst", help="API request burst (client-go's).")] = 300,
    scheduler_name: Annotated[
        str, typer.Option("--scheduler-name", help="Accepted (the binder follows BindRequests).")
    ] = "kai-scheduler",
    reservation_namespace: Annotated[
        str, typer.Option("--resource-reservation-namespace", help=ReservationNote)
    ] = "kai-resource-reservation",
    reservation_service_account: Annotated[
        str, typer.Option("--resource-reservation-service-account", help=ReservationNote)
    ] = "kai-resource-reservation",
    reservation_image: Annotated[
        str, typer.Option("--resource-reservation-pod-image", help=ReservationNote)
    ] = "ghcr.io/nvidia/kai-scheduler/resource-reservation:latest",
    reservation_app_label: Annotated[
        str, typer.Option("--resource-reservation-app-label", help=ReservationNote)
    ] = "kai-resource-reservation",
    reservation_timeout: Annotated[
        int, typer.Option("--resource-reservation-allocation-timeout", help=ReservationNote + " Seconds.")
    ] = 40,
    reservation_sync_period: Annotated[
        int, typer.Option("--resource-reservation-sync-period", help=ReservationNote + " Seconds (accepted).")
    ] = 60,
    reservation_resources: Annotated[
        str, typer.Option("--resource-reservation-pod-resources", help=ReservationNote + " JSON requirements.")
    ] = "",
    runtime_class_name: Annotated[str, typer.Option("--runtime-class-name", help=ReservationNote)] = "",
    scale_adjust_namespace: Annotated[
        str, typer.Option("--scale-adjust-namespace", help="Accepted (kai has no node-scale-adjuster).")
    ] = "kai-scale-adjust",
    cdi_enabled: Annotated[bool, _go_bool("cdi-enabled", "Accepted (kai sets GPU env, not CDI devices)")] = False,
    volume_binding_timeout: Annotated[
        int, typer.Option("--volume-binding-timeout-seconds", help="Accepted (kai binds no volumes).")
    ] = 120,
    rate_limiter_base_delay: Annotated[int, typer.Option("--rate-limiter-base-delay", help="Accepted.")] = 1,
    rate_limiter_max_delay: Annotated[int, typer.Option("--rate-limiter-max-delay", help="Accepted.")] = 60,
    feature_gates: FeatureGates = "",
    fake_gpu_uuids: Annotated[
        bool,
        typer.Option(
            "--fake-gpu-nodes",
            "--fake-gpu-uuids",
            help="Dev clusters (KWOK): write a made-up GPU UUID on reservation pods.",
        ),
    ] = False,
    verbosity: Annotated[int, typer.Option("--v", "-v", help="klog verbosity (>= 4: debug log).")] = 0,
    log_level: LogLevel = "info",
) -> None:
    """Bind pods as BindRequests ask (the binder alone, as KAI deploys it)."""
    import json

    from kai.cluster.app import LiveOptions
    from kai.cluster.cache import RESERVATION_NAMESPACE

    _setup_logging("debug" if verbosity >= 4 else log_level)
    if reservation_namespace != RESERVATION_NAMESPACE:
        raise _fail(
            f"--resource-reservation-namespace: only {RESERVATION_NAMESPACE} is built, got {reservation_namespace!r}"
        )
    resources = None
    if reservation_resources:
        try:
            resources = json.loads(reservation_resources)
        except ValueError as err:
            raise _fail(f"--resource-reservation-pod-resources: not JSON: {err}") from None
        if not isinstance(resources, dict):
            raise _fail("--resource-reservation-pod-resources: expected a JSON object with requests/limits")
    duration = _duration("--lease-duration", lease_duration)
    options = LiveOptions(
        scheduler=False,
        binder=True,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace or namespace,
        lease_duration=duration,
        renew_deadline=duration * 2 / 3,
        retry_period=min(2.0, duration / 5),
        listen=_address("--listen-address", listen) if listen else "",
        metrics_listen="" if listen else _address("--metrics-bind-address", metrics_bind_address),
        probe_listen="" if listen else _address("--health-probe-bind-address", health_probe_bind_address),
        binder_workers=workers,
        fake_gpu_uuids=fake_gpu_uuids,
        reservation_timeout=float(reservation_timeout),
        binder_settings={
            "reservation_image": reservation_image,
            "reservation_app_label": reservation_app_label,
            "reservation_service_account": reservation_service_account,
            "reservation_resources": resources,
            "reservation_runtime_class": runtime_class_name,
        },
    )
    _start(kubeconfig, options, qps, burst)


def _address(name: str, value: str) -> str:
    """Go's ``:8080`` (every interface) or ``host:port``; ``0`` as the port picks a free one."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise _fail(f"{name}: expected host:port or :port, got {value!r}")
    return f"{host or '0.0.0.0'}:{port}"


def _start(kubeconfig: str | None, options: Any, qps: float = -1, burst: int = 0) -> None:
    """Connect, open the listener and serve until a signal; a busy address is a one-line error."""
    from kai.cluster.app import LiveProcess

    kube = _connect(kubeconfig).rate_limit(qps, burst)
    try:
        process = LiveProcess(kube, options)
    except OSError as err:
        raise _fail(f"{options.listen}: {err.strerror or err}") from None
    _serve(process)


class GoFlags(TyperCommand):
    """Go (pflag) style booleans as well: ``--flag=true``, ``--flag=false`` (KAI's chart writes them so).

    ``--flag value`` and ``--flag=value`` already work for every other option.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, go_booleans(self.params, args))


def go_booleans(params: list[Any], args: list[str]) -> list[str]:
    """Rewrite ``--b=true|false`` of boolean flags into click's ``--b`` / ``--no-b`` (or nothing)."""
    flags: dict[str, tuple[str | None, str | None]] = {}  # --name -> (token for true, token for false)
    for param in params:
        if getattr(param, "is_flag", False):  # typer's own click: no isinstance on click's classes
            secondary = getattr(param, "secondary_opts", None) or []
            for name in param.opts:
                flags[name] = (name, secondary[0] if secondary else None)
    out: list[str] = []
    for arg in args:
        name, eq, value = arg.partition("=")
        if eq and name in flags:
            truth = value.strip().lower()
            if truth not in ("true", "false", "1", "0", "t", "f"):
                raise typer.BadParameter(f"{value!r} is not a boolean (true or false)", param_hint=name)
            on, off = flags[name]
            token = on if truth in ("true", "1", "t") else off
            if token is not None:
                out.append(token)
            continue
        out.append(arg)
    return out


run.command_class = GoFlags  # type: ignore[attr-defined]
binder.command_class = GoFlags  # type: ignore[attr-defined]


def register(app: typer.Typer) -> None:
    """Add `kai run` and `kai binder` to the `kai` command."""
    app.command("run", cls=GoFlags)(run)
    app.command("binder", cls=GoFlags)(binder)
