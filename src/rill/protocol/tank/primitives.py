"""TANK's primitive encodings (tank-wire-reference §1), sans-I/O.

Owns: little-endian fixed-width integers, ``str8``, the 32-bit LEB128 ``varint`` (at most 5
bytes; a longer one, or a 5th byte above 0x0f, is ``BadVarint``) and ``Reader``, the cursor every
TANK decoder walks a payload with. Names travel as ``str8``: they are decoded as UTF-8 with
``surrogateescape`` so that any byte string round-trips exactly (TANK compares names byte for
byte and checks no character set).
"""

from __future__ import annotations

import struct

from rill.protocol.tank.errors import BadVarint, LengthMismatch, Truncated

U8 = struct.Struct("<B")
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
MAX_VARINT_BYTES = 5
MAX_U32 = 0xFFFF_FFFF
MAX_U64 = 0xFFFF_FFFF_FFFF_FFFF


def encode_varint(value: int) -> bytes:
    """The shortest form of an unsigned 32-bit ``value``."""
    if not 0 <= value <= MAX_U32:
        raise ValueError(f"varint value {value} is outside 0..2^32-1")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes | bytearray | memoryview, offset: int = 0,
                  end: int | None = None) -> tuple[int, int]:
    """(value, offset after it) of the varint at ``offset`` (bytes up to ``end`` are the input)."""
    if end is None:
        end = len(data)
    value = 0
    shift = 0
    for index in range(MAX_VARINT_BYTES):
        if offset + index >= end:
            raise Truncated("varint runs past the end of the input")
        byte = data[offset + index]
        if index == MAX_VARINT_BYTES - 1:
            if byte > 0x0F:
                raise BadVarint("varint longer than 32 bits (5th byte above 0x0f)")
            return value | (byte << shift), offset + index + 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset + index + 1
        shift += 7
    raise AssertionError("unreachable")  # pragma: no cover


def encode_str8(value: str | bytes) -> bytes:
    raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
    if len(raw) > 255:
        raise ValueError(f"str8 of {len(raw)} bytes (at most 255)")
    return bytes((len(raw),)) + raw


def name_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)


class Reader:
    """A cursor over one payload; every read checks its bounds (``Truncated``)."""

    __slots__ = ("data", "offset", "end")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0,
                 end: int | None = None) -> None:
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.offset = offset
        self.end = len(data) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.offset

    def _take(self, size: int) -> int:
        start = self.offset
        if start + size > self.end:
            raise Truncated(f"{size} bytes wanted at {start}, {self.end - start} left")
        self.offset = start + size
        return start

    def u8(self) -> int:
        return self.data[self._take(1)]

    def u16(self) -> int:
        return U16.unpack_from(self.data, self._take(2))[0]

    def u32(self) -> int:
        return U32.unpack_from(self.data, self._take(4))[0]

    def u64(self) -> int:
        return U64.unpack_from(self.data, self._take(8))[0]

    def varint(self) -> int:
        value, self.offset = decode_varint(self.data, self.offset, self.end)
        return value

    def raw(self, size: int) -> bytes:
        start = self._take(size)
        return bytes(self.data[start : start + size])

    def view(self, size: int) -> memoryview:
        start = self._take(size)
        return memoryview(self.data)[start : start + size]

    def str8(self) -> str:
        size = self.u8()
        return self.raw(size).decode("utf-8", "surrogateescape")

    def endpoint(self) -> tuple[str, int]:
        """addr4 (network order) + port:u16 LE, as ("a.b.c.d", port)."""
        start = self._take(4)
        address = ".".join(str(b) for b in self.data[start : start + 4])
        return address, self.u16()

    def finish(self) -> None:
        if self.offset != self.end:
            raise LengthMismatch(f"{self.end - self.offset} bytes left over after the last field")


def encode_endpoint(endpoint: tuple[str, int]) -> bytes:
    address, port = endpoint
    return bytes(int(part) for part in address.split(".")) + U16.pack(port)
