"""Stream records (wire reference §4.1).

Stream header (33 bytes + name): u32 id; u64 created_at µs; u32 topics_count; u64 size_bytes;
u64 messages_count; u8 name_length; name.
StreamDetails = stream header followed by one topic header per topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rill.protocol.buffer import Reader, Writer
from rill.protocol.iggy.commands.base import STR8, U32, U64
from rill.protocol.iggy.responses.base import Record
from rill.protocol.iggy.responses.topics import Topic


@dataclass(frozen=True, slots=True)
class Stream(Record):
    LAYOUT = (U32, U64, U32, U64, U64, STR8)

    id: int
    created_at: int
    topics_count: int
    size_bytes: int
    messages_count: int
    name: str


@dataclass(frozen=True, slots=True)
class StreamDetails(Record):
    """A stream header followed by the headers of its topics (no partitions)."""

    stream: Stream
    topics: tuple[Topic, ...] = field(default_factory=tuple)

    def encode(self, writer: Writer) -> None:
        self.stream.encode(writer)
        for topic in self.topics:
            topic.encode(writer)

    @classmethod
    def decode(cls, reader: Reader) -> StreamDetails:
        stream = Stream.decode(reader)
        topics = []
        while not reader.at_end():
            topics.append(Topic.decode(reader))
        return cls(stream, tuple(topics))

    # convenience accessors so callers can treat details like a header
    @property
    def id(self) -> int:
        return self.stream.id

    @property
    def name(self) -> str:
        return self.stream.name
