"""MemoryLog: the memory twin of ``PartitionLog``, the other implementation of the core's
partition-log port (``core.log.Log``), and ``MemoryLogs``, the twin of ``log_opener.FileLogs``.

Owns a log of one partition kept in memory: the same offsets, holes, timestamps, record bytes,
leader epochs, truncation and retention as the file log, with nothing written anywhere. The
core's tests run on it (``tests/in_process_core.py``); the storage tests run one body over both
(``tests/server/storage/test_log_port.py``).

What it shares with the file log, so that the two cannot drift apart:
  * the record formats (``formats``): the same ``stamp``/``stamp_sparse``/``restamp``/
    ``check_stored``/``scan`` and conversions make the same bytes and refuse the same input
    with the same errors; the twin lays out and checks nothing itself. It keeps what a
    format's index entries say (first offset, position, timestamp, leader epoch, holes) as
    Python lists, one item per index entry.
  * the reads (``log_reads.LogReads``, its base class): ``MemorySegment`` answers the few
    segment lookups they ask (``read``, ``end_within``, ``position``, ``find_timestamp``,
    ``index_columns``) as ``Segment``/``BatchSegment`` do; reads return bytes, never file
    regions.

Segments are lists of index units (a record, or a whole batch for a batch-index format) with
the file log's rollover rule: after a write, a segment of ``segment_size`` bytes or more is
sealed and the next one starts at the next offset; so retention (``delete_expired_segments``,
``delete_oldest_segment``) removes the same offsets. Every record counts as verified (it was
stamped here). Durability waits return at once. Leader epochs are kept per unit (a per-record
format's stamping epoch, a batch format's from its index entry). ``close(sync=False)`` (a log
whose partition is being deleted) and ``destroy`` make ``MemoryLogs`` forget the log; a log
closed otherwise is found again by the next ``open`` of its partition (a restart), with its
leader epoch 0 again, as a reopened file log.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from rill.errors import CannotAppendMessage, FeatureUnavailable
from rill.protocol.buffer import DecodeError
from rill.server.storage.formats import RecordFormat, conversion, format_named, iggy_v1, kafka_v2
from rill.server.storage.formats.iggy_v1 import StampedBatch, uniform_positions
from rill.server.storage.replica import check_replicated, epochs_after
from rill.server.storage.index_entry import INDEX_ENTRY, MAX_POSITION, build_index_entries
from rill.server.storage.log_reads import LogReads
from rill.server.storage.truncation import TruncationRefused, check_cut

_SMALLEST_SEND_MESSAGE = 16 + 4 + 4 + 1  # as the file log: a segment's room check
_ENTRY_HEAD = struct.Struct("<IIQ")  # the 16 bytes of every entry the log reads
DEFAULT_SEGMENT_SIZE = 1_000_000_000  # bytes, as ``LogSettings``


@dataclass(frozen=True, slots=True)
class MemoryLogSettings:
    """What a memory log keeps of ``LogSettings``: the rollover size and the record format."""

    segment_size: int = DEFAULT_SEGMENT_SIZE  # bytes; soft limit
    record_format: str = iggy_v1.NAME

    def __post_init__(self) -> None:
        if self.segment_size <= 0:
            raise ValueError("segment_size must be positive")


class MemorySegment:
    """One segment of a memory log: its records' bytes and one unit per index entry."""

    def __init__(self, start_offset: int) -> None:
        self.start_offset = start_offset
        self.data = bytearray()
        self.firsts: list[int] = []  # each unit's first offset
        self.positions: list[int] = []  # where each unit starts in ``data``
        self.timestamps: list[int] = []  # each unit's index timestamp
        self.epochs: list[int] = []  # each unit's leader epoch
        self.holes: list[int] = []  # offsets of each unit that hold no record
        self.holes_total = 0
        self.messages_count = 0  # offsets held
        self.first_timestamp: int | None = None
        self.last_timestamp: int | None = None
        self.sealed = False
        self.index_generation = 0  # (never rebuilt: what ``columnar`` checks)

    @property
    def next_offset(self) -> int:
        return self.start_offset + self.messages_count

    @property
    def size_bytes(self) -> int:
        return len(self.data)

    @property
    def records_count(self) -> int:
        return self.messages_count - self.holes_total

    def add(self, records: bytes | bytearray | memoryview, units: Iterable[tuple[int, int, int,
            int, int]], count: int, first_timestamp: int, last_timestamp: int) -> None:
        """Append ``records`` (``count`` offsets) and their units (first offset, position
        in the segment, timestamp, epoch, holes)."""
        if self.messages_count == 0:
            self.first_timestamp = first_timestamp
        for first, position, timestamp, epoch, holes in units:
            self.firsts.append(first)
            self.positions.append(position)
            self.timestamps.append(timestamp)
            self.epochs.append(epoch)
            self.holes.append(holes)
            self.holes_total += holes
        self.data += records
        self.messages_count += count
        self.last_timestamp = last_timestamp

    def cut(self, unit: int) -> None:
        """Keep the units before ``unit`` (a truncation); the segment is active again."""
        end = self.firsts[unit] if unit < len(self.firsts) else self.next_offset
        del self.data[self._unit_position(unit):]
        for column in (self.firsts, self.positions, self.timestamps, self.epochs, self.holes):
            del column[unit:]
        self.messages_count = end - self.start_offset
        self.holes_total = sum(self.holes)
        self.last_timestamp = self.timestamps[-1] if self.timestamps else None
        if not self.timestamps:
            self.first_timestamp = None
        self.sealed = False

    # ------------------------------------------------------------------ lookups (``LogReads``)
    def unit_of(self, offset: int) -> int:
        return bisect_right(self.firsts, offset) - 1

    def _unit_first(self, unit: int) -> int:
        return self.firsts[unit] if unit < len(self.firsts) else self.next_offset

    def _unit_position(self, unit: int) -> int:
        return self.positions[unit] if unit < len(self.positions) else len(self.data)

    def position(self, offset: int) -> int:
        return self._unit_position(self.unit_of(offset))

    @staticmethod
    def read_within(first_offset: int, end_offset: int, max_bytes: int) -> None:
        """No one-lookup read here: ``end_within`` and ``read`` answer."""
        return None

    def read(self, first_offset: int, end_offset: int) -> tuple[int, bytes]:
        """Whole units from the one holding ``first_offset`` to the one holding
        ``end_offset - 1``: ``(count from first_offset to their end, bytes)``."""
        first = self.unit_of(first_offset)
        end = self.unit_of(end_offset - 1) + 1
        data = bytes(self.data[self.positions[first]:self._unit_position(end)])
        return self._unit_first(end) - first_offset, data

    def read_region(self, first_offset: int, end_offset: int) -> None:
        return None  # nothing is a file: ``read``

    def end_within(self, first_offset: int, end_offset: int, max_bytes: int) -> int:
        """The largest unit boundary <= ``end_offset`` whose units from the one holding
        ``first_offset`` take at most ``max_bytes`` (``first_offset`` when not even one fits)."""
        first = self.unit_of(first_offset)
        end = self.unit_of(end_offset - 1) + 1
        limit = self.positions[first] + max_bytes
        if self._unit_position(end) <= limit:
            return end_offset
        fitting = bisect_right(self.positions, limit, first + 1, end) - (first + 1)
        return first_offset if fitting == 0 else self.firsts[first + fitting]

    def find_timestamp(self, timestamp_us: int) -> int | None:
        if not self.messages_count or self.last_timestamp is None or (
                self.last_timestamp < timestamp_us):
            return None
        return self._unit_first(bisect_left(self.timestamps, timestamp_us))

    def index_columns(self, first_offset: int, end_offset: int) -> tuple[bytes, bytes]:
        """As ``Segment.index_columns`` (per-record units only): little-endian u32 starts and
        the end, u64 timestamps."""
        first, end = first_offset - self.start_offset, end_offset - self.start_offset
        starts = array("I", self.positions[first:end])
        starts.append(self._unit_position(end))
        stamps = array("Q", self.timestamps[first:end])
        if starts.itemsize != 4 or stamps.itemsize != 8:
            raise RuntimeError("this host's array sizes do not fit the index columns")
        if struct.pack("=I", 1) != struct.pack("<I", 1):
            starts.byteswap()
            stamps.byteswap()
        return starts.tobytes(), stamps.tobytes()

    def cut_unit(self, offset: int, name: str) -> int:
        """The unit a cut to ``offset`` keeps up to; refused inside a batch."""
        if offset == self.next_offset:
            return len(self.firsts)
        unit = self.unit_of(offset)
        if self.firsts[unit] != offset:
            raise TruncationRefused(
                f"offset {offset} is inside the batch of offsets {self.firsts[unit]}.."
                f"{self._unit_first(unit + 1) - 1} of {name}: a batch is never cut")
        return unit


