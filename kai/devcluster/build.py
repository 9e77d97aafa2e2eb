"""Build (or reuse) the pinned control-plane binaries: etcd, kube-apiserver, kwok, kube-controller-manager, prometheus.

Each binary is compiled from the Go module proxy into a cache directory outside the
repository (``$KAI_CONTROLPLANE_CACHE`` or ``~/.cache/kai/controlplane``), one folder
per pinned version, e.g. ``~/.cache/kai/controlplane/kube-apiserver-v1.34.4/``.
A binary that is already there is reused; nothing is downloaded by hand and
nothing lands in the repository.

``k8s.io/kubernetes`` and etcd's server module cannot be ``go install``-ed directly
(their ``go.mod`` files carry replace directives), so each is built through a small
wrapper module generated in the cache: for Kubernetes, every ``k8s.io/<staging> v0.0.0``
requirement is replaced by the published ``v0.<minor>.<patch>`` of that staging module.
kube-controller-manager is built the same way as kube-apiserver (its own wrapper module, so
that minimum version selection never mixes the two). Prometheus's module has no replace
directive and is ``go install``-ed; without the ``builtinassets`` build tag its web UI is
not compiled in (the HTTP query API, which is all kai uses, is), and the ``remove_all_sd`` tag
leaves out the cloud service discoveries (file and HTTP discovery stay), most of its dependencies.

etcd, kube-apiserver and kwok are the core every live test needs; kube-controller-manager and
prometheus are extras that only the dev cluster and the tests that ask for them start. Every
missing binary is attempted, a failed one does not stop the others, and the go commands run
under ``nice`` so that a build leaves the machine usable.

Usage::

    python -m kai.devcluster.build            # build what is missing, exit 1 on failure
    python -m kai.devcluster.build --for-tests  # same, but exit 0 and record the failure
    python -m kai.devcluster.build --only prometheus  # build one component (if missing)
    python -m kai.devcluster.build --status     # print what is cached
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
PROMETHEUS_VERSION = "v0.316.0"
"""Prometheus's Go module version; Prometheus tags its 3.x releases as v0.3xx.y (v0.316.0 = 3.16.0)."""

BUILD_ERROR_FILE = "build-error.txt"
"""Written into the cache root when a build fails; removed when a later build succeeds."""


class BuildError(RuntimeError):
    """A control-plane binary could not be built."""


@dataclass(frozen=True)
class Component:
    """One binary to build: which Go module and package, at which version, and how."""

    name: str
    module: str
    version: str
    package: str
    wrapper: bool
    """Build through a generated wrapper module (needed when the module has replace directives)."""
    replace_k8s_staging: bool = False
    ldflags: tuple[str, ...] = field(default_factory=tuple)
    tags: tuple[str, ...] = ()
    """Go build tags."""

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


def _k8s_version_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


def _prometheus_version_ldflags(module_version: str) -> tuple[str, ...]:
    minor, patch = module_version.lstrip("v").split(".")[1:3]
    release = f"{int(minor) // 100}.{int(minor) % 100}.{patch}"
    pkg = "github.com/prometheus/common/version"
    return (
        f"-X {pkg}.Version={release}",
        f"-X {pkg}.Revision=module-{module_version}",
        f"-X {pkg}.Branch=release",
        f"-X {pkg}.BuildUser=kai",
        f"-X {pkg}.BuildDate=19700101-00:00:00",
    )


COMPONENTS: tuple[Component, ...] = (
    Component(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        version=ETCD_VERSION,
        package="go.etcd.io/etcd/server/v3",
        wrapper=True,
    ),
    Component(
        name="kwok",
        module="sigs.k8s.io/kwok",
        version=KWOK_VERSION,
        package="sigs.k8s.io/kwok/cmd/kwok",
        wrapper=False,
    ),
    Component(
        name="kube-apiserver",
        module="k8s.io/kubernetes",
        version=KUBERNETES_VERSION,
        package="k8s.io/kubernetes/cmd/kube-apiserver",
        wrapper=True,
        replace_k8s_staging=True,
        ldflags=_k8s_version_ldflags(KUBERNETES_VERSION),
    ),
    Component(
        name="kube-controller-manager",
        module="k8s.io/kubernetes",
        version=KUBERNETES_VERSION,
        package="k8s.io/kubernetes/cmd/kube-controller-manager",
        wrapper=True,
        replace_k8s_staging=True,
        ldflags=_k8s_version_ldflags(KUBERNETES_VERSION),
    ),
    Component(
        name="prometheus",
        module="github.com/prometheus/prometheus",
        version=PROMETHEUS_VERSION,
        package="github.com/prometheus/prometheus/cmd/prometheus",
        wrapper=False,
        ldflags=_prometheus_version_ldflags(PROMETHEUS_VERSION),
        # Only the file and HTTP service discovery (in every build) are used: leave out the cloud ones,
        # which are most of Prometheus's dependencies.
        tags=("remove_all_sd",),
    ),
)

