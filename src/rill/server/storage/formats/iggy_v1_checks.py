"""Record checks: whether stored records are what they should be, and where they are.

Owns the per-record checks of every read and of recovery:
  * ``verify_records``: records against their index entries. Each entry has the expected
    relative offset and puts its record inside the data, right after the previous one; each
    record carries the expected offset, a known state and the entry's timestamp, its lengths
    end exactly where the next record begins, and its checksum (``crc32(payload)``) and header
    map are right. Returns ``(count, kind, reason)``: ``count`` records verified, then (unless
    ``kind`` is ``KIND_GOOD``) the next one is wrong for ``reason``.
  * ``scan_records``: records walked from a position without an index (recovery, index
    rebuilds): the same record checks, plus timestamps in order: a record is out of order when
    it is before the previous one, or after the next one while that one is not before the
    previous and the one after the next is not after it either (so one flipped timestamp is
    refused alone, not with everything after it).
  * ``find_record``: the first byte from a position where a record of an offset in a range
    begins and checks: where records can be found again after bytes that are not records.

``kind`` says how to read a failure: ``KIND_CONTENT`` (checksum or header map: the record is
where it should be, its bytes are wrong), ``KIND_STRUCTURE`` (the record is not where, or not
what, the index or the layout says: the index or the log is wrong), ``KIND_TIMESTAMP`` (scans:
a valid record whose timestamp is out of order).

Each check has a Python reference here (``*_python``) and a C twin in ``_record_checks.c``, used when
it is built (``records.ACCELERATED``): same results, same reasons word for word
(``tests/server/storage/formats/test_iggy_v1_checks_accelerator.py`` holds them to it). The twins release
the GIL on large data, so checks can run in worker threads beside the event loop.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.layout import STORED_TIMESTAMP_AT
from rill.server.storage.index_entry import INDEX_ENTRY, INDEX_ENTRY_SIZE, MAX_POSITION
from rill.server.storage.formats.iggy_v1 import (
    ACCELERATOR,
    KNOWN_STATES,
    RECORD_FIXED,
    RECORD_FIXED_SIZE,
    RECORD_OVERHEAD,
    add_header_values,
    crc32,
)

KIND_GOOD = 0
KIND_CONTENT = 1
KIND_STRUCTURE = 2
KIND_TIMESTAMP = 3

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_TIMESTAMP_AT = STORED_TIMESTAMP_AT
_NO_LIMIT = 0xFFFF_FFFF_FFFF_FFFF


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What ``scan_records`` found: ``count`` good records ending at byte ``end_position``,
    their index entries, and why it stopped there (``stop_kind`` ``KIND_GOOD`` and no reason
    when the data or ``max_count`` ended)."""

    count: int
    end_position: int
    index_entries: bytearray
    first_timestamp: int | None
    last_timestamp: int | None
    stop_kind: int
    stop_reason: str | None


