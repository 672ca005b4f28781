"""Index rebuilds: every record of a segment's log located and checked, and the index written
back from what was found.

Owns:
  * ``locate_records``: walks a log with the record checks (layout, checksum, header map,
    timestamps in order) and gives one index entry per offset. A record with a bad checksum or
    header map but a sound layout ending where the next record begins is recorded as bad and
    the walk goes on after it. Where the layout is broken (a corrupted offset or length), the
    walk finds records again: at the end its own lengths give, at the old index's position of
    the next offset (``hints``), or at the first byte from there where a record of a later
    offset begins and checks (the format's ``find``). Only the offsets in between are
    refused; the records before and after are served.
  * ``replace_index_file``: a rebuilt index written safely (a temporary file, synced per the
    durability policy, renamed over the index, the directory synced).
  * ``RebuildJob``: a rebuild whose scan (and file write, for a sealed segment) can run in a
    worker thread; the segment installs its result on the event loop.

Invariant: entries stay dense (entry ``i`` is offset ``start + i``), positions never decrease
and timestamps never decrease: an offset that is bad or cannot be located gets the position
where it was lost, and the old index's timestamp where that index agrees on the position (a
right index is not rewritten because of a bad record), else the previous good timestamp.
What is truly bad is not written anywhere: the next verification after a restart finds it
again.
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from rill.server.storage.checkpoints import write_atomically
from rill.server.storage.durability import Durability
from rill.server.storage.paths import DataPaths
from rill.server.storage.formats import IGGY_V1, RecordFormat
from rill.server.storage.formats.iggy_v1_checks import KIND_CONTENT, KIND_GOOD, KIND_TIMESTAMP
from rill.server.storage.index_entry import INDEX_ENTRY, INDEX_ENTRY_SIZE

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LocatedRecords:
    """One index entry per offset from the segment start (``count`` of them), the end of the
    last record located, and the offsets refused (offset -> reason)."""

    index_entries: bytearray
    count: int
    end_position: int
    bad: dict[int, str] = field(default_factory=dict)
    end_reason: str | None = None  # why the walk of a tail ended before the end of the data
    entry_size: int = INDEX_ENTRY_SIZE  # the format's (its first 16 bytes are INDEX_ENTRY)

    @property
    def first_timestamp(self) -> int | None:
        return INDEX_ENTRY.unpack_from(self.index_entries, 0)[2] if self.count else None

    @property
    def last_timestamp(self) -> int | None:
        if not self.count:
            return None
        return INDEX_ENTRY.unpack_from(self.index_entries,
                                       len(self.index_entries) - self.entry_size)[2]

    def without_trailing_bad(self, start_offset: int) -> LocatedRecords:
        """The records up to the last good one (a torn tail after an unclean stop)."""
        count = self.count
        while count and start_offset + count - 1 in self.bad:
            count -= 1
        if count == self.count:
            return self
        end = INDEX_ENTRY.unpack_from(self.index_entries, count * INDEX_ENTRY_SIZE)[1]
        bad = {offset: reason for offset, reason in self.bad.items()
               if offset < start_offset + count}
        return LocatedRecords(self.index_entries[: count * INDEX_ENTRY_SIZE], count, end, bad,
                              self.bad[start_offset + count])


def locate_records(
    data: bytes | bytearray | memoryview,
    start_offset: int,
    expected_count: int | None,
    hints: bytes | None = None,
    record_format: RecordFormat = IGGY_V1,
) -> LocatedRecords:
    """Locate and check the records of a log whose first offset is ``start_offset``: exactly
    ``expected_count`` offsets (a sealed segment: those not found are refused), or (None) as
    many as it holds (a tail: the walk ends where no further record can be found). The
    records are ``record_format``'s."""
    if record_format.batch_index:
        return _locate_batches(data, start_offset, expected_count, record_format)
    scan, end_of = record_format.scan, record_format.record_end
    view = memoryview(data)
    length = len(view)
    end_offset = None if expected_count is None else start_offset + expected_count
    entries = bytearray()
    bad: dict[int, str] = {}
    position, offset, previous = 0, start_offset, 0
    end_reason: str | None = None

    def refuse(first: int, end: int, at: int, reason: str) -> None:
        for lost in range(first, end):
            bad[lost] = reason if lost == first else f"cannot be located (lost before byte {at})"
            entries.extend(INDEX_ENTRY.pack(lost - start_offset, position,
                                            _kept_timestamp(hints, lost - start_offset, position,
                                                            previous)))

    while end_offset is None or offset < end_offset:
        found = scan(view, position, offset, start_offset, previous,
                     max_count=_NO_LIMIT if end_offset is None else end_offset - offset)
        entries += found.index_entries
        offset += found.count
        position = found.end_position
        if found.count:
            previous = found.last_timestamp
        if found.stop_kind == KIND_GOOD:
            break
        reason = found.stop_reason or ""
        stop = end_of(view, position)
        if found.stop_kind == KIND_TIMESTAMP or (
            found.stop_kind == KIND_CONTENT and _ends_at_a_record(view, stop, offset + 1)
        ):
            assert stop is not None
            refuse(offset, offset + 1, stop, reason)  # located, and bad
            offset += 1
            position = stop
            continue
        last = (end_offset - 1 if end_offset is not None
                else offset + (length - position) // (record_format.min_record_size + 1))
        again = _next_record(view, position, offset, last, stop, hints, start_offset,
                             record_format)
        if again is None:
            if end_offset is not None:  # the expected offsets left cannot be located
                refuse(offset, end_offset, length, reason)
                offset = end_offset
            end_reason = reason
            break
        refuse(offset, again[1], again[0], reason)
        position, offset = again
    if end_offset is not None and offset < end_offset:
        refuse(offset, end_offset, length, f"the log ends at byte {length}, before offset {offset}")
    count = len(entries) // INDEX_ENTRY_SIZE
    for lost in sorted(bad, reverse=True):  # no refused entry later than the entry after it
        at = (lost - start_offset) * INDEX_ENTRY_SIZE + 8
        if lost - start_offset + 1 < count:
            following = entries[at + INDEX_ENTRY_SIZE : at + INDEX_ENTRY_SIZE + 8]
            if int.from_bytes(entries[at : at + 8], "little") > int.from_bytes(following, "little"):
                entries[at : at + 8] = following
    return LocatedRecords(entries, count, position, bad, end_reason)


def _locate_batches(
    data: bytes | bytearray | memoryview, start_offset: int, expected_count: int | None,
    record_format: RecordFormat,
) -> LocatedRecords:
    """``locate_records`` for a batch-index format: one entry per batch, ``count`` offsets.

    A batch cannot be cut and carries no offset of its own records, so the walk does not look
    for batches again after a broken one: a tail ends there (recovery cuts it after an unclean
    stop), and a sealed segment's offsets after it are refused, under one entry at the byte
    where they were lost (a read of any of them is refused; the batches before are served)."""
    view = memoryview(data)
    found = record_format.scan(view, 0, start_offset, start_offset, 0,
                               max_count=_NO_LIMIT if expected_count is None else expected_count)
    entries, count, position = bytearray(found.index_entries), found.count, found.end_position
    end_reason = None if found.stop_kind == KIND_GOOD else found.stop_reason
    bad: dict[int, str] = {}
    if expected_count is not None and count < expected_count:
        reason = end_reason or (
            f"the log ends at byte {len(view)}, before offset {start_offset + count}")
        bad = {lost: reason if lost == start_offset + count
               else f"cannot be located (lost before byte {position})"
               for lost in range(start_offset + count, start_offset + expected_count)}
        entries += INDEX_ENTRY.pack(count, position, found.last_timestamp or 0)
        entries += bytes(record_format.index_entry_size - INDEX_ENTRY_SIZE)
        count = expected_count
    return LocatedRecords(entries, count, position, bad, end_reason,
                          record_format.index_entry_size)


def _kept_timestamp(hints: bytes | None, relative: int, position: int, previous: int) -> int:
    """A refused offset's timestamp: the old index's when it put the record at the same
    place (so a right index is not rewritten for a bad record), else the previous one's."""
    if hints is not None and (relative + 1) * INDEX_ENTRY_SIZE <= len(hints):
        _, hinted_position, timestamp = INDEX_ENTRY.unpack_from(hints, relative * INDEX_ENTRY_SIZE)
        if hinted_position == position and timestamp >= previous:
            return timestamp
    return previous


_NO_LIMIT = 0xFFFF_FFFF_FFFF_FFFF


def _ends_at_a_record(view: memoryview, stop: int | None, next_offset: int) -> bool:
    """Whether a record's lengths end where the data ends or the next offset's record begins."""
    if stop is None:
        return False
    if stop == len(view):
        return True
    return len(view) - stop >= 8 and int.from_bytes(view[stop : stop + 8], "little") == next_offset


def _next_record(
    view: memoryview, position: int, offset: int, last: int, stop: int | None,
    hints: bytes | None, start_offset: int, record_format: RecordFormat,
) -> tuple[int, int] | None:
    """Where records can be read again after the broken record of ``offset`` at ``position``:
    ``(position, offset)`` of the next record that checks, or None."""
    if last <= offset:
        return None
    candidates = [stop] if stop is not None and stop > position else []
    relative = offset + 1 - start_offset
    if hints is not None and (relative + 1) * INDEX_ENTRY_SIZE <= len(hints):
        hinted = INDEX_ENTRY.unpack_from(hints, relative * INDEX_ENTRY_SIZE)[1]
        if hinted > position:
            candidates.append(hinted)
    for candidate in candidates:  # a record of the next offset there, even if its bytes are bad
        checked = record_format.scan(view, candidate, offset + 1, start_offset, 0, max_count=1)
        if checked.count == 1 or checked.stop_kind in (KIND_TIMESTAMP, KIND_CONTENT):
            return candidate, offset + 1
    # the first byte from here where a later offset's record begins and checks (a record of a
    # later offset right here too: the offsets between were lost)
    return record_format.find(view, position, offset + 1, last)


def locate_log_records(
    log_path: Path, log_size: int, start_offset: int, expected_count: int | None,
    hints: bytes | None = None, record_format: RecordFormat = IGGY_V1,
) -> LocatedRecords:
    """``locate_records`` over the first ``log_size`` bytes of a log file (a read-only map)."""
    if log_size == 0:
        return locate_records(b"", start_offset, expected_count, hints, record_format)
    descriptor = os.open(log_path, os.O_RDONLY)
    try:
        mapping = mmap.mmap(descriptor, log_size, access=mmap.ACCESS_READ)
    finally:
        os.close(descriptor)  # read-only, never dirty: the mapping outlives it
    try:
        with memoryview(mapping) as view:
            return locate_records(view, start_offset, expected_count, hints, record_format)
    finally:
        try:
            mapping.close()
        except BufferError:  # a slice is still referenced somewhere; the mapping goes with it
            pass


def replace_index_file(path: Path, entries: bytes | bytearray, durability: Durability) -> None:
    """Write ``entries`` as the index at ``path``: a temporary file next to it, synced per the
    policy, renamed over it, the directory synced. A crash leaves the old or the new index."""
    write_atomically(path, entries, durability, DataPaths.segment_index_rebuild(path))


@dataclass(frozen=True, slots=True)
class RebuildJob:
    """A segment's index to rebuild from its first ``log_size`` bytes of log; ``hints`` is the
    index as it was (``generation``), ``write_file`` whether ``run`` writes the index file (a
    sealed segment; an active one is rewritten in place by the segment)."""

    log_path: Path
    index_path: Path
    log_size: int
    start_offset: int
    count: int
    hints: bytes | None
    write_file: bool
    durability: Durability
    generation: int
    record_format: RecordFormat = IGGY_V1

    def run(self) -> tuple[LocatedRecords, bool]:
        """Locate every record (may run in a worker thread); returns what was found and
        whether the index file now holds it."""
        located = locate_log_records(self.log_path, self.log_size, self.start_offset,
                                     self.count, self.hints, self.record_format)
        if not self.write_file or located.index_entries == self.hints:
            return located, located.index_entries == self.hints
        try:
            replace_index_file(self.index_path, located.index_entries, self.durability)
        except OSError as error:  # served from memory until the next start rebuilds it again
            logger.error("cannot write the rebuilt index %s: %s", self.index_path, error)
            return located, False
        return located, True
