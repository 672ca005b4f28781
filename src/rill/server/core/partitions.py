"""Partitions: create (append N+1..N+count) and delete (the highest-numbered) (wire §3.8).

A failure leaves nothing behind: new partition logs (and a new topic's manifest) are made
first and journalled last, and every file made is removed when any step fails. Deletion
renames the directories to tombstones, commits, then removes them (``storage.directories``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.core.types import Ref
from rill.server.storage.directories import remove_tree, restore, retire, write_manifest
from rill.server.storage.metadata import PartitionRow, TopicRow

MAX_PARTITIONS_PER_REQUEST = 1000
MAX_PARTITIONS_PER_TOPIC = 100_000


def add_partitions(
    state: CoreState, topic: Topic, count: int, new_topic: TopicRow | None = None
) -> None:
    """Open ``count`` new partition logs, then journal them. With ``new_topic`` the topic's
    manifest is written first and its row goes into the same transaction as its partitions, so
    a topic never exists without them. On any failure every file made here is removed."""
    if len(topic.partitions) + count > MAX_PARTITIONS_PER_TOPIC:
        raise errors.TooManyPartitions(field="partitions_count")
    first = len(topic.partitions) + 1
    created_at = state.clock()
    rows = [
        PartitionRow(topic.stream_id, topic.id, pid, created_at)
        for pid in range(first, first + count)
    ]
    paths = state.paths
    opened: list[Partition] = []
    try:
        if new_topic is not None:
            write_manifest(paths.topic_manifest(topic.stream_id, topic.id), new_topic,
                           state.durability)
        for row in rows:
            opened.append(state.open_partition(topic, row.id, row.created_at))
        if new_topic is not None:
            state.store.create_topic(new_topic, rows)
        else:
            state.store.create_partitions(rows)
    except BaseException as error:
        for partition in opened:
            partition.log.destroy()
        if new_topic is not None:
            remove_tree(paths.topic_dir(topic.stream_id, topic.id))
        if isinstance(error, OSError):
            failed = rows[len(opened)].id if len(opened) < len(rows) else rows[-1].id
            raise errors.CannotCreatePartitionDirectory(
                failed, topic.stream_id, topic.id, reason=(
                    f"Cannot create partition {failed} of topic {topic.id} of stream "
                    f"{topic.stream_id}: {error.strerror or error}")
            ) from error
        raise
    for partition in opened:
        topic.partitions[partition.id] = partition


def retire_directories(state: CoreState, directories: list[Path]) -> list[Path | None]:
    """Phase one of deleting several directories: all tombstoned, or none (then raises)."""
    tombstones: list[Path | None] = []
    try:
        for directory in directories:
            tombstones.append(retire(directory, state.durability))
    except OSError:
        restore_directories(state, tombstones)
        raise
    return tombstones


def restore_directories(state: CoreState, tombstones: list[Path | None]) -> None:
    for tombstone in reversed(tombstones):
        restore(tombstone, state.durability)


def remove_tombstones(state: CoreState, tombstones: list[Path | None]) -> None:
    for tombstone in tombstones:
        if tombstone is not None:
            remove_tree(tombstone)
    state.space_freed()


class PartitionService:
    def __init__(self, state: CoreState, on_partitions_changed: Callable[[Topic], None]) -> None:
        self.state = state
        self.on_partitions_changed = on_partitions_changed  # consumer groups rebalance here

    def create_partitions(self, session: Session, stream_id: Ref, topic_id: Ref, count: int) -> None:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.MANAGE_TOPIC, topic.stream_id, topic.id)
        if not 1 <= count <= MAX_PARTITIONS_PER_REQUEST:
            raise errors.TooManyPartitions(field="partitions_count")
        add_partitions(state, topic, count)
        self.on_partitions_changed(topic)

    def delete_partitions(self, session: Session, stream_id: Ref, topic_id: Ref, count: int) -> None:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.MANAGE_TOPIC, topic.stream_id, topic.id)
        if not 1 <= count <= MAX_PARTITIONS_PER_REQUEST:
            raise errors.TooManyPartitions(field="partitions_count")
        count = min(count, len(topic.partitions))
        doomed = sorted(topic.partitions)[len(topic.partitions) - count :]
        directories = [state.paths.partition_dir(topic.stream_id, topic.id, pid) for pid in doomed]
        try:
            tombstones = retire_directories(state, directories)
        except OSError as error:
            raise errors.CannotDeletePartitionDirectory(
                doomed[0], topic.stream_id, topic.id) from error
        try:
            state.store.delete_partitions(topic.stream_id, topic.id, doomed)
        except BaseException:
            restore_directories(state, tombstones)
            raise
        for partition_id in doomed:
            topic.partitions.pop(partition_id).log.destroy()
        remove_tombstones(state, tombstones)
        self.on_partitions_changed(topic)
