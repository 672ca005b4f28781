"""Topic and partition records (wire reference §4.2, §4.3).

Topic header (51 bytes + name): u32 id; u64 created_at; u32 partitions_count; u64
message_expiry (µs, u64::MAX = never); u8 compression_algorithm; u64 max_topic_size (u64::MAX =
unlimited); u8 replication_factor; u64 size_bytes; u64 messages_count; u8 name_length; name.
Partition record (40 bytes): u32 id; u64 created_at; u32 segments_count; u64 current_offset;
u64 size_bytes; u64 messages_count.
TopicDetails = topic header followed by one partition record per partition.
``Topic.record_format`` (the short name of the format the topic stores, ``iggy`` or ``kafka``)
is not in Iggy's binary layout: HTTP's JSON carries it, the binary decoders leave it None
(not told; GET_TOPIC_RECORD_FORMATS, ``TopicRecordFormat``, tells it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rill.protocol.buffer import Reader, Writer
from rill.protocol.iggy.commands.base import STR8, U8, U32, U64
from rill.protocol.iggy.responses.base import Record


@dataclass(frozen=True, slots=True)
class Topic(Record):
    LAYOUT = (U32, U64, U32, U64, U8, U64, U8, U64, U64, STR8)

    id: int
    created_at: int
    partitions_count: int
    message_expiry: int
    compression_algorithm: int
    max_topic_size: int
    replication_factor: int
    size_bytes: int
    messages_count: int
    name: str
    record_format: str | None = None  # not in the binary layout (None: not told)


@dataclass(frozen=True, slots=True)
class TopicRecordFormat(Record):
    """GET_TOPIC_RECORD_FORMATS: one topic's id and the short name of its record format."""

    LAYOUT = (U32, STR8)

    topic_id: int
    record_format: str


@dataclass(frozen=True, slots=True)
class Partition(Record):
    LAYOUT = (U32, U64, U32, U64, U64, U64)

    id: int
    created_at: int
    segments_count: int
    current_offset: int
    size_bytes: int
    messages_count: int


@dataclass(frozen=True, slots=True)
class TopicDetails(Record):
    """A topic header followed by its partition records."""

    topic: Topic
    partitions: tuple[Partition, ...] = field(default_factory=tuple)

    def encode(self, writer: Writer) -> None:
        self.topic.encode(writer)
        for partition in self.partitions:
            partition.encode(writer)

    @classmethod
    def decode(cls, reader: Reader) -> TopicDetails:
        topic = Topic.decode(reader)
        partitions = []
        while not reader.at_end():
            partitions.append(Partition.decode(reader))
        return cls(topic, tuple(partitions))

    @property
    def id(self) -> int:
        return self.topic.id

    @property
    def name(self) -> str:
        return self.topic.name