def _units(entries: bytes | bytearray | memoryview, record_format: RecordFormat,
           offset_base: int, position_shift: int, epoch: int
           ) -> list[tuple[int, int, int, int, int]]:
    """A format's index entries as units: (offset_base + relative offset, position +
    position_shift, timestamp, epoch: the entry's when the format keeps one, else ``epoch``,
    holes)."""
    size = record_format.index_entry_size
    entry_epoch, holes_in = record_format.entry_epoch, record_format.holes_in
    units = []
    for at in range(0, len(entries) - size + 1, size):
        relative, position, timestamp = _ENTRY_HEAD.unpack_from(entries, at)
        units.append((
            offset_base + relative, position + position_shift, timestamp,
            epoch if entry_epoch is None else entry_epoch(entries, at),
            0 if holes_in is None else holes_in(entries[at:at + size]),
        ))
    return units


class MemoryLog(LogReads):
    """A partition log in memory (see the module docstring)."""

    def __init__(self, name: str, settings: MemoryLogSettings) -> None:
        self.name = name  # what errors call it (a file log's directory)
        self.settings = settings
        self.format = format_named(settings.record_format)
        self._segments: list[MemorySegment] = [MemorySegment(0)]
        self._starts = [0]
        self._last_timestamp = 0
        self._closed = False
        self._leader_epoch = 0
        self._stored_high_watermark: int | None = None
        self._incarnation: int | None = None

    def reopened(self) -> MemoryLog:
        """The same records as a log opened again (a restart): leader epoch 0 until set."""
        log = MemoryLog(self.name, self.settings)
        log._segments, log._starts = self._segments, self._starts
        log._last_timestamp = self._last_timestamp
        log._stored_high_watermark = self._stored_high_watermark
        log._incarnation = self._incarnation
        return log

    # ------------------------------------------------------------------ bounds
    @property
    def next_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def current_offset(self) -> int:
        return max(self.next_offset - 1, 0)

    @property
    def is_empty(self) -> bool:
        return self.next_offset == 0

    @property
    def first_offset(self) -> int:
        return self._segments[0].start_offset

    @property
    def messages_count(self) -> int:
        return sum(segment.records_count for segment in self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self._segments)

    @property
    def segments_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[MemorySegment, ...]:
        return tuple(self._segments)

    @property
    def last_timestamp(self) -> int:
        return self._last_timestamp

    # ------------------------------------------------------------------ appending
    def append(self, raw_messages: bytes | bytearray | memoryview, now_us: int,
               gaps: bool = False) -> tuple[int, int]:
        stamp = self._stamp(gaps)
        epoch = self._stamping_epoch()
        worst_size = len(raw_messages) + self.format.growth_per_message * (
            len(raw_messages) // _SMALLEST_SEND_MESSAGE + 1)
        active = self._segment_for(worst_size)
        timestamp = now_us if now_us > self._last_timestamp else self._last_timestamp
        batch: StampedBatch = stamp(raw_messages, active.next_offset, timestamp,
                                    active.size_bytes, active.start_offset, epoch)
        self._write(active, batch.records, batch.index_entries, epoch, timestamp, batch.count)
        return batch.first_offset, batch.last_offset

    async def wait_idle(self) -> None:
        """Nothing is ever in flight here: every append is done when it returns."""

    async def append_async(self, raw_messages: bytes | bytearray | memoryview, now_us: int,
                           gaps: bool = False, published: Callable[[], None] | None = None
                           ) -> tuple[int, int]:
        offsets = self.append(raw_messages, now_us, gaps)
        if published is not None:
            published()
        return offsets

    def _stamp(self, gaps: bool) -> Callable[..., StampedBatch]:
        if not gaps:
            return self.format.stamp
        if self.format.stamp_sparse is None:
            raise FeatureUnavailable(reason=f"record format {self.format.name} keeps offsets "
                                            "dense: a batch whose offsets skip cannot be stored")
        return self.format.stamp_sparse

    def append_as(self, record_format: str, raw: bytes | bytearray | memoryview, now_us: int,
                  gaps: bool = False) -> tuple[int, int]:
        """As ``PartitionLog.append_as``: converted by ``formats.conversion``, then appended."""
        timestamp = now_us if now_us > self._last_timestamp else self._last_timestamp
        if self.format.batch_index:
            batch = conversion.convert_batch(raw, record_format, self.format.name, timestamp)
            return self.append(batch, timestamp // 1000 * 1000)
        if record_format != kafka_v2.NAME:
            raise FeatureUnavailable(reason=f"a batch of format {record_format!r} cannot be "
                                            f"written to a topic of format {self.format.name!r}")
        if gaps:
            raise FeatureUnavailable(reason=f"record format {self.format.name} keeps offsets "
                                            "dense: a batch whose offsets skip cannot be stored")
        converted = conversion.kafka_batches_as_records(raw)
        records = bytearray(converted.records)
        epoch = self._stamping_epoch()
        active = self._segment_for(len(records))
        first = active.next_offset
        entries, first_timestamp, last_timestamp = conversion.stamp_converted(
            records, converted.positions, converted.timestamps, first, timestamp,
            self._last_timestamp, first - active.start_offset, active.size_bytes)
        self._write(active, records, entries, epoch, first_timestamp, converted.count,
                    last_timestamp)
        return first, first + converted.count - 1

    def append_stamped(self, records: bytearray, positions: array, now_us: int
                       ) -> tuple[int, int]:
        """As ``PartitionLog.append_stamped``: staged records given their offsets and time."""
        epoch = self._stamping_epoch()
        active = self._segment_for(len(records))
        timestamp = now_us if now_us > self._last_timestamp else self._last_timestamp
        first = active.next_offset
        self.format.restamp(records, positions, first, timestamp)
        relative, base = first - active.start_offset, active.size_bytes
        entries = build_index_entries(
            range(relative, relative + len(positions)),
            uniform_positions(positions, len(records), base) or [p + base for p in positions],
            timestamp)
        self._write(active, records, entries, epoch, timestamp, len(positions))
        return first, first + len(positions) - 1

    def _segment_for(self, size: int) -> MemorySegment:
        if self._closed:
            raise CannotAppendMessage(
                reason=f"Cannot append message: partition log {self.name} is closed")
        active = self._writable_segment()
        if active.messages_count and active.size_bytes + size > MAX_POSITION:
            self._seal_active()
            active = self._writable_segment()
        return active

    def _writable_segment(self) -> MemorySegment:
        if self._segments[-1].sealed:
            self._add_segment(self._segments[-1].next_offset)
        return self._segments[-1]

    def _write(self, active: MemorySegment, records: bytes | bytearray,
               entries: bytes | bytearray, epoch: int, timestamp: int, count: int,
               last_timestamp: int | None = None) -> None:
        last = timestamp if last_timestamp is None else last_timestamp
        active.add(records, _units(entries, self.format, active.start_offset, 0, epoch), count,
                   timestamp, last)
        self._last_timestamp = last
        if active.size_bytes >= self.settings.segment_size:
            self._seal_active()

    def _seal_active(self) -> None:
        self._segments[-1].sealed = True
        self._add_segment(self._segments[-1].next_offset)

    def _add_segment(self, start_offset: int) -> None:
        self._segments.append(MemorySegment(start_offset))
        self._starts.append(start_offset)

    async def wait_durable(self) -> None:
        """Nothing to wait for: memory is as durable as it gets."""

    async def sync(self) -> None:
        """Nothing to sync."""

    # ------------------------------------------------------------------ leader epochs
    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        last = self.last_epoch
        if epoch < min(self._leader_epoch, last if last is not None else 0):
            raise ValueError(f"leader epoch {epoch} is below this log's {last}")
        self._leader_epoch = epoch

    @property
    def last_epoch(self) -> int | None:
        for segment in reversed(self._segments):
            if segment.epochs:
                return segment.epochs[-1]
        return None

    def epoch_end(self, epoch: int) -> tuple[int, int] | None:
        """As ``PartitionLog.epoch_end`` (epochs never decrease along the units)."""
        end = self.next_offset
        for segment in reversed(self._segments):
            larger = bisect_right(segment.epochs, epoch)
            if larger < len(segment.epochs):
                end = segment.firsts[larger]
            if larger:
                return segment.epochs[larger - 1], end
        return None

    def epochs_from(self, offset: int) -> list[tuple[int, int]]:
        """As ``PartitionLog.epochs_from``."""
        if offset >= self.next_offset or self.format.batch_index:
            return []
        pairs: list[tuple[int, int]] = []
        for segment in self._segments:
            for epoch, first in zip(segment.epochs, segment.firsts):
                if not pairs or pairs[-1][0] != epoch:
                    pairs.append((epoch, first))
        return epochs_after(pairs, max(offset, self.first_offset))

    def _stamping_epoch(self) -> int:
        last = self.last_epoch
        if last is not None and self._leader_epoch < last:
            raise CannotAppendMessage(reason=(
                f"Cannot append message: leader epoch {self._leader_epoch} is below the epoch "
                f"{last} of the last records of {self.name}"))
        return self._leader_epoch

    # ------------------------------------------------------------------ incarnation
    @property
    def incarnation(self) -> int | None:
        return self._incarnation

    def store_incarnation(self, incarnation: int) -> None:
        self._incarnation = incarnation

    # ------------------------------------------------------------------ high watermark
    @property
    def stored_high_watermark(self) -> int | None:
        stored = self._stored_high_watermark
        return None if stored is None else min(stored, self.next_offset)

    def store_high_watermark(self, offset: int) -> None:
        if not 0 <= offset <= self.next_offset:
            raise ValueError(f"high watermark {offset} is outside the log (0..{self.next_offset})")
        self._stored_high_watermark = offset

    # ------------------------------------------------------------------ replica side
    def truncate_to(self, offset: int, floor: int = 0) -> None:
        """As ``PartitionLog.truncate_to``: the same refusals, the same log afterwards."""
        if self._closed:
            raise CannotAppendMessage(
                reason=f"Cannot append message: partition log {self.name} is closed")
        if not check_cut(self.name, offset, floor, self.first_offset, self.next_offset):
            return
        number = bisect_right(self._starts, offset) - 1
        boundary = self._segments[number]
        unit = boundary.cut_unit(offset, self.name)  # refuses a cut inside a batch
        del self._segments[number + 1:]
        del self._starts[number + 1:]
        boundary.cut(unit)
        self._last_timestamp = max((s.last_timestamp or 0 for s in self._segments), default=0)
        if self._stored_high_watermark is not None:
            self._stored_high_watermark = min(self._stored_high_watermark, offset)
        if boundary.size_bytes >= self.settings.segment_size:
            self._seal_active()

    async def append_replicated_async(self, records: bytes, first_offset: int,
                                      epochs: Sequence[Sequence[int]] | None = None
                                      ) -> tuple[int, int]:
        return self.append_replicated(records, first_offset, epochs)

    def append_replicated(self, records: bytes, first_offset: int,
                          epochs: Sequence[Sequence[int]] | None = None) -> tuple[int, int]:
        """As ``PartitionLog.append_replicated``: a leader's records kept byte for byte (a
        per-record format's at the ``epochs`` runs given, each at its epoch)."""
        if first_offset != self.next_offset:
            raise CannotAppendMessage(reason=(
                f"Cannot append message: the leader's records start at offset {first_offset}, "
                f"this log's next offset is {self.next_offset}"))
        if self.format.batch_index:
            return self._append_replicated_batches(records, first_offset)
        active = self._segment_for(len(records))
        scanned = self.format.scan(records, 0, first_offset, active.start_offset,
                                   self._last_timestamp, position_base=active.size_bytes)
        check_replicated(scanned, records, first_offset)
        runs = [(int(epoch), int(start)) for epoch, start in epochs or ()
                if start < first_offset + scanned.count]
        if len(runs) > 1:  # one append per run, split where the scan put the records
            count, entries, base = scanned.count, scanned.index_entries, active.size_bytes
            ends = [INDEX_ENTRY.unpack_from(entries, record * INDEX_ENTRY.size)[1] - base
                    for record in range(count)] + [len(records)]
            for number, (epoch, start) in enumerate(runs):
                start = max(start, first_offset)
                end = runs[number + 1][1] if number + 1 < len(runs) else first_offset + count
                if end > start:
                    self.leader_epoch = epoch
                    self.append_replicated(records[ends[start - first_offset]:
                                                   ends[end - first_offset]], start)
            return first_offset, first_offset + count - 1
        if runs:
            self.leader_epoch = runs[0][0]
        self._write(active, records, scanned.index_entries, self._stamping_epoch(),
                    scanned.first_timestamp, scanned.count, scanned.last_timestamp)
        return first_offset, first_offset + scanned.count - 1

    def _append_replicated_batches(self, records: bytes, first_offset: int) -> tuple[int, int]:
        """Whole batches the format's ``scan`` walks cleanly, epochs never decreasing, each
        into the segment a leader's append would have put it in."""
        scanned = self.format.scan(records, 0, first_offset, first_offset, self._last_timestamp)
        check_replicated(scanned, records, first_offset)
        units = _units(scanned.index_entries, self.format, first_offset, 0, self._leader_epoch)
        previous = self.last_epoch
        for first, _, _, epoch, _ in units:
            if previous is not None and epoch < previous:
                raise DecodeError(f"the leader's batch at offset {first} has leader epoch "
                                  f"{epoch}, below the {previous} before it")
            previous = epoch
        end_offset = first_offset + scanned.count
        for number, (first, start, timestamp, epoch, holes) in enumerate(units):
            end = units[number + 1][1] if number + 1 < len(units) else len(records)
            active = self._segment_for(end - start)
            following = units[number + 1][0] if number + 1 < len(units) else end_offset
            active.add(records[start:end], [(first, active.size_bytes, timestamp, epoch, holes)],
                       following - first, timestamp, timestamp)
            self._last_timestamp = timestamp
            if active.size_bytes >= self.settings.segment_size:
                self._seal_active()
        return first_offset, end_offset - 1

    # ------------------------------------------------------------------ retention
    def delete_expired_segments(self, now_us: int, expiry_us: int) -> int:
        deleted = 0
        while len(self._segments) > 1 and self._segments[0].sealed:
            last_timestamp = self._segments[0].last_timestamp
            if last_timestamp is None:  # (as the file log: bounded by the next segment)
                last_timestamp = self._segments[1].first_timestamp
            if last_timestamp is None or last_timestamp + expiry_us > now_us:
                break
            self._delete_oldest()
            deleted += 1
        return deleted

    def delete_oldest_segment(self) -> bool:
        if len(self._segments) < 2 or not self._segments[0].sealed:
            return False
        self._delete_oldest()
        return True

    def _delete_oldest(self) -> None:
        self._segments.pop(0)
        self._starts.pop(0)

    def purge(self) -> None:
        self._segments[:] = [MemorySegment(0)]
        self._starts[:] = [0]
        self._last_timestamp = 0
        if self._stored_high_watermark is not None:
            self._stored_high_watermark = 0

    # ------------------------------------------------------------------ closing
    def close(self, sync: bool = True) -> None:
        self._closed = True

    def destroy(self) -> None:
        self._closed = True

    def __repr__(self) -> str:
        return (f"MemoryLog({self.name!r}, offsets {self.first_offset}..{self.next_offset}, "
                f"{len(self._segments)} segments)")


class _RememberedLog(MemoryLog):
    """A log of ``MemoryLogs``: forgotten there when its partition goes."""

    logs: MemoryLogs
    key: tuple[int, int, int]

    def close(self, sync: bool = True) -> None:
        super().close(sync)
        if not sync:  # a log whose partition is being deleted
            self.logs.forget(self.key, self)

    def destroy(self) -> None:
        super().destroy()
        self.logs.forget(self.key, self)

    def reopened(self) -> MemoryLog:
        log = _RememberedLog.__new__(_RememberedLog)
        log.__dict__.update(MemoryLog.reopened(self).__dict__)
        log.logs, log.key = self.logs, self.key
        return log


class MemoryLogs:
    """The memory twin of ``log_opener.FileLogs`` (the core's ``Logs`` port): opens a
    partition's memory log, the one it had when it was open before (a restart of the Core on
    the same ``MemoryLogs``), until its partition is deleted."""

    def __init__(self, segment_size: int = DEFAULT_SEGMENT_SIZE) -> None:
        self.segment_size = segment_size
        self._logs: dict[tuple[int, int, int], _RememberedLog] = {}

    def open(self, stream_id: int, topic_id: int, partition_id: int, record_format: str,
             clean_shutdown: bool, sync_parent: bool = True) -> MemoryLog:
        key = (stream_id, topic_id, partition_id)
        known = self._logs.get(key)
        if known is not None and known.settings.record_format == record_format:
            log = known.reopened()
        else:
            log = _RememberedLog(f"memory:{stream_id}/{topic_id}/{partition_id}",
                                 MemoryLogSettings(self.segment_size, record_format))
            log.logs, log.key = self, key
        assert isinstance(log, _RememberedLog)
        self._logs[key] = log
        return log

    def forget(self, key: tuple[int, int, int], log: MemoryLog) -> None:
        if self._logs.get(key) is log:
            del self._logs[key]

    def sync_created(self, stream_id: int, topic_id: int) -> None:
        """Nothing to sync."""

    async def verify(self, logs: Callable[[], Iterable[object]]) -> None:
        """Nothing to verify: every record was stamped in this process."""

    def __len__(self) -> int:
        return len(self._logs)

