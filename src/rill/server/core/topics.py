"""Topics: get, list, create, update, delete, purge (wire §3.7), with the server defaults for
expiry and maximum size resolved at create/update time.

Files and metadata change in the order ``core.partitions`` and ``storage.directories``
describe: a failed create leaves nothing behind, a crash never resurrects a deleted topic.
"""

from __future__ import annotations

import logging
from typing import Callable

from rill import errors
from rill.protocol.primitives import (
    EXPIRY_NEVER,
    EXPIRY_SERVER_DEFAULT,
    MAX_TOPIC_SIZE_SERVER_DEFAULT,
    MAX_TOPIC_SIZE_UNLIMITED,
)
from rill.server.auth.permissioner import Action
from rill.server.core.applying import apply_topic_updated, topic_row
from rill.server.config import NEVER
from rill.server.core.model import Session, Topic
from rill.server.core.names import validate_name
from rill.server.core.partitions import (
    MAX_PARTITIONS_PER_REQUEST,
    add_partitions,
    purge_logs,
    remove_tombstones,
    restore_directories,
    retire_directories,
)
from rill.server.core.catalog import TopicRow
from rill.server.core.state import CoreState, catalogue_change
from rill.server.core.types import Ref, TopicSpec
from rill.server.storage.formats import format_named

log = logging.getLogger(__name__)


def _known_format(name: str) -> str:
    return format_named(name).name  # FeatureUnavailable for a format this server cannot store


class TopicService:
    def __init__(self, state: CoreState, on_topic_deleted: Callable[[Topic], None]) -> None:
        self.state = state
        self.on_topic_deleted = on_topic_deleted  # consumer groups drop the topic's groups

    def get_topic(self, session: Session, stream_id: Ref, topic_id: Ref) -> Topic:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_TOPIC, topic.stream_id, topic.id)
        return topic

    def get_topics(self, session: Session, stream_id: Ref) -> list[Topic]:
        stream = self.state.find_stream(stream_id)
        self.state.authorize(session, Action.READ_TOPIC, stream.id)
        return [stream.topics[tid] for tid in sorted(stream.topics)]

    def default_message_expiry(self) -> int:
        """The message expiry (µs, or EXPIRY_NEVER) of a topic created with the default."""
        default = self.state.config.system.segment.message_expiry
        return EXPIRY_NEVER if default == NEVER else int(default * 1_000_000)

    def _resolve_expiry(self, expiry: int) -> int:
        if expiry != EXPIRY_SERVER_DEFAULT:
            return expiry
        return self.default_message_expiry()

    def _resolve_max_size(self, max_size: int) -> int:
        if max_size == MAX_TOPIC_SIZE_SERVER_DEFAULT:
            return self.state.config.system.topic.max_size
        if max_size != MAX_TOPIC_SIZE_UNLIMITED:
            segment_size = self.state.config.system.segment.size
            if max_size < segment_size:
                raise errors.InvalidTopicSize(max_size, segment_size, field="max_topic_size")
        return max_size

    @catalogue_change
    async def create_topic(self, session: Session, stream_id: Ref, spec: TopicSpec) -> Topic:
        state = self.state
        stream = state.find_stream(stream_id)
        state.authorize(session, Action.CREATE_TOPIC, stream.id)
        name = validate_name(spec.name, errors.InvalidTopicName)
        if spec.partitions_count > MAX_PARTITIONS_PER_REQUEST:
            raise errors.TooManyPartitions(field="partitions_count")
        if stream.topics.named(name) is not None:
            raise errors.TopicNameAlreadyExists(name, stream.id, field="name")
        topic_id = spec.topic_id or stream.topics.lowest_free_id()
        if topic_id in stream.topics:
            raise errors.TopicIdAlreadyExists(topic_id, stream.id, field="topic_id")
        topic = Topic(
            stream_id=stream.id,
            id=topic_id,
            name=name,
            created_at=state.clock(),
            compression_algorithm=int(spec.compression_algorithm),
            message_expiry=self._resolve_expiry(spec.message_expiry),
            max_topic_size=self._resolve_max_size(spec.max_topic_size),
            replication_factor=spec.replication_factor or (
                state.config.cluster.default_replication_factor if state.cluster else 1),
            record_format=_known_format(spec.record_format),
        )
        await add_partitions(state, topic, spec.partitions_count, topic_row(topic))
        stream.topics[topic.id] = topic
        return topic

    async def update_topic(self, session: Session, stream_id: Ref, topic_id: Ref,
                           spec: TopicSpec) -> None:
        """New settings (``partitions_count`` and ``topic_id`` are not changed here)."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.MANAGE_TOPIC, topic.stream_id, topic.id)
        name = validate_name(spec.name, errors.InvalidTopicName)
        stream = state.streams[topic.stream_id]
        if stream.topics.named(name) not in (None, topic):
            raise errors.TopicNameAlreadyExists(name, stream.id, field="name")
        expiry = self._resolve_expiry(spec.message_expiry)
        max_size = self._resolve_max_size(spec.max_topic_size)
        replication = spec.replication_factor or 1
        row = await state.store.update_topic(
            TopicRow(
                topic.stream_id, topic.id, name, topic.created_at,
                int(spec.compression_algorithm), expiry, max_size, replication,
                topic.record_format,
            )
        )
        apply_topic_updated(state, topic, row)  # and its manifest (``core.applying``)

    @catalogue_change
    async def delete_topic(self, session: Session, stream_id: Ref, topic_id: Ref) -> None:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.MANAGE_TOPIC, topic.stream_id, topic.id)
        topics = state.streams[topic.stream_id].topics
        del topics[topic.id]  # nothing new reaches it; put back if the deletion fails
        directory = state.paths.topic_dir(topic.stream_id, topic.id)
        try:
            tombstones = await retire_directories(state, [directory])
        except OSError as error:
            topics[topic.id] = topic
            raise errors.CannotDeleteTopicDirectory(topic.id, topic.stream_id, directory) from error
        try:
            await state.store.delete_topic(topic.stream_id, topic.id)
        except BaseException:
            topics[topic.id] = topic
            await restore_directories(state, tombstones)
            raise
        self.on_topic_deleted(topic)
        await remove_tombstones(state, tombstones, topic.partitions.values())

    @catalogue_change
    async def purge_topic(self, session: Session, stream_id: Ref, topic_id: Ref) -> None:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.MANAGE_TOPIC, topic.stream_id, topic.id)
        await state.store.purge_topic(topic.stream_id, topic.id)
        if state.cluster is not None:
            return  # every replica empties itself for the partition's new incarnation
        await purge_logs(state, list(topic.partitions.values()))
