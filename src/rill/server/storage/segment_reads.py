"""Segment reads: the read side of a ``Segment`` (a mixin, as ``segment_checks`` is its
verification side).

Owns: reading verified records (``read``, stopping before a bad record, checking what was never
verified with the format's ``verify``), handing verified ranges out as file regions
(``read_region``), and the lookups over the index that reads and the log need: timestamp ->
offset (``find_timestamp``), the index columns of a range (``index_columns``), how many records
fit a byte budget (``end_within``), where a truncation cuts (``cut_point``), positions and
entries. Per-record index here (entry ``offset - start``); ``batch_segment.BatchSegment``
overrides what a batch index answers differently.

Invariants: a read returns only records verified since they were last written, and never
reads past the published end (``size_bytes``); an index found to disagree with the log is
rebuilt (``segment_checks``) and the read redone with the new one (``index_generation``).
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import TYPE_CHECKING

from rill.errors import CannotReadMessage
from rill.server.storage.descriptors import CachedFile
from rill.server.storage.durability import Durability
from rill.server.storage.file_io import read_all_at
from rill.server.storage.file_region import MIN_REGION_BYTES, FileRegion
from rill.server.storage.formats import RecordFormat
from rill.server.storage.formats.iggy_v1_checks import KIND_CONTENT, KIND_GOOD
from rill.server.storage.index_entry import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    POSITION_FIELD,
    TIMESTAMP_FIELD,
    search_entries,
)
from rill.server.storage.verification import SegmentVerification


class SegmentReads:
    """Mixed into ``Segment``, whose files, index and verification it reads."""

    if TYPE_CHECKING:  # what Segment provides
        log_path: Path
        index_path: Path
        start_offset: int
        messages_count: int
        size_bytes: int
        last_timestamp: int | None
        index_generation: int
        format: RecordFormat
        verification: SegmentVerification
        _durability: Durability
        _log_file: CachedFile | None

        @property
        def next_offset(self) -> int: ...

        def _index(self) -> bytearray | mmap.mmap | bytes: ...

        def _position(self, index: bytearray | mmap.mmap | bytes, offset: int) -> int: ...

        def _rebuild_index(self, reason: str) -> None: ...

    def read(self, first_offset: int, end_offset: int) -> tuple[int, bytes]:
        """Verified records of offsets [first_offset, end_offset), which must lie in this
        segment: ``(count, records)``, stopping before the first bad record. Raises
        CannotReadMessage (4011) naming the offset when the first record asked for is bad."""
        self._check_range(first_offset, end_offset)
        for _ in range(3):
            generation = self.index_generation
            stop = self.verification.first_bad(first_offset, end_offset)
            if stop == first_offset:
                raise self.verification.error(first_offset)
            index = self._index()
            first_position = self._position(index, first_offset)
            last_position = self._position(index, stop - 1)
            end_position = (
                self.size_bytes if stop == self.next_offset else self._position(index, stop)
            )
            if not first_position <= last_position < end_position <= self.size_bytes:
                self._rebuild_index(
                    f"index positions {first_position}..{end_position} of offsets "
                    f"{first_offset}..{stop - 1} are out of order"
                )
                continue
            data = self._read_log(end_position - first_position, first_position)
            if len(data) < end_position - first_position:
                self._rebuild_index(
                    f"the log ends at byte {first_position + len(data)}, before the "
                    f"{end_position} its index gives"
                )
                continue
            checked = self._verify_read(index, data, first_position, first_offset, stop)
            if self.index_generation != generation:
                continue  # rebuilt from the log: read again with the new index
            if checked == first_offset:
                raise self.verification.error(first_offset)
            if checked < stop:
                data = data[: self._position(index, checked) - first_position]
            return checked - first_offset, data
        raise CannotReadMessage(
            reason=f"Cannot read message: the index of {self.log_path} keeps disagreeing "
            "with its log"
        )

    def read_within(self, first_offset: int, end_offset: int, max_bytes: int
                    ) -> tuple[int, bytes] | None:
        """A batch-index segment's one-lookup read (``BatchSegment.read_within``); None here:
        a per-record segment reads through ``end_within`` and ``read``."""
        return None

    def read_region(self, first_offset: int, end_offset: int) -> tuple[int, FileRegion] | None:
        """Records of [first_offset, end_offset) as a region of the log file, to be sent
        without reading them: only when every one of them is verified already and they span at
        least ``MIN_REGION_BYTES`` (None otherwise: ``read`` them)."""
        self._check_range(first_offset, end_offset)
        verification = self.verification
        if (verification.first_bad(first_offset, end_offset) != end_offset
                or verification.gaps(first_offset, end_offset)):
            return None
        index = self._index()
        first_position = self._position(index, first_offset)
        end_position = (self.size_bytes if end_offset == self.next_offset
                        else self._position(index, end_offset))
        region = self._log_region(first_position, end_position)
        return None if region is None else (end_offset - first_offset, region)

    def _log_region(self, first_position: int, end_position: int) -> FileRegion | None:
        """Bytes [first_position, end_position) of the log as a region, when at least
        ``MIN_REGION_BYTES`` and within the log (None otherwise: the caller reads)."""
        if (end_position - first_position < MIN_REGION_BYTES
                or not 0 <= first_position < end_position <= self.size_bytes):
            return None  # small (or an index to check: ``read`` does)
        assert self._log_file is not None
        try:
            descriptor = self._log_file.pin()
        except OSError:
            return None  # ``read`` reports it
        try:
            return FileRegion(descriptor, first_position, end_position - first_position,
                              self._durability.io_totals.add_read)
        finally:
            self._log_file.unpin()

    def _verify_read(
        self, index: bytearray | mmap.mmap | bytes, data: bytes, base: int, first: int, stop: int
    ) -> int:
        """Verify the unverified records of [first, stop) in ``data`` (the log from byte
        ``base``); returns the first offset that is not good (``stop`` when all are). A bad
        record is marked; an index that disagrees with the log is rebuilt."""
        start = self.start_offset
        for gap_start, gap_end in self.verification.gaps(first, stop):
            begin = self._position(index, gap_start) - base
            end = len(data) if gap_end == stop else self._position(index, gap_end) - base
            if 0 <= begin <= end <= len(data):
                count, kind, reason = self.format.verify(
                    memoryview(data)[begin:end],
                    index[(gap_start - start) * INDEX_ENTRY_SIZE
                          : (gap_end - start) * INDEX_ENTRY_SIZE],
                    gap_start, gap_start - start, base + begin,
                )
            else:
                count, kind, reason = 0, -1, (
                    f"index positions {base + begin}..{base + end} of offsets "
                    f"{gap_start}..{gap_end - 1} are out of order"
                )
            self.verification.add_verified(gap_start, gap_start + count)
            if kind == KIND_GOOD:
                continue
            bad = gap_start + count
            if kind == KIND_CONTENT:
                self.verification.mark_bad(bad, bad + 1, reason)
            else:
                self._rebuild_index(f"offset {bad}: {reason}")
            return bad
        return stop

    def find_timestamp(self, timestamp_us: int) -> int | None:
        """Offset of the first message with timestamp >= ``timestamp_us`` in this segment.

        The two index entries that decide it (the one found and the one before) are checked
        against the log first; if that rebuilt the index, the search runs again on it."""
        if (
            not self.messages_count
            or self.last_timestamp is None
            or self.last_timestamp < timestamp_us
        ):
            return None
        for _ in range(2):
            generation = self.index_generation
            found = self.start_offset + self._bisect_timestamps(timestamp_us)
            first, end = max(found - 1, self.start_offset), min(found + 1, self.next_offset)
            for offset in range(first, end):
                try:
                    self.read(offset, offset + 1)
                except CannotReadMessage:
                    pass  # refused to readers anyway; its neighbours decide
            if self.index_generation == generation:
                break
        return found

    def _bisect_timestamps(self, timestamp_us: int) -> int:
        return search_entries(self._index(), 0, self.messages_count, INDEX_ENTRY_SIZE,
                              TIMESTAMP_FIELD, timestamp_us, False)

    def index_columns(self, first_offset: int, end_offset: int) -> tuple[bytes, bytes]:
        """``(boundaries, timestamps)`` of offsets [first_offset, end_offset) from the index.

        ``boundaries`` holds end - first + 1 little-endian u32 positions: each record's start,
        then the end of the last one; ``timestamps`` holds one little-endian u64 per record.
        Both are strided copies of the index bytes (no per-entry Python work, any host order).
        They are what the index says: ``read`` verifies the records (and the index) themselves.
        """
        self._check_range(first_offset, end_offset)
        index = self._index()
        first = (first_offset - self.start_offset) * INDEX_ENTRY_SIZE
        end = (end_offset - self.start_offset) * INDEX_ENTRY_SIZE
        with memoryview(index) as raw, raw[first:end] as entries:
            with entries.cast("I") as words, words[1::4] as positions:
                starts = positions.tobytes()
            with entries.cast("Q") as double_words, double_words[1::2] as stamps:
                timestamps = stamps.tobytes()
        if end_offset == self.next_offset:
            last = self.size_bytes.to_bytes(4, "little")
        else:
            last = bytes(index[end + 4 : end + 8])
        return starts + last, timestamps

    def end_within(self, first_offset: int, end_offset: int, max_bytes: int) -> int:
        """The largest end <= ``end_offset`` such that the records of [first_offset, end) take
        at most ``max_bytes`` (``first_offset`` when not even one fits). Arithmetic on the
        index: a binary search."""
        self._check_range(first_offset, end_offset)
        index = self._index()
        limit = self._position(index, first_offset) + max_bytes
        last_end = self.size_bytes if end_offset == self.next_offset else self._position(
            index, end_offset)
        if last_end <= limit:
            return end_offset
        start = self.start_offset  # the records past the first that end within the limit:
        return start - 1 + search_entries(index, first_offset + 1 - start, end_offset - start,
                                          INDEX_ENTRY_SIZE, POSITION_FIELD, limit, True)

    def cut_point(self, offset: int) -> tuple[int, int]:
        """``(log length, index length)`` of this segment cut to end before ``offset`` (one of
        its offsets or its next one). Every record is a unit here: any offset is a boundary."""
        if not self.start_offset <= offset <= self.next_offset:
            raise ValueError(f"offset {offset} is not in segment {self.log_path}")
        if offset == self.next_offset:
            return self.size_bytes, self.messages_count * INDEX_ENTRY_SIZE
        return self.position(offset), (offset - self.start_offset) * INDEX_ENTRY_SIZE

    def position(self, offset: int) -> int:
        """Where message ``offset``'s record starts in the log file."""
        return self._position(self._index(), offset)

    def index_entry(self, offset: int) -> tuple[int, int, int]:
        """``(relative_offset, position, timestamp)`` of one message (for tests and tools)."""
        return INDEX_ENTRY.unpack_from(
            self._index(), (offset - self.start_offset) * INDEX_ENTRY_SIZE
        )

    def _check_range(self, first_offset: int, end_offset: int) -> None:
        if not self.start_offset <= first_offset < end_offset <= self.next_offset:
            raise ValueError(
                f"offsets [{first_offset}, {end_offset}) are not in segment {self.log_path}"
            )


    def _read_log(self, length: int, position: int) -> bytes:
        """Read from the log (its descriptor pinned meanwhile)."""
        assert self._log_file is not None
        try:
            descriptor = self._log_file.pin()
        except OSError as error:
            raise CannotReadMessage(
                reason=f"Cannot read message: cannot open {self.log_path}: {error}"
            ) from error
        try:
            return read_all_at(descriptor, length, position, self._durability.io_totals)
        finally:
            self._log_file.unpin()
