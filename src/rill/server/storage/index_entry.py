"""The index entry: the 16 bytes every segment index keeps per unit (a record, or a batch).

Layout, little-endian::

    relative_offset u32 (offset - segment start) | position u32 (of the unit in the .log) |
    timestamp u64

A per-record format (iggy-v1) keeps one entry per record; a batch-index format keeps one per
batch and may follow each entry with bytes of its own (kafka-v2: a leader epoch and the
batch's holes; ``RecordFormat.index_entry_size``), which the log never reads but through the
format. Owns: the layout (``INDEX_ENTRY``), its size, the largest position or relative offset
it can hold (``MAX_POSITION``: a segment is sealed before its positions would pass it) and
``build_index_entries`` (the C twin ``index_entries`` of ``formats/_staged.c`` builds them when
offsets and positions are evenly spaced: records of one size, the common case).
"""

from __future__ import annotations

import os
import struct
import sys
from array import array

INDEX_ENTRY = struct.Struct("<IIQ")  # relative_offset, position, timestamp
INDEX_ENTRY_SIZE = INDEX_ENTRY.size
MAX_POSITION = 0xFFFF_FFFF  # index positions and relative offsets are u32

_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


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


def _load_twin():  # type: ignore[no-untyped-def]
    """``_staged.c``'s ``index_entries``, or None (not built, an older build, or
    ``RILL_PURE_PYTHON=1``). Imported last: the formats package imports this module."""
    if os.environ.get("RILL_PURE_PYTHON") == "1":
        return None
    try:
        from rill.server.storage.formats import _stamp
    except ImportError:
        return None
    return getattr(_stamp, "index_entries", None)


_index_entries = _load_twin()
