"""Catalog changes applied to the model: the one place each kind of confirmed change reaches
the in-memory model, whoever made it.

Owns: ``apply`` (a change another node made, delivered by the catalog: ``Catalog.follow``,
``Core.apply``) and the functions it shares with the services that make the same change
here (``apply_position``: ``core.consumer_offsets``; ``apply_stream_renamed``:
``core.streams``; ``apply_topic_updated``: ``core.topics``; a group's and a user's, which
their services keep: ``ConsumerGroupService`` and ``UserService``, ``apply_created``,
``apply_updated``, ``apply_deleted``; a personal access token's, kept by
``PersonalAccessTokenService``: ``TokenStored``, ``TokenDeleted``), so that a change confirmed for this node and one
delivered from elsewhere leave the same model (and the same manifests: a stream's or topic's
``stream.json``/``topic.json`` follow the catalog, best effort, as a start writes a missing one
again). A change of something the model does not hold (deleted here meanwhile) is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from rill.server.core.catalog import (
    CatalogChange,
    GroupCreated,
    GroupDeleted,
    PartitionRow,
    PartitionsCreated,
    PositionRow,
    PositionStored,
    StreamCreated,
    StreamDeleted,
    StreamRenamed,
    StreamRow,
    TopicCreated,
    TopicDeleted,
    TopicRow,
    TopicUpdated,
    UserCreated,
    UserDeleted,
    UserUpdated,
)
from rill.server.core.consumer_groups import ConsumerGroupService
from rill.server.core.model import Partition, Stream, Topic
from rill.server.core.state import CoreState
from rill.server.core.tokens import (
    PersonalAccessTokenService,
    TokenDeleted,
    TokenStored,
)
from rill.server.core.users import UserService
from rill.server.storage.directories import (
    remove_tree,
    remove_trees,
    retire_all,
    write_manifest,
)

log = logging.getLogger(__name__)


def topic_row(topic: Topic) -> TopicRow:
    return TopicRow(
        topic.stream_id, topic.id, topic.name, topic.created_at, topic.compression_algorithm,
        topic.message_expiry, topic.max_topic_size, topic.replication_factor, topic.record_format,
    )


def apply(state: CoreState, groups: ConsumerGroupService, users: UserService,
          change: CatalogChange | TokenStored | TokenDeleted,
          tokens: PersonalAccessTokenService | None = None) -> None:
    """A change confirmed elsewhere, applied as the node's own confirmation of it would be
    (``tokens``: where token changes go; without it they are refused)."""
    if isinstance(change, (TokenStored, TokenDeleted)) and tokens is not None:
        if isinstance(change, TokenStored):
            if change.row.user_id in users.users:
                tokens.apply_stored(change.row)
        else:
            tokens.apply_deleted(change.user_id, change.name)
    elif isinstance(change, (GroupCreated, GroupDeleted)):
        _apply_group(state, groups, change)
    elif isinstance(change, UserCreated):
        if change.row.id not in users.users:
            users.apply_created(change.row)
    elif isinstance(change, UserUpdated):
        user = users.users.get(change.row.id)
        if user is not None:
            users.apply_updated(user, change.row)
    elif isinstance(change, UserDeleted):
        user = users.users.get(change.id)
        if user is not None:
            users.apply_deleted(user)
    elif isinstance(change, PositionStored):
        row = change.row
        partition = _partition(state, row.stream_id, row.topic_id, row.partition_id)
        if partition is not None:
            apply_position(partition, row)
    elif isinstance(change, StreamRenamed):
        if change.stream_id in state.streams:
            apply_stream_renamed(state, state.streams[change.stream_id], change.name)
    elif isinstance(change, TopicUpdated):
        topic = _topic(state, change.row.stream_id, change.row.id)
        if topic is not None:
            apply_topic_updated(state, topic, change.row)
    elif isinstance(change, StreamCreated):
        if change.row.id not in state.streams:
            apply_stream_created(state, change.row)
    elif isinstance(change, TopicCreated):
        stream = state.streams.get(change.row.stream_id)
        if stream is not None and change.row.id not in stream.topics:
            apply_topic_created(state, stream, change.row, change.partitions)
    elif isinstance(change, PartitionsCreated):
        if change.partitions:
            first = change.partitions[0]
            topic = _topic(state, first.stream_id, first.topic_id)
            if topic is not None:
                for row in change.partitions:
                    if row.id not in topic.partitions:
                        topic.partitions[row.id] = state.open_partition(topic, row.id,
                                                                        row.created_at)
                groups.partitions_changed(topic)  # its groups deal the new ones too
    elif isinstance(change, TopicDeleted):
        topic = _topic(state, change.stream_id, change.topic_id)
        if topic is not None:
            groups.topic_deleted(topic)
            apply_topic_deleted(state, topic)
    elif isinstance(change, StreamDeleted):
        stream = state.streams.get(change.stream_id)
        if stream is not None:
            groups.stream_deleted(stream)
            for topic in list(stream.topics.values()):
                apply_topic_deleted(state, topic)
            del state.streams[stream.id]
            _remove_soon(state, state.paths.stream_dir(stream.id))
    else:  # a kind this core does not apply from events yet (``core.catalog``)
        raise TypeError(f"cannot apply {type(change).__name__} from the catalog")


def apply_position(partition: Partition, row: PositionRow) -> None:
    """A stored position: where ``row.consumer`` reads next, with its note and epoch (a
    position stored without them has none)."""
    key = row.consumer
    partition.positions[key] = row.next_offset
    for kept, value in ((partition.position_notes, row.note),
                        (partition.position_epochs, row.leader_epoch)):
        if value is None:
            kept.pop(key, None)
        else:
            kept[key] = value


def apply_stream_renamed(state: CoreState, stream: Stream, name: str) -> None:
    if stream.name != name:
        state.streams.rename(stream.id, name)
    try:
        write_manifest(state.paths.stream_manifest(stream.id),
                       StreamRow(stream.id, stream.name, stream.created_at), state.durability)
    except OSError:
        log.exception("cannot write the manifest of stream %d", stream.id)


def apply_topic_updated(state: CoreState, topic: Topic, row: TopicRow) -> None:
    """New name and settings (its record format and creation time stay)."""
    stream = state.streams[topic.stream_id]
    if topic.name != row.name:
        stream.topics.rename(topic.id, row.name)
    topic.compression_algorithm = row.compression_algorithm
    topic.message_expiry = row.message_expiry
    topic.max_topic_size = row.max_topic_size
    topic.room = None  # (its room is counted against the new maximum)
    topic.replication_factor = row.replication_factor
    try:
        write_manifest(state.paths.topic_manifest(topic.stream_id, topic.id), topic_row(topic),
                       state.durability)
    except OSError:
        log.exception("cannot write the manifest of topic %d of stream %d", topic.id,
                      topic.stream_id)


def _apply_group(state: CoreState, groups: ConsumerGroupService,
                 change: GroupCreated | GroupDeleted) -> None:
    topic = (_topic(state, change.row.stream_id, change.row.topic_id)
             if isinstance(change, GroupCreated) else
             _topic(state, change.stream_id, change.topic_id))
    if topic is None:
        return
    if isinstance(change, GroupCreated):
        groups.apply_created(topic, change.row)
        return
    group = groups.groups_of(topic).get(change.id)
    if group is not None:
        groups.apply_deleted(topic, group)


def _topic(state: CoreState, stream_id: int, topic_id: int) -> Topic | None:
    stream = state.streams.get(stream_id)
    return stream.topics.get(topic_id) if stream is not None else None


def _partition(state: CoreState, stream_id: int, topic_id: int, partition_id: int
               ) -> Partition | None:
    topic = _topic(state, stream_id, topic_id)
    return topic.partitions.get(partition_id) if topic is not None else None


def apply_stream_created(state: CoreState, row: StreamRow) -> Stream:
    """A stream another node created: its manifest and its place in the model."""
    write_manifest(state.paths.stream_manifest(row.id), row, state.durability)
    stream = state.streams[row.id] = Stream(row.id, row.name, row.created_at)
    return stream


def apply_topic_created(state: CoreState, stream: Stream, row: TopicRow,
                        partitions: Sequence[PartitionRow]) -> Topic:
    """A topic another node created: its manifest, a log per partition (on the loop: a
    cluster's topics are created at human speed) and its place in the model."""
    topic = Topic(stream_id=row.stream_id, id=row.id, name=row.name, created_at=row.created_at,
                  compression_algorithm=row.compression_algorithm,
                  message_expiry=row.message_expiry, max_topic_size=row.max_topic_size,
                  replication_factor=row.replication_factor, record_format=row.record_format)
    write_manifest(state.paths.topic_manifest(row.stream_id, row.id), row, state.durability)
    for partition in partitions:
        topic.partitions[partition.id] = state.open_partition(topic, partition.id,
                                                              partition.created_at)
    stream.topics[topic.id] = topic
    return topic


def apply_topic_deleted(state: CoreState, topic: Topic) -> None:
    """A topic another node deleted: out of the model, its logs closed and its files gone."""
    stream = state.streams.get(topic.stream_id)
    if stream is not None and stream.topics.get(topic.id) is topic:
        del stream.topics[topic.id]
    for partition in topic.partitions.values():
        partition.log.close(sync=False)
    _remove_soon(state, state.paths.topic_dir(topic.stream_id, topic.id))


def _remove_soon(state: CoreState, directory: Path) -> None:
    """Delete ``directory`` without holding up the event loop: renamed to its tombstone now
    (its path is free at once for a topic made again under the same ids), the tombstone
    removed in a worker thread (unlinking a deleted topic's files took the loop half a second
    for 300 MB here). A stop in between leaves the tombstone, which the next start removes
    (``core.reconciliation``). Without a running loop, all of it here."""
    try:
        tombstones = retire_all([directory], state.durability)
    except OSError as error:
        log.warning("cannot rename %s to its tombstone (%s): removing it in place", directory,
                    error)
        remove_tree(directory)
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        remove_trees(tombstones)
        state.space_freed()
        return
    removal = loop.run_in_executor(None, remove_trees, tombstones)
    removal.add_done_callback(lambda _: state.space_freed())
