"""The listener list (``server.app.listener_entries``): one entry per enabled listener, read
from the config sections the protocol registry names, started in one loop with one TLS rule."""

from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path

import pytest

from rill.protocol.kafka import apis, decode_response, encode_request, request_class
from rill.server.app import ListenerEntry, Server, listener_entries
from rill.server.auth.certificates import generate_self_signed
from rill.server.config import ServerConfig, TlsConfig
from rill.server.core.reconciliation import StartupRefused
from rill.server.protocols import PROTOCOLS

PING = bytes.fromhex("0400000001000000")  # Iggy's PING
TANK_PING = bytes.fromhex("0300000000")


@pytest.fixture
def certificate(tmp_path) -> tuple[Path, Path]:
    certificate_pem, key_pem = generate_self_signed()
    (tmp_path / "cert.pem").write_bytes(certificate_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    return tmp_path / "cert.pem", tmp_path / "key.pem"


def tls(certificate: tuple[Path, Path]) -> TlsConfig:
    return TlsConfig(enabled=True, certificate=str(certificate[0]), key=str(certificate[1]))


def config_of(tmp_path: Path) -> ServerConfig:
    config = ServerConfig()
    config.system.path = str(tmp_path / "data")
    config.root.password_hash_cost = 4
    for section in (config.tcp, config.quic, config.http, config.kafka, config.tank):
        section.address = "127.0.0.1:0"
    return config


def test_every_enabled_section_of_every_protocol_is_one_entry(tmp_path, certificate):
    config = config_of(tmp_path)
    config.kafka.enabled = config.tank.enabled = True
    config.kafka.tls = config.http.tls = tls(certificate)
    config.tank.address = "127.0.0.1:11011"
    assert listener_entries(config) == [
        ListenerEntry("tcp", "iggy", "tcp", "127.0.0.1:0", None),
        ListenerEntry("quic", "iggy", "quic", "127.0.0.1:0", None),
        ListenerEntry("http", "iggy", "http", "127.0.0.1:0", config.http.tls),
        ListenerEntry("kafka", "kafka", "tcp", "127.0.0.1:0", config.kafka.tls),
        ListenerEntry("tank", "tank", "tcp", "127.0.0.1:11011", None),
    ]
    config.quic.enabled = config.http.enabled = config.kafka.enabled = False
    config.tcp.tls = tls(certificate)
    assert [(entry.name, entry.tls is not None) for entry in listener_entries(config)] == [
        ("tcp", True), ("tank", False)]
    # every section a row names is a listener section of the config
    for row in PROTOCOLS.values():
        for section, transport in row.listeners:
            assert hasattr(getattr(config, section), "address") and transport in (
                "tcp", "quic", "http")


async def _tls_exchange(address, context, request: bytes, size: int) -> bytes:
    reader, writer = await asyncio.open_connection(*address, ssl=context,
                                                   server_hostname="localhost")
    try:
        if request:
            writer.write(request)
        return await asyncio.wait_for(reader.readexactly(size), 20)
    finally:
        writer.close()


def test_iggy_kafka_and_tank_listeners_all_serve_tls_from_one_start_loop(tmp_path, certificate):
    config = config_of(tmp_path)
    config.quic.enabled = config.http.enabled = False
    config.kafka.enabled = config.tank.enabled = True
    config.kafka.anonymous_user = "iggy"
    config.tcp.tls = config.kafka.tls = config.tank.tls = tls(certificate)
    trusting = ssl.create_default_context(cafile=str(certificate[0]))
    api_versions = encode_request(apis.API_VERSIONS, 0, 5, request_class(apis.API_VERSIONS)())

    async def main() -> None:
        server = Server(config)
        await server.start()
        try:
            assert list(server.addresses) == ["tcp", "kafka", "tank"]  # the start order
            iggy = await _tls_exchange(server.addresses["tcp"], trusting, PING, 8)
            assert iggy == bytes(8)
            tank = await _tls_exchange(server.addresses["tank"], trusting, b"", 5)
            assert tank == TANK_PING  # the greeting, first on the link
            size = struct.unpack(">i", await _tls_exchange(
                server.addresses["kafka"], trusting, api_versions, 4))[0]
            assert size > 4
        finally:
            await server.stop()
        assert server.listeners == []
        for address in server.addresses.values():  # every listener stopped
            with pytest.raises(OSError):
                await asyncio.open_connection(*address)

    asyncio.run(main())


def test_kafka_api_versions_answer_over_tls(tmp_path, certificate):
    """The Kafka listener built from its row answers whole frames over TLS (its settings are
    set once bound: the advertised port is the bound one)."""
    config = config_of(tmp_path)
    config.quic.enabled = config.http.enabled = False
    config.kafka.enabled = True
    config.kafka.anonymous_user = "iggy"
    config.kafka.tls = tls(certificate)
    trusting = ssl.create_default_context(cafile=str(certificate[0]))
    request = encode_request(apis.METADATA, 12, 1, request_class(apis.METADATA)(topics=None))

    async def main() -> None:
        server = Server(config)
        await server.start()
        try:
            reader, writer = await asyncio.open_connection(
                *server.addresses["kafka"], ssl=trusting, server_hostname="localhost")
            writer.write(request)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            body = decode_response(apis.METADATA, 12, await reader.readexactly(size)).body
            writer.close()
            assert [(b.host, b.port) for b in body.brokers] == [server.addresses["kafka"]]
        finally:
            await server.stop()

    asyncio.run(main())


@pytest.mark.parametrize("section", ["tcp", "kafka", "tank", "http"])
def test_a_tls_file_that_cannot_be_loaded_refuses_the_start_naming_its_section(
        tmp_path, certificate, section):
    config = config_of(tmp_path)
    config.quic.enabled = False
    config.kafka.enabled = config.tank.enabled = True
    missing = tmp_path / "missing.pem"
    getattr(config, section).tls = TlsConfig(enabled=True, certificate=str(missing),
                                            key=str(certificate[1]))

    async def main() -> None:
        server = Server(config)
        with pytest.raises(StartupRefused) as refused:
            await server.start()
        assert str(refused.value).startswith(
            f"cannot load [{section}.tls] certificate {missing} and key {certificate[1]}: ")
        assert server.listeners == []  # those started before it are stopped

    asyncio.run(main())
