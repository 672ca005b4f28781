"""Base class for response records declared with a field LAYOUT, like commands."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

from rill.protocol.buffer import Reader, Writer
from rill.protocol.iggy.commands.base import FieldCodec


class Record:
    """A fixed-layout record; subclasses with nested lists extend encode/decode."""

    LAYOUT: ClassVar[tuple[FieldCodec[Any], ...]] = ()

    def encode(self, writer: Writer) -> None:
        for field, codec in zip(fields(self), self.LAYOUT):  # type: ignore[arg-type]
            codec.write(writer, getattr(self, field.name))

    @classmethod
    def read_fields(cls, reader: Reader) -> list[Any]:
        return [codec.read(reader) for codec in cls.LAYOUT]

    @classmethod
    def decode(cls, reader: Reader) -> Any:
        return cls(*cls.read_fields(reader))

    def to_bytes(self) -> bytes:
        writer = Writer()
        self.encode(writer)
        return writer.getvalue()


def encode_records(records: list[Any] | tuple[Any, ...]) -> bytes:
    """Concatenated records (a list response: no count prefix)."""
    writer = Writer()
    for record in records:
        record.encode(writer)
    return writer.getvalue()
