"""Messages as the SDK builds them for SEND and reads them back from POLL (wire §3.4, §4.5).

SEND wire layout, per message, back to back:
    id u128 | headers_length u32 | headers | payload_length u32 | payload
POLL wire layout (also rill's on-disk record layout), per message:
    offset u64 | state u8 | timestamp u64 | id u128 | checksum u32 |
    headers_length u32 | headers | payload_length u32 | payload

Owns: building a SEND region from Message values and walking a POLL region into PolledMessage
values. These are SDK conveniences: the server never builds per-message objects on its hot
paths (see ``rill.server.storage.formats.iggy_v1``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import HeaderValue, decode_header_map, encode_header_map
from rill.protocol.iggy.layout import SEND_PREFIX_SIZE, STORED_OVERHEAD, STORED_PREFIX

# the layouts' sizes and fixed part, as the SDK names them (``rill.protocol.iggy.layout`` owns them)
SEND_MESSAGE_PREFIX = SEND_PREFIX_SIZE  # id + headers_length
POLLED_MESSAGE_OVERHEAD = STORED_OVERHEAD  # 45 bytes around headers and payload
POLLED_FIXED = STORED_PREFIX  # offset, state, timestamp, id, checksum, headers_length
_U32 = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class Message:
    """A message to send. ``id`` 0 asks the server for a UUIDv7."""

    payload: bytes
    id: int = 0
    headers: dict[str, HeaderValue] | None = None

    def encode_into(self, out: bytearray) -> None:
        header_bytes = encode_header_map(self.headers)
        out += self.id.to_bytes(16, "little")
        out += _U32.pack(len(header_bytes))
        out += header_bytes
        out += _U32.pack(len(self.payload))
        out += self.payload


def encode_messages(messages: Iterable[Message | bytes]) -> bytes:
    """The SEND region for a batch; plain bytes are payloads with id 0 and no headers."""
    out = bytearray()
    for message in messages:
        if isinstance(message, (bytes, bytearray, memoryview)):
            out += b"\x00" * 16
            out += b"\x00\x00\x00\x00"
            out += _U32.pack(len(message))
            out += message
        else:
            message.encode_into(out)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class PolledMessage:
    offset: int
    state: int
    timestamp: int
    id: int
    checksum: int
    payload: bytes
    headers: dict[str, HeaderValue] = field(default_factory=dict)

    @property
    def id_bytes(self) -> bytes:
        """The 16 id bytes as they travel on the wire (a UUID in canonical order for v7 ids)."""
        return self.id.to_bytes(16, "little")


def iter_polled_messages(region: bytes | bytearray | memoryview, count: int) -> Iterator[PolledMessage]:
    """Walk ``count`` message records of a POLL region; raises DecodeError if it is malformed."""
    view = memoryview(region)
    end = len(view)
    pos = 0
    fixed = POLLED_FIXED.size
    for _ in range(count):
        if pos + fixed > end:
            raise DecodeError("polled message header truncated")
        offset, state, timestamp, raw_id, checksum, headers_length = POLLED_FIXED.unpack_from(view, pos)
        pos += fixed
        if pos + headers_length + 4 > end:
            raise DecodeError("polled message headers truncated")
        headers = decode_header_map(view[pos : pos + headers_length]) if headers_length else {}
        pos += headers_length
        (payload_length,) = _U32.unpack_from(view, pos)
        pos += 4
        if pos + payload_length > end:
            raise DecodeError("polled message payload truncated")
        payload = bytes(view[pos : pos + payload_length])
        pos += payload_length
        yield PolledMessage(
            offset, state, timestamp, int.from_bytes(raw_id, "little"), checksum, payload, headers
        )
    if pos != end:
        raise DecodeError(f"{end - pos} bytes after {count} polled messages")
