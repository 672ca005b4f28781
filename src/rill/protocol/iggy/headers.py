"""Message header maps (wire reference §2.6).

A header map on the wire is a run of entries:
``[key_length u32][key][kind u8][value_length u32][value]``; a message carries
``headers_length u32`` then that many bytes of entries (0 = no headers).

Owns: HeaderValue with typed constructors and readers, encoding and strict decoding of a map.
Invariant: keys and values are 1..255 bytes, kinds are 1..15, keys are unique in a map.

A message has no key field on the Iggy wire (a partitioning key only chooses the partition);
where rill keeps a message's key -- the Spark connector's ``key`` column, the CLI's
``--key-separator`` -- it is the header ``KEY_HEADER`` (``rill.key``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Mapping

from rill.errors import InvalidHeaderKey, InvalidHeaderValue
from rill.protocol.buffer import DecodeError, Reader, Writer


KEY_HEADER = "rill.key"


class HeaderKind(IntEnum):
    RAW = 1
    STRING = 2
    BOOL = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    INT128 = 8
    UINT8 = 9
    UINT16 = 10
    UINT32 = 11
    UINT64 = 12
    UINT128 = 13
    FLOAT32 = 14
    FLOAT64 = 15


# kind -> (byte size, signed) for the integer kinds
_INT_LAYOUT = {
    HeaderKind.INT8: (1, True),
    HeaderKind.INT16: (2, True),
    HeaderKind.INT32: (4, True),
    HeaderKind.INT64: (8, True),
    HeaderKind.INT128: (16, True),
    HeaderKind.UINT8: (1, False),
    HeaderKind.UINT16: (2, False),
    HeaderKind.UINT32: (4, False),
    HeaderKind.UINT64: (8, False),
    HeaderKind.UINT128: (16, False),
}
_FLOAT_LAYOUT = {HeaderKind.FLOAT32: struct.Struct("<f"), HeaderKind.FLOAT64: struct.Struct("<d")}

MAX_HEADER_PART = 255


@dataclass(frozen=True, slots=True)
class HeaderValue:
    """One typed header value, kept as its wire bytes."""

    kind: HeaderKind
    value: bytes

    @classmethod
    def raw(cls, data: bytes) -> HeaderValue:
        return cls(HeaderKind.RAW, bytes(data))

    @classmethod
    def string(cls, text: str) -> HeaderValue:
        return cls(HeaderKind.STRING, text.encode("utf-8"))

    @classmethod
    def bool(cls, flag: bool) -> HeaderValue:
        return cls(HeaderKind.BOOL, b"\x01" if flag else b"\x00")

    @classmethod
    def int(cls, kind: HeaderKind, number: int) -> HeaderValue:
        size, signed = _INT_LAYOUT[kind]
        return cls(kind, number.to_bytes(size, "little", signed=signed))

    @classmethod
    def float(cls, kind: HeaderKind, number: float) -> HeaderValue:
        return cls(kind, _FLOAT_LAYOUT[kind].pack(number))

    def to_python(self) -> bytes | str | bool | int | float:
        """The value as the Python type its kind names."""
        if self.kind == HeaderKind.RAW:
            return self.value
        if self.kind == HeaderKind.STRING:
            return self.value.decode("utf-8")
        if self.kind == HeaderKind.BOOL:
            return self.value != b"\x00"
        if self.kind in _INT_LAYOUT:
            _, signed = _INT_LAYOUT[self.kind]
            return int.from_bytes(self.value, "little", signed=signed)
        return _FLOAT_LAYOUT[self.kind].unpack(self.value)[0]


HeaderMap = Mapping[str, HeaderValue]


def encode_header_map(headers: HeaderMap | None) -> bytes:
    """The entries of a map (without the leading headers_length)."""
    if not headers:
        return b""
    writer = Writer()
    for key, header in headers.items():
        key_bytes = key.encode("utf-8")
        if not 1 <= len(key_bytes) <= MAX_HEADER_PART:
            raise InvalidHeaderKey()
        if not 1 <= len(header.value) <= MAX_HEADER_PART:
            raise InvalidHeaderValue()
        writer.bytes32(key_bytes).u8(header.kind).bytes32(header.value)
    return writer.getvalue()


def decode_header_map(data: bytes | bytearray | memoryview) -> dict[str, HeaderValue]:
    """Parse and validate header entries; raises DecodeError on any malformed entry."""
    reader = Reader(data)
    headers: dict[str, HeaderValue] = {}
    while not reader.at_end():
        key_length = reader.u32()
        if not 1 <= key_length <= MAX_HEADER_PART:
            raise DecodeError(f"header key length {key_length}")
        key = reader.text(key_length)
        kind = reader.u8()
        if not 1 <= kind <= 15:
            raise DecodeError(f"header kind {kind}")
        value_length = reader.u32()
        if not 1 <= value_length <= MAX_HEADER_PART:
            raise DecodeError(f"header value length {value_length}")
        if key in headers:
            raise DecodeError(f"duplicate header key {key!r}")
        headers[key] = HeaderValue(HeaderKind(kind), reader.raw(value_length))
    return headers


def header_values_size(data: bytes | bytearray | memoryview) -> int:
    """Validate a header map's entries and return the sum of its value lengths (for 4017)."""
    return sum(len(value.value) for value in decode_header_map(data).values())
