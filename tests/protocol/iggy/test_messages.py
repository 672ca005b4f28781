"""SEND regions built from Message values and POLL regions walked into PolledMessage values
(wire §3.4, §4.5)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.headers import HeaderKind, HeaderValue, decode_header_map, encode_header_map
from rill.protocol.iggy.messages import (
    POLLED_MESSAGE_OVERHEAD,
    Message,
    PolledMessage,
    encode_messages,
    iter_polled_messages,
)
from rill.protocol.iggy.responses.messages import PolledMessages

from .strategies import U64, header_maps, identifiers, messages, partitionings


def _walk_send_region(region: bytes) -> list[Message]:
    """An independent reader of the SEND layout, for checking what encode_messages wrote."""
    out, pos = [], 0
    while pos < len(region):
        message_id = int.from_bytes(region[pos:pos + 16], "little")
        (headers_length,) = struct.unpack_from("<I", region, pos + 16)
        pos += 20
        headers = decode_header_map(region[pos:pos + headers_length]) if headers_length else None
        pos += headers_length
        (payload_length,) = struct.unpack_from("<I", region, pos)
        pos += 4
        out.append(Message(region[pos:pos + payload_length], message_id, headers))
        pos += payload_length
    return out


def _polled_record(message: PolledMessage) -> bytes:
    headers = encode_header_map(message.headers)
    return (
        struct.pack("<QBQ", message.offset, message.state, message.timestamp)
        + message.id.to_bytes(16, "little")
        + struct.pack("<II", message.checksum, len(headers)) + headers
        + struct.pack("<I", len(message.payload)) + message.payload
    )


def test_send_region_layout() -> None:
    region = encode_messages([Message(b"hi", id=1, headers={"a": HeaderValue.bool(True)}), b"yo"])
    header_bytes = encode_header_map({"a": HeaderValue.bool(True)})
    assert region == (
        (1).to_bytes(16, "little") + struct.pack("<I", len(header_bytes)) + header_bytes
        + b"\x02\x00\x00\x00hi"
        + b"\x00" * 16 + b"\x00\x00\x00\x00" + b"\x02\x00\x00\x00yo"
    )


def test_polled_overhead_is_45() -> None:
    message = PolledMessage(0, 1, 2, 3, 4, b"")
    assert len(_polled_record(message)) == POLLED_MESSAGE_OVERHEAD == 45
    assert message.id_bytes == (3).to_bytes(16, "little")


def test_iter_polled_messages_hand_built() -> None:
    first = PolledMessage(10, 1, 1_700_000_000_000_000, (1 << 127) + 5, 0xDEADBEEF, b"payload",
                          {"k": HeaderValue.int(HeaderKind.INT64, -1)})
    second = PolledMessage(11, 1, 1_700_000_000_000_001, 6, 7, b"x")
    region = _polled_record(first) + _polled_record(second)
    assert list(iter_polled_messages(region, 2)) == [first, second]
    polled = PolledMessages.from_payload(struct.pack("<IQI", 1, 11, 2) + region)
    assert polled.messages == [first, second] and len(polled) == 2
    assert polled.prefix() + region == struct.pack("<IQI", 1, 11, 2) + region

    for length in range(len(region)):
        with pytest.raises(DecodeError):
            list(iter_polled_messages(region[:length], 2))
    with pytest.raises(DecodeError):  # more bytes than count records
        list(iter_polled_messages(region, 1))
    with pytest.raises(DecodeError):
        list(iter_polled_messages(region + b"\x00", 2))


def test_iter_polled_messages_bad_headers() -> None:
    record = bytearray(_polled_record(PolledMessage(0, 1, 0, 0, 0, b"p", {"k": HeaderValue.string("v")})))
    record[41 + 4 + 1] = 0  # the header kind byte after u32 key_length + key "k"
    with pytest.raises(DecodeError):
        list(iter_polled_messages(bytes(record), 1))


@given(identifiers, identifiers, partitionings, st.lists(messages, max_size=5))
def test_send_messages_of_property(stream_id, topic_id, partitioning, batch) -> None:
    command = SendMessages.of(stream_id, topic_id, partitioning, batch)
    decoded = SendMessages.decode(command.encode())
    assert decoded == command
    walked = _walk_send_region(bytes(decoded.messages))
    assert [(m.payload, m.id, m.headers or None) for m in walked] == [
        (m.payload, m.id, m.headers or None) for m in batch
    ]


polled_messages = st.builds(
    PolledMessage,
    offset=U64,
    state=st.sampled_from([1, 10, 20, 30]),
    timestamp=U64,
    id=st.integers(0, (1 << 128) - 1),
    checksum=st.integers(0, 0xFFFF_FFFF),
    payload=st.binary(max_size=100),
    headers=header_maps,
)


@given(st.lists(polled_messages, max_size=6))
def test_iter_polled_messages_property(batch) -> None:
    region = b"".join(_polled_record(message) for message in batch)
    assert list(iter_polled_messages(region, len(batch))) == batch
