"""The index entry: the 16 bytes every segment index keeps per unit (a record, or a batch).

Layout, little-endian::

    relative_offset u32 (offset - segment start) | position u32 (of the unit in the .log) |
    timestamp u64

A per-record format (iggy-v1) keeps one entry per record; a batch-index format keeps one per
batch and may follow each entry with bytes of its own (kafka-v2: a leader epoch and the
batch's holes; ``RecordFormat.index_entry_size``), which the log never reads but through the
format. Owns: the layout (``INDEX_ENTRY``), its size, the largest position or relative offset
it can hold (``MAX_POSITION``: a segment is sealed before its positions would pass it),
``build_index_entries`` (the C twin ``index_entries`` of ``formats/_staged.c`` builds them when
offsets and positions are evenly spaced: records of one size, the common case) and
``search_entries``, the binary search over entries by one of the three fields (the C twin
``search_entries`` of ``formats/_index.c``; ``search_entries_python`` is its reference), and
``batch_span``, the whole batches one read takes within a byte budget (the C twin
``batch_span`` of ``formats/_index.c``; ``batch_span_python`` is its reference).
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right

INDEX_ENTRY = struct.Struct("<IIQ")  # relative_offset, position, timestamp
INDEX_ENTRY_SIZE = INDEX_ENTRY.size
MAX_POSITION = 0xFFFF_FFFF  # index positions and relative offsets are u32

_LITTLE_ENDIAN_HOST = sys.byteorder == "little"

# the fields ``search_entries`` keys on: their byte in an entry
RELATIVE_FIELD = 0  # relative_offset u32
POSITION_FIELD = 4  # position u32
TIMESTAMP_FIELD = 8  # timestamp u64
_FIELDS = {RELATIVE_FIELD: struct.Struct("<I"), POSITION_FIELD: struct.Struct("<4xI"),
           TIMESTAMP_FIELD: struct.Struct("<8xQ")}


def build_index_entries(
    relative_offsets: range, positions: list[int] | range, timestamp_us: int
) -> bytearray:
    """Index entries for one batch: by the C twin when ``positions`` is a range (records of
    one size) as long as ``relative_offsets``, else column by column (C speed, no per-entry
    calls). OverflowError when a relative offset or a position passes u32."""
    if (_index_entries is not None and type(positions) is range and positions.step > 0
            and relative_offsets.step == 1 and len(positions) == len(relative_offsets)
            and positions.start >= 0 and relative_offsets.start >= 0 and timestamp_us >= 0):
        return _index_entries(relative_offsets.start, positions.start, positions.step,
                              len(positions), timestamp_us)
    return build_index_entries_python(relative_offsets, positions, timestamp_us)


def build_index_entries_python(
    relative_offsets: range, positions: list[int] | range, timestamp_us: int
) -> bytearray:
    """Index entries for one batch, filled column by column (C speed, no per-entry calls);
    the reference of ``_staged.c``'s ``index_entries``."""
    count = len(positions)
    entries = bytearray(INDEX_ENTRY_SIZE * count)
    relative_column = array("I", relative_offsets)
    position_column = array("I", positions)
    timestamp_column = array("Q", [timestamp_us]) * count
    if not _LITTLE_ENDIAN_HOST:
        for column in (relative_column, position_column, timestamp_column):
            column.byteswap()
    with memoryview(entries) as raw, raw.cast("I") as words, raw.cast("Q") as double_words:
        words[0::4] = relative_column
        words[1::4] = position_column
        double_words[1::2] = timestamp_column
    return entries


