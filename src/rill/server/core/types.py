"""The neutral types of the broker API: what every wire protocol passes to the core and gets
back, with no protocol's frames or records in them.

Owns: ``Ref`` (a stream or topic named by id or by name), the topic settings a create or an
update carries (``TopicSpec``), and what data calls answer: ``AppendResult`` (the offsets and
timestamp an append assigned), ``LogBounds`` (first offset, next offset, high watermark),
``RecordRange`` (a read's stored bytes and where they sit) and ``PartitionEnd`` (a long poll's
answer); the hooks an append takes (``PartitionChooser``, ``Admission``); and, re-exported, the
model's shapes a protocol reads (``Session``, ``Stream``, ``Topic``, ``Partition``) and the
name rule (``normalize_name``).

One numbering of partitions in the whole core API (``Broker``, its facades, every result
here): partition ids 1..N, as the model and the directories on disk number them. A protocol
that counts from 0 (Kafka, TANK) converts at its edge (``id = index + 1``); Iggy's 1-based ids
need no conversion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rill.server.core.model import Partition, Session, Stream, Topic
from rill.server.core.names import normalize_name
from rill.server.storage.file_region import FileRegion

# re-exported (with what this module defines): the model's shapes and the core's name rule
__all__ = ["Partition", "Session", "Stream", "Topic", "normalize_name"]

Ref = int | str  # a stream or a topic, by id or by name

Region = bytes | bytearray | memoryview

# Picks the partition id (1..N) of an append once the topic is found and the append
# authorized (a protocol's partitioning rule: Iggy's balanced and key-hash kinds); raises the
# protocol's error when it cannot
PartitionChooser = Callable[[Topic], int]

# An admission rule applied atomically with an append to one partition (no other append to
# it runs between): ``admit(partition, region)`` answers the region to store (None: nothing)
# and what to run once the log took it (None: nothing). It applies to a region stored as it
# came (not one converted into the topic's record format). Iggy's message-id deduplication.
Admission = Callable[[Partition, Region], "tuple[Region | None, Callable[[], None] | None]"]


@dataclass(slots=True)
class TopicSpec:
    """A topic's settings. ``message_expiry`` µs and ``max_topic_size`` bytes take the
    protocol-neutral sentinels of ``rill.protocol.primitives`` (server default, never,
    unlimited); ``topic_id`` 0 lets the server choose; ``replication_factor`` 0 means 1."""

    name: str
    partitions_count: int = 0
    topic_id: int = 0
    compression_algorithm: int = 1
    message_expiry: int = 0
    max_topic_size: int = 0
    replication_factor: int = 0
    record_format: str = "iggy-v1"  # how its partitions store records (storage.formats.iggy_v1)


@dataclass(slots=True)
class AppendResult:
    """What an append assigned: offsets ``first_offset..last_offset`` and ``timestamp`` µs."""

    partition_id: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class LogBounds:
    """``first_offset``: the oldest offset retention kept; ``next_offset``: the offset the next
    append gets; ``high_watermark``: the end readers may see (the log end on one server; below
    it on a replicated follower, cluster-design.md)."""

    first_offset: int
    next_offset: int
    high_watermark: int


@dataclass(slots=True)
class RecordRange:
    """A read: ``count`` stored records from ``first_offset`` (the first one's offset) as the
    log holds them on disk (``chunks`` of one record format, ``format``), and the partition's
    bounds at the read.
    A chunk is bytes, or a ``FileRegion`` when the read asked for regions (``data`` reads it)."""

    partition_id: int
    first_offset: int
    count: int
    chunks: list[bytes | memoryview | FileRegion]
    format: str
    bounds: LogBounds
    # the offset after the last record read, where a reader goes on; None: ``first_offset +
    # count`` (dense offsets, or whole stored batches). A sparse log's records skip offsets
    end_offset: int | None = None

    @property
    def next_read(self) -> int:
        """Where a reader of this range goes on: the offset after its last record."""
        return self.first_offset + self.count if self.end_offset is None else self.end_offset

    @property
    def data(self) -> bytes | memoryview:
        chunks = [chunk.read() if type(chunk) is FileRegion else chunk for chunk in self.chunks]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


@dataclass(slots=True)
class PartitionEnd:
    """A long poll's answer per partition: where its log ends and how many bytes are stored
    from the offset the reader waited past."""

    partition_id: int
    next_offset: int
    bytes_after: int


@dataclass(slots=True)
class ConsumerPosition:
    """Where one consumer is in one partition: ``next_offset`` is the next offset it reads
    (None: it never stored a position), with the partition's bounds and the note and leader
    epoch it stored with the position (None: none)."""

    partition_id: int
    next_offset: int | None
    bounds: LogBounds
    note: str | None = None
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class LiveMember:
    """A live member of a protocol's consumer group that reads a topic: the group's position
    name (what its lag is listed under, e.g. ``kafka-group:billing``), the member's id, who the
    client is (its client id and address, as the protocol knows them) and the topic's
    partitions it is assigned (rill's partition ids)."""

    consumer: str
    member_id: str
    client: str
    partitions: tuple[int, ...]


# (stream name, topic name) -> the live members of a protocol's groups reading that topic
MemberSource = Callable[[str, str], list[LiveMember]]


@dataclass(slots=True)
class ConsumerLag:
    """How far one consumer (or group, with its ``group_name``) is behind in one partition:
    ``lag`` counts the stored messages from its next offset on (all of them when it has no
    position); ``end_offset`` is the offset the partition's next message gets."""

    consumer: str
    group_name: str
    partition_id: int
    next_offset: int | None
    end_offset: int
    lag: int
