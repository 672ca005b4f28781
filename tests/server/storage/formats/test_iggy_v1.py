"""stamp_batch turns a SEND region into stored (poll layout) records, or rejects it."""

from __future__ import annotations

import struct
import time
import uuid
import zlib

import pytest
from storage_helpers import region

from rill.errors import InvalidMessagesCount, TooBigHeadersPayload, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import HeaderKind, HeaderValue
from rill.protocol.iggy.messages import Message, encode_messages, iter_polled_messages
from rill.server.storage.formats.iggy_v1 import (
    MAX_HEADERS_BYTES,
    MAX_PAYLOAD_BYTES,
    stamp_batch,
)

TIMESTAMP = 1_700_000_000_123_456
MESSAGE_ID = bytes(range(1, 17))


def test_crc32_is_the_zlib_checksum_of_the_payload() -> None:
    assert zlib.crc32(b"hello") == 0x3610A686


def test_exact_stored_bytes_and_index_entries() -> None:
    raw = encode_messages(
        [Message(b"hello", id=int.from_bytes(MESSAGE_ID, "little")), Message(b"world!", id=7)]
    )
    batch = stamp_batch(memoryview(raw), 105, TIMESTAMP, 4096, 100)
    first = (
        struct.pack("<QBQ", 105, 1, TIMESTAMP)
        + MESSAGE_ID
        + struct.pack("<I", 0x3610A686)
        + struct.pack("<I", 0)
        + struct.pack("<I", 5)
        + b"hello"
    )
    second = (
        struct.pack("<QBQ", 106, 1, TIMESTAMP)
        + (7).to_bytes(16, "little")
        + struct.pack("<I", zlib.crc32(b"world!"))
        + struct.pack("<II", 0, 6)
        + b"world!"
    )
    assert batch.records == first + second
    assert len(first) == 45 + 5
    assert bytes(batch.index_entries) == struct.pack("<IIQ", 5, 4096, TIMESTAMP) + struct.pack(
        "<IIQ", 6, 4096 + len(first), TIMESTAMP
    )
    assert (batch.count, batch.first_offset, batch.last_offset, batch.timestamp_us) == (
        2,
        105,
        106,
        TIMESTAMP,
    )


def test_headers_are_kept_and_round_trip_through_the_poll_decoder() -> None:
    headers = {"key": HeaderValue.string("value"), "n": HeaderValue.int(HeaderKind.UINT32, 42)}
    raw = encode_messages([Message(b"one", id=1, headers=headers), b"two", Message(b"three", id=3)])
    batch = stamp_batch(raw, 0, TIMESTAMP, 0, 0)
    polled = list(iter_polled_messages(batch.records, batch.count))
    assert [m.offset for m in polled] == [0, 1, 2]
    assert [m.payload for m in polled] == [b"one", b"two", b"three"]
    assert polled[0].headers == headers and polled[1].headers == {}
    assert all(
        m.state == 1 and m.timestamp == TIMESTAMP and m.checksum == zlib.crc32(m.payload)
        for m in polled
    )
    assert polled[0].id == 1 and polled[2].id == 3


