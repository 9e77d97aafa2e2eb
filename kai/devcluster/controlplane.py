"""Start and stop a real control plane: etcd + kube-apiserver + KWOK, with kai's CRDs installed.

Optionally also kube-controller-manager (``controller_manager=True``: Jobs and Deployments get
pods, garbage collection and namespace deletion work), Prometheus (``prometheus=True``: scrapes
kai's metrics endpoints, for time-based fair share from a real usage DB) and what KAI's Helm
chart installs for its users (``kai_defaults=True``: PriorityClasses, default queues, and the
``nvidia`` RuntimeClass that kai's admission sets on GPU pods). ``kai dev-cluster up`` turns all
three on; the live tests' shared cluster has none of them (tests there create owners and pods
by hand, and a garbage collector would delete pods whose made-up owners do not exist).

This is what envtest does, done from Python, plus KWOK standing in for kubelets::

    with ControlPlane() as cp:          # builds nothing; binaries come from kai.devcluster.build
        api = cp.api_client()           # kubernetes.client.ApiClient as cluster admin
        ...

* etcd listens on a free loopback port, its data on tmpfs (``/dev/shm``), ``--unsafe-no-fsync``;
* kube-apiserver serves HTTPS on a free loopback port with certificates generated at
  start (:mod:`kai.devcluster.pki`), RBAC authorization, and a kubeconfig for an admin;
* the CRDs in ``deploy/crds`` are created and waited for until Established and served;
* KWOK manages only nodes annotated ``kwok.x-k8s.io/node=fake`` with the stages of
  :mod:`kai.devcluster.kwok_stages`;
* kube-controller-manager runs every default controller but the node lifecycle one (KWOK
  renews node heartbeats about once a minute, which that controller would take for dead
  nodes and evict their pods), without leader election, as cluster admin;
* Prometheus keeps its TSDB in the work folder (so it outlives any kai process, not the
  control plane) and scrapes the ``host:port`` targets of ``prometheus-targets.json``
  (:meth:`ControlPlane.set_prometheus_targets` rewrites it; Prometheus rereads it). No
  kube-state-metrics runs, so a recording rule turns the scheduler's ``kai_cluster_capacity``
  into ``kube_node_status_capacity{resource}``: KAI's default capacity queries then answer.

Every process runs in its own process group and is stopped (SIGTERM, then SIGKILL) by
:meth:`ControlPlane.stop`, which is also registered with ``atexit``. Unless
``detach=True`` (the ``kai dev-cluster up`` case), the children also get SIGKILL from
the kernel if this Python process dies without cleaning up.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kai.devcluster import build, kwok_stages, pki

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CRD_DIR = REPO_ROOT / "deploy" / "crds"
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
POD_CIDR = "10.244.0.0/16"


class ControlPlaneError(RuntimeError):
    """The control plane could not be started (the message says which part and why)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tmpfs_root() -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Process:
    """One child process of the control plane."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(text[-lines:])


def stop_process_group(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM the process group led by ``pid``, then SIGKILL it if it has not exited in ``timeout``."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        # reap it if it is our child, so that it does not linger as a zombie
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


@dataclass
class ControlPlane:
    """A throw-away etcd + kube-apiserver + KWOK. Call :meth:`start`, then :meth:`stop` (or use ``with``)."""

    workdir: Path | None = None
    """Folder for certificates, kubeconfig, logs and etcd data; a fresh tmpfs folder when None."""
    binaries: dict[str, Path] | None = None
    crd_dir: Path = DEFAULT_CRD_DIR
    kwok: bool = True
    detach: bool = False
    """Let the processes outlive this Python process (for ``kai dev-cluster up``)."""
    log: Callable[[str], None] = lambda message: None
    verbose_apiserver: int = 0
    extra_apiserver_args: list[str] = field(default_factory=list)
    """More kube-apiserver flags (e.g. ``--watch-cache-sizes=configmaps#0`` to watch etcd directly)."""
    controller_manager: bool = False
    """Also run kube-controller-manager (Jobs, Deployments, garbage collection, namespace deletion)."""
    prometheus: bool = False
    """Also run Prometheus, scraping :attr:`prometheus_targets`."""
    prometheus_targets: tuple[str, ...] = ("127.0.0.1:8080",)
    """``host:port`` of the kai /metrics endpoints to scrape (``kai run``'s default address)."""
    prometheus_scrape_interval: str = "5s"
    prometheus_listen_port: int = 0
    """Prometheus's port on 127.0.0.1 (0: a free one)."""
    kai_defaults: bool = False
    """Create KAI's PriorityClasses, the default queues and the ``nvidia`` RuntimeClass."""

    processes: dict[str, Process] = field(default_factory=dict, init=False)
    etcd_port: int = field(default=0, init=False)
    apiserver_port: int = field(default=0, init=False)
    kwok_port: int = field(default=0, init=False)
    controller_manager_port: int = field(default=0, init=False)
    prometheus_port: int = field(default=0, init=False)
    kubeconfig: Path = field(default=Path(), init=False)
    pki: pki.Pki | None = field(default=None, init=False)
    _own_workdir: bool = field(default=False, init=False)
    _stopped: bool = field(default=True, init=False)

    # ------------------------------------------------------------------ lifecycle

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}" if self.prometheus_port else ""

    def wanted_binaries(self) -> tuple[str, ...]:
        """The components this control plane starts."""
        names = list(build.CORE)
        if self.controller_manager:
            names.append("kube-controller-manager")
        if self.prometheus:
            names.append("prometheus")
        return tuple(names)

    def start(self, timeout: float = 90.0) -> ControlPlane:
        """Start everything and wait until the API serves kai's CRDs (and KWOK is healthy)."""
        bins = self.binaries or build.binaries()
        missing = [
            name for name in self.wanted_binaries() if name not in bins or not os.access(bins[name], os.X_OK)
        ]
        if missing:
            raise ControlPlaneError(
                f"missing control-plane binaries: {', '.join(missing)} "
                "(build them with `python -m kai.devcluster.build`)"
            )
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="kai-controlplane-", dir=_tmpfs_root()))
            self._own_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        self._stopped = False
        if not self.detach:
            atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        try:
            self.pki = pki.generate(self.workdir / "pki", service_ip=SERVICE_IP)
            for attempt in range(3):
                try:
                    self._start_processes(bins, deadline)
                    break
                except ControlPlaneError as exc:
                    # A free port taken by someone else between probing and binding: try new ports.
                    if "address already in use" not in str(exc) or attempt == 2:
                        raise
                    self.log(f"port clash, retrying: {str(exc).splitlines()[0]}")
                    self.prometheus_listen_port = 0  # a fixed port someone took: any free one
                    self._stop_processes()
                    shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)
        except BaseException:
            self.stop()
            raise
        self.write_state()
        return self

    def _start_processes(self, bins: dict[str, Path], deadline: float) -> None:
        self._start_etcd(bins["etcd"], deadline)
        self._start_apiserver(bins["kube-apiserver"], deadline)
        self.install_crds(deadline)
        if self.kai_defaults:
            from kai.devcluster.defaults import install_kai_defaults

            created = install_kai_defaults(self.api_client())
            self.log(f"installed KAI's defaults: {', '.join(created)}")
        if self.controller_manager:
            self._start_controller_manager(bins["kube-controller-manager"], deadline)
        if self.kwok:
            self._start_kwok(bins["kwok"], deadline)
        if self.prometheus:
            self._start_prometheus(bins["prometheus"], deadline)

    def _stop_processes(self) -> None:
        for name in ("prometheus", "kwok", "kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self.processes.get(name)
            if proc is not None:
                stop_process_group(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=5)
        self.processes.clear()

    def stop(self) -> None:
        """Stop every process started here (KWOK, then the API server, then etcd) and clean up."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_processes()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ clients

    def api_client(self) -> k8s.ApiClient:
        """A new Kubernetes API client authenticated as cluster admin."""
        return k8s_config.new_client_from_config(config_file=str(self.kubeconfig))

    def ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.processes.items()}

    def write_state(self) -> Path:
        """Record ports, pids and paths in ``<workdir>/state.json`` (read by ``kai dev-cluster status``)."""
        assert self.workdir is not None
        state = {
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "etcd": f"http://127.0.0.1:{self.etcd_port}",
            "prometheus": self.prometheus_url,
            "pids": self.pids(),
            "workdir": str(self.workdir),
            "started": time.time(),
        }
        path = self.workdir / "state.json"
        path.write_text(json.dumps(state, indent=2))
        return path

    # ------------------------------------------------------------------ pieces

    def _spawn(self, name: str, argv: list[str]) -> Process:
        assert self.workdir is not None
        log_path = self.workdir / "logs" / f"{name}.log"
        with log_path.open("ab") as log_file:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=None if self.detach else _die_with_parent,
            )
        proc = Process(name, popen, log_path)
        self.processes[name] = proc
        self.log(f"started {name} (pid {popen.pid})")
        return proc

    def _wait(self, proc: Process, what: str, check: Callable[[], bool], deadline: float) -> None:
        while True:
            if not proc.alive():
                raise ControlPlaneError(
                    f"{proc.name} exited with code {proc.popen.returncode} while waiting for {what}; "
                    f"log {proc.log}:\n{proc.log_tail()}"
                )
            try:
                if check():
                    return
            except (OSError, urllib.error.URLError, ApiException):
                pass
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"timed out waiting for {what}; log {proc.log}:\n{proc.log_tail()}")
            time.sleep(0.1)

    def _start_etcd(self, binary: Path, deadline: float) -> None:
        assert self.workdir is not None
        self.etcd_port = free_port()
        peer_port = free_port()
        data_dir = self.workdir / "etcd-data"
        client_url = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        proc = self._spawn("etcd", [
            str(binary),
            "--name=kai",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=kai={peer_url}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync",
            "--quota-backend-bytes=4294967296",
            "--log-level=warn",
        ])

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client_url}/health", timeout=2) as resp:
                return json.loads(resp.read()).get("health") == "true"

        self._wait(proc, "etcd to be healthy", healthy, deadline)
        self.log(f"etcd ready on {client_url}")

    def _start_apiserver(self, binary: Path, deadline: float) -> None:
        assert self.workdir is not None and self.pki is not None
        p = self.pki
        self.apiserver_port = free_port()
        self.kubeconfig = pki.write_kubeconfig(self.workdir / "kubeconfig", self.server, p)
        proc = self._spawn("kube-apiserver", [
            str(binary),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={self.workdir / 'pki'}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            f"--client-ca-file={p.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            # No kube-controller-manager runs here: nothing would ever lift the not-ready taint
            # that TaintNodesByCondition puts on every new node, nor create service accounts.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p.sa_public_key}",
            f"--service-account-signing-key-file={p.sa_private_key}",
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            f"--v={self.verbose_apiserver}",
            *self.extra_apiserver_args,
        ])
        ctx = self.ssl_context()

        def ready() -> bool:
            with urllib.request.urlopen(f"{self.server}/readyz", timeout=2, context=ctx) as resp:
                return resp.status == 200

        self._wait(proc, "kube-apiserver /readyz", ready, deadline)
        core = k8s.CoreV1Api(self.api_client())
        self._wait(proc, "the default namespace", lambda: bool(core.read_namespace("default")), deadline)
        self.log(f"kube-apiserver ready on {self.server}")

    def install_crds(self, deadline: float | None = None) -> list[str]:
        """Create (or replace) every CRD in :attr:`crd_dir` and wait until each is Established and served."""
        deadline = deadline or time.monotonic() + 60
        api = self.api_client()
        ext = k8s.ApiextensionsV1Api(api)
        custom = k8s.CustomObjectsApi(api)
        apiserver = self.processes["kube-apiserver"]
        crds = load_crds(self.crd_dir)
        if not crds:
            raise ControlPlaneError(f"no CRD found in {self.crd_dir}")
        for crd in crds:
            try:
                ext.create_custom_resource_definition(crd, _preload_content=False)
            except ApiException as exc:
                if exc.status != 409:
                    raise ControlPlaneError(f"CRD {crd['metadata']['name']} rejected: {exc.body}") from exc
                current = json.loads(
                    ext.read_custom_resource_definition(crd["metadata"]["name"], _preload_content=False).data
                )
                crd = {**crd, "metadata": {**crd["metadata"],
                                           "resourceVersion": current["metadata"]["resourceVersion"]}}
                ext.replace_custom_resource_definition(crd["metadata"]["name"], crd, _preload_content=False)
        names = []
        for crd in crds:
            name = crd["metadata"]["name"]
            names.append(name)

            def established(name: str = name) -> bool:
                obj = json.loads(ext.read_custom_resource_definition(name, _preload_content=False).data)
                conds = {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}
                return conds.get("Established") == "True"

            self._wait(apiserver, f"CRD {name} to be Established", established, deadline)
            spec = crd["spec"]
            version = next(v["name"] for v in spec["versions"] if v.get("served", True))

            def served(spec: dict[str, Any] = spec, version: str = version) -> bool:
                group, plural = spec["group"], spec["names"]["plural"]
                if spec["scope"] == "Cluster":
                    custom.list_cluster_custom_object(group, version, plural, limit=1)
                else:
                    custom.list_namespaced_custom_object(group, version, "default", plural, limit=1)
                return True

            self._wait(apiserver, f"CRD {name} to be served", served, deadline)
        self.log(f"installed {len(names)} CRDs: {', '.join(names)}")
        return names

    def _start_kwok(self, binary: Path, deadline: float) -> None:
        assert self.workdir is not None
        config = self.workdir / "kwok.yaml"
        config.write_text(kwok_stages.stages_yaml())
        self.kwok_port = free_port()
        proc = self._spawn("kwok", [
            str(binary),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector="
            f"{kwok_stages.NODE_ANNOTATION}={kwok_stages.NODE_ANNOTATION_VALUE}",
            "--node-lease-duration-seconds=0",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.1.0.1",
            f"--server-address=127.0.0.1:{self.kwok_port}",
        ])

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.kwok_port}/healthz", timeout=2) as resp:
                return resp.status == 200

        self._wait(proc, "kwok /healthz", healthy, deadline)
        self.log("kwok ready")


    def _start_controller_manager(self, binary: Path, deadline: float) -> None:
        assert self.workdir is not None and self.pki is not None
        p = self.pki
        self.controller_manager_port = free_port()
        proc = self._spawn("kube-controller-manager", [
            str(binary),
            f"--kubeconfig={self.kubeconfig}",
            # No delegated authentication or authorization for its own endpoint: /healthz (always allowed)
            # is all that is asked of it here.
            "--authentication-skip-lookup=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.controller_manager_port}",
            f"--cert-dir={self.workdir / 'controller-manager-certs'}",
            "--leader-elect=false",
            # KWOK refreshes node conditions about once a minute: the node lifecycle controller would
            # mark the fake nodes unreachable and evict their pods.
            "--controllers=*,-nodelifecycle",
            f"--service-account-private-key-file={p.sa_private_key}",
            f"--root-ca-file={p.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--use-service-account-credentials=false",
            "--concurrent-gc-syncs=5",
            "--profiling=false",
            "--v=0",
        ])
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # its self-signed serving certificate, on loopback

        def healthy() -> bool:
            url = f"https://127.0.0.1:{self.controller_manager_port}/healthz"
            with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                return resp.status == 200

        self._wait(proc, "kube-controller-manager /healthz", healthy, deadline)
        self.log("kube-controller-manager ready")

    def _prometheus_config(self) -> str:
        assert self.workdir is not None
        targets = self.workdir / "prometheus-targets.json"
        rules = self.workdir / "prometheus-rules.yml"
        # No kube-state-metrics here: KAI's default capacity queries (kube_node_status_capacity) are
        # answered from the capacity kai's scheduler exports.
        rules.write_text(yaml.safe_dump({"groups": [{
            "name": "kai-dev-cluster",
            "rules": [{"record": "kube_node_status_capacity", "expr": "kai_cluster_capacity"}],
        }]}))
        config = {
            "global": {
                "scrape_interval": self.prometheus_scrape_interval,
                "evaluation_interval": self.prometheus_scrape_interval,
                "scrape_timeout": "1s",
            },
            "rule_files": [str(rules)],
            "scrape_configs": [{
                "job_name": "kai",
                "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "5s"}],
            }],
        }
        return yaml.safe_dump(config, sort_keys=False)

    def set_prometheus_targets(self, targets: tuple[str, ...] | list[str]) -> None:
        """Scrape these ``host:port`` endpoints from now on (Prometheus rereads the file within 5 s)."""
        assert self.workdir is not None
        self.prometheus_targets = tuple(targets)
        path = self.workdir / "prometheus-targets.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": list(self.prometheus_targets), "labels": {}}]))
        tmp.replace(path)

    def _start_prometheus(self, binary: Path, deadline: float) -> None:
        assert self.workdir is not None
        config = self.workdir / "prometheus.yml"
        config.write_text(self._prometheus_config())
        self.set_prometheus_targets(self.prometheus_targets)
        self.prometheus_port = self.prometheus_listen_port or free_port()
        proc = self._spawn("prometheus", [
            str(binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.workdir / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{self.prometheus_port}",
            "--storage.tsdb.retention.time=15d",
            "--log.level=warn",
        ])

        def ready() -> bool:
            with urllib.request.urlopen(f"{self.prometheus_url}/-/ready", timeout=2) as resp:
                return resp.status == 200

        self._wait(proc, "prometheus /-/ready", ready, deadline)
        self.log(f"prometheus ready on {self.prometheus_url}")


def load_crds(folder: Path) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in the YAML files of ``folder``, in file-name order."""
    crds = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc)
    return crds


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[ControlPlane]:
    """``with running() as cp:`` — start a control plane and always stop it."""
    cp = ControlPlane(**kwargs)
    try:
        yield cp.start()
    finally:
        cp.stop()
