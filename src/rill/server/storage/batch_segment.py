"""BatchSegment: a segment of a batch-index record format (``RecordFormat.batch_index``).

Such a format stores each client batch as one unit that cannot be cut (Kafka's RecordBatch
v2: kafka-notes §3) and keeps ONE 16-byte index entry per batch, in the same layout as a
per-record index: ``relative_offset u32`` (the batch's first offset - segment start) |
``position u32`` | ``timestamp u64`` (the batch's max timestamp, never decreasing). A batch's
last offset is the next entry's first - 1, or the segment's end for the last batch.

Owns the lookups of such an index, all binary searches over its entries (a per-record
``Segment`` indexes entry ``offset - start`` directly and keeps doing so):
  * offset -> the entry of the batch holding it (``entry_of``: the last entry whose first
    offset is <= offset);
  * a read of offsets [first, end) returns whole batches, from the one holding ``first`` to
    the one holding ``end - 1`` (as Kafka's Fetch does): its ``count`` runs from ``first`` to
    the end of the last batch returned, so a reader goes on at the next batch;
  * ``max_bytes`` cuts between batches (at least one is returned);
  * ``read_region``: the same whole batches as a ``FileRegion`` of the log file (sent with
    sendfile), only when every one of them is verified already and they span at least
    ``MIN_REGION_BYTES`` (else None: ``read`` them, which checks them);
  * timestamp -> the first offset of the first batch whose max timestamp is >= it;
  * leader epochs, for a format whose entries carry one (``RecordFormat.entry_epoch``, entries
    of ``index_entry_size`` bytes): ``epoch_split`` gives, within the segment, the last epoch
    <= a requested one and the first offset of the first batch of a larger epoch (epochs never
    decrease along a log), the segment's part of ``PartitionLog.epoch_end``; ``last_epoch``.

Invariants: ``entries_count`` is the number of entries in use, ``messages_count`` the offsets
they cover, ``records_count`` the records (fewer where sparse batches leave holes, which the
format keeps in the entries: ``RecordFormat.holes_in``); a bad batch is refused whole (every
offset of it is marked bad); verification is per batch (the format's ``verify`` returns the
offsets of the batches it verified); the leader epochs of a segment's entries never decrease
(the log refuses an append that would lower them).
Not supported here yet: columnar reads (``index_columns``: they hand out per-record columns).
"""

from __future__ import annotations

import mmap
import os
import struct
from bisect import bisect_right
from pathlib import Path
from typing import Callable

from rill.errors import CannotReadMessage, FeatureUnavailable
from rill.server.storage.durability import Durability
from rill.server.storage.file_region import FileRegion
from rill.server.storage.formats import RecordFormat
from rill.server.storage.formats.iggy_v1_checks import KIND_CONTENT, KIND_GOOD
from rill.server.storage.index_entry import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    POSITION_FIELD,
    RELATIVE_FIELD,
    TIMESTAMP_FIELD,
    batch_span,
    search_entries,
)
from rill.server.storage.segment import Segment
from rill.server.storage.truncation import TruncationRefused
from rill.server.storage.verification import VerificationJob

_RELATIVE_AT = struct.Struct("<I")
_POSITION_AT = struct.Struct("<4xI")
_TIMESTAMP_AT = struct.Struct("<8xQ")

Index = bytearray | mmap.mmap | bytes


def segment_class(record_format: RecordFormat) -> type[Segment]:
    """The segment kind a format's index needs."""
    if record_format.batch_index:
        return BatchSegment
    if record_format.index_entry_size != INDEX_ENTRY_SIZE:
        raise ValueError(f"format {record_format.name}: a per-record index has "
                         f"{INDEX_ENTRY_SIZE}-byte entries")
    if record_format.entry_epoch is not None:
        raise ValueError(f"format {record_format.name}: only a batch index keeps leader epochs")
    return Segment


