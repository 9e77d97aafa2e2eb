"""Serving certificates of the webhook server: mounted ones, or a CA and a leaf generated at start.

The API server calls webhooks over TLS only and checks the serving certificate
against the `caBundle` of the webhook configuration. In a cluster the Helm chart
generates both and mounts them (`tls.crt`, `tls.key`, `ca.crt` in one folder);
for a dev cluster or a test, :func:`ensure_certificates` generates a short-lived
CA and a certificate for the given host names and IPs into the same layout.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE, KEY_FILE, CA_FILE = "tls.crt", "tls.key", "ca.crt"
DEFAULT_HOSTS = ("127.0.0.1", "localhost")


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
        bundle = ca_file.read_bytes() if ca_file.is_file() else cert_file.read_bytes()
        return ServingCertificates(cert_file, key_file, bundle, generated=False)
    folder.mkdir(parents=True, exist_ok=True)
    ca_pem, cert_pem, key_pem = generate(hosts)
    ca_file.write_bytes(ca_pem)
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(key_pem)
    key_file.chmod(0o600)
    return ServingCertificates(cert_file, key_file, ca_pem, generated=True)