def test_zero_id_becomes_a_fresh_uuid7_and_nonzero_ids_are_kept() -> None:
    now_us = time.time_ns() // 1000
    batch = stamp_batch(region(b"a", b"b", Message(b"c", id=99)), 0, now_us, 0, 0)
    polled = list(iter_polled_messages(batch.records, 3))
    generated = [uuid.UUID(bytes=m.id_bytes) for m in polled[:2]]
    for value in generated:
        assert value.version == 7
        assert value.variant == uuid.RFC_4122
        milliseconds = int.from_bytes(value.bytes[:6], "big")
        assert abs(milliseconds - now_us // 1000) <= 1
    assert generated[0] != generated[1]
    assert polled[2].id == 99


def test_every_zero_id_of_an_uneven_batch_gets_a_distinct_uuid() -> None:
    payloads = [b"x" * size for size in (1000, 1, 1, 1, 1, 1, 1, 1, 1, 500, 2, 3)]
    batch = stamp_batch(region(*payloads), 0, TIMESTAMP, 0, 0)
    ids = [m.id_bytes for m in iter_polled_messages(batch.records, batch.count)]
    assert len(set(ids)) == len(payloads)
    assert all(uuid.UUID(bytes=value).version == 7 for value in ids)


def test_every_truncated_prefix_fails_cleanly() -> None:
    headers = {"k": HeaderValue.raw(b"v")}
    first = encode_messages([Message(b"payload", id=5, headers=headers)])
    raw = first + encode_messages([Message(b"second", id=6)])
    for length in range(len(raw)):
        if length == 0:
            with pytest.raises(InvalidMessagesCount):
                stamp_batch(raw[:length], 0, TIMESTAMP, 0, 0)
        elif length == len(first):
            assert stamp_batch(raw[:length], 0, TIMESTAMP, 0, 0).count == 1
        else:
            with pytest.raises(DecodeError):
                stamp_batch(raw[:length], 0, TIMESTAMP, 0, 0)


@pytest.mark.parametrize(
    "raw",
    [
        bytes(16) + struct.pack("<II", 0, 0),  # payload_length 0
        bytes(16) + struct.pack("<II", 0, 5) + b"abc",  # payload overruns
        bytes(16) + struct.pack("<II", 0, 3) + b"abc" + b"\x01",  # trailing garbage
        bytes(16) + struct.pack("<I", 100) + b"\x00" * 10,  # headers overrun
        bytes(16)
        + struct.pack("<I", 10)
        + struct.pack("<I", 0)
        + b"\x01"
        + struct.pack("<I", 1)
        + b"v"
        + struct.pack("<I", 1)
        + b"p",  # empty key
        bytes(16)
        + struct.pack("<I", 11)
        + struct.pack("<I", 1)
        + b"k"
        + b"\x63"
        + struct.pack("<I", 1)
        + b"v"
        + struct.pack("<I", 1)
        + b"p",  # kind 99
    ],
)
def test_malformed_messages_raise_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        stamp_batch(raw, 0, TIMESTAMP, 0, 0)


def test_duplicate_header_keys_are_malformed() -> None:
    entry = struct.pack("<I", 1) + b"k" + b"\x01" + struct.pack("<I", 1) + b"v"
    raw = (
        bytes(16) + struct.pack("<I", 2 * len(entry)) + entry + entry + struct.pack("<I", 1) + b"p"
    )
    with pytest.raises(DecodeError):
        stamp_batch(raw, 0, TIMESTAMP, 0, 0)


def test_empty_batch_is_invalid_messages_count() -> None:
    with pytest.raises(InvalidMessagesCount) as raised:
        stamp_batch(b"", 0, TIMESTAMP, 0, 0)
    assert raised.value.code == 4009


def test_payload_limit_is_ten_million_bytes() -> None:
    assert stamp_batch(region(b"a" * (MAX_PAYLOAD_BYTES - 1), b"b"), 0, TIMESTAMP, 0, 0).count == 2
    with pytest.raises(TooBigMessagePayload) as raised:
        stamp_batch(region(b"a" * MAX_PAYLOAD_BYTES, b"b"), 0, TIMESTAMP, 0, 0)
    assert raised.value.code == 4022


def _messages_with_header_bytes(total: int) -> list[Message]:
    """Messages whose header values add up to ``total`` bytes."""
    messages, remaining, number = [], total, 0
    while remaining:
        headers = {}
        for key in range(50):
            size = min(255, remaining)
            if not size:
                break
            headers[f"h{key}"] = HeaderValue.raw(b"v" * size)
            remaining -= size
        messages.append(Message(b"p%d" % number, headers=headers))
        number += 1
    return messages


def test_headers_limit_is_one_hundred_thousand_value_bytes() -> None:
    assert (
        stamp_batch(
            encode_messages(_messages_with_header_bytes(MAX_HEADERS_BYTES)), 0, TIMESTAMP, 0, 0
        ).count
        > 1
    )
    with pytest.raises(TooBigHeadersPayload) as raised:
        stamp_batch(
            encode_messages(_messages_with_header_bytes(MAX_HEADERS_BYTES + 1)), 0, TIMESTAMP, 0, 0
        )
    assert raised.value.code == 4017


def test_a_limit_is_met_as_soon_as_a_running_total_passes_it() -> None:
    """A rejection costs no more than an acceptance: the region after the message that passed
    a limit is not even looked at (here, a malformed tail)."""
    raw = encode_messages([b"a" * (MAX_PAYLOAD_BYTES + 1)]) + b"\x00" * 5
    with pytest.raises(TooBigMessagePayload):
        stamp_batch(raw, 0, TIMESTAMP, 0, 0)
    headers = encode_messages(_messages_with_header_bytes(MAX_HEADERS_BYTES + 1))
    with pytest.raises(TooBigHeadersPayload):
        stamp_batch(headers + b"\x00" * 5, 0, TIMESTAMP, 0, 0)
    with pytest.raises(DecodeError):  # a malformed message before the limit is met comes first
        stamp_batch(b"\x00" * 5 + raw, 0, TIMESTAMP, 0, 0)


def test_a_malformed_message_is_named_in_the_error() -> None:
    first = encode_messages([Message(b"ok", id=1)])
    broken_header = struct.pack("<I", 1) + b"k" + b"\x63" + struct.pack("<I", 1) + b"v"
    raw = first + bytes(16) + struct.pack("<I", len(broken_header)) + broken_header
    raw += struct.pack("<I", 1) + b"p"
    with pytest.raises(DecodeError) as raised:
        stamp_batch(raw, 0, TIMESTAMP, 0, 0)
    assert raised.value.detail == "message 1: header kind 99"
    with pytest.raises(DecodeError) as raised:
        stamp_batch(first + b"\x07" * 10, 0, TIMESTAMP, 0, 0)
    assert raised.value.detail == f"message 1: truncated at byte {len(first)} of {len(first) + 10}"
