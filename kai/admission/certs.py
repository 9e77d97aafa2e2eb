"""Serving certificates of the webhook server: mounted ones, or a CA and a leaf generated at start.

The API server calls webhooks over TLS only and checks the serving certificate
against the `caBundle` of the webhook configuration. In a cluster the Helm chart
generates both and mounts them (`tls.crt`, `tls.key`, `ca.crt` in one folder);
for a dev cluster or a test, :func:`ensure_certificates` generates a short-lived
CA and a certificate for the given host names and IPs into the same layout.

Generated certificates go into a private folder: created 0700 (an existing one must be a real
folder, not a symlink, owned by us; it is made 0700), the files written 0600 without following a
symlink planted in their place. Certificates found in a folder are used only when the folder and the
key are owned by us or root (a Secret mount), never ones another user could have planted.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import ipaddress
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE, KEY_FILE, CA_FILE = "tls.crt", "tls.key", "ca.crt"
DEFAULT_HOSTS = ("127.0.0.1", "localhost")


def default_cert_dir() -> Path:
    """A per-user folder under the temporary directory (made private when certificates are generated)."""
    return Path(tempfile.gettempdir()) / f"kai-admission-certs-{os.getuid()}"


@dataclass(frozen=True)
class ServingCertificates:
    """Paths of the serving certificate and key, and the CA bundle (PEM bytes) that trusts them."""

    cert_file: Path
    key_file: Path
    ca_bundle: bytes
    generated: bool


def _key_usage(ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=not ca, data_encipherment=False,
        key_agreement=False, key_cert_sign=ca, crl_sign=ca, encipher_only=False, decipher_only=False,
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def generate(hosts: tuple[str, ...] | list[str], days: int = 365) -> tuple[bytes, bytes, bytes]:
    """A fresh CA and a serving certificate for `hosts` (IPs and DNS names): (ca_pem, cert_pem, key_pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kai-admission-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "kai-admission")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return ca_cert.public_bytes(pem), cert.public_bytes(pem), key_pem


def ensure_certificates(folder: Path, hosts: tuple[str, ...] | list[str] = DEFAULT_HOSTS) -> ServingCertificates:
    """Use `tls.crt` / `tls.key` (and `ca.crt`) from `folder` when present, else generate them there.

    Without `ca.crt` the serving certificate itself is the bundle (a self-signed one).
    """
    cert_file, key_file, ca_file = folder / CERT_FILE, folder / KEY_FILE, folder / CA_FILE
    if cert_file.is_file() and key_file.is_file():
        for path in (folder, key_file):
            _trusted_owner(path)
        bundle = ca_file.read_bytes() if ca_file.is_file() else cert_file.read_bytes()
        return ServingCertificates(cert_file, key_file, bundle, generated=False)
    private_folder(folder)
    ca_pem, cert_pem, key_pem = generate(hosts)
    for path, data in ((ca_file, ca_pem), (cert_file, cert_pem), (key_file, key_pem)):
        _write_private(path, data)
    return ServingCertificates(cert_file, key_file, ca_pem, generated=True)


def private_folder(folder: Path) -> None:
    """Make `folder` a folder only we can enter (0700); refuse a symlink or one another user owns."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise OSError(errno.ENOTDIR, "not a folder of its own (a symlink or a file): refusing to write keys there")
    if info.st_uid != os.getuid():
        raise PermissionError(errno.EPERM, f"owned by uid {info.st_uid}, not by us: refusing to write keys there")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)


def _write_private(path: Path, data: bytes) -> None:
    """Write a 0600 file, replacing whatever is there without following a symlink."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a symlink is removed itself, its target untouched
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _trusted_owner(path: Path) -> None:
    owner = path.stat().st_uid
    if owner not in (0, os.getuid()):
        raise PermissionError(errno.EPERM, f"{path} is owned by uid {owner}: not using certificates another user wrote")
