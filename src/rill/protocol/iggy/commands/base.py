"""The command base class and the field codecs commands are declared with.

A command is a frozen dataclass whose ``LAYOUT`` lists one field codec per dataclass field, in
wire order; ``encode`` and ``read`` walk that layout. Commands with optional parts or a
free-form tail override ``encode``/``read``. Each command also knows how to read its OK
response (``decode_response``) so that the SDK needs no second table.

Trailing bytes (the one tolerance rule, wire §3 "Min" column): Iggy server 0.4.95 parses most
requests by position after a minimum-length check and never looks at what follows the last
field, while a few (the empty-payload commands, GET_CLIENT's "exactly 4") refuse any extra byte.
A command class says which it is with ``TRAILING_BYTES_IGNORED``; ``decode`` (and so
``codes.decode_command``, which the server uses) applies it. docs/wire-notes.md lists each
command's choice and the 0.4.95 source it was read from; tests/protocol/iggy/test_tolerance.py
pins the table.

Invariant: ``decode(payload)`` consumes the whole payload or raises DecodeError, except that a
command with ``TRAILING_BYTES_IGNORED`` ignores the bytes after its last field (never a
partial field: a field the payload cuts short is still a DecodeError).
"""

from __future__ import annotations

from dataclasses import fields
from enum import IntEnum
from typing import Any, Callable, ClassVar, Generic, TypeVar

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.iggy.framing import encode_request
from rill.protocol.iggy.primitives import (
    Consumer,
    Identifier,
    Partitioning,
    PollingStrategy,
    decode_enum,
)

T = TypeVar("T")


class FieldCodec(Generic[T]):
    """Reads and writes one field."""

    def __init__(self, name: str, read: Callable[[Reader], T], write: Callable[[Writer, T], Any]):
        self.name = name
        self.read = read
        self.write = write

    def __repr__(self) -> str:
        return self.name


U8: FieldCodec[int] = FieldCodec("u8", Reader.u8, Writer.u8)
U32: FieldCodec[int] = FieldCodec("u32", Reader.u32, Writer.u32)
U64: FieldCodec[int] = FieldCodec("u64", Reader.u64, Writer.u64)
U128: FieldCodec[int] = FieldCodec("u128", Reader.u128, Writer.u128)
BOOL: FieldCodec[bool] = FieldCodec("bool8", Reader.bool8, Writer.bool8)
STRICT_BOOL: FieldCodec[bool] = FieldCodec("bool8 (0/1)", Reader.strict_bool8, Writer.bool8)
STR8: FieldCodec[str] = FieldCodec("str8", Reader.str8, Writer.str8)
STR32: FieldCodec[str] = FieldCodec("str32", Reader.str32, Writer.str32)
IDENT: FieldCodec[Identifier] = FieldCodec(
    "ident", Identifier.decode, lambda writer, value: value.encode(writer)
)
CONSUMER: FieldCodec[Consumer] = FieldCodec(
    "consumer", Consumer.decode, lambda writer, value: value.encode(writer)
)
PARTITIONING: FieldCodec[Partitioning] = FieldCodec(
    "partitioning", Partitioning.decode, lambda writer, value: value.encode(writer)
)
STRATEGY: FieldCodec[PollingStrategy] = FieldCodec(
    "polling strategy", PollingStrategy.decode, lambda writer, value: value.encode(writer)
)


def enum8(enum_type: type[IntEnum]) -> FieldCodec[IntEnum]:
    """A u8 that must be a member of ``enum_type`` (else status 3)."""
    return FieldCodec(
        f"u8 {enum_type.__name__}",
        lambda reader: decode_enum(enum_type, reader.u8()),
        lambda writer, value: writer.u8(int(value)),
    )


class Command:
    """Base of every request. Subclasses are frozen dataclasses with CODE, NAME and LAYOUT."""

    CODE: ClassVar[int]
    NAME: ClassVar[str]  # the one verb name: "create_stream", used by handler, core, SDK
    LAYOUT: ClassVar[tuple[FieldCodec[Any], ...]] = ()
    # True where Iggy 0.4.95 ignores bytes after the last field (see the module docstring);
    # False (the default, and every rill extension) refuses them with status 3.
    TRAILING_BYTES_IGNORED: ClassVar[bool] = False

    def encode(self) -> bytes:
        writer = Writer()
        for field, codec in zip(fields(self), self.LAYOUT):  # type: ignore[arg-type]
            codec.write(writer, getattr(self, field.name))
        return writer.getvalue()

    @classmethod
    def read(cls, reader: Reader) -> Command:
        """Read the command's fields from ``reader``, leaving whatever follows them unread."""
        values = [codec.read(reader) for codec in cls.LAYOUT]
        try:
            return cls(*values)
        except ValueError as error:  # a value the dataclass refuses (e.g. bad identifier)
            raise DecodeError(str(error)) from None

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> Command:
        """The command in ``payload``; bytes after its fields are refused unless the command
        has ``TRAILING_BYTES_IGNORED`` (as Iggy 0.4.95 does for it)."""
        reader = Reader(payload)
        command = cls.read(reader)
        if not cls.TRAILING_BYTES_IGNORED:
            reader.expect_end()
        return command

    def to_frame(self) -> bytes:
        return encode_request(self.CODE, self.encode())

    @classmethod
    def decode_response(cls, payload: memoryview | bytes) -> Any:
        """Read the OK response payload. Default: the command answers with an empty OK."""
        return None


class EmptyCommand(Command):
    """A command with no payload; any payload byte is a decode error (0.4.95 checks
    ``bytes.is_empty()`` for every one of them)."""

    def encode(self) -> bytes:
        return b""

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> Command:
        if len(payload):
            raise DecodeError(f"{cls.NAME} takes no payload, got {len(payload)} bytes")
        return cls()


def optional_response(decoder: Callable[[Reader], T]) -> Callable[[memoryview | bytes], T | None]:
    """For get-single commands: an empty OK means 'not found' and reads as None."""

    def read(payload: memoryview | bytes) -> T | None:
        if not len(payload):
            return None
        reader = Reader(payload)
        value = decoder(reader)
        reader.expect_end()
        return value

    return read


def list_response(decoder: Callable[[Reader], T]) -> Callable[[memoryview | bytes], list[T]]:
    """Lists have no count prefix: read records until the payload is consumed (wire §4)."""

    def read(payload: memoryview | bytes) -> list[T]:
        reader = Reader(payload)
        items = []
        while not reader.at_end():
            items.append(decoder(reader))
        return items

    return read


def single_response(decoder: Callable[[Reader], T]) -> Callable[[memoryview | bytes], T]:
    def read(payload: memoryview | bytes) -> T:
        reader = Reader(payload)
        value = decoder(reader)
        reader.expect_end()
        return value

    return read
