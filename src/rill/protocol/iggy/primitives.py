"""Iggy's wire values: Identifier, Consumer, Partitioning, PollingStrategy and its small enums.

Owns the encodings of wire reference §2.1-§2.4. Each type has ``encode(writer)`` and a
``decode(reader)`` classmethod; invariants are checked at decode time (a bad kind byte or a
bad length raises DecodeError) and at construction time (ValueError) for values built in code.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from rill.protocol.buffer import DecodeError, Reader, Writer

_U32 = struct.Struct("<I")


class IdKind(IntEnum):
    NUMERIC = 1
    STRING = 2


@dataclass(frozen=True, slots=True)
class Identifier:
    """A stream/topic/group/user reference: a u32 id or a name (wire §2.1)."""

    value: int | str

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, str)):
            raise ValueError(f"identifier must be int or str, not {type(self.value).__name__}")
        if isinstance(self.value, int):
            if not 0 <= self.value <= 0xFFFFFFFF:
                raise ValueError(f"numeric identifier {self.value} is outside u32")
        elif not 1 <= len(self.value.encode("utf-8")) <= 255:
            raise ValueError("string identifier must be 1..255 UTF-8 bytes")

    @classmethod
    def of(cls, value: int | str | Identifier) -> Identifier:
        return value if isinstance(value, Identifier) else cls(value)

    @property
    def is_numeric(self) -> bool:
        return isinstance(self.value, int)

    def encode(self, writer: Writer) -> None:
        if isinstance(self.value, int):
            writer.u8(IdKind.NUMERIC).u8(4).u32(self.value)
        else:
            data = self.value.encode("utf-8")
            writer.u8(IdKind.STRING).u8(len(data)).raw(data)

    @classmethod
    def decode(cls, reader: Reader) -> Identifier:
        kind = reader.u8()
        length = reader.u8()
        if length == 0:
            raise DecodeError("identifier length 0")
        if kind == IdKind.NUMERIC:
            if length != 4:
                raise DecodeError(f"numeric identifier length {length} != 4")
            return cls(reader.u32())
        if kind == IdKind.STRING:
            return cls(reader.text(length))
        raise DecodeError(f"identifier kind {kind}")

    def __str__(self) -> str:
        return str(self.value)


# Identifiers of small numeric ids, shared (they are immutable): the SEND/POLL decoders' fast
# path makes one per identifier of every request, and nearly every id is small.
_SMALL_IDENTIFIERS = tuple(Identifier(value) for value in range(256))


def numeric_identifier(value: int) -> Identifier:
    """``Identifier(value)`` for a u32 read off the wire."""
    return _SMALL_IDENTIFIERS[value] if value < 256 else Identifier(value)


class ConsumerKind(IntEnum):
    CONSUMER = 1
    CONSUMER_GROUP = 2


@dataclass(frozen=True, slots=True)
class Consumer:
    """Who polls: a regular consumer or a consumer group, named by an Identifier (wire §2.2)."""

    kind: ConsumerKind
    id: Identifier

    @classmethod
    def regular(cls, consumer_id: int | str | Identifier) -> Consumer:
        return cls(ConsumerKind.CONSUMER, Identifier.of(consumer_id))

    @classmethod
    def group(cls, group_id: int | str | Identifier) -> Consumer:
        return cls(ConsumerKind.CONSUMER_GROUP, Identifier.of(group_id))

    @property
    def is_group(self) -> bool:
        return self.kind == ConsumerKind.CONSUMER_GROUP

    def encode(self, writer: Writer) -> None:
        writer.u8(self.kind)
        self.id.encode(writer)

    @classmethod
    def decode(cls, reader: Reader) -> Consumer:
        kind = reader.u8()
        if kind not in (1, 2):
            raise DecodeError(f"consumer kind {kind}")
        return cls(ConsumerKind(kind), Identifier.decode(reader))


class PartitioningKind(IntEnum):
    BALANCED = 1
    PARTITION_ID = 2
    MESSAGES_KEY = 3


@dataclass(frozen=True, slots=True)
class Partitioning:
    """Where a SEND goes: balanced, an explicit partition id, or a key (wire §2.3).

    ``value`` is kept as raw bytes: the server validates it (4028 / 82), not the decoder.
    """

    kind: PartitioningKind
    value: bytes = b""

    @classmethod
    def balanced(cls) -> Partitioning:
        return cls(PartitioningKind.BALANCED, b"")

    @classmethod
    def partition_id(cls, partition_id: int) -> Partitioning:
        return cls(PartitioningKind.PARTITION_ID, _U32.pack(partition_id))

    @classmethod
    def messages_key(cls, key: bytes | str | int) -> Partitioning:
        if isinstance(key, str):
            key = key.encode("utf-8")
        elif isinstance(key, int):
            key = key.to_bytes(8, "little")
        return cls(PartitioningKind.MESSAGES_KEY, bytes(key))

    def encode(self, writer: Writer) -> None:
        writer.u8(self.kind).u8(len(self.value)).raw(self.value)

    @classmethod
    def decode(cls, reader: Reader) -> Partitioning:
        kind = reader.u8()
        if kind not in (1, 2, 3):
            raise DecodeError(f"partitioning kind {kind}")
        return cls(PartitioningKind(kind), reader.bytes8())


class PollingKind(IntEnum):
    OFFSET = 1
    TIMESTAMP = 2
    FIRST = 3
    LAST = 4
    NEXT = 5


@dataclass(frozen=True, slots=True)
class PollingStrategy:
    """Where a POLL starts (wire §2.4); ``value`` is an offset or a µs timestamp."""

    kind: PollingKind
    value: int = 0

    @classmethod
    def offset(cls, offset: int) -> PollingStrategy:
        return cls(PollingKind.OFFSET, offset)

    @classmethod
    def timestamp(cls, timestamp_us: int) -> PollingStrategy:
        return cls(PollingKind.TIMESTAMP, timestamp_us)

    @classmethod
    def first(cls) -> PollingStrategy:
        return cls(PollingKind.FIRST, 0)

    @classmethod
    def last(cls) -> PollingStrategy:
        return cls(PollingKind.LAST, 0)

    @classmethod
    def next(cls) -> PollingStrategy:
        return cls(PollingKind.NEXT, 0)

    def encode(self, writer: Writer) -> None:
        writer.u8(self.kind).u64(self.value)

    @classmethod
    def decode(cls, reader: Reader) -> PollingStrategy:
        kind = reader.u8()
        if not 1 <= kind <= 5:
            raise DecodeError(f"polling kind {kind}")
        return cls(PollingKind(kind), reader.u64())


class MessageState(IntEnum):
    AVAILABLE = 1
    UNAVAILABLE = 10
    POISONED = 20
    MARKED_FOR_DELETION = 30


class Transport(IntEnum):
    TCP = 1
    QUIC = 2
    HTTP = 3  # rill extension: HTTP sessions never appear on the binary wire


def decode_enum(enum_type: type[IntEnum], value: int) -> IntEnum:
    """The enum member for a wire byte, or DecodeError (status 3) for an unknown value."""
    try:
        return enum_type(value)
    except ValueError:
        raise DecodeError(f"{enum_type.__name__} {value}") from None
