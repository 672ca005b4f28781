"""TLS on the binary TCP listener (``tcp.tls``) with a certificate generated for the test, and
the SDK's TCP transport over it (``ssl=``)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct

import pytest

from rill import errors
from rill.client import AsyncClient, Client, Message, Partitioning, PollingStrategy
from rill.server.auth.certificates import generate_self_signed

PING = bytes.fromhex("0400000001000000")


@pytest.fixture
def certificate(tmp_path):
    certificate_pem, key_pem = generate_self_signed()
    (tmp_path / "tls_cert.pem").write_bytes(certificate_pem)
    (tmp_path / "tls_key.pem").write_bytes(key_pem)
    return tmp_path / "tls_cert.pem", tmp_path / "tls_key.pem"


@pytest.fixture
def tls_server(rill_factory, certificate):
    certificate_path, key_path = certificate
    return rill_factory({
        "RILL_TCP_TLS_ENABLED": "true",
        "RILL_TCP_TLS_CERTIFICATE": str(certificate_path),
        "RILL_TCP_TLS_KEY": str(key_path),
    }).start()


@pytest.fixture
def trusting(certificate):
    return ssl.create_default_context(cafile=str(certificate[0]))


def test_raw_tls_ping_frame_exactly(tls_server, trusting):
    with socket.create_connection(tls_server.tcp_address, timeout=10) as raw:
        with trusting.wrap_socket(raw, server_hostname="localhost") as sock:
            sock.sendall(PING)
            assert sock.recv(8) == bytes(8)


def test_sdk_over_tls_with_a_context_trusting_the_certificate(tls_server, trusting):
    with Client(tls_server.address, ssl=trusting) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("secure", stream_id=1)
        client.create_topic(1, "t", partitions_count=1)
        payloads = [b"over", b"tls" * 30000, b"\x00\xff"]  # one of them larger than a TLS record
        client.send_messages(1, 1, [Message(p) for p in payloads], partitioning=Partitioning.partition_id(1))
        polled = client.poll_messages(1, 1, consumer=1, partition_id=1,
                                      strategy=PollingStrategy.offset(0), count=10)
        assert [m.payload for m in polled.messages] == payloads
        assert [c.transport for c in client.get_clients()] == [1]


def test_plain_client_gets_a_clear_failure(tls_server):
    async def main():
        client = AsyncClient(tls_server.address, reconnect=False, timeout=20)
        await client.connect()  # TCP connects; the TLS handshake it never starts fails
        try:
            with pytest.raises(errors.Disconnected):
                await client.ping()
        finally:
            await client.close()

    asyncio.run(main())


def test_client_that_does_not_trust_the_certificate_cannot_connect(tls_server):
    async def main():
        for reconnect in (False, True):  # not trusted is final: never retried
            client = AsyncClient(tls_server.address, ssl=True, reconnect=reconnect)  # system CAs
            with pytest.raises(errors.InvalidTlsCertificate, match="not trusted.*ca_file"):
                await client.connect()

    asyncio.run(main())


def test_tls_client_against_a_plain_server_cannot_connect(rill_server, trusting):
    async def main():
        client = AsyncClient(rill_server.address, ssl=trusting, reconnect=False)
        with pytest.raises(errors.CannotEstablishConnection):
            await client.connect()

    asyncio.run(main())


def test_oversize_frame_over_tls_is_refused_like_plain_tcp(rill_factory, certificate, trusting):
    certificate_path, key_path = certificate
    server = rill_factory({
        "RILL_TCP_TLS_ENABLED": "true",
        "RILL_TCP_TLS_CERTIFICATE": str(certificate_path),
        "RILL_TCP_TLS_KEY": str(key_path),
        "RILL_TCP_MAX_FRAME_SIZE": "1 KB",
    }).start()
    with socket.create_connection(server.tcp_address, timeout=10) as raw:
        with trusting.wrap_socket(raw, server_hostname="localhost") as sock:
            sock.sendall(struct.pack("<II", 4 + 5000, 101))
            assert sock.recv(8) == struct.pack("<II", 4029, 0)
