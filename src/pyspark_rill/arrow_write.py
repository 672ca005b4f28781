"""The write path: Arrow record batches -> SEND regions, one per (stream, topic, partitioning).

Input columns (others, e.g. ``offset`` or ``timestamp`` of a DataFrame read from rill, are
ignored): ``value`` BINARY or STRING, required and non-empty; ``key`` BINARY or STRING
(partition = xxHash32(key) mod N as the server computes it, and the key is kept in header
``rill.key``); ``partition`` integer (an explicit partition id; wins over ``key``); ``id``
BINARY of 16 bytes (null or absent: the server assigns a UUIDv7); ``headers``
MAP<STRING, BINARY|STRING> or the typed map the reader gives; ``stream``/``topic`` STRING,
used per row when the option of that name is not set. Rows with neither partition nor key
are balanced by the server.

A region is built column-wise with Arrow: ``binary_join_element_wise`` of the id, the
headers length, the headers, the payload length and the payload gives the SEND layout in one
buffer, with no per-row Python work unless rows carry keys or headers.

Owns: ``WriteSpec`` (the validated input schema) and ``encode_batch``.
"""

from __future__ import annotations

import sys
import time
from array import array
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from rill.protocol.iggy.headers import MAX_HEADER_PART, HeaderKind, HeaderValue, encode_header_map
from rill.protocol.iggy.primitives import Partitioning
from rill.protocol.iggy.stored import crc32, uuid7_block

from pyspark_rill.options import RillOptionError, WriteOptions
from pyspark_rill.schema import KEY_HEADER

_HARD_LIMIT = 10_000_000  # the server's limit on the payload bytes of one request
_BYTES = (BinaryType, StringType)
_INTEGERS = (ByteType, ShortType, IntegerType, LongType)


@dataclass(frozen=True)
class WriteSpec:
    columns: frozenset[str]  # of: value key partition id headers stream topic
    typed_headers: bool


def check_schema(schema: StructType, options: WriteOptions) -> WriteSpec:
    """Validate the DataFrame's columns; errors name the column and the expected type."""
    fields = {field.name: field.dataType for field in schema.fields}
    expected = {"value": _BYTES, "key": _BYTES, "partition": _INTEGERS, "id": (BinaryType,),
                "stream": (StringType,), "topic": (StringType,)}
    if "value" not in fields:
        raise RillOptionError("column 'value' is required to write to rill (BINARY or STRING)")
    for name, types in expected.items():
        if name in fields and not isinstance(fields[name], types):
            allowed = " or ".join(t.typeName().upper() for t in types)
            raise RillOptionError(f"column {name!r} must be {allowed}, got "
                                  f"{fields[name].simpleString().upper()}")
    typed = False
    if "headers" in fields:
        kind = fields["headers"]
        typed = (isinstance(kind, MapType) and isinstance(kind.valueType, StructType)
                 and [f.name for f in kind.valueType.fields] == ["kind", "value"])
        if not (isinstance(kind, MapType) and isinstance(kind.keyType, StringType)
                and (typed or isinstance(kind.valueType, _BYTES))):
            raise RillOptionError(
                "column 'headers' must be MAP<STRING, BINARY>, MAP<STRING, STRING> or "
                f"MAP<STRING, STRUCT<kind STRING, value BINARY>>, got {kind.simpleString().upper()}")
    for name in ("stream", "topic"):
        if getattr(options, name) is None and name not in fields:
            raise RillOptionError(f"option {name!r} or a column {name!r} is required to write")
    used = frozenset(name for name in ("value", "key", "partition", "id", "headers", "stream",
                                       "topic") if name in fields)
    return WriteSpec(used, typed)


@dataclass(frozen=True)
class Request:
    stream: str
    topic: str
    partitioning: Partitioning
    region: memoryview  # a SEND region, or records in the stored layout
    count: int
    positions: bytes | None = None  # with stored records: where each starts


def _binary(batch: pa.RecordBatch, name: str) -> pa.Array:
    column = batch.column(name)
    return column if column.type == pa.binary() else column.cast(pa.binary())


def encode_batch(batch: pa.RecordBatch, spec: WriteSpec, options: WriteOptions,
                 partitions_count: Callable[[str, str], int], max_bytes: int,
                 stored: bool = False) -> Iterator[Request]:
    """The requests that write ``batch``: grouped by target, then by partition choice; SEND
    regions, or with ``stored`` records in the stored layout (for STAGE_MESSAGES)."""
    build = _stored_records if stored else _region
    if batch.num_rows == 0:
        return
    value = batch.column("value")
    if value.null_count or pc.min(pc.binary_length(value)).as_py() == 0:
        raise RillOptionError("column 'value' has a null or empty value; rill messages need a "
                              "payload of at least one byte")
    for (stream, topic), rows in _by_target(batch, spec, options):
        for partitioning, part in _by_partition(rows, spec, partitions_count(stream, topic)):
            for chunk in _chunks(part, max_bytes):
                yield Request(stream, topic, partitioning, *build(chunk, spec))


