"""The QUIC transport through a raw aioquic client against a real server (wire §1.5): framing
per stream, bad input isolated to its stream, concurrency on one connection, sessions and the
self-signed certificate."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import stat
import struct
import time

import pytest
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from cryptography import x509

from rill.client import Client
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.commands.streams import CreateStream, GetStream, GetStreams
from rill.protocol.iggy.commands.system import GetClients
from rill.protocol.iggy.commands.topics import CreateTopic
from rill.protocol.iggy.commands.users import LoginUser
from rill.protocol.iggy.framing import encode_request
from rill.protocol.iggy.messages import Message
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.server.auth.certificates import generate_self_signed

PING = bytes.fromhex("0400000001000000")
LOGIN = LoginUser("iggy", "iggy").to_frame()


class RawQuicProtocol(QuicConnectionProtocol):
    """Collects each stream's bytes; a stream's future resolves at its end or reset."""

    def __init__(self, quic: QuicConnection) -> None:
        super().__init__(quic)
        self.buffers: dict[int, bytearray] = {}
        self.results: dict[int, asyncio.Future] = {}
        self.terminated = asyncio.get_running_loop().create_future()

    def result(self, stream_id: int) -> asyncio.Future:
        if stream_id not in self.results:
            self.results[stream_id] = asyncio.get_running_loop().create_future()
        return self.results[stream_id]

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StreamDataReceived):
            self.buffers.setdefault(event.stream_id, bytearray()).extend(event.data)
            if event.end_stream and not self.result(event.stream_id).done():
                self.result(event.stream_id).set_result(("data", bytes(self.buffers[event.stream_id])))
        elif isinstance(event, events.StreamReset):
            if not self.result(event.stream_id).done():
                self.result(event.stream_id).set_result(("reset", event.error_code))
        elif isinstance(event, events.ConnectionTerminated) and not self.terminated.done():
            self.terminated.set_result(event)


class RawQuic:
    """One QUIC connection; ``send`` writes raw bytes on a new bidirectional stream."""

    def __init__(self, transport, protocol: RawQuicProtocol) -> None:
        self.transport = transport
        self.protocol = protocol

    @classmethod
    async def open(cls, address: tuple[str, int], cafile: str | None = None,
                   server_name: str = "localhost") -> RawQuic:
        configuration = QuicConfiguration(is_client=True, server_name=server_name)
        if cafile is None:
            configuration.verify_mode = ssl.CERT_NONE
        else:
            configuration.load_verify_locations(cafile=cafile)
        loop = asyncio.get_running_loop()
        quic = QuicConnection(configuration=configuration)
        transport, protocol = await loop.create_datagram_endpoint(
            lambda: RawQuicProtocol(quic), local_addr=("127.0.0.1", 0)
        )
        protocol.connect(address)
        await asyncio.wait_for(protocol.wait_connected(), 20)
        return cls(transport, protocol)

    @property
    def local_address(self) -> str:
        host, port = self.transport.get_extra_info("sockname")[:2]
        return f"{host}:{port}"

    def send(self, data: bytes, end: bool = True) -> int:
        quic = self.protocol._quic
        stream_id = quic.get_next_available_stream_id()
        quic.send_stream_data(stream_id, data, end_stream=end)
        self.protocol.transmit()
        return stream_id

    async def outcome(self, stream_id: int) -> tuple[str, object]:
        return await asyncio.wait_for(self.protocol.result(stream_id), 20)

    async def request(self, frame: bytes) -> tuple[int, bytes]:
        kind, data = await self.outcome(self.send(frame))
        assert kind == "data", (kind, data)
        status, length = struct.unpack_from("<II", data)
        assert length == len(data) - 8
        return status, data[8:]

    async def close(self) -> None:
        self.protocol.close()
        self.transport.close()


run = asyncio.run


def frame(command) -> bytes:
    return command.to_frame()


def create_topic(stream_id: int, name: str = "t", partitions: int = 1) -> bytes:
    return frame(CreateTopic(Identifier(stream_id), 0, partitions, CompressionAlgorithm.NONE, 0, 0, 0, name))


def test_ping_frame_exactly(rill_server):
    async def main():
        link = await RawQuic.open(rill_server.quic_address)
        kind, data = await link.outcome(link.send(PING))
        await link.close()
        return kind, data

    assert run(main()) == ("data", bytes(8))


def test_unauthenticated_request_gets_status_40(rill_server):
    async def main():
        link = await RawQuic.open(rill_server.quic_address)
        answer = await link.request(frame(GetStreams()))
        await link.close()
        return answer

    assert run(main()) == (40, b"")


def test_login_create_send_and_poll_exact_payloads(rill_server):
    payloads = [b"first", b"\x00\x01binary\xff", b"x" * 5000]

    async def main():
        link = await RawQuic.open(rill_server.quic_address)
        assert await link.request(LOGIN) == (0, struct.pack("<I", 1))
        status, body = await link.request(frame(CreateStream(7, "quic-stream")))
        assert status == 0 and b"quic-stream" in body
        status, body = await link.request(create_topic(7, "quic-topic", 2))
        assert status == 0 and b"quic-topic" in body
        send = SendMessages.of(7, "quic-topic", Partitioning.partition_id(2),
                               [Message(p, id=i + 1) for i, p in enumerate(payloads)])
        assert await link.request(send.to_frame()) == (0, b"")
        poll = PollMessages(Consumer.regular(1), Identifier(7), Identifier.of("quic-topic"), 2,
                            PollingStrategy.offset(0), 10, False)
        status, body = await link.request(poll.to_frame())
        await link.close()
        return status, PollMessages.decode_response(body)

    status, polled = run(main())
    assert status == 0
    assert (polled.partition_id, polled.count, polled.current_offset) == (2, 3, 2)
    assert [m.payload for m in polled.messages] == payloads
    assert [m.id for m in polled.messages] == [1, 2, 3]
    assert [m.offset for m in polled.messages] == [0, 1, 2]


def test_twenty_concurrent_requests_on_one_connection(rill_server):
    async def main():
        link = await RawQuic.open(rill_server.quic_address)
        await link.request(LOGIN)
        creations = [link.send(frame(CreateStream(i, f"s{i}"))) for i in range(1, 21)]
        created = await asyncio.gather(*(link.outcome(s) for s in creations))
        lookups = [link.send(frame(GetStream(Identifier(i)))) for i in range(1, 21)]
        found = await asyncio.gather(*(link.outcome(s) for s in lookups))
        await link.close()
        return created, found

    created, found = run(main())
    for index, (kind, data) in enumerate(created, start=1):
        assert kind == "data" and data[:4] == bytes(4) and f"s{index}".encode() in data
    for index, (kind, data) in enumerate(found, start=1):
        assert kind == "data" and data[:4] == bytes(4)
        assert GetStream.decode_response(data[8:]).name == f"s{index}"


def test_malformed_requests_close_only_their_own_stream(rill_server):
    bad_streams = [
        b"\x01\x02",  # shorter than a header
        b"",  # an empty stream
        struct.pack("<II", 40, 1),  # the length prefix announces more than the stream holds
        struct.pack("<II", 4, 1) + b"extra",  # ... or less
        encode_request(1, b"x"),  # well framed, undecodable: PING takes no payload
        encode_request(202, b"\x01\x00"),  # truncated CREATE_STREAM
    ]

    async def main():
        link = await RawQuic.open(rill_server.quic_address)
        await link.request(LOGIN)
        bad = [link.send(data) for data in bad_streams]
        good = link.send(frame(CreateStream(3, "still-fine")))
        outcomes = [await link.outcome(stream) for stream in bad]
        good_outcome = await link.outcome(good)
        after = await link.request(PING)
        await link.close()
        return outcomes, good_outcome, after

    outcomes, good_outcome, after = run(main())
    assert outcomes == [("data", struct.pack("<II", 3, 0))] * len(bad_streams)
    assert good_outcome[0] == "data" and good_outcome[1][:4] == bytes(4)
    assert after == (0, b"")


def test_oversize_request_stream_is_reset_and_the_connection_continues(rill_factory):
    server = rill_factory({"RILL_QUIC_MAX_REQUEST_SIZE": "1 KB"}).start()

    async def main():
        link = await RawQuic.open(server.quic_address)
        await link.request(LOGIN)
        big = SendMessages.of(1, 1, Partitioning.balanced(), [b"y" * 2000]).to_frame()
        too_long = link.send(big)
        # announced as too long: refused as soon as the length prefix arrives, before any FIN
        announced = link.send(struct.pack("<II", 1_000_000, 101), end=False)
        fits = link.send(frame(CreateStream(4, "small")))
        results = [await link.outcome(too_long), await link.outcome(announced)]
        fits_outcome = await link.outcome(fits)
        after = await link.request(PING)
        await link.close()
        return results, fits_outcome, after

    results, fits_outcome, after = run(main())
    assert results == [("reset", 4029), ("reset", 4029)]
    assert fits_outcome[0] == "data" and fits_outcome[1][:4] == bytes(4)
    assert after == (0, b"")


def wait_until(predicate, timeout=20.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(interval)


def test_quic_sessions_are_transport_2_and_end_with_the_connection(rill_server):
    tcp = Client(rill_server.address)
    tcp.connect()
    tcp.login_user("iggy", "iggy")

    async def main():
        link = await RawQuic.open(rill_server.quic_address)
        await link.request(LOGIN)
        status, body = await link.request(frame(GetClients()))
        assert status == 0
        clients = GetClients.decode_response(body)
        address = link.local_address
        await link.close()
        return clients, address

    try:
        clients, address = run(main())
        by_address = {client.address: client for client in clients}
        assert by_address[address].transport == 2 and by_address[address].user_id == 1
        assert sorted(client.transport for client in clients) == [1, 2]

        def quic_gone():
            return all(client.transport != 2 for client in tcp.get_clients())

        wait_until(quic_gone)  # CONNECTION_CLOSE ends the session
    finally:
        tcp.close()


def test_self_signed_certificate_is_generated_once_and_reused(rill_server):
    secrets = rill_server.data_dir / "secrets"
    certificate_path = secrets / "self_signed_cert.pem"
    key_path = secrets / "self_signed_key.pem"
    assert stat.S_IMODE(os.stat(secrets).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(certificate_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    certificate = x509.load_pem_x509_certificate(certificate_path.read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert "127.0.0.1" in [str(ip) for ip in names.get_values_for_type(x509.IPAddress)]
    before = (certificate_path.read_bytes(), key_path.read_bytes())

    async def verified_ping():
        link = await RawQuic.open(rill_server.quic_address, cafile=str(certificate_path))
        answer = await link.request(PING)
        await link.close()
        return answer

    assert run(verified_ping()) == (0, b"")  # the server presents exactly that certificate
    port = rill_server.quic_address[1]
    rill_server.restart()
    assert rill_server.quic_address[1] == port
    assert (certificate_path.read_bytes(), key_path.read_bytes()) == before
    assert run(verified_ping()) == (0, b"")


def test_configured_certificate_is_used_instead_of_a_generated_one(rill_factory, tmp_path):
    certificate_pem, key_pem = generate_self_signed("rill.test")
    (tmp_path / "cert.pem").write_bytes(certificate_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server = rill_factory({
        "RILL_QUIC_CERTIFICATE_SELF_SIGNED": "false",
        "RILL_QUIC_CERTIFICATE_CERTIFICATE": str(tmp_path / "cert.pem"),
        "RILL_QUIC_CERTIFICATE_KEY": str(tmp_path / "key.pem"),
    }).start()

    async def main():
        link = await RawQuic.open(server.quic_address, cafile=str(tmp_path / "cert.pem"),
                                  server_name="rill.test")
        answer = await link.request(PING)
        await link.close()
        return answer

    assert run(main()) == (0, b"")
    assert not (server.data_dir / "secrets" / "self_signed_cert.pem").exists()


def test_quic_can_be_disabled(rill_factory):
    server = rill_factory({"RILL_QUIC_ENABLED": "false"}).start()
    assert server.quic_address is None
    assert not any("listening on quic" in line for line in server.output)
    with socket.create_connection(server.tcp_address, timeout=10) as sock:
        sock.sendall(PING)
        assert sock.recv(8) == bytes(8)


def test_untrusted_certificate_fails_the_handshake(rill_server, tmp_path):
    other, _ = generate_self_signed()
    (tmp_path / "other.pem").write_bytes(other)

    async def main():
        with pytest.raises(ConnectionError):
            await RawQuic.open(rill_server.quic_address, cafile=str(tmp_path / "other.pem"))

    run(main())


def test_idle_connection_times_out_and_its_session_ends(rill_factory):
    server = rill_factory({"RILL_QUIC_MAX_IDLE_TIMEOUT": "1 s", "RILL_QUIC_KEEP_ALIVE_INTERVAL": "none"}).start()
    tcp = Client(server.address)
    tcp.connect()
    tcp.login_user("iggy", "iggy")

    async def main():
        link = await RawQuic.open(server.quic_address)
        assert await link.request(LOGIN) == (0, struct.pack("<I", 1))
        assert sorted(c.transport for c in tcp.get_clients()) == [1, 2]
        # nobody speaks: the idle timeout (the smaller of both sides', here the server's) ends it
        await asyncio.wait_for(link.protocol.terminated, 30)
        await link.close()

    try:
        run(main())
        wait_until(lambda: [c.transport for c in tcp.get_clients()] == [1])
    finally:
        tcp.close()


def test_keep_alive_pings_hold_an_idle_connection_open(rill_factory):
    server = rill_factory({"RILL_QUIC_MAX_IDLE_TIMEOUT": "2 s", "RILL_QUIC_KEEP_ALIVE_INTERVAL": "200 ms"}).start()

    async def main():
        link = await RawQuic.open(server.quic_address)  # this client never pings by itself
        await link.request(LOGIN)
        await asyncio.sleep(5)  # more than twice the idle timeout without a request
        assert not link.protocol.terminated.done()
        answer = await link.request(PING)
        await link.close()
        return answer

    assert run(main()) == (0, b"")


def test_stream_limit_comes_from_the_configuration(rill_factory):
    server = rill_factory({"RILL_QUIC_MAX_CONCURRENT_BIDI_STREAMS": "2"}).start()

    async def main():
        link = await RawQuic.open(server.quic_address)
        advertised = link.protocol._quic._remote_max_streams_bidi  # what the server announced
        streams = [link.send(PING) for _ in range(6)]  # 4 of them wait for streams to close
        outcomes = await asyncio.gather(*(link.outcome(stream) for stream in streams))
        await link.close()
        return advertised, outcomes

    advertised, outcomes = run(main())
    assert advertised == 2
    assert outcomes == [("data", bytes(8))] * 6


def test_before_login_a_request_stream_may_hold_only_a_few_kilobytes(rill_factory):
    server = rill_factory({"RILL_CONNECTIONS_MAX_REQUEST_SIZE_UNAUTHENTICATED": "1 KiB"}).start()

    async def main():
        link = await RawQuic.open(server.quic_address)
        big = SendMessages.of(1, 1, Partitioning.balanced(), [b"y" * 2000]).to_frame()
        before = await link.outcome(link.send(big))
        announced = await link.outcome(link.send(struct.pack("<II", 50_000_000, 101), end=False))
        assert await link.request(LOGIN) == (0, struct.pack("<I", 1))
        await link.request(frame(CreateStream(1, "s")))
        await link.request(create_topic(1))
        after = await link.request(big)
        await link.close()
        return before, announced, after

    before, announced, after = run(main())
    assert before == ("reset", 4029) and announced == ("reset", 4029)
    assert after == (0, b"")  # the same request once logged in


def test_a_connection_that_never_logs_in_is_closed(rill_factory):
    server = rill_factory({"RILL_CONNECTIONS_UNAUTHENTICATED_TIMEOUT": "500 ms"}).start()

    async def main():
        link = await RawQuic.open(server.quic_address)  # the server's keep-alives hold it open
        assert await link.request(PING) == (0, b"")  # a PING is no login
        await asyncio.wait_for(link.protocol.terminated, 10)
        await link.close()

    run(main())


def test_beyond_max_connections_a_new_connection_is_refused_and_others_go_on(rill_factory):
    server = rill_factory({"RILL_CONNECTIONS_MAX_CONNECTIONS": "2"}).start()

    async def main():
        first, second = await RawQuic.open(server.quic_address), await RawQuic.open(server.quic_address)
        third = await RawQuic.open(server.quic_address)
        terminated = await asyncio.wait_for(third.protocol.terminated, 10)
        assert terminated.error_code == 2  # CONNECTION_REFUSED
        assert await first.request(PING) == (0, b"")
        assert await second.request(PING) == (0, b"")
        await first.close()
        await asyncio.sleep(0.5)  # the server sees the close
        fourth = await RawQuic.open(server.quic_address)
        assert await fourth.request(PING) == (0, b"")
        for link in (second, third, fourth):
            await link.close()

    run(main())
