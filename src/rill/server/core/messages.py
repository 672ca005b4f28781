"""Messages: send (partition choice, size limit, append, durability), poll (five strategies,
auto-commit) and flush (wire §3.4, §6.3-§6.5).

The hot paths hand raw bytes through: SEND's message region goes to the partition log, which
validates and stamps it in one pass (in a worker thread for large batches, so the event loop
serves other connections meanwhile); POLL answers with the log's bytes as they are on disk,
at most ``[system] max_poll_size`` of them (at least one message).

Write failures (a full disk, an I/O error) are logged once when they start and once when writes
succeed again, not at every failed SEND. While the metadata space reserve is released (the disk
was full), a SEND may not take the last bytes the reserve left: they are kept for metadata.
"""

from __future__ import annotations

import logging
import struct
from typing import Callable

import xxhash

from rill import errors
from rill.protocol.commands.messages import FlushUnsavedBuffer, PollMessages, SendMessages
from rill.protocol.primitives import MAX_TOPIC_SIZE_UNLIMITED, Partitioning, PartitioningKind
from rill.protocol.primitives import PollingKind
from rill.protocol.responses.messages import PolledMessages
from rill.server.core.consumer_offsets import ConsumerOffsetService
from rill.server.core.deduplication import MessageDeduplicator
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.storage.partition_log import PartitionLog

_U32 = struct.Struct("<I")
log = logging.getLogger(__name__)

# what a failed append or fsync raises (also creating the next segment at a rollover)
WRITE_FAILURES = (
    errors.CannotSaveMessagesToSegment,
    errors.CannotSyncFile,
    errors.CannotCreateSegmentLogFile,
    errors.CannotCreateSegmentIndexFile,
)


class WriteFailures:
    """Logs the first failure of a run of failed writes, and the first success after it."""

    def __init__(self) -> None:
        self.count = 0  # failures since the last success

    def failed(self, error: errors.RillError) -> None:
        if not self.count:
            log.error("writing messages fails: %s (further failures are counted, not logged)",
                      error.reason)
        self.count += 1

    def recovered(self) -> None:
        log.warning("writing messages works again, after %d failed attempt(s)", self.count)
        self.count = 0


def partition_for_key(key: bytes, partitions_count: int) -> int:
    """Messages-key partitioning: xxHash32(key, seed 0) mod N, with 0 meaning N (wire §6.3)."""
    partition = xxhash.xxh32_intdigest(key) % partitions_count
    return partition or partitions_count


class MessageService:
    def __init__(self, state: CoreState, offsets: ConsumerOffsetService,
                 appended: Callable[[PartitionLog], None]) -> None:
        self.state = state
        self.offsets = offsets
        self.appended = appended  # after every append: metrics, and the long polls it wakes
        # None when deduplication is off: the send path then pays nothing for it
        self.deduplicator = MessageDeduplicator.from_config(
            state.config.system.message_deduplication
        )
        self.write_failures = WriteFailures()

    # -- send ------------------------------------------------------------------------------

    def choose_partition(self, topic: Topic, partitioning: Partitioning) -> Partition:
        kind, value = partitioning.kind, partitioning.value
        if kind != PartitioningKind.BALANCED and not 1 <= len(value) <= 255:
            raise errors.InvalidKeyValueLength()
        if not topic.partitions:
            raise errors.NoPartitions(topic.id, topic.stream_id)
        if kind == PartitioningKind.BALANCED:
            partition_id = topic.next_balanced_partition()
        elif kind == PartitioningKind.PARTITION_ID:
            if len(value) != 4:
                raise errors.InvalidNumberEncoding()
            partition_id = _U32.unpack(value)[0]
        else:
            partition_id = partition_for_key(value, len(topic.partitions))
        return self.state.find_partition(topic, partition_id)

    async def send_messages(self, session: Session, command: SendMessages) -> None:
        state = self.state
        topic = state.find_topic(command.stream_id, command.topic_id)
        state.authorize(session, "send_messages", topic.stream_id, topic.id)
        partition = self.choose_partition(topic, command.partitioning)
        if topic.max_topic_size != MAX_TOPIC_SIZE_UNLIMITED and topic.size_bytes >= topic.max_topic_size:
            raise errors.TopicFull(topic.id, topic.stream_id)
        try:
            reserve = state.store.reserve
            if reserve is not None and not reserve.room_for_data():
                raise errors.CannotSaveMessagesToSegment(reason=(
                    "Cannot save messages to segment: the disk is full (its last "
                    f"{reserve.size} bytes are kept for metadata, so deletions still work)"))
            if self.deduplicator is None:
                # large batches are stamped and written in a worker thread (storage.partition_log)
                await partition.log.append_async(command.messages, state.clock())
            else:
                self.deduplicator.append(partition, command.messages, state.clock())
            self.appended(partition.log)
            await partition.log.wait_durable()
        except WRITE_FAILURES as error:
            self.write_failures.failed(error)
            raise
        if self.write_failures.count:
            self.write_failures.recovered()

    # -- poll ------------------------------------------------------------------------------

    def _start_offset(
        self, partition: Partition, key: tuple[int, int], command: PollMessages
    ) -> int | None:
        """Where the poll starts, or None when there is nothing to return."""
        log = partition.log
        strategy = command.strategy
        kind = strategy.kind
        if kind == PollingKind.OFFSET:
            return strategy.value
        if kind == PollingKind.TIMESTAMP:
            return log.offset_for_timestamp(strategy.value)
        if kind == PollingKind.FIRST:
            return log.first_offset
        if kind == PollingKind.LAST:
            return max(log.first_offset, log.current_offset + 1 - command.count)
        stored = partition.offsets.get(key)  # NEXT
        if stored is None:
            return log.first_offset
        if stored >= log.current_offset:
            return None
        return stored + 1

    def poll_messages(self, session: Session, command: PollMessages) -> PolledMessages:
        state = self.state
        topic = state.find_topic(command.stream_id, command.topic_id)
        state.authorize(session, "poll_messages", topic.stream_id, topic.id)
        if command.count == 0:
            raise errors.InvalidMessagesCount(field="count")
        partition, key = self.offsets.resolve(
            session, topic, command.consumer, command.partition_id, advance=True
        )
        log = partition.log
        start = None if log.is_empty else self._start_offset(partition, key, command)
        if start is None:
            return PolledMessages(partition.id, log.current_offset, 0, b"")
        first = max(start, log.first_offset)
        count, chunks = log.read(first, command.count, state.config.system.max_poll_size)
        if count and command.auto_commit:
            self.offsets.store(partition, key, first + count - 1)
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return PolledMessages(partition.id, log.current_offset, count, raw)

    # -- flush -----------------------------------------------------------------------------

    async def flush_unsaved_buffer(self, session: Session, command: FlushUnsavedBuffer) -> None:
        """rill writes every batch when it is sent, so nothing is ever buffered in memory;
        flushing makes the partition's written bytes durable now (an fsync) whatever the policy."""
        state = self.state
        topic = state.find_topic(command.stream_id, command.topic_id)
        state.authorize(session, "flush_unsaved_buffer", topic.stream_id, topic.id)
        partition = state.find_partition(topic, command.partition_id)
        await partition.log.sync()