class BatchSegment(Segment):
    """A segment whose index has one entry per batch (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], start_offset: int,
                 durability: Durability, record_format: RecordFormat) -> None:
        super().__init__(directory, start_offset, durability, record_format)
        self.entries_count = 0
        # 16 bytes the log reads, then the format's own (a leader epoch)
        self._entry_size = record_format.index_entry_size
        # offsets that hold no record (sparse batches); None: not counted yet (an opened
        # segment: counted from its batches' heads when first asked, ``records_count``)
        self._holes: int | None = 0

    # ------------------------------------------------------------------ opening
    @classmethod
    def open_active(  # type: ignore[no-untyped-def, override]
        cls, directory, start_offset, durability, index_entries, size_bytes, verified=False,
        bad=None, record_format=None, messages_count=None,
    ):
        if messages_count is None:
            raise ValueError("a batch-index segment needs its messages_count")
        segment = super().open_active(directory, start_offset, durability, index_entries,
                                      size_bytes, verified, bad, record_format, messages_count)
        assert isinstance(segment, BatchSegment)
        segment._holes = None
        size = segment._entry_size
        segment.entries_count = len(index_entries) // size
        if segment.entries_count:  # (the base class read them at a 16-byte stride)
            segment.first_timestamp = _TIMESTAMP_AT.unpack_from(index_entries, 0)[0]
            segment.last_timestamp = _TIMESTAMP_AT.unpack_from(
                index_entries, len(index_entries) - size)[0]
        return segment

    @classmethod
    def open_sealed(  # type: ignore[no-untyped-def, override]
        cls, directory, start_offset, durability, **kwargs
    ):
        segment = super().open_sealed(directory, start_offset, durability, **kwargs)
        assert isinstance(segment, BatchSegment)
        segment._holes = None
        segment.entries_count = segment.index_path.stat().st_size // segment._entry_size
        return segment

    # ------------------------------------------------------------------ writing
    def write(self, records: bytes | bytearray, index_entries: bytes | bytearray) -> None:
        self._write_files(records, index_entries, self.entries_count * self._entry_size)

    def publish(self, records_size: int, index_entries: bytes | bytearray,
                first_timestamp: int, last_timestamp: int, count: int | None = None) -> None:
        """Make a written batch readable; ``count``: the offsets it holds (required)."""
        if count is None:
            raise ValueError("a batch-index segment needs the offsets a batch holds")
        if self.sealed or self._index_mirror is None:
            raise RuntimeError(f"segment {self.log_path} is sealed")
        self._mirror_entries(index_entries, self.entries_count * self._entry_size)
        if self.messages_count == 0:
            self.first_timestamp = first_timestamp
        first_new = self.next_offset
        self.entries_count += len(index_entries) // self._entry_size
        self.messages_count += count
        if self._holes is not None and self.format.holes_in is not None:
            self._holes += self.format.holes_in(index_entries)
        self.verification.add_verified(first_new, self.next_offset)  # stamped here
        self.size_bytes += records_size
        self.last_timestamp = last_timestamp

    # ------------------------------------------------------------------ records
    @property
    def records_count(self) -> int:
        """Records stored: the offsets minus the holes of sparse batches (TANK's explicit
        sequence numbers), what a reader counts. The format keeps each batch's holes in its
        index entry (``RecordFormat.holes_in``): an opened segment sums them over its index
        when first asked (no log read), appends add theirs."""
        if self._holes is None:
            holes_in = self.format.holes_in
            self._holes = (0 if holes_in is None or not self.entries_count
                           else holes_in(self._index()[: self.entries_count * self._entry_size]))
        return self.messages_count - self._holes

    # ------------------------------------------------------------------ index lookups
    def entry_of(self, index: Index, offset: int) -> int:
        """Number of the entry of the batch holding ``offset`` (a binary search, in C)."""
        return search_entries(index, 0, self.entries_count, self._entry_size, RELATIVE_FIELD,
                              offset - self.start_offset, True) - 1

    def _entry_first(self, index: Index, number: int) -> int:
        """First offset of entry ``number`` (the segment's end past the last entry)."""
        if number >= self.entries_count:
            return self.next_offset
        return self.start_offset + _RELATIVE_AT.unpack_from(index, number * self._entry_size)[0]

    def _entry_position(self, index: Index, number: int) -> int:
        if number >= self.entries_count:
            return self.size_bytes
        return _POSITION_AT.unpack_from(index, number * self._entry_size)[0]

    def _position(self, index: Index, offset: int) -> int:
        return self._entry_position(index, self.entry_of(index, offset))

    def cut_point(self, offset: int) -> tuple[int, int]:
        """``(log length, index length)`` of this segment cut to end before ``offset``, which
        must start a batch (or be the segment's next offset): a batch is never cut
        (``truncation.TruncationRefused`` otherwise)."""
        if not self.start_offset <= offset <= self.next_offset:
            raise ValueError(f"offset {offset} is not in segment {self.log_path}")
        index = self._index()
        number = (self.entries_count if offset == self.next_offset
                  else self.entry_of(index, offset))
        if self._entry_first(index, number) != offset:
            raise TruncationRefused(
                f"offset {offset} is inside the batch of offsets "
                f"{self._entry_first(index, number)}..{self._entry_first(index, number + 1) - 1}"
                f" of {self.log_path}: a batch is never cut")
        return self._entry_position(index, number), number * self._entry_size

    def bad_end(self, offset: int) -> int:
        """A bad batch is refused whole: the end of the batch holding ``offset``."""
        index = self._index()
        return self._entry_first(index, self.entry_of(index, offset) + 1)

    # ------------------------------------------------------------------ reading
    def read(self, first_offset: int, end_offset: int) -> tuple[int, bytes]:
        """Whole verified batches, from the one holding ``first_offset`` to the one holding
        ``end_offset - 1``, stopping before a bad batch: ``(count, records)`` where ``count``
        runs from ``first_offset`` to the end of the last batch returned. Raises
        CannotReadMessage when the batch holding ``first_offset`` is bad."""
        self._check_range(first_offset, end_offset)
        for _ in range(3):
            generation = self.index_generation
            index = self._index()
            first_entry = self.entry_of(index, first_offset)
            end_entry = self.entry_of(index, end_offset - 1) + 1
            if first_entry < 0:
                self._rebuild_index(f"no index entry holds offset {first_offset}")
                continue
            batch_first = self._entry_first(index, first_entry)
            stop = self.verification.first_bad(batch_first, self._entry_first(index, end_entry))
            if stop < self._entry_first(index, first_entry + 1):
                raise self.verification.error(stop)  # the batch asked for is refused
            end_entry = min(end_entry, self.entry_of(index, stop - 1) + 1)
            first_position = self._entry_position(index, first_entry)
            end_position = self._entry_position(index, end_entry)
            batch_end = self._entry_first(index, end_entry)
            if not first_position < end_position <= self.size_bytes:
                self._rebuild_index(
                    f"index positions {first_position}..{end_position} of offsets "
                    f"{batch_first}..{batch_end - 1} are out of order")
                continue
            data = self._read_log(end_position - first_position, first_position)
            if len(data) < end_position - first_position:
                self._rebuild_index(
                    f"the log ends at byte {first_position + len(data)}, before the "
                    f"{end_position} its index gives")
                continue
            if not self.verification.is_verified(batch_first, batch_end):
                count, kind, reason = self.format.verify(
                    data, index[first_entry * self._entry_size : end_entry * self._entry_size],
                    batch_first, batch_first - self.start_offset, first_position)
                self.verification.add_verified(batch_first, batch_first + count)
                if kind != KIND_GOOD:
                    bad = batch_first + count  # where the first batch that is not good starts
                    if kind == KIND_CONTENT:
                        self.verification.mark_bad(bad, self.bad_end(bad), reason or "")
                    else:
                        self._rebuild_index(f"offset {bad}: {reason}")
                    if self.index_generation != generation or bad == batch_first:
                        continue  # read again: with the new index, or to refuse the batch
                    batch_end = bad
                    data = data[: self._position(index, bad) - first_position]
            return batch_end - first_offset, data
        raise CannotReadMessage(
            reason=f"Cannot read message: the index of {self.log_path} keeps disagreeing "
            "with its log")

    def read_within(self, first_offset: int, end_offset: int, max_bytes: int
                    ) -> tuple[int, bytes] | None:
        """``end_within`` then ``read`` in one lookup (``index_entry.batch_span``, in C): the
        whole batches from the one holding ``first_offset`` to the one holding ``end_offset -
        1`` that fit in ``max_bytes`` (at least one), as ``(count, records)`` -- when every
        one of them is verified already and none is bad, and the index and the log agree.
        None otherwise (and for a budget below 1): ``end_within`` and ``read`` check, report
        and mend what this one passes over. The common read of a tailing consumer."""
        if max_bytes < 1:
            return None
        self._check_range(first_offset, end_offset)
        start = self.start_offset
        span = batch_span(self._index(), self.entries_count, self._entry_size,
                          first_offset - start, end_offset - start, max_bytes, self.size_bytes,
                          self.next_offset - start)
        if span is None:
            return None
        batch_first, batch_end, first_position, end_position = span
        batch_first += start
        batch_end += start
        verification = self.verification
        if (not verification.is_verified(batch_first, batch_end)
                or verification.first_bad(batch_first, batch_end) != batch_end):
            return None
        data = self._read_log(end_position - first_position, first_position)
        if len(data) < end_position - first_position:
            return None
        return batch_end - first_offset, data

    def read_region(self, first_offset: int, end_offset: int) -> tuple[int, FileRegion] | None:
        """``read``'s whole batches as a region of the log file, to be sent without reading
        them: ``(count, region)``, only when every batch is verified already (and none bad),
        they span at least ``MIN_REGION_BYTES`` and the index positions are in order; None
        otherwise (``read`` them: it checks what is unverified and reports what is wrong)."""
        self._check_range(first_offset, end_offset)
        index = self._index()
        first_entry = self.entry_of(index, first_offset)
        if first_entry < 0:
            return None
        end_entry = self.entry_of(index, end_offset - 1) + 1
        batch_first = self._entry_first(index, first_entry)
        batch_end = self._entry_first(index, end_entry)
        verification = self.verification
        if (not verification.is_verified(batch_first, batch_end)
                or verification.first_bad(batch_first, batch_end) != batch_end):
            return None
        region = self._log_region(self._entry_position(index, first_entry),
                                  self._entry_position(index, end_entry))
        return None if region is None else (batch_end - first_offset, region)

    def end_within(self, first_offset: int, end_offset: int, max_bytes: int) -> int:
        """The largest end <= ``end_offset`` at a batch boundary such that the batches from
        the one holding ``first_offset`` take at most ``max_bytes`` (``first_offset`` when not
        even that one fits; ``end_offset`` when all fit)."""
        self._check_range(first_offset, end_offset)
        index = self._index()
        first_entry = self.entry_of(index, first_offset)
        end_entry = self.entry_of(index, end_offset - 1) + 1
        limit = self._entry_position(index, first_entry) + max_bytes
        if self._entry_position(index, end_entry) <= limit:
            return end_offset
        fitting = search_entries(index, first_entry + 1, end_entry, self._entry_size,
                                 POSITION_FIELD, limit, True) - (first_entry + 1)
        if fitting == 0:
            return first_offset
        return self._entry_first(index, first_entry + fitting)

    def find_timestamp(self, timestamp_us: int) -> int | None:
        """First offset of the first batch whose max timestamp is >= ``timestamp_us``."""
        if (not self.messages_count or self.last_timestamp is None
                or self.last_timestamp < timestamp_us):
            return None
        index = self._index()
        found = search_entries(index, 0, self.entries_count, self._entry_size, TIMESTAMP_FIELD,
                               timestamp_us, False)
        return self._entry_first(index, found)

    # ------------------------------------------------------------------ leader epochs
    def _entry_epochs(self) -> Callable[..., int]:
        entry_epoch = self.format.entry_epoch
        if entry_epoch is None:
            raise FeatureUnavailable(reason=f"format {self.format.name} keeps no leader epochs")
        return entry_epoch

    def epoch_split(self, epoch: int) -> tuple[int | None, int | None]:
        """Over this segment's batches: the epoch of the last batch whose epoch is <= ``epoch``
        (None when every batch has a larger one, or there is none), and the first offset of the
        first batch whose epoch is larger (None when there is none). A binary search: epochs
        never decrease along the entries."""
        entry_epoch = self._entry_epochs()
        index, size = self._index(), self._entry_size
        larger = bisect_right(range(self.entries_count), epoch,
                              key=lambda number: entry_epoch(index, number * size))
        floor = entry_epoch(index, (larger - 1) * size) if larger else None
        return floor, (self._entry_first(index, larger) if larger < self.entries_count else None)

    @property
    def last_epoch(self) -> int | None:
        """Leader epoch of the segment's last batch; None when it holds none."""
        entry_epoch = self._entry_epochs()
        if not self.entries_count:
            return None
        return entry_epoch(self._index(), (self.entries_count - 1) * self._entry_size)

    def index_columns(self, first_offset: int, end_offset: int) -> tuple[bytes, bytes]:
        raise FeatureUnavailable(reason=f"columnar reads are per record; format "
                                        f"{self.format.name} is stored per batch")

    def index_entry(self, offset: int) -> tuple[int, int, int]:
        """``(relative_offset, position, max timestamp)`` of the batch holding ``offset``."""
        index = self._index()
        return INDEX_ENTRY.unpack_from(index, self.entry_of(index, offset) * self._entry_size)

    # ------------------------------------------------------------------ index bookkeeping
    def _index(self) -> Index:
        if self._index_mirror is not None:
            return self._index_mirror
        if self.entries_count == 0 or self._index_map is None:
            return b""
        try:
            mapping = self._index_map.get()
        except (ValueError, OSError) as error:
            raise CannotReadMessage(
                reason=f"Cannot read message: cannot map the index {self.index_path}: {error}"
            ) from error
        if len(mapping) < self.entries_count * self._entry_size:
            raise CannotReadMessage(
                reason=f"Cannot read message: the index of {self.log_path} is shorter than its "
                f"{self.entries_count} batches")
        return mapping

    def _install_index(self, entries: bytearray, written: bool) -> None:
        super()._install_index(entries, written)
        self.entries_count = len(entries) // self._entry_size
        self._holes = None  # counted again from the batches the new index finds

    def _index_hints(self) -> bytes | None:
        length = self.entries_count * self._entry_size
        if self._index_mirror is not None:
            return bytes(self._index_mirror[:length])
        try:
            return Path(self.index_path).read_bytes()[:length]
        except OSError:
            return None

    def unverified_chunk(self, offset: int, max_bytes: int) -> VerificationJob | None:
        """The first unverified batches at or after ``offset`` that are not known bad (about
        ``max_bytes`` of log, at least one batch)."""
        verification = self.verification
        index = self._index()
        for first, end in verification.gaps(offset, self.next_offset):
            while first < end and first in verification.bad:
                first = self.bad_end(first)
            if first >= end:
                continue
            first_entry = self.entry_of(index, first)
            end = verification.first_bad(first, end)
            end_entry = self.entry_of(index, end - 1) + 1
            base = self._entry_position(index, first_entry)
            fitting = search_entries(index, first_entry + 1, end_entry, self._entry_size,
                                     POSITION_FIELD, base + max_bytes, True) - first_entry - 1
            end_entry = first_entry + max(fitting, 1)
            batch_first = self._entry_first(index, first_entry)
            return VerificationJob(
                self.log_path, batch_first, self._entry_first(index, end_entry),
                batch_first - self.start_offset, base,
                min(max(self._entry_position(index, end_entry), base), self.size_bytes),
                bytes(index[first_entry * self._entry_size : end_entry * self._entry_size]),
                self.index_generation, self.format,
            )
        return None
