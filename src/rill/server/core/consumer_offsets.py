"""Consumer offsets: where each consumer (or consumer group) is in each partition (wire §3.5,
§6.5). Offsets are keyed by (consumer kind, numeric id): a named regular consumer is hashed
with xxHash32 (seed 0); a group uses its group id, shared by every member.

GET_CONSUMER_OFFSET answers, when nothing was stored for the consumer, the record Iggy 0.4.95
answers: ``stored_offset`` 0 with the partition's current offset (wire §4.6; clients of that
era cannot read an empty answer). For groups it reads the group's own offsets (the fix of wire
§6.5). Failures (unknown stream/topic/partition, permissions) still become an empty OK in the
binary handler. GET_CONSUMER_LAG's ``committed`` flag is what tells "never stored" from
"stored 0" (docs/wire-notes.md).

Consumer lag (GET_CONSUMER_LAG, the HTTP ``consumer-lag`` route, the ``rill_consumer_group_lag``
gauge all come from ``consumer_lag``): per partition, the messages after the committed offset
that are still stored, ``end - max(committed + 1, first)``; when nothing is committed, every
stored message, ``end - first`` (``end``: the offset the next message gets; ``first``: the
oldest one retention kept).
"""

from __future__ import annotations

from typing import Iterable, Protocol

import xxhash

from rill import errors
from rill.protocol.primitives import Consumer, ConsumerKind
from rill.server.auth.permissioner import Action
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.core.types import ConsumerLag, ConsumerPosition, LogBounds, Ref
from rill.server.storage.metadata import OffsetRow

OffsetKey = tuple[int, int]


class GroupPartitionResolver(Protocol):
    """Picks the partition and offset key for a consumer-group consumer (consumer groups)."""

    def resolve_group_partition(
        self, session: Session, topic: Topic, group_id: Ref, partition_id: int,
        advance: bool,
    ) -> tuple[Partition, OffsetKey]: ...

    def group_names(self, topic: Topic) -> dict[int, str]: ...


class NoGroups:
    """Stand-in until consumer groups exist: every group id is unknown."""

    def group_names(self, topic):
        return {}

    def resolve_group_partition(self, session, topic, group_id, partition_id, advance):
        if isinstance(group_id, int):
            raise errors.ConsumerGroupIdNotFound(group_id, topic.id)
        raise errors.ConsumerGroupNameNotFound(group_id, topic.id)


def regular_consumer_id(value: Ref) -> int:
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
                session, topic, consumer.id.value, partition_id, advance
            )
        partition = self.state.find_partition(topic, partition_id or 1)
        return partition, (ConsumerKind.CONSUMER, regular_consumer_id(consumer.id.value))

    def store(self, partition: Partition, key: OffsetKey, offset: int) -> None:
        self.state.store.store_offset(
            OffsetRow(partition.stream_id, partition.topic_id, partition.id, key[0], key[1], offset)
        )
        partition.offsets[key] = offset

    def get_consumer_offset(self, session: Session, stream_id: Ref, topic_id: Ref,
                            consumer: Consumer, partition_id: int) -> ConsumerPosition:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        partition, key = self.resolve(session, topic, consumer, partition_id)
        log = partition.log
        return ConsumerPosition(partition.id, partition.offsets.get(key),
                                LogBounds(log.first_offset, log.next_offset, log.next_offset))

    def get_consumer_lag(self, session: Session, stream_id: Ref, topic_id: Ref
                         ) -> list[ConsumerLag]:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_TOPIC, topic.stream_id, topic.id)
        return consumer_lag(topic, self.groups.group_names(topic))

    def store_consumer_offset(self, session: Session, stream_id: Ref, topic_id: Ref,
                              consumer: Consumer, partition_id: int, offset: int) -> None:
        """Store ``offset`` as the last one ``consumer`` consumed."""
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        partition, key = self.resolve(session, topic, consumer, partition_id)
        if offset > partition.log.current_offset:
            raise errors.InvalidOffset(offset, field="offset")
        self.store(partition, key, offset)


def consumer_lag(topic: Topic, group_names: dict[int, str]) -> list[ConsumerLag]:
    """Every consumer with a stored offset in ``topic``, and every group in every partition,
    with its lag (see the module's docstring); groups first, by id, then consumers."""
    rows: list[ConsumerLag] = []
    partitions = [topic.partitions[key] for key in sorted(topic.partitions)]
    consumers = sorted({key for partition in partitions for key in partition.offsets
                        if key[0] == ConsumerKind.CONSUMER})
    keys: Iterable[tuple[OffsetKey, str]] = [
        *(((int(ConsumerKind.CONSUMER_GROUP), group_id), name) for group_id, name in sorted(group_names.items())),
        *((key, "") for key in consumers),
    ]
    for key, name in keys:
        for partition in partitions:
            stored = partition.offsets.get(key)
            if stored is None and key[0] == ConsumerKind.CONSUMER:
                continue
            log = partition.log
            end, first = log.next_offset, log.first_offset
            lag = end - first if stored is None else max(0, end - max(stored + 1, first))
            rows.append(ConsumerLag(key[0], key[1], name, partition.id, stored is not None,
                                    stored or 0, end, lag))
    return rows
