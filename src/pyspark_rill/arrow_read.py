"""The fast read path: POLL_MESSAGES_COLUMNAR replies -> Arrow record batches, and the fetch loop.

A columnar reply carries the records region of one contiguous offset range, its record
boundaries and its timestamps (see docs/extensions.md); on a sparse log (TANK's explicit
sequence numbers) the records skip the offsets that hold none, and the offset column is then
the records' own offsets. With the boundaries as the offsets of
an Arrow ``BinaryArray`` over the region (zero-copy), every fixed-place field is one vectorised
``binary_slice``: id at bytes 17..33 of a record, headers_length at 37..41, and -- when no
record of the batch has headers, the common case -- the payload from byte 45. When all records
of a reply have one size (payloads of one size, no headers: the common case again), the region
is viewed as a fixed-size binary column instead, whose slices are cheaper still and become
``binary`` columns without a copy. Timestamps are the reply's column as is; offsets, stream,
topic and partition are slices of cached columns. Only batches that carry headers take a
per-record Python path (the header maps must be parsed anyway).

Owns: ``to_record_batch`` and ``read_range`` (the pipelined fetch loop of one partition range,
with the data-loss check). Invariant: batches match ``schema.arrow_schema`` exactly.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from rill.client import Client
from rill.protocol.iggy.layout import (
    ID_SIZE,
    STORED_FIXED_SIZE,
    STORED_HEADERS_LENGTH_AT,
    STORED_ID_AT,
    STORED_OVERHEAD,
)
from rill.protocol.iggy.messages import iter_polled_messages
from rill.protocol.iggy.responses.columnar import ColumnarMessages

from pyspark_rill.schema import KEY_HEADER, arrow_schema, headers_type

# where the columns' bytes sit in a stored record (``rill.protocol.iggy.layout``)
_ID, _HEADERS_LENGTH, _FIXED = STORED_ID_AT, STORED_HEADERS_LENGTH_AT, STORED_FIXED_SIZE

_REST = 2**31 - 1  # binary_slice's "to the end" (it mis-sizes its output without a stop)
_PREFETCH = 2  # columnar requests kept in flight ahead of the one being converted
_OFFSET = struct.Struct("<Q")  # a stored record's first field
_U32 = struct.Struct("<I")


class RillDataLossError(RuntimeError):
    """Offsets a query still needed were removed by retention (see option failOnDataLoss)."""


@dataclass(frozen=True)
class RangeSpec:
    """Offsets [start, end) of one partition; ``from_earliest`` when the start is "whatever is
    oldest" (a partition that appeared after the query started), so no data loss applies."""

    stream: str
    topic: str
    partition: int
    start: int
    end: int
    from_earliest: bool = False


def _u32(buffer: pa.Buffer, count: int) -> pa.Array:
    return pa.Array.from_buffers(pa.uint32(), count, [None, buffer])


def to_record_batch(reply: ColumnarMessages, spec: RangeSpec, typed_headers: bool) -> pa.RecordBatch:
    count = reply.count
    boundaries = _u32(pa.py_buffer(reply.boundaries), count + 1)
    region = pa.py_buffer(reply.records)
    size = _uniform_size(boundaries, count)
    if size:  # records of one size (the common case): a zero-copy fixed-size view of them
        fixed = pa.Array.from_buffers(pa.binary(size), count, [None, region])
        header_lengths = _u32(pc.binary_slice(fixed, _HEADERS_LENGTH, _FIXED).buffers()[1], count)
        ids = _to_binary(pc.binary_slice(fixed, _ID, _ID + ID_SIZE), ID_SIZE)
    else:
        offsets = pc.subtract(boundaries, pa.scalar(reply.base_position, pa.uint32())).cast(
            pa.int32())
        records = pa.Array.from_buffers(pa.binary(), count, [None, offsets.buffers()[1], region])
        header_lengths = _u32(pc.binary_slice(records, _HEADERS_LENGTH, _FIXED).buffers()[2], count)
        ids = pc.binary_slice(records, _ID, _ID + ID_SIZE)
    if pc.max(header_lengths).as_py():
        values, keys, headers = _with_headers(reply, typed_headers)
    else:
        values = (_to_binary(pc.binary_slice(fixed, STORED_OVERHEAD, size), size - STORED_OVERHEAD)
                  if size else pc.binary_slice(records, STORED_OVERHEAD, _REST))
        keys = _nulls(count, pa.binary())
        headers = _nulls(count, headers_type(typed_headers))
    columns = [
        _constant(spec.stream, pa.string(), count),
        _constant(spec.topic, pa.string(), count),
        _constant(spec.partition, pa.int32(), count),
        _offsets(reply),
        ids,
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), count,
                              [None, pa.py_buffer(reply.timestamps)]),
        keys,
        values,
        headers,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(typed_headers))


def _record_offsets(reply: ColumnarMessages) -> list[int]:
    """Each record's own offset (its first 8 bytes): a sparse range's skip (holes)."""
    boundaries, records = reply.boundaries, reply.records
    return [_OFFSET.unpack_from(records, _U32.unpack_from(boundaries, 4 * number)[0]
                                - reply.base_position)[0] for number in range(reply.count)]


def _last_offset(reply: ColumnarMessages) -> int:
    """The offset of the reply's last record (``base_offset - 1`` when it holds none)."""
    if not reply.count:
        return reply.base_offset - 1
    at = _U32.unpack_from(reply.boundaries, 4 * (reply.count - 1))[0]
    return _OFFSET.unpack_from(reply.records, at - reply.base_position)[0]


