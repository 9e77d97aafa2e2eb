"""Certificates and keys for a throw-away control plane, generated fresh at each start.

One CA signs the API server's serving certificate (valid for 127.0.0.1, localhost and
the in-cluster service names) and an admin client certificate in ``system:masters``.
A separate RSA key pair signs service-account tokens. Everything is written as PEM
files into one folder and a kubeconfig is built on top of it.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Pki:
    """Paths of the generated PEM files."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_public_key: Path
    sa_private_key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _cert(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    sans: list[x509.GeneralName] | None = None,
    usage: list[x509.ObjectIdentifier] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=True,
                data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def generate(folder: Path, service_ip: str = "10.0.0.1") -> Pki:
    """Generate the CA, serving and admin certificates and the service-account keys into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kai-devcluster-ca")])
    ca_cert = _cert(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)

    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(service_ip)),
    ]
    serving_cert = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        serving_key.public_key(), ca_name, ca_key, sans=sans, usage=[ExtendedKeyUsageOID.SERVER_AUTH],
    )

    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin_cert = _cert(
        x509.Name([
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "kai-admin"),
        ]),
        admin_key.public_key(), ca_name, ca_key, usage=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_pub = sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)

    return Pki(
        ca_cert=_write(folder / "ca.crt", ca_cert.public_bytes(pem)),
        ca_key=_write(folder / "ca.key", _key_pem(ca_key)),
        serving_cert=_write(folder / "apiserver.crt", serving_cert.public_bytes(pem)),
        serving_key=_write(folder / "apiserver.key", _key_pem(serving_key)),
        admin_cert=_write(folder / "admin.crt", admin_cert.public_bytes(pem)),
        admin_key=_write(folder / "admin.key", _key_pem(admin_key)),
        sa_public_key=_write(folder / "sa.pub", sa_pub),
        sa_private_key=_write(folder / "sa.key", _key_pem(sa_key)),
    )


def write_kubeconfig(path: Path, server: str, pki: Pki, context: str = "kai-dev") -> Path:
    """Write a kubeconfig that reaches ``server`` as the admin user, with absolute file paths."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": context, "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}
        ],
        "users": [{
            "name": "kai-admin",
            "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
        }],
        "contexts": [{"name": context, "context": {"cluster": context, "user": "kai-admin"}}],
        "current-context": context,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
