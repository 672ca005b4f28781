"""Messages: send (partition choice, size limit, append, durability), poll (five strategies,
auto-commit) and flush (wire §3.4, §6.3-§6.5).

The hot paths hand raw bytes through: SEND's message region goes to the partition log, which
validates and stamps it in one pass (in a worker thread for large batches, so the event loop
serves other connections meanwhile); POLL answers with the log's bytes as they are on disk,
at most ``[system] max_poll_size`` of them (less where the session's ``poll_limit`` says so:
HTTP's), at least one message.

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
from rill.protocol.primitives import MAX_TOPIC_SIZE_UNLIMITED, Partitioning, PartitioningKind
from rill.server.auth.permissioner import Action
from rill.server.core.consumer_offsets import ConsumerOffsetService, Reader
from rill.server.core.deduplication import MessageDeduplicator
from rill.server.core.model import Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.core.types import AppendResult, LogBounds, ReadFrom, RecordRange, Ref
from rill.server.storage.partition_log import PartitionLog
from rill.server.storage.formats.iggy_v1 import NAME as SEND_FORMAT

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

    async def send_messages(self, session: Session, stream_id: Ref, topic_id: Ref,
                            partitioning: Partitioning, messages: bytes | memoryview,
                            timestamp_us: int | None = None,
                            region_format: str | None = SEND_FORMAT,
                            gaps: bool = False) -> AppendResult:
        """Append a SEND message region to the partition ``partitioning`` picks; answers once
        the append is as durable as the fsync policy promises, with what it assigned (with
        deduplication on, only the messages that were not duplicates; none: last < first).
        ``timestamp_us``: the time to stamp instead of the clock's (a record format whose
        batches carry their own time: the log still never lets timestamps go back).
        ``region_format``: the record format ``messages`` is in (a SEND region, ``iggy-v1``,
        by default; ``kafka-v2``: RecordBatch v2 batches, a Kafka or TANK produce; None: the
        topic's own). A topic of another format gets them converted (``PartitionLog.append_as``:
        per record, stamped at the clock, ``timestamp_us`` unused; Iggy message ids are not
        kept in a kafka-v2 topic, so deduplication does not apply). ``gaps``: a batch whose
        offsets may skip (``PartitionLog.append``; FeatureUnavailable into an iggy-v1 topic).
        Deduplication applies to Iggy SEND regions stored as such (iggy-v1 topics) only: its
        ids are those of that layout."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.WRITE_MESSAGES, topic.stream_id, topic.id)
        partition = self.choose_partition(topic, partitioning)
        if topic.max_topic_size != MAX_TOPIC_SIZE_UNLIMITED and topic.size_bytes >= topic.max_topic_size:
            raise errors.TopicFull(topic.id, topic.stream_id)
        try:
            reserve = state.store.reserve
            if reserve is not None and not reserve.room_for_data():
                raise errors.CannotSaveMessagesToSegment(reason=(
                    "Cannot save messages to segment: the disk is full (its last "
                    f"{reserve.size} bytes are kept for metadata, so deletions still work)"))
            stored_format = partition.log.settings.record_format
            converting = region_format is not None and region_format != stored_format
            # a converted batch is stamped at the clock: its records keep their own times
            now = state.clock() if timestamp_us is None or converting else timestamp_us
            if converting:
                first, last = partition.log.append_as(region_format, messages, now, gaps)
            elif self.deduplicator is None or stored_format != SEND_FORMAT:
                # large batches are stamped and written in a worker thread (storage.partition_log)
                first, last = await partition.log.append_async(messages, now, gaps)
            else:
                first = partition.log.next_offset
                self.deduplicator.append(partition, messages, now)
                last = partition.log.next_offset - 1
            self.appended(partition.log)
            await partition.log.wait_durable()
        except WRITE_FAILURES as error:
            self.write_failures.failed(error)
            raise
        if self.write_failures.count:
            self.write_failures.recovered()
        return AppendResult(partition.id, first, last, now)

    # -- poll ------------------------------------------------------------------------------

    def _start_offset(
        self, partition: Partition, key: str, start: int, value: int, count: int
    ) -> int | None:
        """Where the read starts (``start``: a ``ReadFrom``), or None when there is nothing
        to return."""
        log = partition.log
        if start == ReadFrom.OFFSET:
            return value
        if start == ReadFrom.TIMESTAMP:
            return log.record_offset_for_timestamp(value)
        if start == ReadFrom.FIRST:
            return log.first_offset
        if start == ReadFrom.LAST:
            return log.start_of_last(count)
        next_offset = partition.positions.get(key)  # NEXT
        if next_offset is None:
            return log.first_offset
        if next_offset >= log.next_offset:
            return None
        return next_offset

    def poll_messages(self, session: Session, stream_id: Ref, topic_id: Ref, consumer: Reader,
                      partition_id: int, start: int, value: int, count: int, commit: bool,
                      regions: bool = False, record_format: str | None = None) -> RecordRange:
        """A consumer's read of up to ``count`` records: its partition (a group's member gets
        one dealt when it names none), the start ``start`` (a ``ReadFrom``) and ``value``
        pick, and with ``commit`` its position stored past the last one read.
        ``regions``: large ranges may come as file regions to send as they are
        (``storage.file_region``; for links that can send files). ``record_format``: the
        format the reader takes (``read_range``)."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        if count == 0:
            raise errors.InvalidMessagesCount(field="count")
        partition, key = self.offsets.resolve(session, topic, consumer, partition_id, advance=True)
        log = partition.log
        first = None if log.is_empty else self._start_offset(partition, key, start, value, count)
        if first is None:
            return read_nothing(partition)
        max_bytes = state.config.system.max_poll_size
        if session.poll_limit:
            max_bytes = min(max_bytes, session.poll_limit)
        found = read_range(partition, first, count, max_bytes, regions, record_format)
        if found.count and commit:
            self.offsets.store(partition, key, found.next_read)
        return found

    def read(self, session: Session, stream_id: Ref, topic_id: Ref, partition_id: int,
             offset: int, max_records: int, max_bytes: int, record_format: str | None = None,
             regions: bool = False) -> RecordRange:
        """Records from ``offset`` (from the first one stored when retention removed it) up to
        the high watermark, at most ``max_records`` and ``max_bytes`` (at least one record
        when any is there), by offset only; in ``record_format`` (``read_range``).
        ``regions``: large stored ranges may come as file regions to send as they are (not
        converted ones: ``read_range``)."""
        partition = self._partition(session, Action.READ_MESSAGES, stream_id, topic_id,
                                    partition_id)
        readable = log_bounds(partition.log).high_watermark - offset
        return read_range(partition, offset, min(max_records, max(0, readable)), max_bytes,
                          regions, record_format)

    def bounds(self, session: Session, stream_id: Ref, topic_id: Ref, partition_id: int
               ) -> LogBounds:
        return log_bounds(self._partition(session, Action.READ_MESSAGES, stream_id, topic_id,
                                          partition_id).log)

    def offset_for_timestamp(self, session: Session, stream_id: Ref, topic_id: Ref,
                             partition_id: int, timestamp_us: int) -> int | None:
        """The first offset stored at or after ``timestamp_us``; None when there is none."""
        return self._partition(session, Action.READ_MESSAGES, stream_id, topic_id,
                               partition_id).log.offset_for_timestamp(timestamp_us)

    def record_at_or_after(self, session: Session, stream_id: Ref, topic_id: Ref,
                           partition_id: int, timestamp_us: int) -> tuple[int, int] | None:
        """(offset, timestamp µs) of the first record whose timestamp is >= ``timestamp_us``,
        exact to the record in every record format and codec; None when there is none."""
        return self._partition(session, Action.READ_MESSAGES, stream_id, topic_id,
                               partition_id).log.record_at_or_after(timestamp_us)

    def max_timestamp(self, session: Session, stream_id: Ref, topic_id: Ref,
                      partition_id: int) -> int:
        """The largest timestamp (µs) the partition's index holds; 0 when it is empty."""
        log = self._partition(session, Action.READ_MESSAGES, stream_id, topic_id,
                              partition_id).log
        return 0 if log.is_empty else log.last_timestamp

    def _partition(self, session: Session, action: Action, stream_id: Ref, topic_id: Ref,
                   partition_id: int) -> Partition:
        """The partition, once ``session`` may do ``action`` on its topic."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, action, topic.stream_id, topic.id)
        return state.find_partition(topic, partition_id)

    # -- flush -----------------------------------------------------------------------------

    async def flush_unsaved_buffer(self, session: Session, stream_id: Ref, topic_id: Ref,
                                   partition_id: int) -> None:
        """rill writes every batch when it is sent, so nothing is ever buffered in memory;
        flushing makes the partition's written bytes durable now (an fsync) whatever the policy."""
        partition = self._partition(session, Action.WRITE_MESSAGES, stream_id, topic_id,
                                    partition_id)
        await partition.log.sync()


