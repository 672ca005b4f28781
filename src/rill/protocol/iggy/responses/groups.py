"""Consumer-group and consumer-offset records (wire §4.4, §4.6).

ConsumerGroup header (13 bytes + name): u32 id; u32 partitions_count; u32 members_count;
str8 name. GET_CONSUMER_GROUPS answers concatenated headers.
ConsumerGroupDetails: header followed by, per member, u32 member_id (the member's client id);
u32 partitions_count; partitions_count x u32 partition id. Members run to the end of the
payload (like the Iggy reader), so details are never part of a list.
ConsumerOffsetInfo (20 bytes): u32 partition_id; u64 current_offset; u64 stored_offset.
ConsumerLag (rill extension, GET_CONSUMER_LAG; docs/extensions.md): u8 consumer_kind;
u32 consumer_id; str8 group_name (empty for a regular consumer); u32 partition_id;
u8 committed (0: nothing stored yet); u64 committed_offset; u64 end_offset; u64 lag.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.iggy.commands.base import STR8, U8, U32, U64
from rill.protocol.iggy.responses.base import Record


@dataclass(frozen=True, slots=True)
class ConsumerGroup(Record):
    LAYOUT = (U32, U32, U32, STR8)

    id: int
    partitions_count: int
    members_count: int
    name: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember(Record):
    """A member (client id) and the partitions assigned to it."""

    id: int
    partitions: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple(self.partitions))

    def encode(self, writer: Writer) -> None:
        writer.u32(self.id).u32(len(self.partitions))
        for partition_id in self.partitions:
            writer.u32(partition_id)

    @classmethod
    def decode(cls, reader: Reader) -> ConsumerGroupMember:
        member_id = reader.u32()
        count = reader.u32()
        if count * 4 > reader.remaining:  # checked up front: never loop on a huge count
            raise DecodeError(f"member {member_id} lists {count} partitions, payload too short")
        return cls(member_id, tuple(reader.u32() for _ in range(count)))


@dataclass(frozen=True, slots=True)
class ConsumerGroupDetails(Record):
    """GET_CONSUMER_GROUP / CREATE_CONSUMER_GROUP answer: header and members."""

    group: ConsumerGroup
    members: tuple[ConsumerGroupMember, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))

    def encode(self, writer: Writer) -> None:
        self.group.encode(writer)
        for member in self.members:
            member.encode(writer)

    @classmethod
    def decode(cls, reader: Reader) -> ConsumerGroupDetails:
        group = ConsumerGroup.decode(reader)
        members = []
        while not reader.at_end():
            members.append(ConsumerGroupMember.decode(reader))
        return cls(group, tuple(members))

    @property
    def id(self) -> int:
        return self.group.id

    @property
    def name(self) -> str:
        return self.group.name


@dataclass(frozen=True, slots=True)
class ConsumerOffsetInfo(Record):
    LAYOUT = (U32, U64, U64)

    partition_id: int
    current_offset: int
    stored_offset: int


@dataclass(frozen=True, slots=True)
class ConsumerLag(Record):
    """How far one consumer (or group) is behind in one partition.

    ``committed_offset`` is the offset it stored (the last one it consumed; meaningless when
    ``committed`` is false), ``end_offset`` the offset the partition's next message will get,
    and ``lag`` the messages after the committed one that are still stored (all of them when
    nothing is committed)."""

    LAYOUT = (U8, U32, STR8, U32, U8, U64, U64, U64)

    consumer_kind: int
    consumer_id: int
    group_name: str
    partition_id: int
    committed: int
    committed_offset: int
    end_offset: int
    lag: int
