"""Iggy's frames (wire reference §1), TCP and QUIC alike.

Request:  [length u32 = 4 + payload length][code u32][payload]
Response: [status u32][length u32 = payload length][payload]

Owns: the two header layouts (nowhere else declares them), building frames, and the two
decoders: ``RequestFrameDecoder`` (the server's side) and ``ResponseFrameDecoder`` (the SDK's),
each ``rill.protocol.framing.FrameDecoder`` given Iggy's header shape. A request length below
its 4 code bytes is reported (``BadLength``) as soon as its 4 bytes are in; what to answer
(status 3 or 4029) is the owner's choice.
"""

from __future__ import annotations

import struct

from rill.protocol.framing import FrameDecoder, frame_splitter

_LENGTH = struct.Struct("<I")
REQUEST_HEADER = struct.Struct("<II")  # length, code
RESPONSE_HEADER = struct.Struct("<II")  # status, length
REQUEST_HEADER_SIZE = 8
RESPONSE_HEADER_SIZE = 8
HEADER_SIZE = 8  # both layouts
LENGTH_PREFIX_SIZE = 4
CODE_SIZE = 4


def encode_request(code: int, payload: bytes | bytearray | memoryview = b"") -> bytes:
    return REQUEST_HEADER.pack(len(payload) + CODE_SIZE, code) + payload


def encode_response(status: int, payload: bytes | bytearray | memoryview = b"") -> bytes:
    return RESPONSE_HEADER.pack(status, len(payload)) + payload


def request_header(code: int, payload_length: int) -> bytes:
    """Only the 8-byte header, for requests whose payload is written separately."""
    return REQUEST_HEADER.pack(payload_length + CODE_SIZE, code)


def response_header(status: int, payload_length: int) -> bytes:
    """Only the 8-byte header, for responses whose payload is written separately."""
    return RESPONSE_HEADER.pack(status, payload_length)


def error_response(status: int) -> bytes:
    """Errors always carry length 0 and no payload."""
    return RESPONSE_HEADER.pack(status, 0)


def decode_request_header(header: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(payload length, code) from the 8 header bytes. Raises ValueError if length < 4."""
    length, code = REQUEST_HEADER.unpack_from(header)
    if length < CODE_SIZE:
        raise ValueError(f"request length {length} is below the 4-byte code")
    return length - CODE_SIZE, code


def decode_response_header(header: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(status, payload length) from the 8 header bytes."""
    return RESPONSE_HEADER.unpack_from(header)


class RequestFrameDecoder(FrameDecoder):
    """[length u32 = 4 + payload length][code u32][payload]: a length below 4 is reported as
    soon as its 4 bytes are in."""

    __slots__ = ()
    next_frame = frame_splitter(header_size=HEADER_SIZE, length=_LENGTH, length_offset=0,
                                length_counts=CODE_SIZE, code=_LENGTH, code_offset=4)


class ResponseFrameDecoder(FrameDecoder):
    """[status u32][length u32 = payload length][payload]."""

    __slots__ = ()
    next_frame = frame_splitter(header_size=HEADER_SIZE, length=_LENGTH, length_offset=4,
                                length_counts=0, code=_LENGTH, code_offset=0)
