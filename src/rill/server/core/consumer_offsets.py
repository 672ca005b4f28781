"""Consumer offsets: where each consumer (or consumer group) is in each partition (wire §3.5,
§6.5). Offsets are keyed by (consumer kind, numeric id): a named regular consumer is hashed
with xxHash32 (seed 0); a group uses its group id, shared by every member.

GET_CONSUMER_OFFSET answers an empty OK when nothing was stored for the consumer (the fixed
behaviour of wire §11, which lets a client tell "never committed" from "committed offset 0"),
and for groups it reads the group's own offsets.
"""

from __future__ import annotations

from typing import Protocol

import xxhash

from rill import errors
from rill.protocol.commands.offsets import GetConsumerOffset, StoreConsumerOffset
from rill.protocol.primitives import Consumer, ConsumerKind, Identifier
from rill.protocol.responses.groups import ConsumerOffsetInfo
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.storage.metadata import OffsetRow

OffsetKey = tuple[int, int]


class GroupPartitionResolver(Protocol):
    """Picks the partition and offset key for a consumer-group consumer (consumer groups)."""

    def resolve_group_partition(
        self, session: Session, topic: Topic, group_id: Identifier, partition_id: int,
        advance: bool,
    ) -> tuple[Partition, OffsetKey]: ...


class NoGroups:
    """Stand-in until consumer groups exist: every group id is unknown."""

    def resolve_group_partition(self, session, topic, group_id, partition_id, advance):
        if group_id.is_numeric:
            raise errors.ConsumerGroupIdNotFound(group_id.value, topic.id)
        raise errors.ConsumerGroupNameNotFound(group_id.value, topic.id)


def regular_consumer_id(identifier: Identifier) -> int:
    value = identifier.value
    return value if isinstance(value, int) else xxhash.xxh32_intdigest(value.encode("utf-8"))


class ConsumerOffsetService:
    def __init__(self, state: CoreState) -> None:
        self.state = state
        self.groups: GroupPartitionResolver = NoGroups()

    def resolve(
        self, session: Session, topic: Topic, consumer: Consumer, partition_id: int,
        advance: bool = False,
    ) -> tuple[Partition, OffsetKey]:
        """The partition a consumer addresses and the key its offsets are stored under."""
        if consumer.kind == ConsumerKind.CONSUMER_GROUP:
            return self.groups.resolve_group_partition(
                session, topic, consumer.id, partition_id, advance
            )
        partition = self.state.find_partition(topic, partition_id or 1)
        return partition, (ConsumerKind.CONSUMER, regular_consumer_id(consumer.id))

    def store(self, partition: Partition, key: OffsetKey, offset: int) -> None:
        self.state.store.store_offset(
            OffsetRow(partition.stream_id, partition.topic_id, partition.id, key[0], key[1], offset)
        )
        partition.offsets[key] = offset

    def get_consumer_offset(
        self, session: Session, command: GetConsumerOffset
    ) -> ConsumerOffsetInfo | None:
        topic = self.state.find_topic(command.stream_id, command.topic_id)
        self.state.authorize(session, "get_consumer_offset", topic.stream_id, topic.id)
        partition, key = self.resolve(session, topic, command.consumer, command.partition_id)
        stored = partition.offsets.get(key)
        if stored is None:
            return None
        return ConsumerOffsetInfo(partition.id, partition.log.current_offset, stored)

    def store_consumer_offset(self, session: Session, command: StoreConsumerOffset) -> None:
        topic = self.state.find_topic(command.stream_id, command.topic_id)
        self.state.authorize(session, "store_consumer_offset", topic.stream_id, topic.id)
        partition, key = self.resolve(session, topic, command.consumer, command.partition_id)
        if command.offset > partition.log.current_offset:
            raise errors.InvalidOffset(command.offset, field="offset")
        self.store(partition, key, command.offset)
