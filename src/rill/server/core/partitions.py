"""Partitions: create (append N+1..N+count) and delete (the highest-numbered) (wire §3.8).

A failure leaves nothing behind: new partition logs (and a new topic's manifest) are made
first and journalled last, and every file made is removed when any step fails. Deletion
renames the directories to tombstones, commits, then removes them (``storage.directories``).

The event loop never waits for the files: making 1,000 partition logs (directories, segment
files, directory syncs) or removing 2,000 takes seconds on a busy disk, so it runs in a
worker thread while the loop serves every other connection. The metadata store commit and
the model change stay on the loop, in one step each, so the model changes all at once:
  * creating: the new logs are made off the loop, then journalled and published together (a
    topic appears only once all its partitions exist; a failure removes what was made, off
    the loop too, and publishes nothing);
  * deleting: what is deleted leaves the model first (nothing new reaches it), its directories
    become tombstones off the loop, the store commits, then the logs are closed (a few at a
    time between loop turns) and the tombstones removed off the loop; a failure before the
    commit renames the tombstones back and puts the partitions (topic, stream) back as they
    were;
  * purging (a topic's or a stream's messages): the store commits, then the logs are emptied
    one between two loop turns (``purge_logs``).
Every such change is a ``catalogue_change`` (``core.state``): one at a time, each to its end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable, Iterable

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.catalog import PartitionRow, TopicRow
from rill.server.core.state import CoreState, catalogue_change
from rill.server.core.types import Ref
from rill.server.storage.directories import (
    remove_tree,
    remove_trees,
    restore_all,
    retire_all,
    write_manifest,
)

MAX_PARTITIONS_PER_REQUEST = 1000
MAX_PARTITIONS_PER_TOPIC = 100_000
CLOSES_PER_TURN = 64  # logs closed between two turns of the event loop


async def add_partitions(
    state: CoreState, topic: Topic, count: int, new_topic: TopicRow | None = None
) -> None:
    """Open ``count`` new partition logs (in a worker thread), then journal them in the
    catalog. With ``new_topic`` the topic's manifest is written first and its row goes into
    the same change as its partitions, so a topic never exists without them; ``topic`` takes
    the settings the catalog confirmed. On any failure every file made here is removed. The
    caller is a ``catalogue_change``."""
    if len(topic.partitions) + count > MAX_PARTITIONS_PER_TOPIC:
        raise errors.TooManyPartitions(field="partitions_count")
    first = len(topic.partitions) + 1
    created_at = state.clock()
    rows = [
        PartitionRow(topic.stream_id, topic.id, pid, created_at)
        for pid in range(first, first + count)
    ]
    opened = await asyncio.to_thread(_make_partitions, state, topic, rows, new_topic)
    try:
        if new_topic is not None:
            held, confirmed = await state.store.create_topic(new_topic, rows)
            topic.name, topic.created_at = held.name, held.created_at  # as confirmed
            topic.compression_algorithm = held.compression_algorithm
            topic.message_expiry, topic.max_topic_size = held.message_expiry, held.max_topic_size
            topic.room = None
            topic.replication_factor = held.replication_factor
        else:
            confirmed = await state.store.create_partitions(rows)
    except BaseException:
        await asyncio.to_thread(_unmake_partitions, state, topic, opened, new_topic)
        raise
    made = {partition.id: partition for partition in opened}
    for row in confirmed:
        partition = topic.partitions[row.id] = made[row.id]
        partition.created_at = row.created_at


def _make_partitions(state: CoreState, topic: Topic, rows: list[PartitionRow],
                     new_topic: TopicRow | None) -> list[Partition]:
    """(Worker thread.) The new topic's manifest and the partitions' logs, their parent
    directory synced once; on a failure nothing made is left."""
    paths = state.paths
    opened: list[Partition] = []
    try:
        if new_topic is not None:
            write_manifest(paths.topic_manifest(topic.stream_id, topic.id), new_topic,
                           state.durability)
        for row in rows:
            opened.append(state.open_partition(topic, row.id, row.created_at, sync_parent=False))
        if rows:
            state.logs.sync_created(topic.stream_id, topic.id)
    except BaseException as error:
        _unmake_partitions(state, topic, opened, new_topic)
        if isinstance(error, OSError):
            failed = rows[len(opened)].id if len(opened) < len(rows) else rows[-1].id
            raise errors.CannotCreatePartitionDirectory(
                failed, topic.stream_id, topic.id, reason=(
                    f"Cannot create partition {failed} of topic {topic.id} of stream "
                    f"{topic.stream_id}: {error.strerror or error}")
            ) from error
        raise
    return opened


def _unmake_partitions(state: CoreState, topic: Topic, opened: list[Partition],
                       new_topic: TopicRow | None) -> None:
    """(Worker thread.) Remove logs made but never published (and the new topic's directory)."""
    for partition in opened:
        partition.log.destroy()
    if new_topic is not None:
        remove_tree(state.paths.topic_dir(topic.stream_id, topic.id))


async def retire_directories(state: CoreState, directories: list[Path]) -> list[Path | None]:
    """Phase one of deleting several directories, in a worker thread: all tombstoned, or none
    (then raises OSError)."""
    return await asyncio.to_thread(retire_all, directories, state.durability)


async def restore_directories(state: CoreState, tombstones: list[Path | None]) -> None:
    await asyncio.to_thread(restore_all, tombstones, state.durability)


async def remove_tombstones(state: CoreState, tombstones: list[Path | None],
                            partitions: Iterable[Partition] = ()) -> None:
    """Phase three, after the commit: close ``partitions``' logs (on the loop, whose files they
    share with the descriptor cache and the syncer, a few between turns), then remove the
    tombstones in a worker thread."""
    for number, partition in enumerate(partitions, 1):
        partition.log.close(sync=False)
        if number % CLOSES_PER_TURN == 0:
            await asyncio.sleep(0)
    await asyncio.to_thread(remove_trees, tombstones)
    state.space_freed()


async def purge_logs(state: CoreState, partitions: Iterable[Partition]) -> None:
    """Empty ``partitions``' logs (``Partition.purge``) one at a time, with a turn of the event
    loop between two: each deletes its segment files, makes a new one and syncs its directory,
    so a topic of 1,000 partitions takes seconds, which every other client would otherwise
    wait through. Each waits for its log's append in flight first (a purge would block the
    loop on it). The caller is a ``catalogue_change``: no partition is deleted meanwhile."""
    for partition in partitions:
        await partition.log.wait_idle()
        partition.purge()
        await asyncio.sleep(0)
    state.space_freed()


class PartitionService:
    def __init__(self, state: CoreState, on_partitions_changed: Callable[[Topic], None]) -> None:
        self.state = state
        self.on_partitions_changed = on_partitions_changed  # consumer groups rebalance here

    @catalogue_change
    async def create_partitions(self, session: Session, stream_id: Ref, topic_id: Ref,
                                count: int, up_to: bool = False) -> None:
        """``count`` new partitions; with ``up_to``, as many as make ``count`` in all, counted
        when the change runs (after the changes queued before it)."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.MANAGE_TOPIC, topic.stream_id, topic.id)
        if up_to:
            count -= len(topic.partitions)
        if not 1 <= count <= MAX_PARTITIONS_PER_REQUEST:
            raise errors.TooManyPartitions(field="partitions_count")
        await add_partitions(state, topic, count)
        self.on_partitions_changed(topic)

    @catalogue_change
    async def delete_partitions(self, session: Session, stream_id: Ref, topic_id: Ref,
                                count: int) -> None:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.MANAGE_TOPIC, topic.stream_id, topic.id)
        if not 1 <= count <= MAX_PARTITIONS_PER_REQUEST:
            raise errors.TooManyPartitions(field="partitions_count")
        count = min(count, len(topic.partitions))
        doomed = sorted(topic.partitions)[len(topic.partitions) - count :]
        removed = [topic.partitions.pop(pid) for pid in doomed]  # nothing new reaches them

        def put_back() -> None:
            for partition in removed:
                topic.partitions[partition.id] = partition

        directories = [state.paths.partition_dir(topic.stream_id, topic.id, pid) for pid in doomed]
        try:
            tombstones = await retire_directories(state, directories)
        except OSError as error:
            put_back()
            raise errors.CannotDeletePartitionDirectory(
                doomed[0], topic.stream_id, topic.id) from error
        try:
            await state.store.delete_partitions(topic.stream_id, topic.id, doomed)
        except BaseException:
            put_back()
            await restore_directories(state, tombstones)
            raise
        self.on_partitions_changed(topic)
        await remove_tombstones(state, tombstones, removed)
