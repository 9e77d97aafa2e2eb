#!/usr/bin/env python3
"""Build kai's OCI image with Debian's tools, no container registry needed (`make image`).

1. The base root filesystem: Debian bookworm's essential packages and python3, made by ``mmdebstrap``
   from Debian's archive into ``~/.cache/kai/image/rootfs-<key>.tar`` (``$KAI_IMAGE_CACHE`` moves the
   cache), once; later builds reuse it.
2. kai's layer: the kai wheel and its live dependencies, the exact versions of ``constraints.txt``,
   installed by pip for the image's Python (3.11, manylinux wheels) into ``site-packages/`` and
   byte-compiled, so that the read-only root filesystem is never written.
3. ``buildah bud`` (or ``podman build``) of ``deploy/image/Containerfile`` ``FROM scratch`` on that
   context, tagged ``localhost/kai:<version>`` (the chart's default image) unless ``--tag`` says else.

``--install`` first installs what is missing (``apt-get install buildah mmdebstrap``, as root).
``--root DIR`` keeps the image in a private container store (the tests use one); ``--archive FILE``
also writes the image as an OCI archive (``ctr images import``, ``podman load``, ``kind load
image-archive`` read it). ``run -- ARGS`` runs ``kai ARGS`` in the image (the tests use it).

Usage::

    python3 deploy/image/build.py [--tag T] [--install] [--root DIR] [--archive FILE]
    python3 deploy/image/build.py run [--root DIR] [--copy SRC:DEST]... -- --version   # kai's arguments after --

Standard library only: it runs before (and without) the project's virtual environment; pip is
taken from ``--python`` (the Makefile passes the virtual environment's).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = Path(__file__).resolve().parent / "Containerfile"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PYTHON_VERSION = "3.11"  # bookworm's python3
GLIBC_MINOR = 36  # bookworm's glibc 2.36: every manylinux_2_{17..36} wheel runs on it
PACKAGES = ("python3", "libstdc++6", "ca-certificates")  # numpy's wheels need libstdc++
# Documentation, manual pages and translations stay out of the image.
EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
KEEP = ("/usr/share/doc/*/copyright",)  # the licences stay
TOOLS = ("buildah", "podman")
ENTRY = '''#!/usr/bin/python3 -I
"""kai's entry point in its image: the packages live in /opt/kai/site-packages."""
import sys

sys.path.insert(0, "/opt/kai/site-packages")
from kai.cli import main

