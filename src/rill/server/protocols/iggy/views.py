"""Iggy's answers built from the core's neutral results (wire §4): the records of streams,
topics, partitions, users, tokens, clients, groups, offsets and stats.

Owns: the Iggy dialect of answers: ``current_offset`` is the last offset, 0 when the log is
empty (§4.3); stored consumer offsets are the last offset consumed, 0 when nothing was stored
(§4.6, as 0.4.95 answers); figures are clamped to their wire widths.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from collections.abc import Sequence

from rill.protocol.iggy.commands.topics import record_format_short
from rill.protocol.iggy.primitives import ConsumerKind, Transport
from rill.protocol.iggy.responses.columnar import ColumnarMessages, StoredBatches
from rill.protocol.iggy.responses.groups import ConsumerGroup as GroupRecord
from rill.protocol.iggy.responses.groups import (
    ConsumerGroupDetails,
    ConsumerGroupMember,
    ConsumerLag,
    ConsumerOffsetInfo,
)
from rill.protocol.iggy.responses.long_poll import PartitionEnd
from rill.protocol.iggy.responses.messages import PolledMessages
from rill.protocol.iggy.responses.streams import Stream as StreamRecord
from rill.protocol.iggy.responses.streams import StreamDetails
from rill.protocol.iggy.responses.system import ClientConsumerGroup, ClientInfo, ClientInfoDetails, Stats
from rill.protocol.iggy.responses.topics import Partition as PartitionRecord
from rill.protocol.iggy.responses.topics import Topic as TopicRecord
from rill.protocol.iggy.responses.topics import TopicDetails
from rill.protocol.iggy.responses.users import PersonalAccessTokenInfo, UserInfo, UserInfoDetails
from rill.server.core.broker import ColumnarRead, Group, PersonalAccessToken, ServerStats, User
from rill.server.core.types import ConsumerPosition, LogBounds, Partition, RecordRange
from rill.server.core.types import Session, Stream, Topic
from rill.server.core.types import ConsumerLag as LagRow
from rill.server.core.types import PartitionEnd as PartitionEndRow
from rill.server.storage.file_region import FileRegion
from rill.server.protocols.iggy.consumers import CONSUMER_PREFIX

U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


def current_offset(bounds: LogBounds) -> int:
    """Iggy's "current offset": the last offset, 0 when the log is empty."""
    return max(bounds.next_offset - 1, 0)


def stream_record(stream: Stream) -> StreamRecord:
    topics = stream.topics.values()
    return StreamRecord(
        id=stream.id,
        created_at=stream.created_at,
        topics_count=len(stream.topics),
        size_bytes=sum(t.size_bytes for t in topics),
        messages_count=sum(t.messages_count for t in topics),
        name=stream.name,
    )


def stream_details(stream: Stream) -> StreamDetails:
    topics = tuple(topic_record(stream.topics[tid]) for tid in sorted(stream.topics))
    return StreamDetails(stream_record(stream), topics)


def topic_record(topic: Topic) -> TopicRecord:
    return TopicRecord(
        id=topic.id,
        created_at=topic.created_at,
        partitions_count=len(topic.partitions),
        message_expiry=topic.message_expiry,
        compression_algorithm=topic.compression_algorithm,
        max_topic_size=topic.max_topic_size,
        replication_factor=topic.replication_factor,
        size_bytes=topic.size_bytes,
        messages_count=topic.messages_count,
        name=topic.name,
        record_format=record_format_short(topic.record_format),
    )


def partition_record(partition: Partition) -> PartitionRecord:
    log = partition.log
    return PartitionRecord(
        id=partition.id,
        created_at=partition.created_at,
        segments_count=log.segments_count,
        current_offset=log.current_offset,
        size_bytes=log.size_bytes,
        messages_count=log.messages_count,
    )


def topic_details(topic: Topic) -> TopicDetails:
    partitions = tuple(partition_record(topic.partitions[pid]) for pid in sorted(topic.partitions))
    return TopicDetails(topic_record(topic), partitions)


@dataclass(slots=True)
class PolledParts:
    """POLL's answer when its records include file regions (a TCP link sends them with
    sendfile, other links read them): ``head`` without records, then ``parts`` in order."""

    head: PolledMessages
    parts: list[bytes | memoryview | FileRegion]

    @property
    def size(self) -> int:
        return sum(len(part) for part in self.parts)


def polled_messages(found: RecordRange) -> PolledMessages | PolledParts:
    chunks = found.chunks
    current_offset = max(found.bounds.next_offset - 1, 0)  # inline: this is the poll path
    if len(chunks) == 1:
        data = chunks[0]
        if type(data) is not FileRegion:
            return PolledMessages(found.partition_id, current_offset, found.count, data)
    elif not any(type(chunk) is FileRegion for chunk in chunks):
        return PolledMessages(found.partition_id, current_offset, found.count, b"".join(chunks))
    return PolledParts(PolledMessages(found.partition_id, current_offset, found.count), chunks)


