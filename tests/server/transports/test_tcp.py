"""The TCP transport with raw sockets: framing, bad input, ordering, isolation (wire §1)."""

from __future__ import annotations

import struct
import threading

import pytest

from rill.client import Client
from raw_link import RawLink
from rill.protocol.iggy.commands.streams import CreateStream, GetStreams
from rill.protocol.iggy.commands.topics import CreateTopic, GetTopic
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Identifier
from rill.protocol.iggy.framing import encode_request

PING = bytes.fromhex("0400000001000000")


@pytest.fixture
def link(rill_server):
    link = RawLink(rill_server.tcp_address)
    yield link
    link.close()


def test_ping_frame_exactly(link):
    link.send(PING)
    assert link.read_exact(8) == bytes.fromhex("0000000000000000")


def test_unauthenticated_frame_exactly(link):
    link.send(GetStreams().to_frame())
    assert link.read_exact(8) == bytes.fromhex("2800000000000000")


def test_malformed_payloads_get_status_3_and_the_connection_stays(link):
    link.login()
    link.send(CreateStream(1, "s").to_frame())
    assert link.response()[0] == 0
    link.send(CreateTopic(Identifier(1), 0, 1, CompressionAlgorithm.NONE, 0, 0, 0, "t").to_frame())
    assert link.response()[0] == 0
    bad_frames = [
        encode_request(202, b"\x01\x00"),  # truncated CREATE_STREAM
        encode_request(1, b"x"),  # PING with a payload
        encode_request(203, b"\x09\x04\x01\x00\x00\x00"),  # identifier kind 9
        encode_request(202, b"\x01\x00\x00\x00\x02\xff\xfe"),  # name is not UTF-8
        encode_request(9999, b"whatever"),  # unknown code
        encode_request(101, bytes.fromhex("010401000000010401000000020401000000")
                       + b"\x00" * 16 + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"),  # empty payload
    ]
    for frame in bad_frames:
        link.send(frame)
        assert link.response() == (3, b"")
    link.send(PING)
    assert link.response() == (0, b"")
    link.send(GetTopic(Identifier(1), Identifier(1)).to_frame())
    status, payload = link.response()
    assert status == 0 and payload[42:50] == b"\x00" * 8  # messages_count: nothing was written


def test_pipelined_requests_are_answered_in_order(link):
    link.login()
    frames = b"".join(CreateStream(i, f"s{i}").to_frame() + PING for i in range(1, 21))
    link.send(frames)
    for i in range(1, 21):
        status, payload = link.response()
        assert status == 0 and struct.unpack_from("<I", payload)[0] == i
        assert link.response() == (0, b"")


def test_frame_below_four_bytes_is_refused_and_closed(link, rill_server):
    link.send(struct.pack("<I", 2) + b"\x00\x00")
    assert link.response() == (3, b"")
    assert link.is_closed()
    with Client(rill_server.address) as client:  # the server serves everyone else
        client.ping()


def test_oversize_frame_is_refused_unread_and_others_are_unaffected(rill_server):
    other = RawLink(rill_server.tcp_address)
    other.login()
    big = RawLink(rill_server.tcp_address)
    big.send(PING)
    # announce a 1 GiB frame but send only its header: the server must answer without waiting
    big.send(struct.pack("<II", 1024 * 1024 * 1024 + 4, 101))
    assert big.response() == (0, b"")  # the request before it is still answered
    status, _ = big.response()
    assert status == 4029  # command_length_error
    assert big.is_closed()
    other.send(PING)
    assert other.response() == (0, b"")
    other.close()
    big.close()


def test_many_concurrent_connections(rill_server):
    results: list[int] = []

    def worker(index: int) -> None:
        with Client(rill_server.address) as client:
            client.login_user("iggy", "iggy")
            client.create_stream(f"c{index}", stream_id=index + 1)
            client.create_topic(index + 1, "t")
            for _ in range(20):
                client.send_messages(index + 1, 1, [b"m"] * 10, partitioning=1)
            results.append(client.get_topic(index + 1, 1).topic.messages_count)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [200] * 8


def test_garbage_does_not_crash_the_server(rill_server):
    import random

    generator = random.Random(7)
    for _ in range(30):
        link = RawLink(rill_server.tcp_address)
        code = generator.choice([1, 38, 100, 101, 102, 120, 121, 200, 202, 302, 402, 603])
        payload = bytes(generator.getrandbits(8) for _ in range(generator.randint(0, 64)))
        link.send(encode_request(code, payload))
        status, _ = link.response()
        assert status != 0 or code in (1, 200, 120, 39)
        link.close()
    with Client(rill_server.address) as client:
        client.ping()
