"""Consumer positions: where each consumer reads next in each partition.

Positions are keyed by a consumer *name* and hold the **next offset to read** (Kafka's commit
meaning; schema 2 of the metadata store, migrated once from schema 1's numeric keys and "last
consumed" offsets). A protocol names its consumers so that they do not meet by chance (Iggy's
are ``iggy-consumer:<u32>``, ``protocols.iggy.consumers``); a member of one of a topic's
consumer groups reads and commits under the name its group's positions are stored under (the
protocol's: ``GroupMembership.position_name``, ``core.consumer_groups``), in the partition the
protocol's membership deals it (``Groups.member_partition``).

Consumer lag (``consumer_lag``: GET_CONSUMER_LAG, the HTTP ``consumer-lag`` route, the
``rill_consumer_group_lag`` gauge): per partition, the messages from the consumer's next offset
on that are still stored, ``end - max(next, first)``; when nothing is committed, every stored
message, ``end - first`` (``end``: the offset the next message gets; ``first``: the oldest one
retention kept).

A position may carry the consumer's *note*, an opaque string stored with it in the same row
(Kafka's commit metadata), and a *leader epoch* (Kafka's committed leader epoch); storing a
position without them clears them.
"""

from __future__ import annotations

from typing import Protocol

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.core.applying import apply_position
from rill.server.core.catalog import PositionRow
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.core.types import ConsumerLag, ConsumerPosition, LogBounds, Ref

ConsumerKey = str  # a consumer's name; its positions are stored under it


class GroupPositionNames(Protocol):
    """The names a topic's consumer groups store their positions under (consumer groups)."""

    def group_position_names(self, topic: Topic) -> list[tuple[ConsumerKey, str]]: ...


class ConsumerOffsetService:
    def __init__(self, state: CoreState, groups: GroupPositionNames) -> None:
        self.state = state
        self.groups = groups

    async def store(self, partition: Partition, key: ConsumerKey, next_offset: int,
                    note: str | None = None, leader_epoch: int | None = None) -> None:
        """Store a position (and the consumer's note and leader epoch with it: a position
        stored without them has none); the model holds it once the catalog confirmed it.
        On the poll path (Iggy's auto-commit): one await of the catalog, no thread hop (the
        SQLite catalog commits on the loop's thread)."""
        row = await self.state.store.store_position(
            PositionRow(partition.stream_id, partition.topic_id, partition.id, key, next_offset,
                        note, leader_epoch))
        apply_position(partition, row)

    def get_consumer_offset(self, session: Session, stream_id: Ref, topic_id: Ref,
                            key: ConsumerKey, partition_id: int) -> ConsumerPosition:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        partition = self.state.find_partition(topic, partition_id)
        log = partition.log
        return ConsumerPosition(partition.id, partition.positions.get(key),
                                LogBounds(log.first_offset, log.next_offset, log.next_offset),
                                partition.position_notes.get(key),
                                partition.position_epochs.get(key))

    def get_consumer_lag(self, session: Session, stream_id: Ref, topic_id: Ref
                         ) -> list[ConsumerLag]:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_TOPIC, topic.stream_id, topic.id)
        return consumer_lag(topic, self.groups.group_position_names(topic))

    async def store_consumer_offset(self, session: Session, stream_id: Ref, topic_id: Ref,
                              key: ConsumerKey, partition_id: int, next_offset: int,
                              note: str | None = None, leader_epoch: int | None = None) -> None:
        """Store ``next_offset`` as where ``consumer`` reads next: at most the log's end (or 1
        on an empty log, where an Iggy client may store "offset 0 consumed"), with the
        consumer's ``note`` (an opaque string, kept with the position) and ``leader_epoch``."""
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        partition = self.state.find_partition(topic, partition_id)
        if not 0 <= next_offset <= max(partition.log.next_offset, 1):
            raise errors.InvalidOffset(next_offset - 1, field="offset")
        await self.store(partition, key, next_offset, note, leader_epoch)


def consumer_lag(topic: Topic, groups: list[tuple[ConsumerKey, str]]) -> list[ConsumerLag]:
    """The lag of every group of ``groups`` (position name, group name; in that order) in every
    partition, then of every other consumer with a stored position in ``topic``, by name, in
    the partitions where it has one."""
    rows: list[ConsumerLag] = []
    partitions = [topic.partitions[key] for key in sorted(topic.partitions)]
    group_keys = {key for key, _ in groups}
    consumers = sorted({key for partition in partitions for key in partition.positions
                        if key not in group_keys})
    for key, name in [*groups, *((consumer, "") for consumer in consumers)]:
        for partition in partitions:
            next_offset = partition.positions.get(key)
            if next_offset is None and not name:
                continue
            log = partition.log
            end, first = log.next_offset, log.first_offset
            lag = end - first if next_offset is None else max(0, end - max(next_offset, first))
            rows.append(ConsumerLag(key, name, partition.id, next_offset, end, lag))
    return rows
