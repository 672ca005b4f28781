"""Records in the stored (POLL) layout built by a client, for staged appends (docs/extensions.md).

Stored layout, per message (wire reference §4.5; also rill's on-disk record)::

    offset u64 | state u8 | timestamp u64 | id 16 bytes | checksum u32 |
    headers_length u32 | headers | payload_length u32 | payload

STAGE_MESSAGES carries messages in this layout, with a positions column (where each record
starts), so that the server only checks them (structure, checksums) instead of building them:
the writer, not the server, pays for the per-message work, and the many writers of a Spark
job do it in parallel. Offset, state and timestamp are placeholders the server overwrites at
commit; ids are final (a writer sends UUIDv7s for messages without an id).

Owns: ``crc32`` (ISA-L's when installed: same function as zlib's, faster), ``uuid7_block`` and
``encode_stored_records`` (the SDK's builder; the Spark connector builds the same bytes with
Arrow). Sans-I/O: the time comes in as an argument; randomness comes from ``os.urandom``.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from typing import Iterable

from rill.protocol.iggy.headers import encode_header_map
from rill.protocol.iggy.layout import STORED_OVERHEAD, STORED_PREFIX  # noqa: F401 (re-exported)
from rill.protocol.iggy.messages import Message

try:  # ISA-L's CRC-32 is the same function as zlib's, 3x faster on 1 KB payloads; optional
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - depends on the environment
    from zlib import crc32

_U32 = struct.Struct("<I")
_VERSION_7 = bytes((byte & 0x0F) | 0x70 for byte in range(256))
_VARIANT_RFC = bytes((byte & 0x3F) | 0x80 for byte in range(256))
_ZERO_ID = bytes(16)


def uuid7_block(count: int, unix_ms: int) -> bytes:
    """``count`` UUIDv7s back to back (16 bytes each), from one ``os.urandom`` call."""
    random_bytes = os.urandom(10 * count)
    block = bytearray(16 * count)
    milliseconds = (unix_ms & 0xFFFF_FFFF_FFFF).to_bytes(6, "big")
    for byte_index in range(6):  # column-wise fills: C speed, no per-UUID objects
        block[byte_index::16] = milliseconds[byte_index : byte_index + 1] * count
    for byte_index in range(10):
        block[6 + byte_index :: 16] = random_bytes[byte_index::10]
    block[6::16] = block[6::16].translate(_VERSION_7)
    block[8::16] = block[8::16].translate(_VARIANT_RFC)
    return bytes(block)


def encode_stored_records(messages: Iterable[Message | bytes], unix_ms: int
                          ) -> tuple[bytes, bytes]:
    """``(positions, records)``: little-endian u32 record starts and the records themselves.
    Plain bytes are payloads without headers; an id of 0 gets a UUIDv7 for ``unix_ms``."""
    items = [Message(m) if isinstance(m, (bytes, bytearray, memoryview)) else m for m in messages]
    uuids = uuid7_block(len(items), unix_ms)
    out = bytearray()
    positions = array("I")
    for index, message in enumerate(items):
        payload = bytes(message.payload)
        headers = encode_header_map(message.headers)
        message_id = (message.id.to_bytes(16, "little") if message.id
                      else uuids[16 * index : 16 * index + 16])
        positions.append(len(out))
        out += STORED_PREFIX.pack(0, 1, 0, message_id, crc32(payload), len(headers))
        out += headers
        out += _U32.pack(len(payload))
        out += payload
    if sys.byteorder != "little":  # pragma: no cover - the wire is little-endian
        positions.byteswap()
    return positions.tobytes(), bytes(out)
