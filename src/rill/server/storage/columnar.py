"""Columnar range reads: records of one segment plus their index columns, for bulk readers.

Owns: ``ColumnarRange`` (what POLL_MESSAGES_COLUMNAR sends) and ``read_segment_columns``.
A range never spans two segments, and is cut so that its records fit ``max_bytes`` (always at
least one record). Everything is copied in bulk from the index and one ``pread`` of the log:
no per-message Python work, which is the point of the command. The records are those of
``Segment.read``, verified: a range stops before a bad record (CannotReadMessage when it is
the first), and its columns always describe exactly the records sent.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from dataclasses import dataclass

from rill.server.storage.segment import Segment

_ZERO_U32 = bytes(4)


@dataclass(frozen=True, slots=True)
class ColumnarRange:
    """``count`` records of offsets ``base_offset``.. and their columns (see the reply layout
    in ``rill.protocol.iggy.responses.columnar``)."""

    base_offset: int
    count: int
    boundaries: bytes  # (count + 1) little-endian u32 positions in the segment
    timestamps: bytes  # count little-endian u64
    records: bytes

    @classmethod
    def empty(cls, base_offset: int) -> ColumnarRange:
        return cls(base_offset, 0, _ZERO_U32, b"", b"")

    @property
    def base_position(self) -> int:
        return int.from_bytes(self.boundaries[:4], "little")


def read_segment_columns(
    segment: Segment, first_offset: int, end_offset: int, max_bytes: int
) -> ColumnarRange:
    """Records of [first_offset, end_offset) (all in ``segment``), cut to fit ``max_bytes``."""
    boundaries, timestamps = segment.index_columns(first_offset, end_offset)
    count = end_offset - first_offset
    positions = array("I")
    positions.frombytes(boundaries)
    if sys.byteorder != "little":
        positions.byteswap()
    if positions[count] - positions[0] > max_bytes:
        # records 0..k-1 fit when boundary k (their end) is within the budget
        fitting = bisect_right(positions, positions[0] + max_bytes) - 1
        count = max(fitting, 1)
        boundaries = boundaries[: 4 * (count + 1)]
        timestamps = timestamps[: 8 * count]
    generation = segment.index_generation
    served, records = segment.read(first_offset, first_offset + count)
    if served < count or segment.index_generation != generation:
        # stopped before a bad record, or the read rebuilt the index: columns of what was read
        count = served
        boundaries, timestamps = segment.index_columns(first_offset, first_offset + count)
    return ColumnarRange(first_offset, count, boundaries, timestamps, records)