def _by_target(batch: pa.RecordBatch, spec: WriteSpec, options: WriteOptions):
    columns = {}
    for name in ("stream", "topic"):
        if getattr(options, name) is None:
            column = batch.column(name)
            if column.null_count:
                raise RillOptionError(f"column {name!r} has a null value (and option {name!r} "
                                      "is not set)")
            columns[name] = column
    if not columns:
        yield (options.stream, options.topic), batch
        return
    stream = columns.get("stream", pa.repeat(pa.scalar(options.stream or ""), batch.num_rows))
    topic = columns.get("topic", pa.repeat(pa.scalar(options.topic or ""), batch.num_rows))
    target = pc.binary_join_element_wise(stream, topic, "/")
    for key in pc.unique(target).to_pylist():
        stream_name, topic_name = key.split("/", 1)
        yield (stream_name, topic_name), batch.filter(pc.equal(target, key))


def _by_partition(rows: pa.RecordBatch, spec: WriteSpec, count: int):
    """(partitioning, rows) groups: explicit partition, else key hash, else balanced."""
    if "partition" not in spec.columns and "key" not in spec.columns:
        yield Partitioning.balanced(), rows
        return
    chosen = [None] * rows.num_rows
    if "key" in spec.columns:
        for index, key in enumerate(_binary(rows, "key").to_pylist()):
            if key:
                chosen[index] = xxhash.xxh32_intdigest(key) % count or count
    if "partition" in spec.columns:
        for index, partition in enumerate(rows.column("partition").to_pylist()):
            if partition is not None:
                chosen[index] = partition
    targets = pa.array(chosen, pa.int64())
    if targets.null_count:
        yield Partitioning.balanced(), rows.filter(pc.is_null(targets))
    for partition in sorted(p for p in set(chosen) if p is not None):
        yield Partitioning.partition_id(partition), rows.filter(pc.equal(targets, partition))


_ROW_OVERHEAD = 64  # request bytes a message takes besides its payload (and headers)


