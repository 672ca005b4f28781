"""The permissions blob of CREATE_USER, UPDATE_PERMISSIONS and UserInfoDetails (wire §2.7).

Wire layout:
    10 x u8 global flags (manage_servers, read_servers, manage_users, read_users,
        manage_streams, read_streams, manage_topics, read_topics, poll_messages, send_messages)
    u8 has_streams; if 1, stream entries, each:
        u32 stream_id; 6 x u8 (manage_stream, read_stream, manage_topics, read_topics,
        poll_messages, send_messages); u8 has_topics; if 1, topic entries, each:
            u32 topic_id; 4 x u8 (manage_topic, read_topic, poll_messages, send_messages);
            u8 more_topics (1 = another topic entry follows)
        u8 more_streams (1 = another stream entry follows)

Owns: the value types and their encoding. Commands carry the blob as ``u32 perm_len`` + blob
(``encode_blob`` / ``decode_blob``).

Invariants:
* An empty stream or topic map is normalised to ``None`` at construction, so the encoder never
  writes ``has_streams``/``has_topics`` = 1 followed by nothing, and values compare equal after
  a round-trip whichever of ``{}`` / ``None`` was given.
* The maps are plain dicts (convenient to build and read) copied at construction; the classes
  define ``__hash__`` over the sorted items, so values are hashable as long as nobody mutates
  the maps afterwards (don't).
* Decoding is bounds-checked: flag bytes are read leniently (1 = true, like the server), the
  structural bytes (has_*/more_*) must be 0 or 1, duplicate ids are rejected, and a blob must
  end exactly at its declared length. Every failure raises DecodeError.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from rill.protocol.buffer import DecodeError, Reader, Writer


def _read_flags(cls: type, reader: Reader) -> list[bool]:
    """One lenient bool byte per boolean dataclass field of ``cls``, in declaration order."""
    return [reader.bool8() for field in fields(cls) if field.type in ("bool", bool)]


def _write_flags(value: Any, writer: Writer) -> None:
    for field in fields(value):
        if field.type in ("bool", bool):
            writer.bool8(getattr(value, field.name))


def _freeze_map(mapping: Mapping[int, Any] | None) -> dict[int, Any] | None:
    return dict(mapping) if mapping else None


def _map_hash(mapping: dict[int, Any] | None) -> int:
    return hash(None if mapping is None else tuple(sorted(mapping.items())))


@dataclass(frozen=True, slots=True)
class GlobalPermissions:
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False

    def encode(self, writer: Writer) -> None:
        _write_flags(self, writer)

    @classmethod
    def decode(cls, reader: Reader) -> GlobalPermissions:
        return cls(*_read_flags(cls, reader))


@dataclass(frozen=True, slots=True)
class TopicPermissions:
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False

    def encode(self, writer: Writer) -> None:
        _write_flags(self, writer)

    @classmethod
    def decode(cls, reader: Reader) -> TopicPermissions:
        return cls(*_read_flags(cls, reader))


@dataclass(frozen=True, slots=True)
class StreamPermissions:
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: dict[int, TopicPermissions] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", _freeze_map(self.topics))

    def __hash__(self) -> int:
        flags = tuple(getattr(self, field.name) for field in fields(self)[:6])
        return hash((flags, _map_hash(self.topics)))

    def encode(self, writer: Writer) -> None:
        _write_flags(self, writer)
        _write_entries(writer, self.topics)

    @classmethod
    def decode(cls, reader: Reader) -> StreamPermissions:
        flags = _read_flags(cls, reader)
        topics = _read_entries(reader, TopicPermissions.decode, "topic")
        return cls(*flags, topics=topics)


@dataclass(frozen=True, slots=True)
class Permissions:
    global_permissions: GlobalPermissions = GlobalPermissions()
    streams: dict[int, StreamPermissions] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", _freeze_map(self.streams))

    def __hash__(self) -> int:
        return hash((self.global_permissions, _map_hash(self.streams)))

    @classmethod
    def root(cls) -> Permissions:
        """All ten global permissions (the root user's)."""
        return cls(GlobalPermissions(*([True] * 10)))

    def encode(self, writer: Writer) -> None:
        self.global_permissions.encode(writer)
        _write_entries(writer, self.streams)

    def to_bytes(self) -> bytes:
        writer = Writer()
        self.encode(writer)
        return writer.getvalue()

    @classmethod
    def decode(cls, reader: Reader) -> Permissions:
        """Read one blob from ``reader`` (which should be bounded to the blob's length)."""
        global_permissions = GlobalPermissions.decode(reader)
        streams = _read_entries(reader, StreamPermissions.decode, "stream")
        return cls(global_permissions, streams)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Permissions:
        reader = Reader(data)
        value = cls.decode(reader)
        reader.expect_end()
        return value

    def encode_blob(self, writer: Writer) -> None:
        """``u32 perm_len`` followed by the blob, as commands and UserInfoDetails carry it."""
        writer.bytes32(self.to_bytes())

    @classmethod
    def decode_blob(cls, reader: Reader) -> Permissions:
        length = reader.u32()
        return cls.from_bytes(reader.view(length))


def _write_entries(writer: Writer, entries: dict[int, Any] | None) -> None:
    """``u8 has_entries`` then, per entry, u32 id + body + u8 more (1 unless the last)."""
    if not entries:
        writer.u8(0)
        return
    writer.u8(1)
    ids = sorted(entries)
    for index, entry_id in enumerate(ids):
        writer.u32(entry_id)
        entries[entry_id].encode(writer)
        writer.u8(1 if index + 1 < len(ids) else 0)


def _read_entries(reader: Reader, read_body: Any, what: str) -> dict[int, Any] | None:
    if not reader.strict_bool8():
        return None
    entries: dict[int, Any] = {}
    more = True
    while more:
        entry_id = reader.u32()
        if entry_id in entries:
            raise DecodeError(f"duplicate {what} id {entry_id} in permissions")
        entries[entry_id] = read_body(reader)
        more = reader.strict_bool8()
    return entries
