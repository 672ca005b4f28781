"""TcpTransport against a fake link, and its reading side fed responses split across reads."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from rill import errors
from rill.bench.ports import free_port
from rill.client.tcp import SCRATCH_SIZE, TcpTransport, _LinkProtocol
from rill.client.transport import parse_address, payload_parts
from rill.protocol.iggy import framing

from .fake_server import DROP, FakeServer, error, ok, run
from .feeding import feed


def test_request_writes_the_exact_frame_and_returns_the_payload():
    async def main():
        async with FakeServer(lambda code, payload: ok(b"answer")) as server:
            link = TcpTransport(server.address)
            await link.connect()
            result = await link.request(202, bytes.fromhex("01000000 04 74657374"))
            await link.close()
        assert bytes(result) == b"answer"
        assert server.frames[0].raw == bytes.fromhex("0d000000ca00000001000000 04 74657374")

    run(main())


def test_error_status_raises_the_server_error_and_the_link_stays_usable():
    async def main():
        answers = iter([error(1009), ok(b"x")])
        async with FakeServer(lambda code, payload: next(answers)) as server:
            async with TcpTransport(server.address) as link:
                with pytest.raises(errors.StreamIdNotFound) as caught:
                    await link.request(203, b"")
                assert caught.value.code == 1009
                assert bytes(await link.request(1, b"")) == b"x"
                assert link.is_connected

    run(main())


def test_pipelined_requests_are_matched_to_their_callers_in_order():
    async def main():
        # The fake server answers only once all 10 requests have arrived.
        async with FakeServer(lambda code, payload: ok(payload * 3), batch=10) as server:
            async with TcpTransport(server.address) as link:
                results = await asyncio.gather(
                    *(link.request(100 + index, bytes([index])) for index in range(10))
                )
        assert [bytes(result) for result in results] == [bytes([index]) * 3 for index in range(10)]
        assert server.codes == [100 + index for index in range(10)]
        assert server.connections == 1

    run(main())


def test_a_40_megabyte_response_is_read_whole_around_small_ones():
    big = hashlib.sha256(b"seed").digest() * (40 * 1024 * 1024 // 32)

    def handler(code, payload):
        return ok(big) if code == 100 else ok(b"small-%d" % code)

    async def main():
        async with FakeServer(handler) as server:
            async with TcpTransport(server.address) as link:
                first, polled, last = await asyncio.gather(
                    link.request(1), link.request(100), link.request(2)
                )
        assert bytes(first) == b"small-1" and bytes(last) == b"small-2"
        assert len(polled) == len(big) == 40 * 1024 * 1024
        assert hashlib.sha256(polled).digest() == hashlib.sha256(big).digest()
        assert isinstance(polled, memoryview)  # read in place into its own buffer

    run(main())


def test_a_big_request_payload_in_parts_arrives_intact():
    region = bytes(range(256)) * (3 * 1024 * 1024 // 256)

    async def main():
        async with FakeServer() as server:
            async with TcpTransport(server.address) as link:
                await link.request(101, (b"prefix", region, b"", b"suffix"))
                await link.request(1, [b"a", b"b"])
        assert server.frames[0].payload == b"prefix" + region + b"suffix"
        assert server.frames[1].raw == framing.encode_request(1, b"ab")

    run(main())


def test_writers_wait_while_the_link_is_paused_then_all_complete():
    async def main():
        release = asyncio.Event()

        async def handler(code, payload):
            await release.wait()  # the server stops reading until released
            return ok(payload[:4])

        async with FakeServer(handler) as server:
            async with TcpTransport(server.address) as link:
                chunk = bytes(1024 * 1024)
                calls = [
                    asyncio.ensure_future(link.request(101, index.to_bytes(4, "little") + chunk))
                    for index in range(32)
                ]
                while not link._protocol.paused:  # 32 MB cannot all fit in socket buffers
                    await asyncio.sleep(0.01)
                release.set()
                results = await asyncio.gather(*calls)
                assert not link._protocol.paused
        assert [bytes(result) for result in results] == [i.to_bytes(4, "little") for i in range(32)]

    run(main())


def test_pipelining_and_a_big_response_under_uvloop():
    import uvloop  # a dependency of rill on every platform but Windows

    big = b"\x5a" * (12 * 1024 * 1024)

    async def main():
        async with FakeServer(lambda code, payload: ok(big) if code == 100 else ok(payload)) as server:
            async with TcpTransport(server.address) as link:
                results = await asyncio.gather(
                    *(link.request(1, bytes([index]) * 70_000) for index in range(5)), link.request(100)
                )
        assert [bytes(result) for result in results[:5]] == [bytes([i]) * 70_000 for i in range(5)]
        assert bytes(results[5]) == big

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(asyncio.wait_for(main(), 30))


def test_a_dropped_link_fails_the_requests_in_flight_with_disconnected():
    async def main():
        async with FakeServer(lambda code, payload: DROP if code == 2 else None) as server:
            link = TcpTransport(server.address)
            await link.connect()
            outcomes = await asyncio.gather(
                link.request(1), link.request(2), link.request(3), return_exceptions=True
            )
            assert all(isinstance(outcome, errors.Disconnected) for outcome in outcomes[1:])
            assert outcomes[0] == b""
            assert outcomes[1].code == 8
            assert not link.is_connected
            with pytest.raises(errors.Disconnected):
                await link.request(1)
            await link.connect()  # the same transport can connect again
            assert await link.request(1) == b""
            assert server.connections == 2
            await link.close()

    run(main())


def test_request_before_connect_and_after_close_raises_not_connected():
    async def main():
        async with FakeServer() as server:
            link = TcpTransport(server.address)
            with pytest.raises(errors.NotConnected) as caught:
                await link.request(1)
            assert caught.value.code == 61
            await link.connect()
            await link.close()
            await link.close()  # idempotent
            with pytest.raises(errors.NotConnected):
                await link.request(1)

    run(main())


def test_closing_fails_pending_requests_with_disconnected():
    async def main():
        async with FakeServer(batch=2) as server:  # never answers a single request
            link = TcpTransport(server.address)
            await link.connect()
            pending = asyncio.ensure_future(link.request(1))
            await server.wait_for_frames(1)
            assert link.in_flight == 1
            await link.close()
            with pytest.raises(errors.Disconnected):
                await pending

    run(main())


def test_connect_to_a_closed_port_raises_os_error():
    port = free_port()  # nobody listens there

    async def main():
        with pytest.raises(OSError):
            await TcpTransport(f"127.0.0.1:{port}").connect()

    run(main())


def test_parse_address():
    assert parse_address("127.0.0.1:8090") == ("127.0.0.1", 8090)
    assert parse_address("localhost") == ("localhost", 8090)
    assert parse_address("tcp://example.org:9") == ("example.org", 9)
    assert parse_address("[::1]:8091") == ("::1", 8091)
    assert parse_address("::1") == ("::1", 8090)
    with pytest.raises(ValueError):
        parse_address("host:http")
    assert payload_parts(b"x") == (b"x",)
    assert payload_parts([b"a", b"b"]) == (b"a", b"b")


# --- the link's reading side, without sockets (the splitting itself: tests/protocol) -------------


def test_responses_split_across_reads_resolve_their_callers_in_order():
    frames = [(0, b"a"), (1009, b""), (0, bytes(range(256)) * 300), (0, b""), (3, b""),
              (0, b"z" * (SCRATCH_SIZE - 8)), (0, b"y" * (SCRATCH_SIZE - 7))]
    stream = b"".join(framing.encode_response(status, body) for status, body in frames)

    async def main():
        for cut in (1, 7, 1000, 70_000):
            protocol = _LinkProtocol(max_response_size=2**31)
            futures = [asyncio.get_running_loop().create_future() for _ in frames]
            protocol.pending.extend(futures)
            feed(protocol, stream, cut)
            for future, (status, body) in zip(futures, frames):
                if status:
                    assert isinstance(future.exception(), errors.RillError)
                    assert future.exception().code == status
                else:
                    assert bytes(future.result()) == body
            assert not protocol.pending and not protocol.lost

    run(main())


def test_an_unsolicited_response_aborts_the_link():
    async def main():
        protocol = _LinkProtocol(max_response_size=100)
        buffer = protocol.get_buffer(-1)
        frame = framing.encode_response(0, b"")
        buffer[: len(frame)] = frame
        protocol.buffer_updated(len(frame))
        assert protocol.lost

    run(main())


def test_an_oversized_response_length_aborts_the_link():
    async def main():
        protocol = _LinkProtocol(max_response_size=100)
        future = asyncio.get_running_loop().create_future()
        protocol.pending.append(future)
        buffer = protocol.get_buffer(-1)
        buffer[:8] = framing.response_header(0, 101)
        protocol.buffer_updated(8)
        assert isinstance(future.exception(), errors.Disconnected)

    run(main())
