"""The server's TLS material (auth owns key material): the self-signed certificate and the
server contexts of the TCP and HTTP listeners.

Owns: generating the self-signed certificate QUIC uses by default (``quic.certificate.
self_signed``) and reusing it after a restart, and building the ``ssl.SSLContext`` of a TCP
listener with TLS enabled (``tcp.tls``).

The self-signed certificate is made at the first start, never shipped and never committed: an
EC P-256 key, subject and issuer CN=localhost, subject alternative names ``localhost``,
``127.0.0.1`` and ``::1``, a leaf (not a CA) for server authentication, valid from a day before its creation for ten years. Both PEM files
are written with mode 0600 into a directory of mode 0700 (``DataPaths.secrets_dir``), each
by ``storage.durability.write_private_file`` (synced, renamed into place: a crash never leaves
half a key). If either file
is missing both are made again; if both exist they are used as they are.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rill.server.storage.durability import write_private_file

log = logging.getLogger(__name__)

COMMON_NAME = "localhost"
VALIDITY = datetime.timedelta(days=3650)
BACKDATE = datetime.timedelta(days=1)  # tolerate a client clock slightly behind ours
_SERVER_KEY_USAGE = x509.KeyUsage(
    digital_signature=True, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
    encipher_only=False, decipher_only=False,
)


def generate_self_signed(common_name: str = COMMON_NAME) -> tuple[bytes, bytes]:
    """A new (certificate PEM, PKCS#8 private key PEM) pair for ``common_name``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    alternative_names = x509.SubjectAlternativeName(
        [
            x509.DNSName(common_name),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(alternative_names, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_SERVER_KEY_USAGE, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    certificate_pem = certificate.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate_pem, key_pem


def ensure_self_signed(certificate_path: Path, key_path: Path) -> tuple[Path, Path]:
    """The self-signed pair at these paths, generated there first if either file is missing."""
    certificate_path, key_path = Path(certificate_path), Path(key_path)
    if certificate_path.is_file() and key_path.is_file():
        return certificate_path, key_path
    for directory in {certificate_path.parent, key_path.parent}:
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
    certificate_pem, key_pem = generate_self_signed()
    write_private_file(key_path, key_pem)
    write_private_file(certificate_path, certificate_pem)
    log.info("generated a self-signed certificate in %s", certificate_path)
    return certificate_path, key_path


def server_ssl_context(certificate: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or newer) from PEM certificate (chain) and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(certificate), str(key))
    return context