def _bytes_view(data: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _check_record(
    view: memoryview, limit: int, at: int, offset: int, base: int,
    index_timestamp: int | None, checksums: bool,
) -> tuple[int, str | None, int]:
    """``(kind, reason, end)`` of the record at ``view[at]`` (byte ``base + at`` of the log) as
    offset ``offset``, within ``limit`` bytes of ``view``; ``end`` is where its lengths end."""
    where = f"record at byte {base + at} (offset {offset})"
    if limit - at < RECORD_OVERHEAD:
        return KIND_STRUCTURE, (
            f"incomplete record at byte {base + at}: {limit - at} bytes left"), 0
    found_offset, state, timestamp, checksum, headers_length = RECORD_FIXED.unpack_from(view, at)
    if found_offset != offset:
        return KIND_STRUCTURE, (
            f"record at byte {base + at} has offset {found_offset}, expected {offset}"), 0
    if state not in KNOWN_STATES:
        return KIND_STRUCTURE, f"{where} has unknown state {state}", 0
    if index_timestamp is not None and timestamp != index_timestamp:
        return KIND_STRUCTURE, (
            f"{where} has timestamp {timestamp}, the index says {index_timestamp}"), 0
    payload_length_at = at + RECORD_FIXED_SIZE + headers_length
    if payload_length_at + 4 > limit:
        return KIND_STRUCTURE, f"{where}: headers length {headers_length} overruns the data", 0
    (payload_length,) = _U32.unpack_from(view, payload_length_at)
    end = payload_length_at + 4 + payload_length
    if payload_length == 0 or end > limit:
        return KIND_STRUCTURE, f"{where}: payload length {payload_length}", 0
    if checksums:
        actual = crc32(view[payload_length_at + 4 : end])
        if actual != checksum:
            return KIND_CONTENT, f"{where}: checksum {actual} where {checksum} is stored", end
        if headers_length:
            try:
                add_header_values(view, at + RECORD_FIXED_SIZE, payload_length_at, 0, None)
            except DecodeError as error:
                return KIND_CONTENT, f"{where}: header map: {error.detail}", end
    return KIND_GOOD, None, end


def verify_records_python(
    records: bytes | bytearray | memoryview,
    entries: bytes | bytearray | memoryview,
    first_offset: int,
    relative_first: int,
    base_position: int,
) -> tuple[int, int, str | None]:
    """Check the records of ``len(entries) // 16`` offsets from ``first_offset`` against their
    index entries (the first with relative offset ``relative_first``). ``records`` holds the
    log from byte ``base_position`` to the end of the last record."""
    view, index = _bytes_view(records), _bytes_view(entries)
    count = len(index) // INDEX_ENTRY_SIZE
    end_position = base_position + len(view)
    for number in range(count):
        relative, position, timestamp = INDEX_ENTRY.unpack_from(index, number * INDEX_ENTRY_SIZE)
        offset = first_offset + number
        following = (
            INDEX_ENTRY.unpack_from(index, (number + 1) * INDEX_ENTRY_SIZE)[1]
            if number + 1 < count else end_position
        )
        if relative != relative_first + number:
            return number, KIND_STRUCTURE, (
                f"index entry of offset {offset} has relative offset {relative}, "
                f"expected {relative_first + number}")
        if ((number == 0 and position != base_position) or position < base_position
                or following < position or following > end_position):
            return number, KIND_STRUCTURE, (
                f"index entry of offset {offset} puts the record at bytes "
                f"{position}..{following}, outside the data")
        kind, reason, end = _check_record(view, following - base_position,
                                          position - base_position, offset, base_position,
                                          timestamp, True)
        if kind:
            return number, kind, reason
        if end != following - base_position:
            return number, KIND_STRUCTURE, (
                f"record at byte {position} (offset {offset}) ends at byte "
                f"{base_position + end}, the index says {following}")
    return count, KIND_GOOD, None


def scan_records_python(
    data: bytes | bytearray | memoryview,
    start_position: int,
    expected_offset: int,
    segment_start: int,
    previous_timestamp: int = 0,
    max_count: int = _NO_LIMIT,
    verify_checksums: bool = True,
    position_base: int = 0,
) -> ScanResult:
    """Walk records from ``start_position``, offsets densely from ``expected_offset``, at most
    ``max_count``, timestamps from ``previous_timestamp`` on; index entries relative to
    ``segment_start``, their positions ``position_base`` past the record's place in ``data``
    (where the data will sit in a segment)."""
    view = _bytes_view(data)
    length = len(view)
    entries: list[bytes] = []
    position, offset, previous = start_position, expected_offset, previous_timestamp
    first_timestamp: int | None = None
    kind, reason = KIND_GOOD, None
    while position < length and len(entries) < max_count:
        where = f"record at byte {position} (offset {offset})"
        if position + position_base > MAX_POSITION:
            kind, reason = KIND_STRUCTURE, f"{where} starts past the u32 positions of an index"
            break
        kind, reason, end = _check_record(view, length, position, offset, 0, None,
                                          verify_checksums)
        if kind:
            break
        (timestamp,) = _U64.unpack_from(view, position + _TIMESTAMP_AT)
        if timestamp < previous:
            kind, reason = KIND_TIMESTAMP, f"{where} has timestamp {timestamp}, before {previous}"
            break
        if length - end >= _TIMESTAMP_AT + 8 and _U64.unpack_from(view, end)[0] == offset + 1:
            (following,) = _U64.unpack_from(view, end + _TIMESTAMP_AT)
            if previous <= following < timestamp and not _in_order_after(
                    view, end, offset + 2, timestamp):
                kind, reason = KIND_TIMESTAMP, (
                    f"{where} has timestamp {timestamp}, after the next record's {following}")
                break
        entries.append(INDEX_ENTRY.pack((offset - segment_start) & 0xFFFF_FFFF,
                                        position + position_base, timestamp))
        if first_timestamp is None:
            first_timestamp = timestamp
        previous = timestamp
        offset += 1
        position = end
    count = len(entries)
    return ScanResult(count, position, bytearray(b"".join(entries)), first_timestamp,
                      previous if count else None, kind, reason)


def _in_order_after(view: memoryview, at: int, offset: int, timestamp: int) -> bool:
    """Whether the record after the one at ``at`` carries ``offset`` and a timestamp of at
    least ``timestamp`` (then the one at ``at`` is the record out of order)."""
    end = record_end(view, at)
    return (end is not None and len(view) - end >= _TIMESTAMP_AT + 8
            and _U64.unpack_from(view, end)[0] == offset
            and _U64.unpack_from(view, end + _TIMESTAMP_AT)[0] >= timestamp)


def find_record_python(
    data: bytes | bytearray | memoryview, start: int, first_offset: int, last_offset: int
) -> tuple[int, int] | None:
    """``(position, offset)`` of the first byte from ``start`` where a record of an offset in
    [first_offset, last_offset] begins and checks (layout, checksum, header map), or None.

    Searches each offset's 8 bytes with ``bytes.find`` (few offsets) or tries every byte."""
    view = _bytes_view(data)
    length = len(view)
    best: tuple[int, int] | None = None
    if last_offset - first_offset < 64:
        raw = view.tobytes()
        for offset in range(first_offset, last_offset + 1):
            needle = _U64.pack(offset)
            hit = raw.find(needle, start)
            limit = length if best is None else best[0]
            while 0 <= hit < limit and hit + RECORD_OVERHEAD <= length:
                if not _check_record(view, length, hit, offset, 0, None, True)[0]:
                    best = (hit, offset)
                    break
                hit = raw.find(needle, hit + 1)
        return best
    for position in range(start, length - RECORD_OVERHEAD + 1):
        (offset,) = _U64.unpack_from(view, position)
        if first_offset <= offset <= last_offset and not _check_record(
                view, length, position, offset, 0, None, True)[0]:
            return position, offset
    return None


def _verify_records_accelerated(  # type: ignore[no-untyped-def]
    records, entries, first_offset, relative_first, base_position
):
    return ACCELERATOR.verify(records, entries, first_offset, relative_first, base_position)


def _scan_records_accelerated(  # type: ignore[no-untyped-def]
    data, start_position, expected_offset, segment_start, previous_timestamp=0,
    max_count=_NO_LIMIT, verify_checksums=True, position_base=0,
) -> ScanResult:
    return ScanResult(*ACCELERATOR.scan(data, start_position, expected_offset, segment_start,
                                        previous_timestamp, max_count, verify_checksums,
                                        position_base))


def _find_record_accelerated(  # type: ignore[no-untyped-def]
    data, start, first_offset, last_offset
):
    return ACCELERATOR.find_record(data, start, first_offset, last_offset)


if ACCELERATOR is not None:
    verify_records = _verify_records_accelerated
    scan_records = _scan_records_accelerated
    find_record = _find_record_accelerated
else:
    verify_records = verify_records_python
    scan_records = scan_records_python
    find_record = find_record_python


def record_end(view: bytes | bytearray | memoryview, position: int) -> int | None:
    """End position of the record starting at ``position`` by its lengths, or None if they do
    not fit the data."""
    end = len(view)
    if position + RECORD_OVERHEAD > end:
        return None
    (headers_length,) = _U32.unpack_from(view, position + RECORD_FIXED_SIZE - 4)
    payload_length_at = position + RECORD_FIXED_SIZE + headers_length
    if payload_length_at + 4 > end:
        return None
    stop = payload_length_at + 4 + _U32.unpack_from(view, payload_length_at)[0]
    return stop if stop <= end else None


def record_header(
    view: bytes | bytearray | memoryview, position: int
) -> tuple[int, int, int, int, int]:
    """``(offset, state, timestamp, checksum, headers_length)`` of the record at ``position``."""
    return RECORD_FIXED.unpack_from(view, position)