def _offsets(reply: ColumnarMessages) -> pa.Array:
    """The offset column: a slice of a cached column for a dense range (the common case),
    the records' own offsets where a sparse log (TANK's explicit numbers) skips some."""
    if _last_offset(reply) == reply.base_offset + reply.count - 1:
        return pc.add(_arange(reply.count), pa.scalar(reply.base_offset, pa.int64()))
    return pa.array(_record_offsets(reply), pa.int64())


def _uniform_size(boundaries: pa.Array, count: int) -> int:
    """The size of every record when all have one size (and carry a payload), else 0."""
    if count == 0:
        return 0
    first, second = boundaries[0].as_py(), boundaries[1].as_py()
    size = second - first
    if size <= STORED_OVERHEAD or boundaries[count].as_py() - first != size * count:
        return 0
    if count > 1:
        smallest, largest = pc.min_max(pc.pairwise_diff(boundaries.slice(1))).values()
        if smallest.as_py() != size or largest.as_py() != size:
            return 0
    return size


_arange_cache = pa.array([], pa.int64())


def _arange(count: int) -> pa.Array:
    """0..count-1 as int64 (a cached column, grown on demand: no per-row work per batch)."""
    global _arange_cache
    if len(_arange_cache) < count:
        size = max(count, 2 * len(_arange_cache))
        _arange_cache = pc.subtract(
            pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), size)), 1)
    return _arange_cache.slice(0, count)


def _to_binary(fixed: pa.Array, width: int) -> pa.Array:
    """A compact fixed-size binary column as a ``binary`` column, zero-copy (its offsets are
    0, width, 2 * width, ...)."""
    count = len(fixed)
    offsets = pc.multiply(_arange(count + 1), pa.scalar(width, pa.int64())).cast(pa.int32())
    return pa.Array.from_buffers(pa.binary(), count, [None, offsets.buffers()[1],
                                                      fixed.buffers()[1]])


_CONSTANTS_KEPT = 64
_constants: dict[tuple, pa.Array] = {}


def _constant(value, kind: pa.DataType, count: int) -> pa.Array:
    """``count`` times ``value``: slices of a cached column (one per value seen lately)."""
    key = (value, str(kind))
    column = _constants.get(key)
    if column is None or len(column) < count:
        if len(_constants) >= _CONSTANTS_KEPT:
            _constants.clear()
        column = _constants[key] = pa.repeat(pa.scalar(value, kind), max(count, 65536))
    return column.slice(0, count)


def _nulls(count: int, kind: pa.DataType) -> pa.Array:
    return _constant(None, kind, count)


def _with_headers(reply: ColumnarMessages, typed: bool) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Payloads, keys and header maps of a batch in which some records carry headers."""
    values, keys, maps = [], [], []
    for message in iter_polled_messages(reply.records, reply.count):
        values.append(message.payload)
        key_header = message.headers.pop(KEY_HEADER, None)
        keys.append(key_header.value if key_header is not None else None)
        if not message.headers:
            maps.append(None)
        elif typed:
            maps.append([(name, {"kind": header.kind.name.lower(), "value": header.value})
                         for name, header in message.headers.items()])
        else:
            maps.append([(name, header.value) for name, header in message.headers.items()])
    return (pa.array(values, pa.binary()), pa.array(keys, pa.binary()),
            pa.array(maps, headers_type(typed)))


def read_range(client: Client, spec: RangeSpec, typed_headers: bool, max_messages: int,
               max_bytes: int, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """Record batches for offsets [spec.start, spec.end), in order, with up to ``_PREFETCH``
    requests in flight so that the server reads while this process converts."""
    fetch = client.async_client.poll_messages_columnar
    in_flight: deque = deque()
    position = requested = spec.start
    while position < spec.end:
        while requested < spec.end and len(in_flight) < _PREFETCH:
            count = min(max_messages, spec.end - requested)
            in_flight.append((requested, count, client.submit(fetch(
                spec.stream, spec.topic, spec.partition, requested, count, max_bytes))))
            requested += count
        asked, count, future = in_flight.popleft()
        reply: ColumnarMessages = future.result()
        # offsets below the partition's first stored one were removed; a sparse log's holes
        # (a reply starting past ``asked`` above it) were never there
        if reply.first_offset > asked and not (spec.from_earliest and asked == spec.start):
            _data_loss(spec, asked, min(reply.first_offset, spec.end), fail_on_data_loss)
        last = _last_offset(reply)
        if last == reply.base_offset + reply.count - 1:  # dense (the common case)
            usable = min(reply.count, spec.end - reply.base_offset)
        else:
            usable = bisect_left(_record_offsets(reply), spec.end)
        if usable <= 0:  # nothing left in the range: purged, deleted or expired under us
            if reply.next_offset < spec.end:
                _data_loss(spec, max(asked, reply.next_offset), spec.end, fail_on_data_loss)
            break
        batch = to_record_batch(reply, spec, typed_headers)
        yield batch if usable == reply.count else batch.slice(0, usable)
        # on after the last record taken (the range's end when the reply went past it)
        position = last + 1 if usable == reply.count else spec.end
        if position != asked + count:  # a short (or shifted) reply: re-plan from ``position``
            for _, _, pending in in_flight:
                pending.result()  # answered in order; their ranges are asked again
            in_flight.clear()
            requested = position


def _data_loss(spec: RangeSpec, first: int, end: int, fail: bool) -> None:
    if fail:
        raise RillDataLossError(
            f"{spec.stream}/{spec.topic} partition {spec.partition}: offsets {first}..{end - 1} "
            "were removed (retention, purge or deletion) before the query read them; set "
            "option failOnDataLoss=false to skip lost offsets")
