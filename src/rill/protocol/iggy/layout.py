"""The Iggy message layouts: the one module that knows where each field of a message sits
(wire reference §3.4, §4.5), and the message key.

SEND layout, per message, back to back::

    id u128 | headers_length u32 | headers | payload_length u32 | payload

Stored layout: what POLL answers, what rill keeps on disk (record format ``iggy-v1``) and what
STAGE_MESSAGES carries, per message::

    offset u64 | state u8 | timestamp u64 | id 16 bytes | checksum u32 |
    headers_length u32 | headers | payload_length u32 | payload

Owns: the field offsets and sizes, the structs that read and write the fixed parts, and one
reference walker per layout (``walk_send``, ``walk_stored``: where each message's parts are,
no copies). The server's hot loops (``storage.formats.iggy_v1``, ``_stamp.c``, the record checks)
and the Spark reader's Arrow slices use these names; the C twin checks its copies of them at
import (``storage.formats.iggy_v1``).

The key: a message's key is its ``rill.key`` header (``KEY_HEADER``), whatever protocol or tool
wrote it: the CLI's ``--key``, the Spark connector's ``key`` column, and next Kafka's and TANK's
record keys, so a key written by one is the key read by the others.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import KEY_HEADER  # noqa: F401 - re-exported: the message key

ID_SIZE = 16
LENGTH_SIZE = 4  # headers_length and payload_length are u32

# -- SEND ----------------------------------------------------------------------------------
SEND_ID_AT = 0
SEND_HEADERS_LENGTH_AT = 16
SEND_PREFIX_SIZE = 20  # id + headers_length
SEND_OVERHEAD = 24  # the prefix and payload_length
SEND_HEAD = struct.Struct("<16sI")  # id, headers_length

# -- stored --------------------------------------------------------------------------------
STORED_OFFSET_AT = 0
STORED_STATE_AT = 8
STORED_TIMESTAMP_AT = 9
STORED_ID_AT = 17
STORED_CHECKSUM_AT = 33
STORED_HEADERS_LENGTH_AT = 37
STORED_FIXED_SIZE = 41  # offset .. headers_length
STORED_OVERHEAD = 45  # the fixed part and payload_length
STORED_PREFIX = struct.Struct("<QBQ16sII")  # offset, state, timestamp, id, checksum, h. length
STORED_FIXED = struct.Struct("<QBQ16xII")  # the same, the id skipped
STORED_HEAD = struct.Struct("<QBQ")  # offset, state, timestamp: what a commit restamps
STATE_AVAILABLE = 1

_U32 = struct.Struct("<I")


class Parts(NamedTuple):
    """Where one message sits in a region: [start, end), its headers and its payload."""

    start: int
    end: int
    headers_at: int
    headers_length: int
    payload_at: int
    payload_length: int


def walk_send(region: bytes | bytearray | memoryview) -> Iterator[Parts]:
    """Each message of a SEND region; DecodeError where it is truncated."""
    return _walk(memoryview(region), SEND_HEADERS_LENGTH_AT, SEND_PREFIX_SIZE, "send")


def walk_stored(region: bytes | bytearray | memoryview) -> Iterator[Parts]:
    """Each record of a stored region; DecodeError where it is truncated."""
    return _walk(memoryview(region), STORED_HEADERS_LENGTH_AT, STORED_FIXED_SIZE, "stored")


def _walk(view: memoryview, headers_length_at: int, fixed: int, name: str) -> Iterator[Parts]:
    position, end = 0, len(view)
    while position < end:
        if position + fixed + LENGTH_SIZE > end:
            raise DecodeError(f"{name} message truncated")
        (headers_length,) = _U32.unpack_from(view, position + headers_length_at)
        headers_at = position + fixed
        length_at = headers_at + headers_length
        if length_at + LENGTH_SIZE > end:
            raise DecodeError(f"{name} message truncated")
        (payload_length,) = _U32.unpack_from(view, length_at)
        payload_at = length_at + LENGTH_SIZE
        stop = payload_at + payload_length
        if stop > end:
            raise DecodeError(f"{name} message payload truncated")
        yield Parts(position, stop, headers_at, headers_length, payload_at, payload_length)
        position = stop
