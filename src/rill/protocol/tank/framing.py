"""TANK's frames (tank-wire-reference §2): ``msg_id:u8  payload_len:u32  payload``, sans-I/O.

Owns: the 5-byte header (both directions share it), building frames and splitting a byte
stream into them. ``TankFrameDecoder`` is a ``rill.protocol.framing.FrameDecoder`` with TANK's
header shape (``frame_splitter``): ``Frame.code`` is the msg_id, ``Frame.payload`` the payload.
A payload above ``max_payload_size`` (256 MiB by default, as TANK's broker) is ``BadLength``
as soon as its 5 header bytes are in, and nothing is allocated for it; the owner closes the
connection (TANK has no error answer for it).
"""

from __future__ import annotations

import struct

from rill.protocol.framing import FrameDecoder, frame_splitter

HEADER = struct.Struct("<BI")  # msg_id, payload_len
HEADER_SIZE = 5
MAX_PAYLOAD_SIZE = 256 * 1024 * 1024  # inbound frames above this close the connection
PING_FRAME = b"\x03\x00\x00\x00\x00"  # the broker's one ping, sent first on accept

_LENGTH = struct.Struct("<I")
_MSG_ID = struct.Struct("<B")


def frame(msg_id: int, payload: bytes | bytearray | memoryview = b"") -> bytes:
    return HEADER.pack(msg_id, len(payload)) + payload


def frame_header(msg_id: int, payload_length: int) -> bytes:
    """Only the header, for a payload written separately (e.g. a Consume answer's chunks)."""
    return HEADER.pack(msg_id, payload_length)


class TankFrameDecoder(FrameDecoder):
    """Both sides' decoder: TANK requests and responses have the same header."""

    __slots__ = ()
    HEADER_SIZE = HEADER_SIZE

    def __init__(self, max_payload_size: int = MAX_PAYLOAD_SIZE, **options) -> None:
        super().__init__(max_payload_size, **options)

    next_frame = frame_splitter(header_size=HEADER_SIZE, length=_LENGTH, length_offset=1,
                                length_counts=0, code=_MSG_ID, code_offset=0)
