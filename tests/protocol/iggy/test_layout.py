"""The Iggy message layouts (``rill.protocol.iggy.layout``): the named offsets agree with the
structs and with what the SDK writes, and the reference walkers find every part."""

from __future__ import annotations

import pytest

from rill.protocol.iggy import layout
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import HeaderValue, encode_header_map
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.iggy.stored import encode_stored_records

MESSAGES = [Message(b"first", id=7), Message(b"", id=8, headers={"rill.key": HeaderValue.raw(b"k")}),
            Message(b"third" * 10)]


def test_the_offsets_agree_with_the_structs():
    assert layout.SEND_HEAD.size == layout.SEND_PREFIX_SIZE == layout.SEND_HEADERS_LENGTH_AT + 4
    assert layout.SEND_OVERHEAD == layout.SEND_PREFIX_SIZE + layout.LENGTH_SIZE
    assert layout.STORED_PREFIX.size == layout.STORED_FIXED.size == layout.STORED_FIXED_SIZE
    assert layout.STORED_OVERHEAD == layout.STORED_FIXED_SIZE + layout.LENGTH_SIZE
    assert layout.STORED_HEAD.size == layout.STORED_ID_AT
    assert layout.STORED_ID_AT + layout.ID_SIZE == layout.STORED_CHECKSUM_AT
    assert layout.STORED_CHECKSUM_AT + 4 == layout.STORED_HEADERS_LENGTH_AT


def test_walk_send_finds_each_message_of_an_sdk_region():
    region = encode_messages(MESSAGES)
    parts = list(layout.walk_send(region))
    assert [bytes(region[p.payload_at : p.payload_at + p.payload_length]) for p in parts] == [
        m.payload for m in MESSAGES]
    assert [int.from_bytes(region[p.start : p.start + 16], "little") for p in parts] == [7, 8, 0]
    headers = parts[1]
    assert region[headers.headers_at : headers.headers_at + headers.headers_length] == \
        encode_header_map(MESSAGES[1].headers)
    assert parts[-1].end == len(region) and parts[1].start == parts[0].end


def test_walk_stored_finds_each_record_and_the_fields_sit_where_named():
    positions, records = encode_stored_records(MESSAGES, 1_700_000_000_000)
    parts = list(layout.walk_stored(records))
    starts = [int.from_bytes(positions[i : i + 4], "little") for i in range(0, len(positions), 4)]
    assert [p.start for p in parts] == starts
    second = parts[1]
    assert records[second.start + layout.STORED_ID_AT] == 8  # little-endian id 8
    assert records[second.start + layout.STORED_STATE_AT] == layout.STATE_AVAILABLE
    assert [bytes(records[p.payload_at : p.payload_at + p.payload_length]) for p in parts] == [
        m.payload for m in MESSAGES]


@pytest.mark.parametrize("cut", [1, 20, 23, 30])
def test_a_truncated_region_is_a_decode_error(cut):
    region = encode_messages([Message(b"payload", headers={"a": HeaderValue.raw(b"b")})])
    with pytest.raises(DecodeError, match="truncated"):
        list(layout.walk_send(region[:-cut] if cut < len(region) else region[:1]))
