"""Messages: append (size limit, the append, durability), reads of a partition bounded by the
high watermark, and flush.

The hot paths hand raw bytes through: an append's region goes to the partition log, which
validates and stamps it in one pass (in a worker thread for large batches, so the event loop
serves other connections meanwhile); a read answers with the log's bytes as they are on disk.
How a protocol picks a partition (``PartitionChooser``), which records it admits
(``Admission``) and where its consumers start reading are its own rules
(``protocols.iggy.partitioning``, ``deduplication``, ``polling``): the core takes a partition
id (1..N) or a chooser, and reads from an offset.

Write failures (a full disk, an I/O error) are logged once when they start and once when writes
succeed again, not at every failed append. While the metadata space reserve is released (the
disk was full), an append may not take the last bytes the reserve left: they are kept for
metadata.
"""

from __future__ import annotations

import logging
from typing import Callable

from rill import errors
from rill.protocol.primitives import MAX_TOPIC_SIZE_UNLIMITED
from rill.server.auth.permissioner import Action
from rill.server.core.cluster_view import ACKS_ALL, ACKS_LEADER
from rill.server.core.consumer_offsets import ConsumerOffsetService
from rill.server.core.long_poll import AppendSignals
from rill.server.core.log import Log
from rill.server.core.model import LEADER, Partition, Session, Topic
from rill.server.core.state import CoreState
from rill.server.core.types import (
    Admission,
    AppendResult,
    LogBounds,
    PartitionChooser,
    RecordRange,
    Ref,
)

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


