"""Partitions: create (append N+1..N+count) and delete (the highest-numbered) (wire §3.8)."""

from __future__ import annotations

from rill import errors
from rill.protocol.commands.partitions import CreatePartitions, DeletePartitions
from rill.server.core.model import Session, Topic
from rill.server.core.state import CoreState
from rill.server.storage.metadata import PartitionRow, TopicRow

MAX_PARTITIONS_PER_REQUEST = 1000
MAX_PARTITIONS_PER_TOPIC = 100_000


def add_partitions(
    state: CoreState, topic: Topic, count: int, new_topic: TopicRow | None = None
) -> None:
    """Journal then open ``count`` new partitions; with ``new_topic`` the topic row goes in the
    same transaction, so a topic never exists without its partitions."""
    if len(topic.partitions) + count > MAX_PARTITIONS_PER_TOPIC:
        raise errors.TooManyPartitions(field="partitions_count")
    first = len(topic.partitions) + 1
    created_at = state.clock()
    rows = [
        PartitionRow(topic.stream_id, topic.id, pid, created_at)
        for pid in range(first, first + count)
    ]
    if new_topic is not None:
        state.store.create_topic(new_topic, rows)
    else:
        state.store.create_partitions(rows)
    for row in rows:
        topic.partitions[row.id] = state.open_partition(
            row.stream_id, row.topic_id, row.id, row.created_at
        )


class PartitionService:
    def __init__(self, state: CoreState) -> None:
        self.state = state
        self.on_partitions_changed = lambda topic: None  # consumer groups rebalance here

    def create_partitions(self, session: Session, command: CreatePartitions) -> None:
        state = self.state
        topic = state.find_topic(command.stream_id, command.topic_id)
        state.authorize(session, "create_partitions", topic.stream_id, topic.id)
        if not 1 <= command.partitions_count <= MAX_PARTITIONS_PER_REQUEST:
            raise errors.TooManyPartitions(field="partitions_count")
        add_partitions(state, topic, command.partitions_count)
        self.on_partitions_changed(topic)

    def delete_partitions(self, session: Session, command: DeletePartitions) -> None:
        state = self.state
        topic = state.find_topic(command.stream_id, command.topic_id)
        state.authorize(session, "delete_partitions", topic.stream_id, topic.id)
        if not 1 <= command.partitions_count <= MAX_PARTITIONS_PER_REQUEST:
            raise errors.TooManyPartitions(field="partitions_count")
        count = min(command.partitions_count, len(topic.partitions))
        doomed = sorted(topic.partitions)[len(topic.partitions) - count :]
        state.store.delete_partitions(topic.stream_id, topic.id, doomed)
        for partition_id in doomed:
            topic.partitions.pop(partition_id).log.destroy()
        self.on_partitions_changed(topic)