def log_bounds(log: PartitionLog) -> LogBounds:
    end = log.next_offset
    return LogBounds(log.first_offset, end, end)


def read_nothing(partition: Partition) -> RecordRange:
    log = partition.log
    return RecordRange(partition.id, log.next_offset, 0, [], log.settings.record_format,
                       log_bounds(log))


def read_range(partition: Partition, offset: int, max_records: int, max_bytes: int,
               regions: bool = False, record_format: str | None = None) -> RecordRange:
    """The stored bytes of up to ``max_records`` records from ``offset``, as they are on disk
    (with ``regions``, large ranges as file regions: ``PartitionLog.read``). ``record_format``:
    the format the reader takes; when the log keeps another (a Kafka-written topic read by an
    Iggy client, or the other way), its records are converted, per record, exactly the offsets
    asked for (``PartitionLog.read_as``); None or the log's own format: the stored bytes."""
    log = partition.log
    first_stored = log.first_offset
    first = max(offset, first_stored)
    if record_format is not None and record_format != log.settings.record_format:
        converted = log.read_as(record_format, first, max_records, max_bytes)
        end = log.next_offset
        return RecordRange(partition.id, converted.first_offset, converted.count,
                           [converted.records] if converted.count else [], record_format,
                           LogBounds(first_stored, end, end), converted.end_offset)
    count, chunks = log.read(first, max_records, max_bytes, regions)
    end = log.next_offset  # (bounds inline: this is the poll path)
    return RecordRange(partition.id, first, count, chunks, log.settings.record_format,
                       LogBounds(first_stored, end, end))
