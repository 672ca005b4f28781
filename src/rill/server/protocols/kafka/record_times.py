"""Record timestamps inside stored RecordBatch v2 bytes: ListOffsets' exact-to-the-record answer.

Owns: ``first_at_or_after(batches, timestamp_ms)``, the (offset, timestamp) of the first record
whose timestamp is >= the time asked for, walking the records of the stored batches given
(kafka-notes §3.1 for the layout). Only ListOffsets (an admin path, one batch per partition)
comes here; Produce and Fetch never look inside a batch.

What it reads: the batch header; for a LogAppendTime batch every record has the batch's
maxTimestamp; otherwise the records block, decompressed when the codec is gzip (the standard
library's; snappy, lz4 and zstd would need packages this server does not depend on yet), each
record's timestampDelta and offsetDelta (its key, value and headers are stepped over by the
record's own length). A batch it cannot open (another codec, bytes that do not parse) is
answered at batch granularity: its first offset with its maxTimestamp when that is >= the time.
"""

from __future__ import annotations

import struct
import zlib

_HEADER = struct.Struct(">qiiBIhiqqqhii")
_HEADER_SIZE = _HEADER.size  # 61
_LOG_APPEND_TIME = 0x08
_CODEC_MASK = 0x07
_GZIP = 1


def _varint(data: bytes | memoryview, at: int) -> tuple[int, int]:
    """A zig-zag varint (varlong too) at ``at``: (value, position after it)."""
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _records(block: bytes | memoryview, count: int, base_offset: int, base_timestamp: int
             ) -> list[tuple[int, int]]:
    found = []
    at = 0
    for _ in range(count):
        length, at = _varint(block, at)
        end = at + length
        at += 1  # attributes
        timestamp_delta, at = _varint(block, at)
        offset_delta, at = _varint(block, at)
        if end > len(block) or length < 3:
            raise ValueError("record overruns its block")
        found.append((base_offset + offset_delta, base_timestamp + timestamp_delta))
        at = end
    return found


def batch_records(batch: memoryview) -> list[tuple[int, int]] | None:
    """``(offset, timestamp ms)`` of every record of one whole batch; None when it cannot
    be opened (a codec other than none/gzip, or bytes that do not parse)."""
    (base_offset, _, _, _, _, attributes, last_delta, base_timestamp, max_timestamp, _, _, _,
     count) = _HEADER.unpack_from(batch, 0)
    if attributes & _LOG_APPEND_TIME:
        return [(base_offset + delta, max_timestamp) for delta in range(last_delta + 1)]
    codec = attributes & _CODEC_MASK
    block: bytes | memoryview = batch[_HEADER_SIZE:]
    try:
        if codec == _GZIP:
            block = zlib.decompress(bytes(block), 47)  # gzip or zlib header
        elif codec != 0:
            return None
        return _records(block, count, base_offset, base_timestamp)
    except (ValueError, IndexError, zlib.error):
        return None


def first_at_or_after(batches: bytes | memoryview, timestamp_ms: int) -> tuple[int, int] | None:
    """The (offset, timestamp ms) of the first record of ``batches`` (whole stored batches back
    to back) whose timestamp is >= ``timestamp_ms``; None when no record is."""
    view = memoryview(batches)
    at = 0
    while len(view) - at >= _HEADER_SIZE:
        header = _HEADER.unpack_from(view, at)
        end = at + 12 + header[1]
        if end > len(view):
            break
        base_offset, max_timestamp = header[0], header[8]
        records = batch_records(view[at:end])
        if records is None:
            if max_timestamp >= timestamp_ms:
                return base_offset, max_timestamp
        else:
            for offset, timestamp in records:
                if timestamp >= timestamp_ms:
                    return offset, timestamp
        at = end
    return None