CORE = ("etcd", "kube-apiserver", "kwok")
"""What every control plane starts; the other components are started only when asked for."""


def cache_root() -> Path:
    """Where binaries are cached: ``$KAI_CONTROLPLANE_CACHE`` or ``~/.cache/kai/controlplane``."""
    env = os.environ.get("KAI_CONTROLPLANE_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kai" / "controlplane"


def binary_path(component: Component, root: Path | None = None) -> Path:
    return (root or cache_root()) / component.folder / "bin" / component.name


def binaries(root: Path | None = None) -> dict[str, Path]:
    """Paths of every component's binary (whether or not they exist yet)."""
    return {c.name: binary_path(c, root) for c in COMPONENTS}


def missing_binaries(root: Path | None = None, names: tuple[str, ...] | None = None) -> list[str]:
    """The components among ``names`` (default: all) whose binary is not there."""
    wanted = names if names is not None else tuple(c.name for c in COMPONENTS)
    return [name for name, path in binaries(root).items() if name in wanted and not os.access(path, os.X_OK)]


def recorded_build_error(root: Path | None = None) -> str | None:
    """The error text of the last failed build, if the last build failed."""
    path = (root or cache_root()) / BUILD_ERROR_FILE
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


# --------------------------------------------------------------------------- building


def _log(message: str) -> None:
    print(f"[kai controlplane] {message}", flush=True)


def _go_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "CGO_ENABLED": "0",
            "GOTOOLCHAIN": "local",
            "GOFLAGS": "-mod=mod -buildvcs=false",
            "GOWORK": "off",
            "GOBIN": str(workdir),
        }
    )
    return env


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(10)