sys.exit(main())
'''


class ImageError(RuntimeError):
    """The image could not be built or run; the message says what is missing."""


def version() -> str:
    text = (ROOT / "kai" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not found:
        raise ImageError("kai/__init__.py: no __version__")
    return found.group(1)


def default_tag() -> str:
    return f"localhost/kai:{version()}"


def cache_root() -> Path:
    return Path(os.environ.get("KAI_IMAGE_CACHE") or Path.home() / ".cache" / "kai" / "image")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(args: list[str], what: str, timeout: float = 1800, **kwargs: object) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload]
    except FileNotFoundError as err:
        raise ImageError(f"{what}: {args[0]} not found") from err
    except subprocess.TimeoutExpired as err:
        raise ImageError(f"{what}: timed out after {timeout:.0f} s") from err
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise ImageError(f"{what} failed (exit {done.returncode}): {tail}")
    return done


# -- tools ------------------------------------------------------------------------------------------
def find_tool(preferred: str = "auto") -> str:
    names = TOOLS if preferred == "auto" else (preferred,)
    for name in names:
        if shutil.which(name):
            return name
    raise ImageError(f"no image tool: none of {', '.join(names)} is installed (apt-get install -y buildah mmdebstrap)")


def install_tools() -> None:
    """apt-get install buildah and mmdebstrap when either is missing (as root, with apt-get)."""
    missing = [p for p in ("buildah", "mmdebstrap") if not shutil.which(p)]
    if not missing:
        return
    if not shutil.which("apt-get"):
        raise ImageError(f"{', '.join(missing)} missing and there is no apt-get to install them")
    if os.geteuid() != 0:
        raise ImageError(
            f"{', '.join(missing)} missing; installing them needs root (apt-get install -y {' '.join(missing)})"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    try:
        _run(command, "apt-get install", env=env)
    except ImageError:  # stale package lists: update once, then retry
        _run(["apt-get", "update"], "apt-get update", env=env)
        _run(command, "apt-get install", env=env)


def _store(tool: str, root: Path | None) -> list[str]:
    """A private container store (vfs: works without overlay support, e.g. inside a container)."""
    if root is None:
        return []
    return ["--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "vfs"]


# -- the base root filesystem -----------------------------------------------------------------------
def _rootfs_key() -> str:
    spec = "\n".join([SUITE, MIRROR, "essential", *PACKAGES, *EXCLUDES, *KEEP, platform.machine()])
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def rootfs(log: bool = True) -> Path:
    """The cached base root filesystem tarball, made by mmdebstrap when missing."""
    target = cache_root() / f"rootfs-{SUITE}-{_rootfs_key()}.tar"
    with _locked(cache_root() / "rootfs.lock"):
        if target.exists():
            return target
        if not shutil.which("mmdebstrap"):
            raise ImageError("mmdebstrap is not installed (apt-get install -y mmdebstrap)")
        if log:
            print(f"building the base root filesystem with mmdebstrap ({SUITE}) ...", file=sys.stderr)
        partial = target.with_suffix(".partial.tar")
        options = [f"--dpkgopt=path-exclude={p}" for p in EXCLUDES] + [f"--dpkgopt=path-include={p}" for p in KEEP]
        _run(
            [
                "mmdebstrap",
                "--variant=essential",
                f"--include={','.join(PACKAGES)}",
                "--format=tar",
                *options,
                SUITE,
                str(partial),
                MIRROR,
            ],
            "mmdebstrap",
        )
        partial.rename(target)
        for old in cache_root().glob(f"rootfs-{SUITE}-*.tar"):
            if old != target:
                old.unlink(missing_ok=True)
    return target


# -- kai's layer ------------------------------------------------------------------------------------
def _platforms() -> list[str]:
    machine = platform.machine()
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(GLIBC_MINOR, 16, -1)]
    return [*tags, f"manylinux2014_{machine}"]


def kai_layer(context: Path, python: str) -> None:
    """site-packages/ (kai[live] with constraints.txt's versions) and the entry point, into `context`."""
    wheels = context / "wheels"
    _run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)], "pip wheel (kai)")
    (wheel,) = wheels.glob("kai-*.whl")
    target = context / "site-packages"
    platforms = [arg for tag in _platforms() for arg in ("--platform", tag)]
    _run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--target",
            str(target),
            "--python-version",
            PYTHON_VERSION,
            "--implementation",
            "cp",
            "--only-binary=:all:",
            *platforms,
            "-c",
            str(ROOT / "constraints.txt"),
            f"{wheel}[live]",
        ],
        "pip install (kai's dependencies for the image)",
    )
    shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts name the build machine's python
    shutil.rmtree(wheels)
    # Compiled here once: the image's root filesystem is read-only at run time.
    _run(
        [python, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", str(target)],
        "byte-compiling site-packages",
    )
    entry = context / "kai"
    entry.write_text(ENTRY, encoding="utf-8")
    entry.chmod(0o755)


def build(tag: str, tool: str, python: str, root: Path | None = None, archive: Path | None = None) -> str:
    """Build the image; returns its tag."""
    base = rootfs()
    with tempfile.TemporaryDirectory(prefix="kai-image-", dir=cache_root()) as tmp:
        context = Path(tmp)
        if _same_device(base, context):
            os.link(base, context / "rootfs.tar")
        else:
            shutil.copy(base, context / "rootfs.tar")
        kai_layer(context, python)
        shutil.copy(CONTAINERFILE, context / "Containerfile")
        command = [tool, *_store(tool, root)]
        command += ["bud"] if tool == "buildah" else ["build"]
        command += ["--isolation", "chroot"] if tool == "buildah" else []
        command += ["--label", f"{SOURCE_LABEL}={source_digest()}"]
        command += [
            "--build-arg",
            f"VERSION={version()}",
            "-f",
            str(context / "Containerfile"),
            "-t",
            tag,
            str(context),
        ]
        _run(command, f"{tool} build")
    if archive is not None:
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.unlink(missing_ok=True)
        _run([tool, *_store(tool, root), "push", tag, f"oci-archive:{archive}:{tag}"], f"{tool} push (OCI archive)")
    return tag


SOURCE_LABEL = "dev.kai.source-digest"


def source_digest() -> str:
    """A digest of everything the image is built from (kai's package, its pins, this builder)."""
    digest = hashlib.sha256(_rootfs_key().encode())
    inputs = [ROOT / "pyproject.toml", ROOT / "constraints.txt", CONTAINERFILE, Path(__file__).resolve()]
    files = [*sorted((ROOT / "kai").rglob("*.py")), *inputs]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def built_digest(tag: str, tool: str, root: Path | None = None) -> str:
    """The source digest of the image `tag` ("" when there is none)."""
    done = subprocess.run(
        [tool, *_store(tool, root), "inspect", "--type", "image", tag]  # JSON, both tools
        if tool == "buildah"
        else [tool, *_store(tool, root), "image", "inspect", tag],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        return ""
    found = re.search(rf'"{re.escape(SOURCE_LABEL)}":\s*"([0-9a-f]+)"', done.stdout)
    return found.group(1) if found else ""


def _same_device(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev


# -- running kai in the image -----------------------------------------------------------------------
def run(
    tag: str,
    commands: list[list[str]],
    tool: str,
    root: Path | None = None,
    copies: tuple[tuple[Path, str], ...] = (),
) -> list[subprocess.CompletedProcess[str]]:
    """`kai ARGS` in the image as its user (65532), for each ARGS of `commands`, in one container;
    files in `copies` are placed first.

    buildah: a working container run with chroot isolation (works where the OCI runtime cannot set
    up namespaces, cgroups or rlimits, as inside a container); podman: ``podman run``.
    """
    store = _store(tool, root)
    if tool == "podman":
        volumes = [arg for src, dest in copies for arg in ("-v", f"{Path(src).resolve()}:{dest}:ro")]
        return [
            subprocess.run(
                ["podman", *store, "run", "--rm", "--network", "none", *volumes, tag, *args],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            for args in commands
        ]
    container = _run(["buildah", *store, "from", "--pull-never", tag], "buildah from").stdout.strip().splitlines()[-1]
    try:
        for src, dest in copies:
            _run(["buildah", *store, "copy", "--chown", "65532:65532", container, str(src), dest], "buildah copy")
        return [
            subprocess.run(
                ["buildah", *store, "run", "--isolation", "chroot", container, "--", "/usr/local/bin/kai", *args],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            for args in commands
        ]
    finally:
        subprocess.run(["buildah", *store, "rm", container], capture_output=True, check=False, timeout=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", nargs="?", choices=("build", "run"), default="build")
    parser.add_argument("--tag", default=default_tag(), help="Image name (default: %(default)s, the chart's).")
    parser.add_argument("--tool", choices=("auto", *TOOLS), default="auto")
    parser.add_argument("--python", default=sys.executable, help="Python whose pip installs kai's layer.")
    parser.add_argument("--root", type=Path, help="A private container store (folder).")
    parser.add_argument("--archive", type=Path, help="Also write the image as an OCI archive here.")
    parser.add_argument("--install", action="store_true", help="apt-get install buildah and mmdebstrap if missing.")
    parser.add_argument("--copy", action="append", default=[], help="run: SRC:DEST placed in the container first.")
    argv = list(sys.argv[1:] if argv is None else argv)
    kai_args: list[str] = []
    if "--" in argv:  # run: kai's own arguments follow
        at = argv.index("--")
        argv, kai_args = argv[:at], argv[at + 1 :]
    options = parser.parse_args(argv)
    try:
        if options.install:
            install_tools()
        tool = find_tool(options.tool)
        if options.command == "run":
            copies = tuple((Path(c.split(":", 1)[0]), c.split(":", 1)[1]) for c in options.copy)
            (done,) = run(options.tag, [kai_args], tool, options.root, copies)
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
            return done.returncode
        tag = build(options.tag, tool, options.python, options.root, options.archive)
    except ImageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