def _chunks(rows: pa.RecordBatch, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """Slices whose requests stay within about ``max_bytes`` (payloads plus ~64 bytes a
    message, so that many tiny messages cannot make an oversized frame) and whose payloads
    stay within the server's hard limit."""
    payload = pc.sum(pc.binary_length(rows.column("value"))).as_py()
    total = payload + _ROW_OVERHEAD * rows.num_rows
    if total <= max_bytes and payload <= _HARD_LIMIT:
        yield rows
        return
    step = max(1, rows.num_rows * max_bytes // total)
    for start in range(0, rows.num_rows, step):
        piece = rows.slice(start, step)
        if piece.num_rows > 1 and pc.sum(pc.binary_length(piece.column("value"))).as_py() > _HARD_LIMIT:
            yield from _chunks(piece, max_bytes // 2)
        else:
            yield piece


def _u32_binary(lengths: pa.Array) -> pa.Array:
    """Little-endian u32 bytes of non-negative int32 lengths, as a binary column (zero-copy)."""
    lengths = lengths.cast(pa.int32())
    four = pa.Array.from_buffers(pa.binary(4), len(lengths), [None, lengths.buffers()[1]],
                                 offset=lengths.offset)
    return four.cast(pa.binary())


def _ids(rows: pa.RecordBatch, spec: WriteSpec, generate: bool) -> pa.Array | pa.Scalar:
    """The id column: the ``id`` column (16 bytes each); where it is null or absent, zeros
    (the server assigns UUIDv7s) or, with ``generate``, UUIDv7s made here."""
    count = rows.num_rows
    given = rows.column("id") if "id" in spec.columns else None
    if given is not None:
        lengths = pc.binary_length(given)
        if pc.min(lengths).as_py() not in (16, None) or pc.max(lengths).as_py() not in (16, None):
            raise RillOptionError("column 'id' must hold 16-byte values (or null)")
        if not given.null_count:
            return given
    if not generate:
        zero = pa.scalar(bytes(16), pa.binary())
        return zero if given is None else pc.fill_null(given, zero)
    block = uuid7_block(count, time.time_ns() // 1_000_000)
    fresh = pa.Array.from_buffers(pa.binary(16), count, [None, pa.py_buffer(block)]).cast(
        pa.binary())
    return fresh if given is None else pc.if_else(pc.is_null(given), fresh, given)


def _headers(rows: pa.RecordBatch, spec: WriteSpec) -> tuple[pa.Array | pa.Scalar, ...]:
    """(headers_length, headers) columns, or constant scalars when no row has any."""
    if "headers" in spec.columns or "key" in spec.columns:
        headers = pa.array(_header_maps(rows, spec), pa.binary())
        return _u32_binary(pc.binary_length(headers)), headers
    return pa.scalar(bytes(4), pa.binary()), pa.scalar(b"", pa.binary())


def _joined(joined: pa.Array) -> tuple[memoryview, bytes]:
    """The data of a binary column as one buffer, and its row starts (u32, from 0)."""
    count = len(joined)
    offsets = pa.Array.from_buffers(pa.int32(), count + 1, [None, joined.buffers()[1]],
                                    offset=joined.offset)
    start, end = offsets[0].as_py(), offsets[count].as_py()
    if start:
        offsets = pc.subtract(offsets, pa.scalar(start, pa.int32()))
    starts = offsets.buffers()[1][offsets.offset * 4 : (offsets.offset + count) * 4]
    return memoryview(joined.buffers()[2])[start:end], starts.to_pybytes()


def _region(rows: pa.RecordBatch, spec: WriteSpec) -> tuple[memoryview, int]:
    """A SEND region: id | headers_length | headers | payload_length | payload."""
    value = _binary(rows, "value")
    header_lengths, headers = _headers(rows, spec)
    joined = pc.binary_join_element_wise(_ids(rows, spec, generate=False), header_lengths,
                                         headers, _u32_binary(pc.binary_length(value)), value,
                                         b"")
    return _joined(joined)[0], rows.num_rows


_STORED_HEAD = pa.scalar(bytes(8) + b"\x01" + bytes(8), pa.binary())  # offset, state, timestamp


def _stored_records(rows: pa.RecordBatch, spec: WriteSpec) -> tuple[memoryview, int, bytes]:
    """Records in the stored layout (``rill.protocol.iggy.stored``): the per-message work of an
    append -- ids and checksums -- done here, in the Spark task, rather than on the server.
    Only the checksums take a per-row call (one C call each)."""
    value = _binary(rows, "value")
    checksums = array("I", map(crc32, value.to_pylist()))
    if sys.byteorder != "little":
        checksums.byteswap()
    checksum_column = pa.Array.from_buffers(pa.binary(4), rows.num_rows,
                                            [None, pa.py_buffer(checksums.tobytes())])
    header_lengths, headers = _headers(rows, spec)
    joined = pc.binary_join_element_wise(
        _STORED_HEAD, _ids(rows, spec, generate=True), checksum_column.cast(pa.binary()),
        header_lengths, headers, _u32_binary(pc.binary_length(value)), value, b"")
    records, starts = _joined(joined)
    return records, rows.num_rows, starts


def _header_maps(rows: pa.RecordBatch, spec: WriteSpec) -> list[bytes]:
    """Encoded header maps, one per row (the per-row path: rows with keys or headers)."""
    count = rows.num_rows
    keys = _binary(rows, "key").to_pylist() if "key" in spec.columns else [None] * count
    maps = rows.column("headers").to_pylist() if "headers" in spec.columns else [None] * count
    encoded = []
    for key, entries in zip(keys, maps):
        headers: dict[str, HeaderValue] = {}
        for name, item in entries or ():
            if item is None:
                continue
            if spec.typed_headers:
                headers[name] = _typed_header(name, item)
            elif isinstance(item, str):
                headers[name] = HeaderValue.string(item)
            else:
                headers[name] = HeaderValue.raw(item)
            _check_header_sizes(name, headers[name])
        if key:
            headers[KEY_HEADER] = HeaderValue.raw(key)
        encoded.append(encode_header_map(headers))
    return encoded


_KINDS = {kind.name.lower(): kind for kind in HeaderKind}
_FIXED_SIZES = {HeaderKind.BOOL: 1, HeaderKind.INT8: 1, HeaderKind.INT16: 2, HeaderKind.INT32: 4,
                HeaderKind.INT64: 8, HeaderKind.INT128: 16, HeaderKind.UINT8: 1,
                HeaderKind.UINT16: 2, HeaderKind.UINT32: 4, HeaderKind.UINT64: 8,
                HeaderKind.UINT128: 16, HeaderKind.FLOAT32: 4, HeaderKind.FLOAT64: 8}


def _typed_header(name: str, item: dict) -> HeaderValue:
    """One entry of a typed headers column (``STRUCT<kind, value>``), checked: a kind rill
    knows, a value, and the byte size that kind has."""
    kind_name, value = item.get("kind"), item.get("value")
    kind = _KINDS.get(kind_name.strip().lower()) if isinstance(kind_name, str) else None
    if kind is None:
        raise RillOptionError(
            f"column 'headers': header {name!r} has kind {kind_name!r}; the kinds are "
            + ", ".join(_KINDS))
    if value is None:
        raise RillOptionError(f"column 'headers': header {name!r} (kind {kind.name.lower()}) "
                              "has a null value")
    value = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    size = _FIXED_SIZES.get(kind)
    if size is not None and len(value) != size:
        raise RillOptionError(
            f"column 'headers': header {name!r} of kind {kind.name.lower()} must hold "
            f"{size} byte(s) (little-endian), got {len(value)}")
    return HeaderValue(kind, value)


def _check_header_sizes(name: str, header: HeaderValue) -> None:
    if not 1 <= len(name.encode("utf-8")) <= MAX_HEADER_PART:
        raise RillOptionError(f"column 'headers': header name {name!r} must be 1 to "
                              f"{MAX_HEADER_PART} bytes")
    if not 1 <= len(header.value) <= MAX_HEADER_PART:
        raise RillOptionError(f"column 'headers': the value of header {name!r} must be 1 to "
                              f"{MAX_HEADER_PART} bytes, got {len(header.value)}")
