"""Frames of the binary transports (wire reference §1), TCP and QUIC alike.

Request:  [length u32 = 4 + payload length][code u32][payload]
Response: [status u32][length u32 = payload length][payload]

Owns: building frames and incrementally splitting a byte stream into frames, without I/O.
Invariant: a ``length`` below 4 or above the configured maximum is reported, never trusted.
"""

from __future__ import annotations

import struct

REQUEST_HEADER = struct.Struct("<II")  # length, code
RESPONSE_HEADER = struct.Struct("<II")  # status, length
REQUEST_HEADER_SIZE = 8
RESPONSE_HEADER_SIZE = 8
LENGTH_PREFIX_SIZE = 4
CODE_SIZE = 4

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024


def encode_request(code: int, payload: bytes | bytearray | memoryview = b"") -> bytes:
    return REQUEST_HEADER.pack(len(payload) + CODE_SIZE, code) + payload


def encode_response(status: int, payload: bytes | bytearray | memoryview = b"") -> bytes:
    return RESPONSE_HEADER.pack(status, len(payload)) + payload


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