def stored_batches(found: RecordRange) -> StoredBatches:
    """The stored records as they are, in the topic's format (rill extension 1001)."""
    chunks = found.chunks
    return StoredBatches(found.partition_id, found.bounds.first_offset, found.bounds.next_offset,
                         record_format_short(found.format),
                         chunks[0] if len(chunks) == 1 else b"".join(chunks))


def columnar_messages(read: ColumnarRead) -> ColumnarMessages:
    found = read.found
    return ColumnarMessages(
        read.partition_id, read.bounds.first_offset, read.bounds.next_offset, found.base_offset,
        found.count, found.base_position, found.timestamps, found.boundaries, found.records,
    )


def consumer_offset(position: ConsumerPosition) -> ConsumerOffsetInfo:
    """Iggy's stored offset is the last one consumed: the next offset - 1 (0 when none)."""
    next_offset = position.next_offset
    return ConsumerOffsetInfo(position.partition_id, current_offset(position.bounds),
                              0 if next_offset is None else max(next_offset - 1, 0))


def consumer_lag(row: LagRow) -> ConsumerLag:
    """Iggy's record of a lag row: an Iggy group by id and name, an Iggy consumer by id, and a
    position another protocol stores (``consumer`` without Iggy's prefix, e.g. a Kafka group's
    ``kafka-group:<id>``) as a consumer group with id 0 named by that stored name. Committed
    means a message was consumed: the next offset is past 0 (Iggy stores the last one)."""
    if row.group_name or row.consumer.startswith(CONSUMER_PREFIX):
        kind = ConsumerKind.CONSUMER_GROUP if row.group_name else ConsumerKind.CONSUMER
        consumer_id, name = int(row.consumer.rpartition(":")[2]), row.group_name
    else:
        kind, consumer_id, name = ConsumerKind.CONSUMER_GROUP, 0, row.consumer
    committed = (row.next_offset or 0) > 0
    return ConsumerLag(int(kind), consumer_id, name, row.partition_id, int(committed),
                       max((row.next_offset or 0) - 1, 0), row.end_offset, row.lag)


def partition_end(row: PartitionEndRow) -> PartitionEnd:
    return PartitionEnd(row.partition_id, row.next_offset, row.bytes_after)


def group_record(group: Group, members: Sequence[tuple[int, list[int]]]) -> GroupRecord:
    """``members``: (client id, partitions) of every member (``IggyGroupMembers.listing``)."""
    return GroupRecord(group.id, group.partitions_count, len(members), group.name)


def group_details(group: Group, members: Sequence[tuple[int, list[int]]]
                  ) -> ConsumerGroupDetails:
    listed = [ConsumerGroupMember(client_id, partitions) for client_id, partitions in members]
    return ConsumerGroupDetails(group_record(group, members), listed)


def user_info(user: User) -> UserInfo:
    return UserInfo(user.id, user.created_at, int(user.status), user.username)


def user_details(user: User) -> UserInfoDetails:
    return UserInfoDetails(user_info(user), user.permissions)


def token_info(token: PersonalAccessToken) -> PersonalAccessTokenInfo:
    return PersonalAccessTokenInfo(token.name, token.expiry_at)


# the core's neutral transport names as Iggy's transport numbers (wire §4.10)
TRANSPORTS = {"tcp": Transport.TCP, "quic": Transport.QUIC, "http": Transport.HTTP}


def client_info(session: Session) -> ClientInfo:
    return ClientInfo(session.client_id, session.user_id, int(TRANSPORTS[session.transport]),
                      session.address, len(session.consumer_groups))


def client_details(session: Session) -> ClientInfoDetails:
    groups = [ClientConsumerGroup(stream_id, topic_id, group_id)
              for stream_id, topic_id, group_id in list(session.consumer_groups)]
    return ClientInfoDetails.of(session.client_id, session.user_id,
                                int(TRANSPORTS[session.transport]), session.address, groups)


# GET_STATS fields narrower than u64 (wire §4.9); the other integers are u64
_U32_STATS = frozenset({"process_id", "streams_count", "topics_count", "partitions_count",
                        "segments_count", "clients_count", "consumer_groups_count"})


def stats(figures: ServerStats) -> Stats:
    """The figures, each clamped to its wire width."""
    values = {}
    for name, value in dataclasses.asdict(figures).items():
        if isinstance(value, int):
            value = max(0, min(value, U32_MAX if name in _U32_STATS else U64_MAX))
        values[name] = value
    return Stats(**values)
