"""Recovery: what a partition's segment files are worth at open, and the repairs that makes safe.

Every segment gets a structural check, O(1) in its size: the index length is a multiple of 16,
its first and last entries are offsets ``start`` and ``start + n - 1`` at positions inside the
log, the records found there carry those offsets and timestamps (a batch index keeps a running
maximum of its batches' timestamps: compared as such, ``_timestamp_agrees``), and the last one
ends exactly at the end of the log. A check that fails names the field that disagrees
(offset, position, timestamp) with both values. A sealed segment must also hold exactly the
offsets up to the next segment's start. A segment that passes is opened unverified: its records are verified by their
first read, or by the background verifier after an unclean stop (``verification``).

A segment is walked record by record with checksums (``index_rebuild.locate_records``) when its
check fails, when ``validate_checksum`` is set (everything is verified at start), and, for the
LAST segment (the tail, which may not have been synced), whenever the shutdown was not clean.
The walk locates every record it can: a record with a bad checksum or header map is refused
(logged, never served), and the walk finds records again after a broken layout, so only what
cannot be located is refused. The index is rewritten safely whenever it disagrees with the log.
A walked segment opens verified.

The tail after an unclean stop: a torn end (bytes that are not records, and bad records after
the last good one: writes the stop interrupted, never acknowledged under fsync = always) is
cut. After a clean stop nothing is cut: a tail with bytes after its last record that cannot be
read as records is kept, unserved, and sealed (appends go to a new segment). Sealed segments are
never truncated: their data was acknowledged.

Everything about the records themselves (their heads, lengths, checks, walks) is the log's
``RecordFormat``'s; a batch-index format's segments are checked the same way, one entry per
batch (the last batch's head says how many offsets it holds).

Stray files: an ``.index`` without its ``.log`` and a leftover ``.index.rebuild`` are deleted;
files not named like segments are left alone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from rill.server.storage.durability import Durability
from rill.server.storage.index_rebuild import (
    LocatedRecords,
    locate_log_records,
    replace_index_file,
)
from rill.server.storage.paths import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    REBUILD_SUFFIX,
    DataPaths,
    parse_segment_file_name,
)
from rill.server.storage.formats import IGGY_V1, RecordFormat
from rill.server.storage.index_entry import INDEX_ENTRY, INDEX_ENTRY_SIZE
from rill.server.storage.file_io import IoTotals, read_all_at
from rill.server.storage.batch_segment import segment_class
from rill.server.storage.segment import Segment

logger = logging.getLogger(__name__)


def recover_segments(
    directory: Path, durability: Durability, *, clean_shutdown: bool, validate_checksum: bool,
    record_format: RecordFormat = IGGY_V1,
) -> list[Segment]:
    """Open the segments found in ``directory``, oldest first, the last one active (or sealed,
    with no active segment yet, when its end cannot be read; see above). Their records are
    ``record_format``'s (the topic's).

    Returns an empty list when the directory holds no segment log.
    """
    logs: set[int] = set()
    indexes: set[int] = set()
    strays: list[Path] = []
    for entry in os.scandir(directory):
        if entry.name.endswith(INDEX_SUFFIX + REBUILD_SUFFIX) and parse_segment_file_name(
                entry.name[: -len(REBUILD_SUFFIX)]):
            strays.append(Path(entry.path))  # a rebuild a stop interrupted before its rename
            continue
        parsed = parse_segment_file_name(entry.name)
        if parsed is None or not entry.is_file():
            continue
        start_offset, suffix = parsed
        (logs if suffix == LOG_SUFFIX else indexes).add(start_offset)
    for start_offset in sorted(indexes - logs):
        stray = DataPaths.segment_index(directory, start_offset)
        logger.warning("removing index %s: its log file is missing", stray)
        strays.append(stray)
    for stray in strays:
        stray.unlink(missing_ok=True)
    starts = sorted(logs)
    segments: list[Segment] = []
    for number, start_offset in enumerate(starts):
        if number == len(starts) - 1:
            segments.append(recover_tail(directory, start_offset, durability, clean_shutdown,
                                          validate_checksum, record_format))
        else:
            expected_count = starts[number + 1] - start_offset
            segments.append(
                _recover_sealed(
                    directory, start_offset, durability, expected_count, validate_checksum,
                    record_format,
                )
            )
    if strays:
        durability.sync_directory(directory)
    return segments


def recover_tail(
    directory: Path, start_offset: int, durability: Durability, clean_shutdown: bool,
    validate_checksum: bool, record_format: RecordFormat,
) -> Segment:
    """Open the last segment (see the module docstring); also the segment a truncation cut
    (``PartitionLog.truncate_to``), which becomes the tail."""
    log_path = DataPaths.segment_log(directory, start_offset)
    index_path = DataPaths.segment_index(directory, start_offset)
    log_size = log_path.stat().st_size
    index_entries = index_path.read_bytes() if index_path.exists() else None
    problem = None
    if index_entries is None:
        problem = "index file is missing"
    elif clean_shutdown and not validate_checksum:
        problem, messages_count = _structural_problem(
            log_path, start_offset, log_size, len(index_entries), index_entries.__getitem__, None,
            record_format, durability.io_totals,
        )
        if problem is None:
            return segment_class(record_format).open_active(
                directory, start_offset, durability, index_entries, log_size,
                record_format=record_format, messages_count=messages_count)
    if problem is not None:
        logger.warning("segment %s: %s; locating its records in the log", log_path, problem)
    located = locate_log_records(log_path, log_size, start_offset, None, index_entries,
                                 record_format)
    if not clean_shutdown:
        located = located.without_trailing_bad(start_offset)
    _write_index_if_changed(index_path, index_entries, located, durability)
    if located.end_position < log_size:
        if clean_shutdown:
            logger.error(
                "segment %s: the %d bytes after offset %d cannot be read as records (%s); "
                "kept unserved, and the segment is sealed", log_path,
                log_size - located.end_position, start_offset + located.count - 1,
                located.end_reason)
            return _open_located_sealed(directory, start_offset, durability, located,
                                        record_format)
        logger.warning(
            "segment %s: cutting %d bytes of torn or invalid tail after offset %d: %s",
            log_path, log_size - located.end_position, start_offset + located.count - 1,
            located.end_reason,
        )
        _truncate_file(log_path, located.end_position, durability)
        log_size = located.end_position
    return segment_class(record_format).open_active(
        directory, start_offset, durability, located.index_entries, log_size, verified=True,
        bad=located.bad, record_format=record_format, messages_count=located.count)


def _recover_sealed(
    directory: Path,
    start_offset: int,
    durability: Durability,
    expected_count: int,
    validate_checksum: bool,
    record_format: RecordFormat,
) -> Segment:
    log_path = DataPaths.segment_log(directory, start_offset)
    index_path = DataPaths.segment_index(directory, start_offset)
    log_size = log_path.stat().st_size
    if not index_path.exists():
        problem: str | None = "index file is missing"
        index_entries = None
    else:
        totals = durability.io_totals
        index_size = index_path.stat().st_size
        problem, _ = _structural_problem(
            log_path,
            start_offset,
            log_size,
            index_size,
            lambda span: _read_file_range(index_path, span.stop - span.start, span.start,
                                          totals),
            expected_count,
            record_format,
            totals,
        )
        if problem is None and not validate_checksum:
            return segment_class(record_format).open_sealed(
                directory, start_offset, durability, messages_count=expected_count,
                size_bytes=log_size,
                first_timestamp=_indexed_timestamp(index_path, 0, totals),
                last_timestamp=_indexed_timestamp(
                    index_path, index_size - record_format.index_entry_size, totals),
                record_format=record_format,
            )
        index_entries = index_path.read_bytes()
    if problem is not None:
        logger.warning("sealed segment %s: %s; locating its records in the log", log_path, problem)
    located = locate_log_records(log_path, log_size, start_offset, expected_count, index_entries,
                                 record_format)
    _write_index_if_changed(index_path, index_entries, located, durability)
    if located.end_position < log_size:
        logger.warning("sealed segment %s: %d bytes after its last record are not served",
                       log_path, log_size - located.end_position)
    return _open_located_sealed(directory, start_offset, durability, located, record_format)


def _open_located_sealed(
    directory: Path, start_offset: int, durability: Durability, located: LocatedRecords,
    record_format: RecordFormat,
) -> Segment:
    return segment_class(record_format).open_sealed(
        directory, start_offset, durability, messages_count=located.count,
        size_bytes=located.end_position, first_timestamp=located.first_timestamp,
        last_timestamp=located.last_timestamp, verified=True, bad=located.bad,
        record_format=record_format,
    )


def _write_index_if_changed(
    index_path: Path, index_entries: bytes | None, located: LocatedRecords,
    durability: Durability,
) -> None:
    if index_entries != located.index_entries:
        logger.warning("segment index %s rebuilt from the log (%d entries)", index_path,
                       located.count)
        replace_index_file(index_path, located.index_entries, durability)


def _structural_problem(
    log_path: Path,
    start_offset: int,
    log_size: int,
    index_size: int,
    read_index,
    expected_count: int | None,
    record_format: RecordFormat,
    totals: IoTotals,
) -> tuple[str | None, int]:
    """Why the index and the log disagree, checked at both ends (None when they agree), and
    the offsets the segment holds.

    ``read_index(slice)`` returns those bytes of the index. A per-record index has one entry
    per offset; a batch index (``record_format.batch_index``) one per batch, the last batch's
    record giving how many offsets it holds.
    """
    record_head, overhead = record_format.record_head, record_format.min_record_size
    per_batch, size = record_format.batch_index, record_format.index_entry_size
    if index_size % size:
        return f"index length {index_size} is not a multiple of {size}", 0
    count = index_size // size
    if not per_batch and expected_count is not None and count != expected_count:
        return f"index has {count} entries where {expected_count} are expected", 0
    if count == 0:
        if expected_count:
            return f"index is empty where {expected_count} offsets are expected", 0
        return (None if log_size == 0 else f"index is empty but the log has {log_size} bytes"), 0
    first_relative, first_position, first_timestamp = INDEX_ENTRY.unpack(
        read_index(slice(0, INDEX_ENTRY_SIZE))
    )
    last_relative, last_position, last_timestamp = INDEX_ENTRY.unpack(
        read_index(slice(index_size - size, index_size - size + INDEX_ENTRY_SIZE))
    )
    if first_relative != 0 or first_position != 0:
        return f"first index entry is ({first_relative}, {first_position}), expected (0, 0)", 0
    dense = last_relative >= count - 1 if per_batch else last_relative == count - 1
    if not dense or last_position + overhead > log_size:
        return (f"last index entry ({last_relative}, {last_position}) is past a {log_size}-byte "
                f"log"), 0
    head = _read_file_range(log_path, overhead, 0, totals)
    if len(head) < overhead:
        return f"first record at position 0: the log has {len(head)} bytes", 0
    offset, _, timestamp = record_head(head, 0)
    if offset != start_offset:
        return f"first record at position 0: offset {offset}, the index says {start_offset}", 0
    if not _timestamp_agrees(timestamp, first_timestamp, None, per_batch):
        return (f"first record at position 0: timestamp {timestamp}, the index says "
                f"{first_timestamp}"), 0
    tail = _read_file_range(log_path, log_size - last_position, last_position, totals)
    offset, held, timestamp = record_head(tail, 0)
    last_offset = start_offset + last_relative
    if offset != last_offset:
        return (f"record at position {last_position}: offset {offset}, the index says "
                f"{last_offset}"), 0
    previous = None
    if per_batch and count > 1:  # the running maximum the last entry continues
        previous = INDEX_ENTRY.unpack(read_index(slice(
            index_size - 2 * size, index_size - 2 * size + INDEX_ENTRY_SIZE)))[2]
    if not _timestamp_agrees(timestamp, last_timestamp, previous, per_batch):
        return (f"record at position {last_position}: timestamp {timestamp}, the index says "
                f"{last_timestamp}" + ("" if previous is None else
                                        f" (the entry before says {previous})")), 0
    if record_format.record_end(tail, 0) != len(tail):
        return f"last record does not end at the end of the log ({log_size} bytes)", 0
    messages = last_relative + held
    if expected_count is not None and messages != expected_count:
        return f"the segment holds {messages} offsets where {expected_count} are expected", 0
    return None, messages


def _timestamp_agrees(stored: int, indexed: int, previous: int | None, per_batch: bool) -> bool:
    """Whether an index entry's timestamp is the one its record (or batch) gives. A per-record
    index holds each record's own timestamp. A batch index holds a running maximum (Kafka's
    time index: a batch stamped earlier than one before it is indexed at the earlier one's
    time; ``formats.kafka_v2``): an entry is at least its batch's own timestamp, and exactly the
    larger of it and the entry before (``previous``) where that one is known (the first entry
    of a segment continues the previous segment's maximum, and several batches appended
    together share the largest one's)."""
    if not per_batch:
        return stored == indexed
    if previous is None:
        return indexed >= stored
    return indexed == max(stored, previous)


def _indexed_timestamp(index_path: Path, position: int, totals: IoTotals) -> int:
    return INDEX_ENTRY.unpack(_read_file_range(index_path, INDEX_ENTRY_SIZE, position, totals))[2]


# ---------------------------------------------------------------------- repairs
def _read_file_range(path: Path, length: int, position: int, totals: IoTotals) -> bytes:
    """Read bytes of a file that is not open."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        return read_all_at(descriptor, length, position, totals)
    finally:
        os.close(descriptor)


def _truncate_file(path: Path, size: int, durability: Durability) -> None:
    """Cut a file to ``size`` bytes (a torn tail) and sync it per policy."""
    descriptor = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(descriptor, size)
        durability.sync_now(descriptor)
    finally:
        durability.close_file(descriptor)
