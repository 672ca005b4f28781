"""Recovery: what a partition's segment files are worth at open, and the repairs that makes safe.

Every segment gets a structural check, O(1) in its size: the index length is a multiple of 16,
its first and last entries are offsets ``start`` and ``start + n - 1`` at positions inside the
log, the records found there carry those offsets, and the last one ends exactly at the end of
the log. A sealed segment must also hold exactly the offsets up to the next segment's start.

The LAST segment (the tail, which may not have been synced) is scanned record by record with
checksums whenever the shutdown was not clean, whenever ``validate_checksum`` is set, and
whenever its structural check fails. A torn or garbage tail is cut at the end of the last valid
record, and the index is rebuilt from the log whenever it disagrees (missing, short, long).

A SEALED segment that fails its check is scanned; if the log is whole and has exactly the
expected offsets, its index is rebuilt. Otherwise the segment is kept but marked corrupt (an
error naming the file is logged): reads touching it raise ``CannotReadMessage`` while the rest of
the partition keeps working. Sealed segments are never truncated: their data was acknowledged.

Stray files: an ``.index`` without its ``.log`` is deleted; files not named like segments are
left alone.
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from rill.server.storage.durability import Durability
from rill.server.storage.paths import LOG_SUFFIX, DataPaths, parse_segment_file_name
from rill.server.storage.records import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    RECORD_OVERHEAD,
    ScanResult,
    record_end,
    record_header,
    scan_records,
)
from rill.server.storage.segment import Segment, read_all_at, write_all_at

logger = logging.getLogger(__name__)


def recover_segments(
    directory: Path, durability: Durability, *, clean_shutdown: bool, validate_checksum: bool
) -> list[Segment]:
    """Open the segments found in ``directory``, oldest first, the last one active.

    Returns an empty list when the directory holds no segment log.
    """
    logs: set[int] = set()
    indexes: set[int] = set()
    for entry in os.scandir(directory):
        parsed = parse_segment_file_name(entry.name)
        if parsed is None or not entry.is_file():
            continue
        start_offset, suffix = parsed
        (logs if suffix == LOG_SUFFIX else indexes).add(start_offset)
    for start_offset in sorted(indexes - logs):
        stray = DataPaths.segment_index(directory, start_offset)
        logger.warning("removing index %s: its log file is missing", stray)
        stray.unlink(missing_ok=True)
    starts = sorted(logs)
    segments: list[Segment] = []
    for number, start_offset in enumerate(starts):
        if number == len(starts) - 1:
            full_scan = validate_checksum or not clean_shutdown
            segments.append(_recover_tail(directory, start_offset, durability, full_scan))
        else:
            expected_count = starts[number + 1] - start_offset
            segments.append(
                _recover_sealed(
                    directory, start_offset, durability, expected_count, validate_checksum
                )
            )
    if indexes - logs:
        durability.sync_directory(directory)
    return segments


def _recover_tail(
    directory: Path, start_offset: int, durability: Durability, full_scan: bool
) -> Segment:
    log_path = DataPaths.segment_log(directory, start_offset)
    index_path = DataPaths.segment_index(directory, start_offset)
    log_size = log_path.stat().st_size
    index_entries = index_path.read_bytes() if index_path.exists() else None
    problem = None
    if index_entries is None:
        problem = "index file is missing"
    elif not full_scan:
        problem = _structural_problem(
            log_path, start_offset, log_size, len(index_entries), index_entries.__getitem__, None
        )
    if full_scan or problem is not None:
        if problem is not None:
            logger.warning("segment %s: %s; rebuilding from the log", log_path, problem)
        scan = _scan_log(log_path, log_size, start_offset, verify_checksums=True)
        if scan.end_position < log_size:
            logger.warning(
                "segment %s: cutting %d bytes of torn or invalid tail after offset %d: %s",
                log_path,
                log_size - scan.end_position,
                start_offset + scan.count - 1,
                scan.stop_reason,
            )
            _truncate_file(log_path, scan.end_position, durability)
            log_size = scan.end_position
        if index_entries != scan.index_entries:
            logger.warning(
                "segment %s: index rebuilt from the log (%d entries)", index_path, scan.count
            )
            _rewrite_file(index_path, scan.index_entries, durability)
            index_entries = scan.index_entries
    assert index_entries is not None
    return Segment.open_active(directory, start_offset, durability, index_entries, log_size)


def _recover_sealed(
    directory: Path,
    start_offset: int,
    durability: Durability,
    expected_count: int,
    verify_checksums: bool,
) -> Segment:
    log_path = DataPaths.segment_log(directory, start_offset)
    index_path = DataPaths.segment_index(directory, start_offset)
    log_size = log_path.stat().st_size
    first_timestamp = last_timestamp = None
    if not index_path.exists():
        problem: str | None = "index file is missing"
    else:
        index_size = index_path.stat().st_size
        problem = _structural_problem(
            log_path,
            start_offset,
            log_size,
            index_size,
            lambda span: _read_file_range(index_path, span.stop - span.start, span.start),
            expected_count,
        )
        if problem is None:
            first_timestamp = _indexed_timestamp(index_path, 0)
            last_timestamp = _indexed_timestamp(index_path, index_size - INDEX_ENTRY_SIZE)
    if problem is not None or verify_checksums:
        scan = _scan_log(log_path, log_size, start_offset, verify_checksums=True)
        scan_problem = scan.stop_reason
        if scan_problem is None and scan.count != expected_count:
            scan_problem = f"log holds {scan.count} messages where {expected_count} are expected"
        if scan_problem is not None:
            return Segment.open_sealed(
                directory,
                start_offset,
                durability,
                messages_count=expected_count,
                size_bytes=log_size,
                first_timestamp=None,
                last_timestamp=None,
                corrupt_reason=scan_problem if problem is None else f"{problem}; {scan_problem}",
            )
        if problem is not None or index_path.read_bytes() != scan.index_entries:
            logger.warning(
                "sealed segment %s: %s; index rebuilt from the log",
                log_path,
                problem or "index disagrees with the log",
            )
            _rewrite_file(index_path, scan.index_entries, durability)
        first_timestamp, last_timestamp = scan.first_timestamp, scan.last_timestamp
    return Segment.open_sealed(
        directory,
        start_offset,
        durability,
        messages_count=expected_count,
        size_bytes=log_size,
        first_timestamp=first_timestamp,
        last_timestamp=last_timestamp,
    )


def _structural_problem(
    log_path: Path,
    start_offset: int,
    log_size: int,
    index_size: int,
    read_index,
    expected_count: int | None,
) -> str | None:
    """Why the index and the log disagree, checked at both ends; None when they agree.

    ``read_index(slice)`` returns those bytes of the index.
    """
    if index_size % INDEX_ENTRY_SIZE:
        return f"index length {index_size} is not a multiple of {INDEX_ENTRY_SIZE}"
    count = index_size // INDEX_ENTRY_SIZE
    if expected_count is not None and count != expected_count:
        return f"index has {count} entries where {expected_count} are expected"
    if count == 0:
        return None if log_size == 0 else f"index is empty but the log has {log_size} bytes"
    first_relative, first_position, _ = INDEX_ENTRY.unpack(read_index(slice(0, INDEX_ENTRY_SIZE)))
    last_relative, last_position, last_timestamp = INDEX_ENTRY.unpack(
        read_index(slice(index_size - INDEX_ENTRY_SIZE, index_size))
    )
    if first_relative != 0 or first_position != 0:
        return f"first index entry is ({first_relative}, {first_position}), expected (0, 0)"
    if last_relative != count - 1 or last_position + RECORD_OVERHEAD > log_size:
        return f"last index entry ({last_relative}, {last_position}) is past a {log_size}-byte log"
    head = _read_file_range(log_path, RECORD_OVERHEAD, 0)
    if len(head) < RECORD_OVERHEAD or record_header(head, 0)[0] != start_offset:
        return f"first record does not carry offset {start_offset}"
    tail = _read_file_range(log_path, log_size - last_position, last_position)
    offset, _, timestamp, _, _ = record_header(tail, 0)
    last_offset = start_offset + count - 1
    if offset != last_offset or timestamp != last_timestamp:
        return f"record at position {last_position} is not the indexed offset {last_offset}"
    if record_end(tail, 0) != len(tail):
        return f"last record does not end at the end of the log ({log_size} bytes)"
    return None


def _scan_log(
    log_path: Path, log_size: int, start_offset: int, verify_checksums: bool
) -> ScanResult:
    """Scan a whole log through a read-only memory map."""
    if log_size == 0:
        return ScanResult(0, 0, bytearray(), None, None, None)
    descriptor = os.open(log_path, os.O_RDONLY)
    try:
        mapping = mmap.mmap(descriptor, log_size, access=mmap.ACCESS_READ)
    finally:
        os.close(descriptor)  # read-only, never dirty
    try:
        with memoryview(mapping) as view:
            return scan_records(view, 0, start_offset, verify_checksums, start_offset)
    finally:
        try:
            mapping.close()
        except BufferError:  # a slice is still referenced somewhere; the mapping goes with it
            pass


def _indexed_timestamp(index_path: Path, position: int) -> int:
    return INDEX_ENTRY.unpack(_read_file_range(index_path, INDEX_ENTRY_SIZE, position))[2]


# ---------------------------------------------------------------------- repairs
def _read_file_range(path: Path, length: int, position: int) -> bytes:
    """Read bytes of a file that is not open."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        return read_all_at(descriptor, length, position)
    finally:
        os.close(descriptor)


def _rewrite_file(path: Path, data: bytes | bytearray, durability: Durability) -> None:
    """Replace a file's content (a rebuilt index) and sync it per policy."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all_at(descriptor, data, 0)
        durability.sync_now(descriptor)
    finally:
        durability.close_file(descriptor)


def _truncate_file(path: Path, size: int, durability: Durability) -> None:
    """Cut a file to ``size`` bytes (a torn tail) and sync it per policy."""
    descriptor = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(descriptor, size)
        durability.sync_now(descriptor)
    finally:
        durability.close_file(descriptor)
