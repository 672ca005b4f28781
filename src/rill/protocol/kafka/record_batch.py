"""Kafka's RecordBatch v2 record by record, sans-I/O (kafka-notes §3.1): the one place that
writes and reads the records inside a batch and inflates a compressed records block.

Owns:

* the batch header (``HEADER``: baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
  magic i8, crc u32, attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
  producerId i64, producerEpoch i16, baseSequence i32, recordsCount i32; 61 bytes, CRC-32C
  over attributes .. end) and ``build``, which puts a header (base offset 0, leader epoch -1:
  the log rewrites both) on a records block;
* zig-zag varints (``put_varint``, ``read_varint``), ``put_record`` and ``read_record``:
  one record is ``length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
  key (varint length, -1 null) | value (likewise) | headers count varint | per header: key
  (varint length) value (varint length, -1 null)``;
* ``decompress``: a records block (or a legacy MessageSet wrapper's value) of codec 1 gzip,
  2 snappy (raw, or the xerial framing snappy-java writes), 3 lz4 frame (``legacy_lz4``: the
  0.8 framing whose header checksum also covered the magic number; the byte is recomputed),
  4 zstd, never inflating past ``limit`` bytes (``TooLarge``): a few stored or produced bytes
  cannot make the server allocate gigabytes.

Who uses it: the legacy MessageSet conversion (``message_sets``), the record-format conversion
of storage (Kafka batches read by Iggy clients and back) and the benchmark's Kafka client. The
``kafka-v2`` format's Produce/Fetch path never comes here: it stores and serves batches whole.
"""

from __future__ import annotations

import struct
import zlib
from typing import Sequence

import cramjam
import xxhash
from crc32c import crc32c

__all__ = [
    "CODEC_MASK", "CONTROL", "CRC_FROM", "GZIP", "HEADER", "HEADER_SIZE", "LOG_APPEND_TIME",
    "LZ4", "MAX_INFLATED", "SNAPPY", "ZSTD", "TooLarge", "build", "decompress", "put_record",
    "put_varint", "read_record", "read_varint",
]