def search_entries_python(index, lo: int, hi: int, entry_size: int, field: int, value: int,
                          right: bool) -> int:  # type: ignore[no-untyped-def]
    """``bisect_right`` (``right``) or ``bisect_left`` of ``value`` over entries ``lo..hi-1``
    of ``index`` (entries of ``entry_size`` bytes, 16 or more), keyed by ``field``
    (``RELATIVE_FIELD``, ``POSITION_FIELD`` or ``TIMESTAMP_FIELD``); the reference of
    ``_index.c``. ValueError when an argument is out of range or entry ``hi - 1`` passes the
    index's end."""
    unpack = _FIELDS.get(field)
    if unpack is None or lo < 0 or hi < lo or entry_size < INDEX_ENTRY_SIZE:
        raise ValueError("search_entries: an argument is out of range")
    if lo == hi:
        return lo
    if (hi - 1) * entry_size + field + (8 if field == TIMESTAMP_FIELD else 4) > len(index):
        raise ValueError("search_entries: the entries pass the index's end")
    search = bisect_right if right else bisect_left
    return search(range(hi), value, lo,
                  key=lambda number: unpack.unpack_from(index, number * entry_size)[0])


def batch_span_python(index, count: int, entry_size: int, first: int, end: int,
                      max_bytes: int, size_bytes: int, next_relative: int
                      ) -> tuple[int, int, int, int] | None:  # type: ignore[no-untyped-def]
    """The whole batches a read of relative offsets ``[first, end)`` takes from a
    batch-index segment of ``count`` entries, ``size_bytes`` of log and ``next_relative`` (its
    next offset, relative): from the batch holding ``first`` to the one holding ``end - 1``,
    cut to those that fit in ``max_bytes`` (at least the first). Returns ``(batch_first,
    batch_end, first_position, end_position)``: the relative offsets where the first batch
    starts and the last one ends, and their log positions. None when the index cannot answer
    it plainly -- no entry holds ``first``, or the positions are out of order -- for the
    caller's careful path to report. The reference of ``_index.c``'s ``batch_span``; the same
    entries as a segment's ``end_within`` followed by its ``read``. ValueError when
    an argument is out of range or the entries pass the index's end."""
    if (count < 0 or entry_size < INDEX_ENTRY_SIZE or not 0 <= first < end <= next_relative
            or max_bytes < 1 or size_bytes < 0):
        raise ValueError("batch_span: an argument is out of range")
    if count * entry_size > len(index):
        raise ValueError("batch_span: the entries pass the index's end")
    relative = _FIELDS[RELATIVE_FIELD]
    position = _FIELDS[POSITION_FIELD]

    def relative_at(number: int) -> int:
        return next_relative if number >= count else relative.unpack_from(
            index, number * entry_size)[0]

    def position_at(number: int) -> int:
        return size_bytes if number >= count else position.unpack_from(
            index, number * entry_size)[0]

    first_entry = search_entries_python(index, 0, count, entry_size, RELATIVE_FIELD, first,
                                        True) - 1
    if first_entry < 0:
        return None
    end_entry = search_entries_python(index, 0, count, entry_size, RELATIVE_FIELD, end - 1,
                                      True)
    if end_entry <= first_entry:  # relative offsets out of order
        return None
    first_position = position_at(first_entry)
    limit = first_position + max_bytes
    if position_at(end_entry) > limit:
        fitting = search_entries_python(index, first_entry + 1, end_entry, entry_size,
                                        POSITION_FIELD, limit, True) - (first_entry + 1)
        end_entry = first_entry + max(fitting, 1)
    end_position = position_at(end_entry)
    if not first_position < end_position <= size_bytes:
        return None
    return relative_at(first_entry), relative_at(end_entry), first_position, end_position


def _load_twin(name: str):  # type: ignore[no-untyped-def]
    """``_stamp``'s C twin ``name``, or None (not built, an older build, or
    ``RILL_PURE_PYTHON=1``). Imported last: the formats package imports this module."""
    if os.environ.get("RILL_PURE_PYTHON") == "1":
        return None
    try:
        from rill.server.storage.formats import _stamp
    except ImportError:
        return None
    return getattr(_stamp, name, None)


_index_entries = _load_twin("index_entries")
search_entries = _load_twin("search_entries") or search_entries_python
batch_span = _load_twin("batch_span") or batch_span_python
