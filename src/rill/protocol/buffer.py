"""Reader and Writer over bytes for the little-endian wire encodings (wire reference §2).

Owns: the primitive encodings u8/u32/u64/u128/f32, str8 (u8 length + UTF-8) and str32
(u32 length + bytes). Invariant: a Reader never reads past its end; any short or malformed
input raises ``DecodeError``, never IndexError or struct.error.
"""

from __future__ import annotations

import struct

from rill.errors import InvalidCommand

_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")
_U128_PARTS = struct.Struct("<QQ")

U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


class DecodeError(InvalidCommand):
    """A payload that does not parse. On the wire it is always status 3 (invalid_command)."""

    def __init__(self, detail: str) -> None:
        super().__init__(reason=f"Invalid command: {detail}")
        self.detail = detail


class Reader:
    """Sequential little-endian reader over a bytes-like object (no copies until asked)."""

    __slots__ = ("_view", "_pos", "_end")

    def __init__(self, data: bytes | bytearray | memoryview, start: int = 0, end: int | None = None):
        self._view = memoryview(data)
        if self._view.ndim != 1 or self._view.itemsize != 1:
            self._view = self._view.cast("B")
        self._pos = start
        self._end = len(self._view) if end is None else end

    @property
    def position(self) -> int:
        return self._pos

    @property
    def remaining(self) -> int:
        return self._end - self._pos

    def at_end(self) -> bool:
        return self._pos >= self._end

    def expect_end(self) -> None:
        if self._pos != self._end:
            raise DecodeError(f"{self._end - self._pos} unexpected trailing bytes")

    def _take(self, size: int) -> int:
        pos = self._pos
        if size < 0 or pos + size > self._end:
            raise DecodeError(f"needed {size} bytes at {pos}, have {self._end - pos}")
        self._pos = pos + size
        return pos

    def u8(self) -> int:
        return _U8.unpack_from(self._view, self._take(1))[0]

    def u32(self) -> int:
        return _U32.unpack_from(self._view, self._take(4))[0]

    def u64(self) -> int:
        return _U64.unpack_from(self._view, self._take(8))[0]

    def u128(self) -> int:
        low, high = _U128_PARTS.unpack_from(self._view, self._take(16))
        return low | (high << 64)

    def f32(self) -> float:
        return _F32.unpack_from(self._view, self._take(4))[0]

    def bool8(self) -> bool:
        """A byte where 1 is true and anything else false (the server's lenient reading)."""
        return self.u8() == 1

    def strict_bool8(self) -> bool:
        """A byte that must be exactly 0 or 1."""
        value = self.u8()
        if value > 1:
            raise DecodeError(f"expected a 0/1 flag, got {value}")
        return value == 1

    def raw(self, size: int) -> bytes:
        pos = self._take(size)
        return bytes(self._view[pos : pos + size])

    def view(self, size: int) -> memoryview:
        """A zero-copy view of the next ``size`` bytes."""
        pos = self._take(size)
        return self._view[pos : pos + size]

    def rest(self) -> memoryview:
        return self.view(self._end - self._pos)

    def text(self, size: int) -> str:
        data = self.view(size)
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as error:
            raise DecodeError(f"invalid UTF-8: {error.reason}") from None

    def str8(self) -> str:
        return self.text(self.u8())

    def str32(self) -> str:
        return self.text(self.u32())

    def bytes8(self) -> bytes:
        return self.raw(self.u8())

    def bytes32(self) -> bytes:
        return self.raw(self.u32())


class Writer:
    """Appends little-endian encodings to a growing bytearray."""

    __slots__ = ("buffer",)

    def __init__(self, size_hint: int = 0) -> None:
        self.buffer = bytearray()

    def u8(self, value: int) -> Writer:
        self.buffer += _U8.pack(value)
        return self

    def u32(self, value: int) -> Writer:
        self.buffer += _U32.pack(value)
        return self

    def u64(self, value: int) -> Writer:
        self.buffer += _U64.pack(value)
        return self

    def u128(self, value: int) -> Writer:
        self.buffer += value.to_bytes(16, "little")
        return self

    def f32(self, value: float) -> Writer:
        self.buffer += _F32.pack(value)
        return self

    def bool8(self, value: bool) -> Writer:
        return self.u8(1 if value else 0)

    def raw(self, data: bytes | bytearray | memoryview) -> Writer:
        self.buffer += data
        return self

    def str8(self, value: str) -> Writer:
        return self.bytes8(value.encode("utf-8"))

    def str32(self, value: str) -> Writer:
        return self.bytes32(value.encode("utf-8"))

    def bytes8(self, data: bytes) -> Writer:
        if len(data) > 255:
            raise ValueError(f"{len(data)} bytes do not fit a u8 length")
        self.buffer += _U8.pack(len(data))
        self.buffer += data
        return self

    def bytes32(self, data: bytes) -> Writer:
        self.buffer += _U32.pack(len(data))
        self.buffer += data
        return self

    def getvalue(self) -> bytes:
        return bytes(self.buffer)