HEADER = struct.Struct(">qiiBIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
CRC_FROM = 21  # attributes .. end
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: the CRC'd part of the header
_HEAD = struct.Struct(">qiiBI")  # baseOffset .. crc
MAGIC = 2
CODEC_MASK = 0x07
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
LOG_APPEND_TIME = 0x08
CONTROL = 0x20
MAX_INFLATED = 64 << 20  # what one compressed block may inflate to, by default

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, version i32, compatible version i32
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_U32 = struct.Struct(">I")


class TooLarge(ValueError):
    """A compressed block that inflates past the limit."""


# -- varints and records ---------------------------------------------------------------------


def put_varint(out: bytearray, value: int) -> None:
    """Append ``value`` zig-zag encoded (a varlong's width covers every varint)."""
    value = (value << 1) ^ (value >> 63)
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(data: bytes | bytearray | memoryview, at: int) -> tuple[int, int]:
    """The zig-zag varint (or varlong) at ``at``: (value, position after it); IndexError past
    the data, ValueError when longer than 10 bytes."""
    byte = data[at]
    if byte < 0x80:  # one byte: most lengths and deltas
        return (byte >> 1) ^ -(byte & 1), at + 1
    result, shift = byte & 0x7F, 7
    while True:
        at += 1
        byte = data[at]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), at + 1
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def put_record(out: bytearray, offset_delta: int, timestamp_delta: int,
               key: bytes | bytearray | memoryview | None,
               value: bytes | bytearray | memoryview | None,
               headers: Sequence[tuple[bytes | memoryview, bytes | memoryview | None]] = ()
               ) -> None:
    """Append one record (its length first)."""
    body = bytearray(b"\x00")  # attributes
    put_varint(body, timestamp_delta)
    put_varint(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            body.append(1)  # zig-zag -1
        else:
            put_varint(body, len(blob))
            body += blob
    put_varint(body, len(headers))
    for name, header_value in headers:
        put_varint(body, len(name))
        body += name
        if header_value is None:
            body.append(1)
        else:
            put_varint(body, len(header_value))
            body += header_value
    put_varint(out, len(body))
    out += body


def _read_blob(data: bytes | bytearray | memoryview, at: int
               ) -> tuple[bytes | bytearray | memoryview | None, int]:
    length, at = read_varint(data, at)
    if length < 0:
        return None, at
    return data[at:at + length], at + length


def read_record(block: bytes | bytearray | memoryview, at: int, with_headers: bool = True):
    """The record at ``at`` of a records block: ``(end, timestamp_delta, offset_delta, key,
    value, headers)``, key/value/header values as slices of ``block`` (None when null),
    headers a list of (key, value) (empty without ``with_headers``); ValueError when the record
    overruns its own length or the block."""
    size, at = read_varint(block, at)
    end = at + size
    if size < 0 or end > len(block):
        raise ValueError("a record runs past its records block")
    at += 1  # attributes
    timestamp_delta, at = read_varint(block, at)
    offset_delta, at = read_varint(block, at)
    key, at = _read_blob(block, at)
    value, at = _read_blob(block, at)
    headers = []
    if with_headers:
        count, at = read_varint(block, at)
        for _ in range(count):
            name, at = _read_blob(block, at)
            header_value, at = _read_blob(block, at)
            headers.append((name, header_value))
    if at > end:
        raise ValueError("a record overruns its own length")
    return end, timestamp_delta, offset_delta, key, value, headers


def build(records: bytes | bytearray, count: int, last_offset_delta: int, base_timestamp: int,
          max_timestamp: int, attributes: int = 0, producer_id: int = -1,
          producer_epoch: int = -1, base_sequence: int = -1, base_offset: int = 0,
          leader_epoch: int = -1) -> bytes:
    """A whole RecordBatch v2 around a records block (``put_record`` output, or a compressed
    one with the codec in ``attributes``). A client's batch has base offset 0 and leader epoch
    -1 (the log sets both; neither is under the CRC); a batch read from a log has the log's."""
    tail = _TAIL.pack(attributes, last_offset_delta, base_timestamp, max_timestamp,
                      producer_id, producer_epoch, base_sequence, count) + records
    return _HEAD.pack(base_offset, HEADER_SIZE - 12 + len(records), leader_epoch, MAGIC,
                      crc32c(tail)) + tail


def build_in_place(batch: bytearray, count: int, last_offset_delta: int, base_timestamp: int,
                   max_timestamp: int, attributes: int = 0, producer_id: int = -1,
                   producer_epoch: int = -1, base_sequence: int = -1, base_offset: int = 0,
                   leader_epoch: int = -1) -> bytearray:
    """``build``'s batch, its header written into the first ``HEADER_SIZE`` bytes of ``batch``,
    whose records block follows them (``set_to_records(..., head_room=HEADER_SIZE)``): no copy
    of the records. Returns ``batch``."""
    _TAIL.pack_into(batch, _HEAD.size, attributes, last_offset_delta, base_timestamp,
                    max_timestamp, producer_id, producer_epoch, base_sequence, count)
    with memoryview(batch) as view, view[_HEAD.size:] as tail:
        crc = crc32c(tail)
    _HEAD.pack_into(batch, 0, base_offset, len(batch) - 12, leader_epoch, MAGIC, crc)
    return batch


# -- compression -----------------------------------------------------------------------------


def _snappy_block(data: bytes, limit: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(data) > limit:
        raise TooLarge(f"a snappy block inflates past {limit} bytes")
    return bytes(cramjam.snappy.decompress_raw(data))


def _xerial_blocks(data: bytes, limit: int) -> bytes:
    out = bytearray()
    at = _XERIAL_HEADER_SIZE
    while at < len(data):
        if len(data) - at < 4:
            raise ValueError("a truncated xerial snappy block length")
        (length,) = _U32.unpack_from(data, at)
        at += 4
        if at + length > len(data):
            raise ValueError("a xerial snappy block runs past the data")
        out += _snappy_block(data[at:at + length], limit - len(out))
        at += length
    return bytes(out)


def _fixed_lz4_header(data: bytes) -> bytes:
    """An LZ4 frame whose header checksum byte is recomputed over the frame descriptor (old
    Kafka's magic 0 lz4 computed it over the magic number and the descriptor)."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        return data
    flags = data[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(data) <= end:
        return data
    checksum = (xxhash.xxh32_intdigest(data[4:end]) >> 8) & 0xFF
    return data[:end] + bytes((checksum,)) + data[end + 1:]


def _into(decompress_into, data: bytes, limit: int) -> bytes:
    """lz4/zstd frames into buffers growing 8-fold up to ``limit`` (their frames need not say
    how large they inflate)."""
    size = min(limit, max(1 << 16, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            return bytes(memoryview(out)[:decompress_into(data, out)])
        except cramjam.DecompressionError:
            if size >= limit:
                raise TooLarge(f"a block that does not inflate into {limit} bytes") from None
            size = min(limit, size * 8)


def decompress(codec: int, data: bytes | bytearray | memoryview, legacy_lz4: bool = False,
               limit: int = MAX_INFLATED) -> bytes:
    """A compressed block inflated; ``TooLarge`` past ``limit`` bytes, ValueError (or a codec's
    own error) when it does not decompress."""
    data = bytes(data)
    if codec == GZIP:
        inflater = zlib.decompressobj(47)  # gzip (or zlib) header
        out = inflater.decompress(data, limit + 1)
        if len(out) > limit:
            raise TooLarge(f"a gzip block inflates past {limit} bytes")
        return out
    if codec == SNAPPY:
        if data.startswith(_XERIAL_MAGIC):
            return _xerial_blocks(data, limit)
        return _snappy_block(data, limit)
    if codec == LZ4:
        if legacy_lz4:
            data = _fixed_lz4_header(data)
        return _into(cramjam.lz4.decompress_into, data, limit)
    if codec == ZSTD:
        return _into(cramjam.zstd.decompress_into, data, limit)
    raise ValueError(f"unknown compression codec {codec}")
