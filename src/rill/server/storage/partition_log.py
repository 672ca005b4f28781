"""PartitionLog: the log of one partition, as a list of segments named by first offset; the
file implementation of the core's partition-log port (``core.log.Log``; opened for the core by
``log_opener.FileLogs``; its memory twin is ``memory_log.MemoryLog``).

This module owns its appends (every path, and when one runs in a worker thread), its segments'
life (rollover, sealing) and retention; its reads are ``log_reads.LogReads`` and its replica
side (leader epochs, follower appends, truncation, checkpoints) ``replica.ReplicaLog``, the two
base classes of ``PartitionLog``.

Invariants:
  * Offsets increase: the first message ever appended is offset 0 and each append takes the
    offsets after the last one; segments cover consecutive offset ranges, oldest first, and
    only the last one is active (appendable). Retention removes whole sealed segments from the
    front, a truncation (``replica``) cuts the tail. Offsets may hold no record: a batch
    appended with ``gaps`` (TANK's explicit sequence numbers) holds fewer records than offsets
    (holes). Readers count records, never offset spans (``log_reads``); ``messages_count``
    counts records.
  * Timestamps never decrease within a partition: a batch is stamped with
    ``max(now_us, last timestamp)``.
  * A batch is validated and stamped completely before anything is written; a rejected batch
    leaves the files byte for byte as they were. An accepted batch is one write to the log and
    one to the index.
  * Descriptors: segments open their files through the process's descriptor cache
    (``storage.descriptors``), which bounds how many are open over every partition; a log
    that is not being written or read may hold none.
  * Durability: only the active segment's log file is marked dirty after an append. The index of
    the active segment is synced at seal and close only, because recovery rebuilds the tail's
    index from its log after an unclean stop. A segment is synced when sealed (unless NEVER).
  * Rollover: after a write, a segment of ``segment_size`` bytes or more is sealed and the next
    segment starts at the next offset (the limit is soft: it can be exceeded by one batch).
  * Appends off the event loop (``append_async``): a large batch, while other partitions are
    being appended to (or a very large one, at any time), is stamped and written by a worker
    thread (the C stamper and ``pwrite`` release the GIL, so the event loop keeps serving
    other connections meanwhile; a rejected batch is rejected there too), then published
    on the event loop: reads only ever see published batches. At most one append is in
    flight per log; every other mutation (``append``, ``append_stamped``, retention, purge,
    close, destroy) first settles it (waiting for the worker if it still runs, then
    publishing), so offsets, positions and descriptors never change under a worker. Other
    batches are appended inline, where a thread hop would cost more than it frees
    (``_use_thread``).

Record formats: the topic's ``RecordFormat`` (``formats``) lays out, checks and finds the records;
its segments are per-record ``Segment``s or, for a batch-index format, ``BatchSegment``s.

Replication (``replica.ReplicaLog``, the log's base class): leader epochs (stamped by every
append, kept per batch or in a checkpoint), ``append_replicated`` (a follower's verbatim append),
``truncate_to`` (a follower's cut, completed at open after a stop: ``truncation``) and the
high-watermark checkpoint.

Size accounting: ``size_bytes`` is the sum of the ``.log`` sizes (records in poll layout, 45
bytes of overhead per message). It does not match Iggy's §6.7 formula byte for byte (Iggy adds
24 bytes per persisted batch and counts a smaller per-message overhead).

``is_empty`` is true when no message was ever appended since creation or the last purge (the
"empty" flag of §6.4); after retention deleted every stored message it is false while
``messages_count`` is 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from array import array
from collections.abc import Callable
from concurrent.futures import Future
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from rill.errors import (
    CannotAppendMessage,
    CannotCreatePartitionDirectory,
    FeatureUnavailable,
)
from rill.server.storage.durability import Durability
from rill.server.storage.formats import conversion, kafka_v2
from rill.server.storage.formats import iggy_v1
from rill.server.storage.formats.iggy_v1 import ACCELERATED, StampedBatch
from rill.server.storage.index_entry import MAX_POSITION, build_index_entries
from rill.server.storage.formats import format_named
from rill.server.storage.formats.iggy_v1 import uniform_positions
from rill.server.storage.recovery import recover_segments
from rill.server.storage.log_reads import LogReads
from rill.server.storage.replica import ReplicaLog
from rill.server.storage.truncation import complete_truncation
from rill.server.storage.batch_segment import segment_class
from rill.server.storage.segment import Segment

logger = logging.getLogger(__name__)

_SMALLEST_SEND_MESSAGE = 16 + 4 + 4 + 1  # id, headers_length, payload_length, one payload byte

# When ``append_async`` hands an append to a worker thread. The hop costs CPU (a wake-up, the
# GIL changing hands, the batch moving to another core's cache: about +0.2 CPU s/GB on the
# 2-core machine of docs/performance.md), so it pays only when the event loop has
# other work meanwhile. "auto": batches of ``APPEND_THREAD_MIN_BYTES`` or more while another
# partition log was appended to within ``APPEND_CONCURRENCY_WINDOW`` seconds (one producer:
# inline; several, to several partitions: large batches in threads), and every batch of
# ``APPEND_THREAD_LARGE_BYTES`` or more. "always": every batch of ``APPEND_THREAD_MIN_BYTES`` or
# more. "never": all inline. Only with the C stamper,
# which releases the GIL (the Python one would hold it). Each log takes its rule from its
# ``LogSettings`` (the server's ``[system] append_threads`` / ``append_thread_min_size``; these
# two are the defaults), so two servers in one process keep their own.
APPEND_THREAD_MODE = "auto" if ACCELERATED else "never"
APPEND_THREAD_MIN_BYTES = 512 * 1024
# Regions of this size or more go to a worker thread under "auto" too, whatever the activity:
# stamping (or rejecting) several MiB takes milliseconds of event loop, against a hop of tens
# of microseconds, so no connection waits behind one large SEND.
APPEND_THREAD_LARGE_BYTES = 4 * 1024 * 1024
APPEND_CONCURRENCY_WINDOW = 0.01
# The worker threads, and the log ``append_async`` saw last, are the server's: its
# ``Durability`` holds them (``append_executor()``, ``last_append``), so two servers in one
# process neither share threads nor see each other's appends as concurrent.


def _use_thread(log: PartitionLog, size: int) -> bool:
    """Whether ``append_async`` should append ``size`` bytes to ``log`` in a worker thread."""
    durability = log._durability
    now = time.monotonic()
    last_appended, last_appended_at = durability.last_append
    others = (
        last_appended not in (None, id(log))
        and now - last_appended_at < APPEND_CONCURRENCY_WINDOW
    )
    durability.last_append = (id(log), now)
    mode = log.settings.append_threads if ACCELERATED else "never"
    if mode == "never" or size < log.settings.append_thread_min_size:
        return False
    return mode == "always" or others or size >= APPEND_THREAD_LARGE_BYTES


def _stamp_and_write(segment: Segment, raw_messages: bytes | bytearray | memoryview,
                     timestamp: int, stamp: Callable[..., StampedBatch],
                     leader_epoch: int = 0) -> StampedBatch:
    """Runs in a worker thread: the whole per-byte part of an append (stamp, both writes)."""
    batch = stamp(
        raw_messages, segment.next_offset, timestamp, segment.size_bytes, segment.start_offset,
        leader_epoch,
    )
    segment.write(batch.records, batch.index_entries)
    return batch


def _write_only(segment: Segment, batch: StampedBatch) -> StampedBatch:
    """Runs in a worker thread: the file half of a batch already checked and indexed (a
    follower's copy of its leader's records)."""
    segment.write(batch.records, batch.index_entries)
    return batch


class _PendingAppend:
    """An append whose stamping and writes run in a worker thread, not yet published."""

    __slots__ = ("segment", "timestamp", "last_timestamp", "work", "finished", "offsets",
                 "error", "published")

    def __init__(self, segment: Segment, timestamp: int, work: Future[StampedBatch],
                 last_timestamp: int | None = None,
                 published: Callable[[], None] | None = None) -> None:
        self.segment = segment
        self.published = published  # called once it is published (``append_async``)
        self.timestamp = timestamp
        self.last_timestamp = last_timestamp  # (records that keep their own: the last one's)
        self.work = work
        self.finished = asyncio.wrap_future(work)  # resolves on the event loop
        self.offsets: tuple[int, int] | None = None
        self.error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class LogSettings:
    segment_size: int = 1_000_000_000  # bytes; soft limit
    # verify every record of every segment at open (synchronously) rather than on first read
    validate_checksum: bool = False
    # the layout of its records (the topic's, recorded in the metadata store)
    record_format: str = iggy_v1.NAME
    # when ``append_async`` appends in a worker thread (see APPEND_THREAD_MODE)
    append_threads: str = field(default_factory=lambda: APPEND_THREAD_MODE)
    append_thread_min_size: int = field(default_factory=lambda: APPEND_THREAD_MIN_BYTES)

    def __post_init__(self) -> None:
        if self.segment_size <= 0:
            raise ValueError("segment_size must be positive")
        if self.append_threads not in ("auto", "always", "never"):
            raise ValueError(f"unknown append thread mode {self.append_threads!r}")


class PartitionLog(LogReads, ReplicaLog):
    """Append and retention over the segments of one partition directory; its reads are
    ``LogReads``, its replica side ``ReplicaLog``."""

    def __init__(
        self,
        directory: Path,
        settings: LogSettings,
        durability: Durability,
        segments: list[Segment],
    ) -> None:
        self.directory = directory
        self.settings = settings
        self.format = format_named(settings.record_format)  # how records are laid out
        self._segment_class = segment_class(self.format)  # per-record or per-batch index
        self._durability = durability
        self._segments = segments
        self._starts = [segment.start_offset for segment in segments]
        self._last_timestamp = max((s.last_timestamp or 0 for s in segments), default=0)
        self._closed = False
        self._pending: _PendingAppend | None = None

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        settings: LogSettings,
        durability: Durability,
        clean_shutdown: bool,
        sync_parent: bool = True,
    ) -> PartitionLog:
        """Open (recovering) or create the log in ``directory``. A created directory's parent is
        synced unless ``sync_parent`` is false (the caller creating many syncs it once).
        Blocking, and safe in a worker thread for a directory no one else uses (the
        descriptor cache is thread safe): creating many partitions runs there."""
        directory = Path(directory)
        created = not directory.exists()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CannotCreatePartitionDirectory(
                reason=f"Cannot create partition directory {directory}: {error}"
            ) from error
        if not created and complete_truncation(directory, durability) is not None:
            clean_shutdown = False  # the cut segment is the tail now: walk it
        segments = (
            []
            if created
            else recover_segments(
                directory,
                durability,
                clean_shutdown=clean_shutdown,
                validate_checksum=settings.validate_checksum,
                record_format=format_named(settings.record_format),
            )
        )
        log = cls(directory, settings, durability, segments)
        log._open_replica_state()
        if not segments:
            log._add_segment(0)
            if created and sync_parent:
                durability.sync_directory(directory.parent)
        elif log._segments[-1].size_bytes >= settings.segment_size:
            log._seal_active()
        return log

    # ------------------------------------------------------------------ properties
    @property
    def next_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def current_offset(self) -> int:
        """Offset of the last message; 0 when empty."""
        return max(self.next_offset - 1, 0)

    @property
    def is_empty(self) -> bool:
        return self.next_offset == 0

    @property
    def first_offset(self) -> int:
        """Oldest stored offset (greater than 0 once retention deleted segments)."""
        return self._segments[0].start_offset

    @property
    def messages_count(self) -> int:
        """Records stored: fewer than the offsets they span when batches hold holes (TANK's
        explicit sequence numbers)."""
        return sum(segment.records_count for segment in self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self._segments)

    @property
    def segments_count(self) -> int:
        return len(self._segments)

    @property
    def last_timestamp(self) -> int:
        """Timestamp (µs) of the last appended message; 0 when none."""
        return self._last_timestamp

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    # ------------------------------------------------------------------ appending
    def append(self, raw_messages: bytes | bytearray | memoryview, now_us: int,
               gaps: bool = False) -> tuple[int, int]:
        """Validate, stamp (at ``leader_epoch``) and write a SEND message region (a client batch
        of a batch format); returns (first, last) offsets. ``gaps``: a batch whose offsets may
        skip (``RecordFormat.stamp_sparse``; FeatureUnavailable for a format without it)."""
        self._settle()
        stamp = self._stamp(gaps)
        epoch = self._stamping_epoch()
        active, timestamp = self._prepare(raw_messages, now_us)
        batch = stamp(
            raw_messages, active.next_offset, timestamp, active.size_bytes, active.start_offset,
            epoch,
        )
        self._write(active, batch.records, batch.index_entries, timestamp, batch.count)
        return batch.first_offset, batch.last_offset

    async def wait_idle(self) -> None:
        """Until no append is in flight (``append_async``'s or a follower's), each published:
        what a caller awaits before checking a rule that must still hold when its own append
        starts (``append_async`` then starts it with no await in between)."""
        while self._pending is not None:
            await asyncio.wait({self._pending.finished})
            self._settle()

    async def append_async(
        self, raw_messages: bytes | bytearray | memoryview, now_us: int, gaps: bool = False,
        published: Callable[[], None] | None = None,
    ) -> tuple[int, int]:
        """``append`` for the event loop: a large region is stamped and written in a worker
        thread while the loop serves others, then published here. Same result, same errors.
        ``published``: called once the records are published (readable), even when this
        coroutine was cancelled meanwhile; never when the append fails."""
        await self.wait_idle()  # one in flight per log; waiters go in arrival order
        if not _use_thread(self, len(raw_messages)):
            offsets = self.append(raw_messages, now_us, gaps)
            if published is not None:
                published()
            return offsets
        stamp = self._stamp(gaps)
        epoch = self._stamping_epoch()
        active, timestamp = self._prepare(raw_messages, now_us)
        work = self._durability.append_executor().submit(
            _stamp_and_write, active, raw_messages, timestamp, stamp, epoch)
        pending = self._pending = _PendingAppend(active, timestamp, work, published=published)
        # publish as soon as the worker is done, even if this coroutine is cancelled meanwhile
        pending.finished.add_done_callback(lambda finished: self._finished(pending, finished))
        await asyncio.wait({pending.finished})
        self._settle(pending)
        if pending.error is not None:
            raise pending.error
        assert pending.offsets is not None
        return pending.offsets

    def _stamp(self, gaps: bool) -> Callable[..., StampedBatch]:
        if not gaps:
            return self.format.stamp
        if self.format.stamp_sparse is None:
            raise FeatureUnavailable(reason=f"record format {self.format.name} keeps offsets "
                                            "dense: a batch whose offsets skip cannot be stored")
        return self.format.stamp_sparse

    def append_as(self, record_format: str, raw: bytes | bytearray | memoryview, now_us: int,
                  gaps: bool = False) -> tuple[int, int]:
        """``append`` of a client batch of ``record_format``, another format than the log's,
        converted first (``formats.conversion``, per record in C, or its Python
        reference): bad input raises the source format's errors and writes nothing. Returns
        (first, last) offsets.

        * An Iggy SEND region into a ``kafka-v2`` log (``convert_batch``): its records stamped
          at the log's append time (``now_us``, never below the log's last timestamp, in whole
          milliseconds), then appended natively.
        * Kafka RecordBatch v2 batches (a Kafka or TANK produce) into an ``iggy-v1`` log
          (``kafka_batches_as_records``: checked as a ``kafka-v2`` log checks them, then one
          stored Iggy record per Kafka record), then ``_append_records``: each record keeps its
          own timestamp (µs) where it has one, ``now_us`` where it has none, raised to the one
          before it where it is earlier (the log's timestamps never decrease). ``gaps`` (offsets
          that skip) is FeatureUnavailable: an Iggy log's offsets are dense."""
        self._settle()
        timestamp = (now_us if now_us > self._last_timestamp else self._last_timestamp)
        if self.format.batch_index:
            batch = conversion.convert_batch(raw, record_format, self.format.name,
                                                    timestamp)
            return self.append(batch, timestamp // 1000 * 1000)
        if record_format != kafka_v2.NAME:
            raise FeatureUnavailable(reason=f"a batch of format {record_format!r} cannot be "
                                            f"written to a topic of format {self.format.name!r}")
        if gaps:
            raise FeatureUnavailable(reason=f"record format {self.format.name} keeps offsets "
                                            "dense: a batch whose offsets skip cannot be stored")
        return self._append_records(conversion.kafka_batches_as_records(raw), timestamp)

    def _append_records(self, converted: conversion.Converted, now_us: int
                        ) -> tuple[int, int]:
        """Write converted stored records (offsets 0.., per-record timestamps, 0: none) at the
        log's next offsets: offsets and timestamps (module invariants) written in place, one
        index entry per record with its timestamp (``conversion.stamp_converted``, in
        C; an empty payload is refused there, before anything is written). Returns (first,
        last) offsets."""
        records = bytearray(converted.records)
        count = converted.count
        self._stamping_epoch()
        active = self._segment_for(len(records))
        first = active.next_offset
        index_entries, first_timestamp, last_timestamp = conversion.stamp_converted(
            records, converted.positions, converted.timestamps, first, now_us,
            self._last_timestamp, first - active.start_offset, active.size_bytes)
        self._write(active, records, bytearray(index_entries), first_timestamp, count,
                    last_timestamp=last_timestamp)
        return first, first + count - 1

    def _finished(self, pending: _PendingAppend, finished: asyncio.Future[StampedBatch]) -> None:
        if not finished.cancelled():
            finished.exception()  # a rejection is taken from ``work`` by ``_settle``, not lost
        self._settle(pending)

    def _settle(self, pending: _PendingAppend | None = None) -> None:
        """Finish the append in flight (``pending`` only, if given): wait for its worker (this
        blocks only when a synchronous caller comes while it runs), then publish it. Its
        outcome is kept on it for the coroutine that started it."""
        if self._pending is None or (pending is not None and self._pending is not pending):
            return
        pending, self._pending = self._pending, None
        try:
            batch = pending.work.result()
            self._write(pending.segment, batch.records, batch.index_entries, pending.timestamp,
                        batch.count, written=True, last_timestamp=pending.last_timestamp)
        except BaseException as error:  # noqa: BLE001 - handed to the appending coroutine
            pending.error = error
        else:
            pending.offsets = (batch.first_offset, batch.last_offset)
            if pending.published is not None:
                pending.published()

    async def _write_async(self, active: Segment, records: bytes | bytearray | memoryview,
                           index_entries: bytearray, timestamp: int, count: int,
                           last_timestamp: int) -> None:
        """``_write`` for the event loop: the file half in a worker thread (a write into the
        page cache can wait milliseconds on the disk's writeback of the same file), published
        here once done, even if the caller is cancelled meanwhile. The caller planned the
        entries at the segment's current end: nothing may be in flight."""
        if self._pending is not None:
            raise CannotAppendMessage(reason=(
                f"Cannot append message: partition log {self.directory} has an append in "
                f"flight"))
        first = active.next_offset
        batch = StampedBatch(records, index_entries, count, first, first + count - 1,
                             timestamp)  # type: ignore[arg-type]
        work = self._durability.append_executor().submit(_write_only, active, batch)
        pending = self._pending = _PendingAppend(active, timestamp, work, last_timestamp)
        pending.finished.add_done_callback(lambda finished: self._finished(pending, finished))
        await asyncio.wait({pending.finished})
        self._settle(pending)
        if pending.error is not None:
            raise pending.error

    def _prepare(self, raw_messages: bytes | bytearray | memoryview, now_us: int
                 ) -> tuple[Segment, int]:
        """The segment a region goes to, and the timestamp its messages get."""
        worst_size = len(raw_messages) + self.format.growth_per_message * (
            len(raw_messages) // _SMALLEST_SEND_MESSAGE + 1
        )
        active = self._segment_for(worst_size)
        timestamp = now_us if now_us > self._last_timestamp else self._last_timestamp
        return active, timestamp

    def append_stamped(self, records: bytearray, positions: array, now_us: int) -> tuple[int, int]:
        """Write records already in stored layout, as ``stamp_batch`` made them for base offset
        0 and base position 0 (``positions``: where each starts), after stamping their real
        offsets and timestamp in place (staged appends: the per-message work was done when
        they were staged). Returns (first, last) offsets."""
        self._settle()
        self._stamping_epoch()
        active = self._segment_for(len(records))
        timestamp = now_us if now_us > self._last_timestamp else self._last_timestamp
        first = active.next_offset
        self.format.restamp(records, positions, first, timestamp)
        relative = first - active.start_offset
        base = active.size_bytes
        index_entries = build_index_entries(
            range(relative, relative + len(positions)),
            uniform_positions(positions, len(records), base) or [p + base for p in positions],
            timestamp,
        )
        self._write(active, records, index_entries, timestamp, len(positions))
        return first, first + len(positions) - 1

    def _segment_for(self, size: int) -> Segment:
        """The active segment, sealed first if ``size`` more bytes could overflow u32 positions."""
        if self._closed:
            raise CannotAppendMessage(
                reason=f"Cannot append message: partition log {self.directory} is closed"
            )
        active = self._writable_segment()
        if active.messages_count and active.size_bytes + size > MAX_POSITION:
            self._seal_active()  # keep every position within u32
            active = self._writable_segment()
        return active

    def _write(self, active: Segment, records: bytes | bytearray, index_entries: bytearray,
               timestamp: int, count: int, written: bool = False,
               last_timestamp: int | None = None) -> None:
        """Write (unless a worker already did: ``written``) and publish one stamped batch of
        ``count`` offsets, stamped ``timestamp`` (its first one's, and its last one's unless
        ``last_timestamp``: a leader's records keep theirs)."""
        last = timestamp if last_timestamp is None else last_timestamp
        if written:
            active.publish(len(records), index_entries, timestamp, last, count)
        else:
            active.append(records, index_entries, timestamp, last, count)
        self._durability.mark_dirty(active.log_file)
        self._last_timestamp = last
        if active.size_bytes >= self.settings.segment_size:
            self._seal_active()

    async def wait_durable(self) -> None:
        """Return once appended data is durable as the durability policy requires."""
        active = self._segments[-1]
        if self._closed or active.sealed:
            return  # sealing synced it
        await self._durability.wait_durable(active.log_file)

    async def sync(self) -> None:
        """Sync the active segment's log now, whatever the policy (FLUSH_UNSAVED_BUFFER).

        Sealed segments were synced when sealed (except under NEVER, where rill syncs nothing
        on its own and this flush covers the active segment only).
        """
        active = self._segments[-1]
        if not self._closed and not active.sealed:
            await self._durability.sync_file(active.log_file)

    def _writable_segment(self) -> Segment:
        if self._segments[-1].sealed:
            self._add_segment(self._segments[-1].next_offset)
        return self._segments[-1]

    def _seal_active(self) -> None:
        """Seal the active segment, start the next (if that fails, the next append retries)."""
        self._segments[-1].seal()
        try:
            self._add_segment(self._segments[-1].next_offset)
        except Exception:  # noqa: BLE001 - the next append retries and reports it
            logger.exception("cannot create the next segment in %s", self.directory)

    def _add_segment(self, start_offset: int) -> None:
        segment = self._segment_class.create(self.directory, start_offset, self._durability,
                                             self.format)
        self._segments.append(segment)
        self._starts.append(start_offset)
        self._durability.sync_directory(self.directory)

    def holds(self, segment: Segment) -> bool:
        """Whether ``segment`` is still one of this open log's (retention, purge and close
        drop segments; background work checks this before it touches one)."""
        if self._closed:
            return False
        number = bisect_right(self._starts, segment.start_offset) - 1
        return number >= 0 and self._segments[number] is segment

    # ------------------------------------------------------------------ retention
    def delete_expired_segments(self, now_us: int, expiry_us: int) -> int:
        """Delete sealed segments whose last message timestamp + expiry <= now; returns how many."""
        self._settle()
        deleted = 0
        while len(self._segments) > 1 and self._segments[0].sealed:
            oldest = self._segments[0]
            last_timestamp = oldest.last_timestamp
            if last_timestamp is None:  # corrupt: bounded by the next segment's first message
                last_timestamp = self._segments[1].first_timestamp
            if last_timestamp is None or last_timestamp + expiry_us > now_us:
                break
            self._delete_oldest()
            deleted += 1
        if deleted:
            self._durability.sync_directory(self.directory)
        return deleted

    def delete_oldest_segment(self) -> bool:
        """Delete the oldest segment if it is sealed; returns whether one was deleted."""
        self._settle()
        if len(self._segments) < 2 or not self._segments[0].sealed:
            return False
        self._delete_oldest()
        self._durability.sync_directory(self.directory)
        return True

    def _delete_oldest(self) -> None:
        segment = self._segments.pop(0)
        self._starts.pop(0)
        segment.delete()

    def purge(self) -> None:
        """Delete every segment (oldest first) and start again, empty, at offset 0 (a stored
        high watermark goes back to 0 with it)."""
        self._settle()
        while self._segments:
            self._delete_oldest()
        self._last_timestamp = 0
        if self._epochs is not None:
            self._epochs.clear()
        self._add_segment(0)
        if self._stored_high_watermark is not None:
            self.store_high_watermark(0)

    # ------------------------------------------------------------------ closing
    def close(self, sync: bool = True) -> None:
        """Sync (per policy; not with ``sync`` false: a log whose directory is being deleted)
        and close every file. The log cannot be used afterwards."""
        self._settle()
        if self._closed:
            return
        self._closed = True
        failure: BaseException | None = None
        for segment in self._segments:
            try:
                segment.close(sync=sync)
            except BaseException as error:  # noqa: BLE001 - close the others, then report
                failure = failure or error
        if failure is not None:
            raise failure

    def destroy(self) -> None:
        """Close the log and remove its directory tree."""
        self._settle()
        if not self._closed:
            self._closed = True
            for segment in self._segments:
                segment.close(sync=False)
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.directory.parent.exists():
            self._durability.sync_directory(self.directory.parent)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({str(self.directory)!r}, offsets {self.first_offset}.."
            f"{self.next_offset}, {len(self._segments)} segments)"
        )
