"""Reads of a partition log: records as stored, converted into another format, by columns, by
time. ``LogReads`` is a part of ``PartitionLog`` (its base class), kept apart by job, and of
its memory twin ``memory_log.MemoryLog`` (whose segments answer the same lookups); it reads
the log's segments (``_segments``, ``_starts``) and never changes them.

Offsets may hold no record (holes: TANK's explicit sequence numbers in a batch format, a
compacted batch): readers count records, never offset spans. ``read_as`` and
``read_columnar`` answer ``count`` records from the next stored one (Kafka's rule for a sparse
log), ``start_of_last`` walks back over records.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

from rill.errors import CannotReadMessage
from rill.protocol.iggy.layout import STORED_HEAD
from rill.server.storage.columnar import ColumnarRange, read_segment_columns
from rill.server.storage.file_region import FileRegion
from rill.server.storage.formats import conversion, iggy_v1

if TYPE_CHECKING:
    from rill.server.storage.formats import RecordFormat
    from rill.server.storage.segment import Segment


class LogReads:
    """The reads of a ``PartitionLog`` (see the module docstring)."""

    format: RecordFormat
    _segments: list[Segment]
    _starts: list[int]

    if TYPE_CHECKING:  # the log's own
        next_offset: int
        first_offset: int

    def read(self, offset: int, count: int, max_bytes: int | None = None, regions: bool = False
             ) -> tuple[int, list[bytes | FileRegion]]:
        """Records (poll layout) of offsets [offset, offset + count), clipped to what exists
        and, with ``max_bytes``, to that many bytes of records (at least one record).

        Offsets below ``first_offset`` start at ``first_offset``. One pread per segment touched.
        A batch-index format returns whole batches, from the one holding ``offset`` (so the
        records may start before it, and the count, from ``offset`` to the end of the last
        batch, may pass ``count``).
        A tailing read (``max_bytes``, no regions, in the last segment) takes
        ``Segment.read_within``'s one lookup when it answers.
        Every record returned was verified (``Segment.read``): the read stops before a bad
        record, and raises CannotReadMessage (4011) naming it when it is the first.
        ``regions``: large verified ranges may come as ``FileRegion``s of the log files
        (``storage.file_region``: sent with sendfile; a batch-index format's are whole
        batches, ``BatchSegment.read_region``), the rest as bytes.
        """
        start = max(offset, self.first_offset)
        end = min(offset + count, self.next_offset)
        if count <= 0 or start >= end:
            return 0, []
        if max_bytes is not None and not regions:  # a tailing reader's: in the last segment
            last = self._segments[-1]
            if start >= last.start_offset:
                found = last.read_within(start, end, max_bytes)
                if found is not None:
                    return found[0], [found[1]]
        chunks: list[bytes | FileRegion] = []
        number = bisect_right(self._starts, start) - 1
        position = start
        budget = max_bytes
        while position < end:
            segment = self._segments[number]
            segment_end = min(end, segment.next_offset)
            cut = False
            if segment_end > position and budget is not None:
                if budget <= 0:
                    break
                fitting = segment.end_within(position, segment_end, budget)
                if fitting == position:  # not one more record fits
                    if chunks:
                        break
                    fitting += 1  # but a read returns at least one
                cut, segment_end = fitting < segment_end, fitting
            if segment_end > position:
                found = segment.read_region(position, segment_end) if regions else None
                if found is None:
                    try:
                        found = segment.read(position, segment_end)
                    except CannotReadMessage:
                        if not chunks:
                            raise
                        break  # the records before the bad one are served
                count, records = found
                chunks.append(records)
                position += count
                if position < segment_end or cut:
                    break  # stopped before a bad record, or the next does not fit max_bytes
                if budget is not None:
                    budget -= len(records)
            number += 1
        return position - start, chunks

    def bytes_after(self, offset: int) -> int:
        """Bytes of records from ``offset`` (or the oldest one kept) to the end of the log."""
        start = max(offset, self.first_offset)
        if start >= self.next_offset:
            return 0
        number = bisect_right(self._starts, start) - 1
        first = self._segments[number]
        return (first.size_bytes - first.position(start)
                + sum(segment.size_bytes for segment in self._segments[number + 1:]))

    def read_as(self, record_format: str, offset: int, count: int, max_bytes: int | None = None
                ) -> conversion.Converted:
        """Up to ``count`` records from ``offset`` (from ``first_offset`` when below it)
        converted into ``record_format`` (``formats.conversion``: per record, for a
        reader of another protocol), exactly those records even when the log keeps whole
        batches. ``max_bytes`` bounds the stored bytes read (at least one batch is read).

        ``count`` counts records, not offsets: a log whose batches hold fewer records than
        offsets (holes: TANK's explicit sequence numbers, a compacted batch) answers from the
        next stored record, as Kafka does for a sparse log, reading on past batches that hold
        no record at or after ``offset`` until it has ``count`` records, reaches the end of
        the log or has read ``max_bytes``. ``Converted.first_offset`` is the first record's
        offset; ``end_offset`` (``conversion.Converted``) is the offset after the last
        one returned, where a reader goes on."""
        start = max(offset, self.first_offset)
        source = self.format.name
        if not self.format.batch_index:  # dense offsets: the records are exactly the offsets
            read, chunks = self.read(start, count, max_bytes)
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            return conversion.convert(data, source, record_format, start,
                                             min(count, read) if read else 0)
        parts: list[conversion.Converted] = []
        got, position, budget = 0, start, max_bytes
        while got < count and (budget is None or budget > 0):
            try:
                read, chunks = self.read(position, count - got, budget)
            except CannotReadMessage:
                if not parts:
                    raise
                break  # the records before the bad batch are served
            if not read:
                break
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            # the offsets wanted first (all a dense log needs: no record converted in vain),
            # then, where holes left fewer records, the rest of the batches read
            window = min(read, count - got)
            for first, span in ((position, window), (position + window, read - window)):
                if got >= count or not span:
                    break
                converted = conversion.convert(data, source, record_format, first, span)
                if converted.count:
                    parts.append(converted.first(count - got))
                    got += parts[-1].count
            position += read
            if budget is not None:
                budget -= len(data)
        if not parts:
            return conversion.convert(b"", source, record_format, start, 0)
        return conversion.Converted.joined(parts)

    def read_columnar(self, offset: int, count: int, max_bytes: int) -> ColumnarRange:
        """Up to ``count`` records from ``offset`` with their index columns, within one segment
        and ``max_bytes`` of records (at least one record), verified as ``read``'s are. See
        ``storage.columnar``. A batch-index format's batches are converted into ``iggy-v1``
        records and their columns (``read_as``: per-record work, the columns of the converted
        records, not of the log's index)."""
        start = max(offset, self.first_offset)
        end = min(start + count, self.next_offset)
        if count <= 0 or start >= end:
            return ColumnarRange.empty(start)
        if self.format.batch_index:
            converted = self.read_as(iggy_v1.NAME, start, end - start, max_bytes)
            boundaries, timestamps = converted.columns()
            return ColumnarRange(converted.first_offset, converted.count, boundaries, timestamps,
                                 converted.records)
        segment = self._segments[bisect_right(self._starts, start) - 1]
        return read_segment_columns(segment, start, min(end, segment.next_offset), max_bytes)

    def start_of_last(self, count: int) -> int:
        """Where a read of the last ``count`` records starts: the offset of the ``count``-th
        record from the end (``first_offset`` when fewer are stored). A batch-index format's
        batches may hold fewer records than offsets (holes): where a segment has any, the
        batches are walked back from the end, converted to find their records' offsets."""
        first = self.first_offset
        if (not self.format.batch_index or self.format.holes_in is None
                or all(s.records_count == s.messages_count for s in self._segments)):
            return max(first, self.next_offset - count)  # dense: no record to look at
        offsets: list[int] = []
        end = self.next_offset
        while end > first and len(offsets) < count:
            try:
                read, chunks = self.read(end - 1, 1)
            except CannotReadMessage:
                break  # a bad batch: the last records start after it
            if not read:
                break
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            batch_first = self.format.record_head(data, 0)[0]
            converted = conversion.convert(data, self.format.name, iggy_v1.NAME,
                                                  batch_first, end - batch_first)
            offsets[:0] = [STORED_HEAD.unpack_from(converted.records, position)[0]
                           for position in converted.positions[:-1]]
            end = batch_first
        if len(offsets) < count:
            return first if end <= first else end
        return offsets[-count]

    def offset_for_timestamp(self, timestamp_us: int) -> int | None:
        """First offset whose timestamp is >= ``timestamp_us``; None if there is none."""
        for segment in self._segments:
            if segment.last_timestamp is not None and segment.last_timestamp >= timestamp_us:
                return segment.find_timestamp(timestamp_us)
        return None

    def record_offset_for_timestamp(self, timestamp_us: int) -> int | None:
        """``offset_for_timestamp`` exact to the record (``record_at_or_after``'s offset)."""
        found = self.record_at_or_after(timestamp_us)
        return None if found is None else found[0]

    def record_at_or_after(self, timestamp_us: int) -> tuple[int, int] | None:
        """(offset, timestamp µs) of the first record whose timestamp is >= ``timestamp_us``;
        None when there is none. Exact to the record in every format and for every codec: a
        batch-index format finds the batch, then the first of its records (converted,
        ``read_as``, which decompresses any codec) at or after the time (the index's running
        maximum may pass a batch whose records are all earlier); a per-record format reads
        the one record the index finds."""
        offset = self.offset_for_timestamp(timestamp_us)
        if not self.format.batch_index:
            if offset is None:
                return None
            read, chunks = self.read(offset, 1)
            if not read:
                return None
            found_offset, _, timestamp = self.format.record_head(chunks[0], 0)
            return found_offset, timestamp
        while offset is not None and offset < self.next_offset:
            converted = self.read_as(iggy_v1.NAME, offset, self.next_offset - offset, 1)
            if not converted.count:
                return None
            for index, timestamp in enumerate(converted.timestamps):
                if timestamp >= timestamp_us:
                    return converted.offset_of(index), timestamp
            offset = converted.end_offset  # (records may skip offsets: holes)
        return None
