"""With ``[tcp] sendfile``, large polls over plain TCP go from the log files to the socket
(sendfile), whole and in order, also when the socket takes only part of them at once (the rest
waits for it, the next reply waits behind it, other connections are served meanwhile); over TLS
they are read and sent; without it, nothing is sent from the files.
The regions themselves are tested in tests/server/storage/test_file_region.py."""

from __future__ import annotations

import asyncio
import os
import socket
import struct

import pytest
import uvloop

from rill.client import Client
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.commands.streams import CreateStream
from rill.protocol.iggy.commands.system import Ping
from rill.protocol.iggy.commands.topics import CreateTopic
from rill.protocol.iggy.commands.users import LoginUser
from rill.protocol.iggy.messages import Message
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.protocols.iggy.handler import IGGY
from rill.server.storage import file_region
from rill.server.transports.tcp import TcpListener

MESSAGES = 1500
PAYLOADS = [os.urandom(1000) for _ in range(MESSAGES)]
S, T = Identifier(1), Identifier(1)
SENDFILE = os.sendfile


class CountedSendfile:
    """os.sendfile, counting the bytes it sent."""

    def __init__(self) -> None:
        self.sent = 0
        self.calls = 0

    def __call__(self, out_fd: int, in_fd: int, offset: int, count: int) -> int:
        self.calls += 1
        sent = SENDFILE(out_fd, in_fd, offset, count)
        self.sent += sent
        return sent


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status, length = struct.unpack("<II", await asyncio.wait_for(reader.readexactly(8), 10))
    return status, await asyncio.wait_for(reader.readexactly(length), 10)


async def _serve_and_poll(tmp_path, slow_reader: bool, counted: CountedSendfile,
                          sendfile: bool = True) -> tuple[PolledMessages, bytes, int]:
    """A server in this process; fills a partition, polls all of it in one request over TCP.
    Returns the poll's answer, the records a plain read of the log gives, and the size of
    the reply."""
    config = ServerConfig()
    config.system.path = str(tmp_path / "data")
    config.root.password_hash_cost = 4
    core = Core(config)
    await core.start()
    listener = TcpListener(core, IGGY, "127.0.0.1", 0, 64 << 20, sendfile=sendfile)
    host, port = await listener.start()
    if slow_reader:  # the reply cannot fit the socket buffers: sendfile takes part of it
        # (accepted sockets inherit the listening socket's buffer sizes)
        listener.server.sockets[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    try:
        reader, writer = await asyncio.open_connection(host, port)
        for command in (LoginUser("iggy", "iggy"), CreateStream(1, "s"),
                        CreateTopic(S, 1, 1, CompressionAlgorithm.NONE, 0, 0, 0, "t"),
                        SendMessages.of(S, T, Partitioning.partition_id(1), PAYLOADS)):
            writer.write(command.to_frame())
            assert (await _response(reader))[0] == 0
        poll = PollMessages(Consumer.regular(1), S, T, 1, PollingStrategy.offset(0), MESSAGES,
                            False)
        writer.write(poll.to_frame() + Ping().to_frame())  # the PING is answered after it
        if slow_reader:  # nobody reads: the socket fills, the rest waits for it ...
            await asyncio.sleep(0.3)
            assert 0 < counted.sent < MESSAGES * 1000
            other_reader, other_writer = await asyncio.open_connection(host, port)
            other_writer.write(Ping().to_frame())  # ... while other connections are served
            assert await _response(other_reader) == (0, b"")
            other_writer.close()
        status, payload = await _response(reader)
        assert status == 0
        assert await _response(reader) == (0, b"")
        writer.close()
        log = core.state.streams[1].topics[1].partitions[1].log
        count, chunks = log.read(0, MESSAGES)
        return PolledMessages.from_payload(payload), b"".join(chunks), len(payload)
    finally:
        await listener.stop()
        await core.stop()


def _run(loop_kind: str, coroutine):
    if loop_kind == "uvloop":
        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
@pytest.mark.parametrize("slow_reader", [False, True], ids=["reading", "slow-reader"])
def test_a_large_poll_is_sent_from_the_log_file_whole_and_in_order(
    tmp_path, monkeypatch, loop_kind: str, slow_reader: bool
) -> None:
    counted = CountedSendfile()
    monkeypatch.setattr(file_region.os, "sendfile", counted)
    polled, stored, size = _run(loop_kind, _serve_and_poll(tmp_path, slow_reader, counted))
    assert polled.count == MESSAGES
    assert bytes(polled.raw) == stored
    assert [message.payload for message in polled.messages] == PAYLOADS
    assert counted.sent == len(stored)  # every record went by sendfile
    if slow_reader:
        assert counted.calls > 2  # in pieces, as the socket took them


def test_small_polls_are_sent_as_bytes(tmp_path, monkeypatch) -> None:
    counted = CountedSendfile()
    monkeypatch.setattr(file_region.os, "sendfile", counted)
    monkeypatch.setattr(file_region, "MIN_REGION_BYTES", 10 << 20)  # nothing is that large
    from rill.server.storage import segment_reads
    monkeypatch.setattr(segment_reads, "MIN_REGION_BYTES", 10 << 20)
    polled, stored, _ = asyncio.run(_serve_and_poll(tmp_path, False, counted))
    assert bytes(polled.raw) == stored and counted.calls == 0


def test_without_sendfile_configured_polls_are_sent_as_bytes(tmp_path, monkeypatch) -> None:
    counted = CountedSendfile()
    monkeypatch.setattr(file_region.os, "sendfile", counted)
    polled, stored, _ = asyncio.run(_serve_and_poll(tmp_path, False, counted, sendfile=False))
    assert bytes(polled.raw) == stored and counted.calls == 0


def test_a_large_poll_over_tls_arrives_whole(rill_factory, tmp_path) -> None:
    from rill.server.auth.certificates import generate_self_signed
    import ssl

    certificate_pem, key_pem = generate_self_signed()
    (tmp_path / "cert.pem").write_bytes(certificate_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server = rill_factory({
        "RILL_TCP_SENDFILE": "true",  # (TLS cannot send files: the regions are read)
        "RILL_TCP_TLS_ENABLED": "true",
        "RILL_TCP_TLS_CERTIFICATE": str(tmp_path / "cert.pem"),
        "RILL_TCP_TLS_KEY": str(tmp_path / "key.pem"),
    }).start()
    trusting = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    with Client(server.address, ssl=trusting) as client:
        client.login_user("iggy", "iggy")
        client.create_stream("s", stream_id=1)
        client.create_topic(1, "t", partitions_count=1)
        client.send_messages(1, 1, [Message(payload) for payload in PAYLOADS],
                             partitioning=Partitioning.partition_id(1))
        polled = client.poll_messages(1, 1, consumer=1, partition_id=1,
                                      strategy=PollingStrategy.offset(0), count=MESSAGES)
        assert [message.payload for message in polled.messages] == PAYLOADS