class MessageService:
    def __init__(self, state: CoreState, offsets: ConsumerOffsetService,
                 appended: Callable[[Log], None], signals: AppendSignals) -> None:
        self.state = state
        self.offsets = offsets
        self.appended = appended  # after every append: metrics, and the long polls it wakes
        self.signals = signals  # what readers wait on (woken by every append: ``appended``)
        self.write_failures = WriteFailures()

    # -- append ----------------------------------------------------------------------------

    async def append(self, session: Session, stream_id: Ref, topic_id: Ref,
                     partition: int | PartitionChooser, region: bytes | memoryview,
                     timestamp_us: int | None = None, region_format: str | None = None,
                     gaps: bool = False, admit: Admission | None = None,
                     acks: int = ACKS_LEADER, ack_timeout: float = 30.0) -> AppendResult:
        """Append ``region`` to partition ``partition`` (an id 1..N, or a protocol's chooser,
        called once the append is authorized); answers once it is as durable as the fsync
        policy promises, with what it assigned (with an admission rule, only what it admitted;
        none: last < first).
        ``timestamp_us``: the time to stamp instead of the clock's (a record format whose
        batches carry their own time: the log still never lets timestamps go back).
        ``region_format``: the record format ``region`` is in (None: the topic's own). A topic
        of another format gets it converted (``Log.append_as``: per record, stamped at
        the clock, ``timestamp_us`` unused; ``admit`` unused). ``gaps``: a batch whose offsets
        may skip (``Log.append``; FeatureUnavailable into an iggy-v1 topic).
        ``admit``: an admission rule (``core.types.Admission``), run with the log's append
        with no suspension between them, so no other append to the partition comes in
        between; what it accepts is remembered once the write is done.
        In a cluster (``Partition.placement``): refused on a node that does not lead the
        partition (``NotLeaderForPartition``, ``LeaderNotAvailable``); ``acks`` ACKS_ALL
        (``core.cluster_view``) is refused while the ISR is below its minimum
        (``NotEnoughReplicas``, nothing written) and answers once the ISR holds the records
        (``ReplicationTimedOut`` after ``ack_timeout`` seconds). Standalone, acks changes
        nothing."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.WRITE_MESSAGES, topic.stream_id, topic.id)
        chosen = state.find_partition(
            topic, partition if type(partition) is int else partition(topic))  # type: ignore[operator]
        placement = chosen.placement
        partition_log = chosen.log
        limited = topic.max_topic_size != MAX_TOPIC_SIZE_UNLIMITED
        if limited:
            if placement is not None:  # replication grows the topic's other partitions too
                topic.room = None
            if topic.room_left() <= 0:
                raise errors.TopicFull(topic.id, topic.stream_id)
            size_before = partition_log.size_bytes
        if placement is not None:
            # an append in flight (ours would wait for it) ends first, so that this node
            # still leads when ours starts: one started after a step-down would land in a
            # follower's log, among the new leader's records
            await partition_log.wait_idle()
            placement = chosen.placement
            check_leads(chosen, topic, acks)
        try:
            reserve = state.store.reserve
            if reserve is not None and not reserve.room_for_data():
                raise errors.CannotSaveMessagesToSegment(reason=(
                    "Cannot save messages to segment: the disk is full (its last "
                    f"{reserve.size} bytes are kept for metadata, so deletions still work)"))
            stored_format = partition_log.settings.record_format
            converting = region_format is not None and region_format != stored_format
            # a converted batch is stamped at the clock: its records keep their own times
            now = state.clock() if timestamp_us is None or converting else timestamp_us
            if converting:
                first, last = partition_log.append_as(region_format, region, now, gaps)
            elif admit is None:
                # large batches are stamped and written in a worker thread (storage.partition_log)
                first, last = await partition_log.append_async(region, now, gaps)
            else:
                # the rule runs with no suspension before the append starts (nothing is in
                # flight: ``wait_idle``), so no other append comes between them; a large
                # region is written by a worker thread, as any SEND's, not on the event loop;
                # what the rule accepted is remembered once published, even if this caller
                # is gone by then
                await partition_log.wait_idle()
                admitted, accepted = admit(chosen, region)
                if admitted is None:
                    first = partition_log.next_offset
                    last = first - 1
                else:
                    first, last = await partition_log.append_async(admitted, now,
                                                                   published=accepted)
            self.appended(partition_log)
            if limited and topic.room is not None:  # (appends that overlap both count: less)
                topic.room -= partition_log.size_bytes - size_before
            await partition_log.wait_durable()
        except WRITE_FAILURES as error:
            self.write_failures.failed(error)
            raise
        if self.write_failures.count:
            self.write_failures.recovered()
        if placement is not None and acks == ACKS_ALL and last >= first:
            assert state.cluster is not None
            await state.cluster.replicated(chosen, last, ack_timeout)
        return AppendResult(chosen.id, first, last, now)

    # -- read ------------------------------------------------------------------------------

    def reader(self, session: Session, stream_id: Ref, topic_id: Ref, partition_id: int
               ) -> PartitionReader:
        """The partition opened for reading (READ_MESSAGES, checked once) by ``session``."""
        partition = self._partition(session, Action.READ_MESSAGES, stream_id, topic_id,
                                    partition_id)
        max_bytes = self.state.config.system.max_poll_size
        if session.poll_limit:
            max_bytes = min(max_bytes, session.poll_limit)
        return PartitionReader(partition, self.offsets, max_bytes, self.signals)

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
        return read_to_watermark(partition, offset, max_records, max_bytes, regions,
                                 record_format)

    def bounds(self, session: Session, stream_id: Ref, topic_id: Ref, partition_id: int
               ) -> LogBounds:
        return log_bounds(self._partition(session, Action.READ_MESSAGES, stream_id, topic_id,
                                          partition_id))

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
        """The partition, once ``session`` may do ``action`` on its topic; in a cluster, only
        on the node that leads it (a follower's records may not be committed yet)."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, action, topic.stream_id, topic.id)
        partition = state.find_partition(topic, partition_id)
        if partition.placement is not None and partition.role != LEADER:
            check_leads(partition, topic, ACKS_LEADER)
        return partition

    # -- flush -----------------------------------------------------------------------------

    async def flush_unsaved_buffer(self, session: Session, stream_id: Ref, topic_id: Ref,
                                   partition_id: int) -> None:
        """rill writes every batch when it is sent, so nothing is ever buffered in memory;
        flushing makes the partition's written bytes durable now (an fsync) whatever the policy."""
        partition = self._partition(session, Action.WRITE_MESSAGES, stream_id, topic_id,
                                    partition_id)
        await partition.log.sync()


class PartitionReader:
    """One partition opened for reading by one session (READ_MESSAGES checked once, at the
    open): its bounds, the offsets a reader may start from, reads up to the high watermark,
    and consumer positions. For one request: a protocol's read rules (Iggy's poll strategies
    and auto-commit, ``protocols.iggy.polling``) with one lookup of the partition."""

    __slots__ = ("_partition", "_offsets", "max_bytes", "_signals")

    def __init__(self, partition: Partition, offsets: ConsumerOffsetService,
                 max_bytes: int, signals: AppendSignals) -> None:
        self._partition = partition
        self._offsets = offsets
        self._signals = signals
        # the most bytes of records one read answers to this session (at least one record):
        # ``[system] max_poll_size``, less where the session's ``poll_limit`` says so (HTTP's)
        self.max_bytes = max_bytes

    @property
    def partition_id(self) -> int:
        return self._partition.id

    @property
    def is_empty(self) -> bool:
        return self._partition.log.is_empty

    @property
    def record_format(self) -> str:
        return self._partition.log.settings.record_format

    def bounds(self) -> LogBounds:
        return log_bounds(self._partition)

    def record_offset_for_timestamp(self, timestamp_us: int) -> int | None:
        """The offset of the first record stored at or after ``timestamp_us`` (None: none)."""
        return self._partition.log.record_offset_for_timestamp(timestamp_us)

    def start_of_last(self, count: int) -> int:
        """The offset of the first of the last ``count`` records stored."""
        return self._partition.log.start_of_last(count)

    def committed_offset(self, consumer: str) -> int | None:
        """The next offset ``consumer`` reads; None when it never committed one."""
        return self._partition.positions.get(consumer)

    def read(self, offset: int, max_records: int, record_format: str | None = None,
             regions: bool = False, max_bytes: int | None = None) -> RecordRange:
        """``MessageService.read``, at most ``max_bytes`` of records (at least one): the
        reader's own limit unless the protocol gives its request's (TANK's fetch_size)."""
        return read_to_watermark(self._partition, offset, max_records,
                                 self.max_bytes if max_bytes is None else max_bytes, regions,
                                 record_format)

    async def wait(self, offset: int, min_bytes: int, timeout: float) -> int:
        """Until the partition holds ``min_bytes`` (at least one record) below its high
        watermark from ``offset`` on, or ``timeout`` seconds passed: those bytes as the wait
        ends (``long_poll.AppendSignals.wait``, woken by appends). A long poll of this one
        partition, opened already."""
        return (await self._signals.wait(((self._partition, offset),), min_bytes, timeout))[0]

    def nothing(self) -> RecordRange:
        """An empty read at the log's end."""
        return read_nothing(self._partition)

    async def commit_offset(self, consumer: str, next_offset: int) -> None:
        """Store ``next_offset`` as where ``consumer`` reads next (no note, no epoch)."""
        await self._offsets.store(self._partition, consumer, next_offset)


def log_bounds(partition: Partition) -> LogBounds:
    """The partition's bounds: its log's, and its high watermark (``Partition.high_watermark``:
    the log end on one server)."""
    log = partition.log
    return LogBounds(log.first_offset, log.next_offset, partition.high_watermark)


def read_nothing(partition: Partition) -> RecordRange:
    log = partition.log
    return RecordRange(partition.id, log.next_offset, 0, [], log.settings.record_format,
                       log_bounds(partition))


def read_to_watermark(partition: Partition, offset: int, max_records: int, max_bytes: int,
                      regions: bool = False, record_format: str | None = None) -> RecordRange:
    """``read_range`` of no record at or past the high watermark."""
    high_watermark = partition.high_watermark
    return read_range(partition, offset, min(max_records, max(0, high_watermark - offset)),
                      max_bytes, regions, record_format, high_watermark)


def read_range(partition: Partition, offset: int, max_records: int, max_bytes: int,
               regions: bool = False, record_format: str | None = None,
               high_watermark: int | None = None) -> RecordRange:
    """The stored bytes of up to ``max_records`` records from ``offset``, as they are on disk
    (with ``regions``, large ranges as file regions: ``Log.read``). ``record_format``:
    the format the reader takes; when the log keeps another (a Kafka-written topic read by an
    Iggy client, or the other way), its records are converted, per record, exactly the offsets
    asked for (``Log.read_as``); None or the log's own format: the stored bytes.
    ``high_watermark``: the partition's, when the caller has it already."""
    log = partition.log
    if high_watermark is None:
        high_watermark = partition.high_watermark
    first_stored = log.first_offset
    first = max(offset, first_stored)
    if record_format is not None and record_format != log.settings.record_format:
        converted = log.read_as(record_format, first, max_records, max_bytes)
        end = log.next_offset
        return RecordRange(partition.id, converted.first_offset, converted.count,
                           [converted.records] if converted.count else [], record_format,
                           LogBounds(first_stored, end, high_watermark), converted.end_offset)
    count, chunks = log.read(first, max_records, max_bytes, regions)
    return RecordRange(partition.id, first, count, chunks, log.settings.record_format,
                       LogBounds(first_stored, log.next_offset, high_watermark))


def check_leads(partition: Partition, topic: Topic, acks: int) -> None:
    """Refuse an append to a replicated partition this node cannot take now: it does not lead
    it (``NotLeaderForPartition``, naming the leader; ``LeaderNotAvailable`` when none does),
    or acks=all while the ISR is below its minimum (``NotEnoughReplicas``)."""
    placement = partition.placement
    assert placement is not None
    if partition.role != LEADER:
        if placement.leader is None:
            raise errors.LeaderNotAvailable(partition.id, topic.name)
        raise errors.NotLeaderForPartition(partition.id, topic.name, placement.leader)
    if acks == ACKS_ALL and len(placement.isr) < placement.min_isr:
        raise errors.NotEnoughReplicas(len(placement.isr), placement.min_isr)
