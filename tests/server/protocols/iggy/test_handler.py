"""What the official Iggy Node.js SDK of December 2024 showed (issue 12, item 6), over a real TCP
connection with raw frames: rill answers these requests as Iggy server 0.4.95 does.

(a) DELETE_TOPIC with an extra u32 after the two identifiers: accepted (0.4.95 ignores
    trailing bytes on it); (b) CREATE_USER with has_permissions 0 followed by stray bytes:
    accepted; (c) GET_CONSUMER_OFFSET for a consumer that never stored an offset: the 20-byte
    ConsumerOffsetInfo with stored_offset 0 (not an empty OK), for a consumer and for a group;
    any failure is still an empty OK. docs/wire-notes.md has the sources.
"""

from __future__ import annotations

import struct

import pytest

from rill.protocol.buffer import Writer
from rill.protocol.iggy.commands.groups import CreateConsumerGroup
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.streams import CreateStream
from rill.protocol.iggy.commands.system import GetClient, Ping
from rill.protocol.iggy.commands.topics import CreateTopic, GetTopic
from rill.protocol.iggy.commands.users import GetUser, LoginUser
from rill.protocol.iggy.framing import encode_request
from raw_link import RawLink
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning


@pytest.fixture
def link(rill_server):
    link = RawLink(rill_server.tcp_address)
    assert link.ask(LoginUser("iggy", "iggy").to_frame()) == (0, struct.pack("<I", 1))
    assert link.ask(CreateStream(1, "shop").to_frame())[0] == 0
    topic = CreateTopic(Identifier.of(1), 0, 2, CompressionAlgorithm.NONE, 0, 0, 0, "orders")
    assert link.ask(topic.to_frame())[0] == 0
    yield link
    link.sock.close()


def _idents(*values: int | str) -> bytes:
    writer = Writer()
    for value in values:
        Identifier.of(value).encode(writer)
    return writer.getvalue()


def test_delete_topic_with_a_trailing_u32_is_done(link):
    assert link.ask(encode_request(303, _idents(1, 1) + struct.pack("<I", 0))) == (0, b"")
    assert link.ask(GetTopic(Identifier.of(1), Identifier.of(1)).to_frame()) == (0, b"")  # gone


def test_strict_commands_still_refuse_trailing_bytes(link):
    assert link.ask(encode_request(Ping.CODE, b"\x00")) == (3, b"")
    assert link.ask(encode_request(GetClient.CODE, struct.pack("<II", 1, 0))) == (3, b"")
    assert link.ask(encode_request(303, _idents(1)[:-1])) == (3, b"")  # a field cut short


def test_create_user_without_permissions_then_stray_bytes_is_created(link):
    payload = b"\x08nodeuser\x07secret1\x01" + b"\x00" + struct.pack("<I", 0)
    status, details = link.ask(encode_request(33, payload))
    assert status == 0 and b"nodeuser" in details
    status, found = link.ask(GetUser(Identifier.of("nodeuser")).to_frame())
    assert status == 0 and b"nodeuser" in found


def _get_offset(consumer: bytes, stream: int | str, topic: int | str, partition: int) -> bytes:
    return encode_request(120, consumer + _idents(stream, topic) + struct.pack("<I", partition))


def _consumer(kind: int, value: int) -> bytes:
    """u8 kind (1 consumer, 2 group) + identifier, as the codec's Consumer writes it."""
    writer = Writer()
    (Consumer.group(value) if kind == 2 else Consumer.regular(value)).encode(writer)
    assert writer.getvalue() == bytes([kind]) + _idents(value)
    return writer.getvalue()


def test_consumer_offset_never_stored_is_the_20_byte_record_with_0(link):
    send = SendMessages.of(1, 1, Partitioning.partition_id(1), [b"a", b"b", b"c"])
    assert link.ask(send.to_frame()) == (0, b"")
    never = struct.pack("<IQQ", 1, 2, 0)  # partition 1, current offset 2, stored offset 0
    assert link.ask(_get_offset(_consumer(1, 7), 1, 1, 1)) == (0, never)
    assert link.ask(_get_offset(_consumer(1, 7), "shop", "orders", 1)) == (0, never)
    # a partition with no message yet: current offset 0
    assert link.ask(_get_offset(_consumer(1, 7), 1, 1, 2)) == (0, struct.pack("<IQQ", 2, 0, 0))
    # a consumer group that never committed: the same record
    assert link.ask(CreateConsumerGroup(Identifier.of(1), Identifier.of(1), 0, "workers").to_frame())[0] == 0
    assert link.ask(_get_offset(_consumer(2, 1), 1, 1, 1)) == (0, never)
    # once stored, the stored offset
    store = encode_request(121, _consumer(1, 7) + _idents(1, 1) + struct.pack("<IQ", 1, 1))
    assert link.ask(store) == (0, b"")
    assert link.ask(_get_offset(_consumer(1, 7), 1, 1, 1)) == (0, struct.pack("<IQQ", 1, 2, 1))


def test_consumer_offset_failures_are_still_an_empty_ok(link):
    assert link.ask(_get_offset(_consumer(1, 7), 1, 9, 1)) == (0, b"")  # no such topic
    assert link.ask(_get_offset(_consumer(1, 7), 9, 1, 1)) == (0, b"")  # no such stream
    assert link.ask(_get_offset(_consumer(1, 7), 1, 1, 9)) == (0, b"")  # no such partition
    assert link.ask(_get_offset(_consumer(2, 5), 1, 1, 1)) == (0, b"")  # no such group