def _run_go(args: list[str], cwd: Path, label: str, timeout: float) -> str:
    """Run a go command, printing a heartbeat with the number of packages compiled so far."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("the Go toolchain ('go') is not on PATH")
    started = time.monotonic()
    proc = subprocess.Popen(
        [go, *args],
        cwd=cwd,
        env=_go_env(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_lower_priority,
    )
    lines: list[str] = []
    state = {"count": 0, "last": ""}
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(20):
            elapsed = time.monotonic() - started
            _log(f"{label}: {elapsed:5.0f}s, {state['count']} packages so far (latest: {state['last']})")

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            lines.append(line)
            if line and not line.startswith(("go: ", "#")) and " " not in line:
                state["count"] += 1
                state["last"] = line
            elif line.startswith("go: downloading"):
                state["last"] = line[len("go: ") :]
            if time.monotonic() - started > timeout:
                raise BuildError(f"{label}: timed out after {timeout:.0f}s")
        rc = proc.wait(timeout=max(1.0, timeout - (time.monotonic() - started)))
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
        raise
    finally:
        done.set()
    if rc != 0:
        tail = "\n".join(lines[-40:])
        raise BuildError(f"{label} failed (go {' '.join(args[:2])} exit {rc}):\n{tail}")
    return "\n".join(lines)


def _staging_replacements(k8s_version: str, workdir: Path) -> list[str]:
    """``replace`` lines: each ``k8s.io/<x> v0.0.0`` requirement of kubernetes to v0.<minor>.<patch>."""
    out = _run_go(["mod", "download", "-json", f"k8s.io/kubernetes@{k8s_version}"], workdir,
                  "download k8s.io/kubernetes", timeout=1200)
    start = out.find("{")
    info = json.loads(out[start:])
    if "Error" in info:
        raise BuildError(f"cannot download k8s.io/kubernetes@{k8s_version}: {info['Error']}")
    gomod = Path(info["GoMod"]).read_text()
    staging = sorted(set(re.findall(r"^\s*(k8s\.io/[A-Za-z0-9._/-]+)\s+v0\.0\.0\s*$", gomod, re.M)))
    if not staging:
        raise BuildError("found no k8s.io/* v0.0.0 requirement in Kubernetes' go.mod; the recipe has changed")
    staging_version = "v0." + k8s_version.lstrip("v").split(".", 1)[1]
    return [f"replace {name} => {name} {staging_version}" for name in staging]


def _build(component: Component, root: Path) -> Path:
    target = binary_path(component, root)
    work = root / component.folder / "src"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ldflags = " ".join(("-s", "-w", *component.ldflags))
    tags = ["-tags", ",".join(component.tags)] if component.tags else []
    started = time.monotonic()
    if component.wrapper:
        (work / "go.mod").write_text(f"module kai.local/controlplane-build/{component.name}\n\ngo 1.24\n")
        if component.replace_k8s_staging:
            replaces = _staging_replacements(component.version, work)
            _log(f"{component.name}: mapping {len(replaces)} staging modules to their published versions")
            with (work / "go.mod").open("a") as fh:
                fh.write("\n" + "\n".join(replaces) + "\n")
        _log(f"{component.name}: resolving modules for {component.package}@{component.version}")
        _run_go(["get", f"{component.package}@{component.version}"], work, f"{component.name} go get",
                timeout=1800)
        _log(f"{component.name}: compiling (this is the long part)")
        _run_go(["build", "-v", "-trimpath", *tags, "-ldflags", ldflags, "-o", str(work / component.name),
                 component.package], work, f"{component.name} build", timeout=3600)
    else:
        _log(f"{component.name}: go install {component.package}@{component.version}")
        target_ref = f"{component.package}@{component.version}"
        _run_go(["install", "-v", "-trimpath", *tags, "-ldflags", ldflags, target_ref],
                work, f"{component.name} install", timeout=3600)
    built = work / component.name
    if not built.exists():
        raise BuildError(f"{component.name}: the go command succeeded but {built} is missing")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.chmod(0o755)
    tmp.replace(target)
    shutil.rmtree(work, ignore_errors=True)
    _log(f"{component.name}: built in {time.monotonic() - started:.0f}s -> {target}")
    return target


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log("another build is running; waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def ensure_binaries(root: Path | None = None, names: tuple[str, ...] | None = None) -> dict[str, Path]:
    """Build every missing binary among ``names`` (default: all); return the paths of all.

    Each missing one is attempted even when an earlier one failed; raises BuildError naming
    every failure at the end.
    """
    root = root or cache_root()
    wanted = names if names is not None else tuple(c.name for c in COMPONENTS)
    with _build_lock(root):
        todo = [c for c in COMPONENTS if c.name in wanted and not os.access(binary_path(c, root), os.X_OK)]
        if not todo:
            _log(f"reusing cached binaries in {root}")
        started = time.monotonic()
        failures: list[str] = []
        for component in todo:
            _log(f"building {component.name} {component.version} from the Go module proxy")
            try:
                _build(component, root)
            except BuildError as exc:
                _log(f"{component.name}: FAILED, going on with the others")
                failures.append(str(exc))
        if failures:
            raise BuildError("\n\n".join(failures))
        if todo:
            _log(f"all binaries ready in {time.monotonic() - started:.0f}s ({root})")
        with contextlib.suppress(FileNotFoundError):
            (root / BUILD_ERROR_FILE).unlink()
    return binaries(root)


def _status(root: Path) -> int:
    for component in COMPONENTS:
        path = binary_path(component, root)
        state = "ok" if os.access(path, os.X_OK) else "missing"
        print(f"{component.name:23} {component.version:9} {state:8} {path}")
    error = recorded_build_error(root)
    if error:
        print(f"last build failed:\n{error}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kai.devcluster.build", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--for-tests", action="store_true",
                        help="exit 0 even when the build fails, recording the error for the live tests")
    parser.add_argument("--status", action="store_true", help="print what is cached and exit")
    parser.add_argument("--only", action="append", choices=[c.name for c in COMPONENTS], metavar="NAME",
                        help="build only this component (repeatable); default: every missing one")
    args = parser.parse_args(argv)
    root = cache_root()
    if args.status:
        return _status(root)
    try:
        ensure_binaries(root, tuple(args.only) if args.only else None)
    except (BuildError, OSError) as exc:
        message = str(exc)
        root.mkdir(parents=True, exist_ok=True)
        (root / BUILD_ERROR_FILE).write_text(message + "\n")
        print(f"[kai controlplane] BUILD FAILED: {message}", file=sys.stderr, flush=True)
        if args.for_tests:
            print("[kai controlplane] continuing: the live tests will fail under CI and skip otherwise",
                  file=sys.stderr, flush=True)
            return 0
        return 1
    except KeyboardInterrupt:
        print("[kai controlplane] interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
