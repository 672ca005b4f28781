"""Consumer positions: where each consumer reads next in each partition (wire §3.5, §6.5 for
Iggy's consumers and groups; any name for the broker's consumers).

Positions are keyed by a consumer *name* and hold the **next offset to read** (Kafka's commit
meaning; schema 2 of the metadata store, migrated once from schema 1's numeric keys and "last
consumed" offsets). Iggy's consumers are named ``iggy-consumer:<u32>`` (a named regular consumer
is hashed with xxHash32, seed 0, as Iggy does) and its groups ``iggy-group:<group id>``, shared by
every member; the Iggy edge converts its "last consumed" offsets (stored = next - 1).

Consumer lag (GET_CONSUMER_LAG, the HTTP ``consumer-lag`` route, the ``rill_consumer_group_lag``
gauge all come from ``consumer_lag``): per partition, the messages from the consumer's next
offset on that are still stored, ``end - max(next, first)``; when nothing is committed, every
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
from rill.server.storage.metadata import PositionRow

ConsumerKey = str  # a consumer's name; its positions are stored under it
ICONSUMER, IGROUP = "iggy-consumer:", "iggy-group:"  # the names of Iggy's consumers


def iggy_consumer_key(consumer_id: Ref) -> ConsumerKey:
    value = consumer_id if isinstance(consumer_id, int) else xxhash.xxh32_intdigest(
        consumer_id.encode("utf-8"))
    return f"{ICONSUMER}{value}"


def iggy_group_key(group_id: int) -> ConsumerKey:
    return f"{IGROUP}{group_id}"


class GroupPartitionResolver(Protocol):
    """Picks the partition and position key for a consumer-group consumer (consumer groups)."""

    def resolve_group_partition(
        self, session: Session, topic: Topic, group_id: Ref, partition_id: int,
        advance: bool,
    ) -> tuple[Partition, ConsumerKey]: ...

    def group_names(self, topic: Topic) -> dict[int, str]: ...


class ConsumerOffsetService:
    def __init__(self, state: CoreState, groups: GroupPartitionResolver) -> None:
        self.state = state
        self.groups = groups

    def resolve(
        self, session: Session, topic: Topic, consumer: Consumer | str, partition_id: int,
        advance: bool = False,
    ) -> tuple[Partition, ConsumerKey]:
        """The partition a consumer addresses and the name its positions are stored under:
        a ``str`` is a consumer's own name (the broker's); a ``Consumer`` is Iggy's."""
        if isinstance(consumer, str):
            return self.state.find_partition(topic, partition_id), consumer
        if consumer.kind == ConsumerKind.CONSUMER_GROUP:
            return self.groups.resolve_group_partition(
                session, topic, consumer.id.value, partition_id, advance
            )
        partition = self.state.find_partition(topic, partition_id or 1)
        return partition, iggy_consumer_key(consumer.id.value)

    def store(self, partition: Partition, key: ConsumerKey, next_offset: int) -> None:
        self.state.store.store_position(
            PositionRow(partition.stream_id, partition.topic_id, partition.id, key, next_offset)
        )
        partition.positions[key] = next_offset

    def get_consumer_offset(self, session: Session, stream_id: Ref, topic_id: Ref,
                            consumer: Consumer | str, partition_id: int) -> ConsumerPosition:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        partition, key = self.resolve(session, topic, consumer, partition_id)
        log = partition.log
        return ConsumerPosition(partition.id, partition.positions.get(key),
                                LogBounds(log.first_offset, log.next_offset, log.next_offset))

    def get_consumer_lag(self, session: Session, stream_id: Ref, topic_id: Ref
                         ) -> list[ConsumerLag]:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_TOPIC, topic.stream_id, topic.id)
        return consumer_lag(topic, self.groups.group_names(topic))

    def store_consumer_offset(self, session: Session, stream_id: Ref, topic_id: Ref,
                              consumer: Consumer | str, partition_id: int, next_offset: int
                              ) -> None:
        """Store ``next_offset`` as where ``consumer`` reads next: at most the log's end (or 1
        on an empty log, where an Iggy client may store "offset 0 consumed")."""
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        partition, key = self.resolve(session, topic, consumer, partition_id)
        if not 0 <= next_offset <= max(partition.log.next_offset, 1):
            raise errors.InvalidOffset(next_offset - 1, field="offset")
        self.store(partition, key, next_offset)


def consumer_lag(topic: Topic, group_names: dict[int, str]) -> list[ConsumerLag]:
    """Every Iggy consumer with a stored position in ``topic``, and every Iggy group in every
    partition, with its lag (see the module's docstring); groups first, by id, then consumers
    by id. (Consumers other protocols name are not Iggy's to list.)"""
    rows: list[ConsumerLag] = []
    partitions = [topic.partitions[key] for key in sorted(topic.partitions)]
    consumers = sorted({int(key[len(ICONSUMER):]) for partition in partitions
                        for key in partition.positions if key.startswith(ICONSUMER)})
    keys: Iterable[tuple[ConsumerKey, str]] = [
        *((iggy_group_key(group_id), name) for group_id, name in sorted(group_names.items())),
        *((f"{ICONSUMER}{consumer_id}", "") for consumer_id in consumers),
    ]
    for key, name in keys:
        for partition in partitions:
            next_offset = partition.positions.get(key)
            if next_offset is None and not name:
                continue
            log = partition.log
            end, first = log.next_offset, log.first_offset
            lag = end - first if next_offset is None else max(0, end - max(next_offset, first))
            rows.append(ConsumerLag(key, name, partition.id, next_offset, end, lag))
    return rows
