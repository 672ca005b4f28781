"""The write path: input schema checks and Arrow batches -> SEND regions (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import xxhash
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from rill.protocol.iggy.headers import decode_header_map
from rill.protocol.iggy.primitives import Partitioning, PartitioningKind
from rill.protocol.iggy.messages import iter_polled_messages
from rill.server.storage.formats.iggy_v1 import stamp_batch
from rill.server.storage.formats.iggy_v1 import check_stored_records

from pyspark_rill.arrow_write import check_schema, encode_batch
from pyspark_rill.options import RillOptionError, WriteOptions
from pyspark_rill.schema import KEY_HEADER

OPTIONS = WriteOptions.parse({"username": "u", "password": "p", "stream": "s", "topic": "t"})


def schema(**columns) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])


def messages(region) -> list[tuple[bytes, bytes, dict]]:
    """(id, payload, headers) of each message of a SEND region."""
    out, position, data = [], 0, bytes(region)
    while position < len(data):
        message_id = data[position:position + 16]
        headers_length = int.from_bytes(data[position + 16:position + 20], "little")
        headers = decode_header_map(data[position + 20:position + 20 + headers_length])
        start = position + 20 + headers_length
        length = int.from_bytes(data[start:start + 4], "little")
        out.append((message_id, data[start + 4:start + 4 + length],
                    {k: v.value for k, v in headers.items()}))
        position = start + 4 + length
    return out


@pytest.mark.parametrize("columns, message", [
    ({"payload": BinaryType()}, "column 'value' is required"),
    ({"value": DoubleType()}, "column 'value' must be BINARY or STRING, got DOUBLE"),
    ({"value": BinaryType(), "partition": StringType()}, "column 'partition' must be"),
    ({"value": BinaryType(), "headers": MapType(StringType(), IntegerType())}, "column 'headers'"),
    ({"value": BinaryType(), "id": StringType()}, "column 'id' must be BINARY"),
])
def test_wrong_columns_are_named(columns, message) -> None:
    with pytest.raises(RillOptionError, match=message):
        check_schema(schema(**columns), OPTIONS)


def test_per_row_targets_need_columns() -> None:
    no_topic = WriteOptions.parse({"username": "u", "password": "p", "stream": "s"})
    with pytest.raises(RillOptionError, match="option 'topic' or a column 'topic'"):
        check_schema(schema(value=BinaryType()), no_topic)
    spec = check_schema(schema(value=StringType(), topic=StringType()), no_topic)
    batch = pa.RecordBatch.from_pydict({"value": ["a", "b", "c"], "topic": ["x", "y", "x"]})
    requests = list(encode_batch(batch, spec, no_topic, lambda s, t: 1, 1 << 20))
    assert sorted((r.topic, [m[1] for m in messages(r.region)]) for r in requests) == [
        ("x", [b"a", b"c"]), ("y", [b"b"])]


def test_plain_values_make_a_valid_region() -> None:
    spec = check_schema(schema(value=BinaryType(), offset=IntegerType()), OPTIONS)
    batch = pa.RecordBatch.from_pydict({"value": [b"one", b"two" * 50], "offset": [1, 2]})
    [request] = encode_batch(batch, spec, OPTIONS, lambda s, t: 3, 1 << 20)
    assert request.partitioning == Partitioning.balanced() and request.count == 2
    assert stamp_batch(request.region, 0, 1, 0, 0).count == 2  # what the server checks
    assert messages(request.region) == [(bytes(16), b"one", {}), (bytes(16), b"two" * 50, {})]


@pytest.mark.parametrize("values", [[b"same", b"size"], [b"one", b"two" * 50, b"3"]])
def test_stored_records_for_staging_pass_the_server_checks(values) -> None:
    spec = check_schema(schema(value=BinaryType(), headers=MapType(StringType(), BinaryType()),
                               id=BinaryType()), OPTIONS)
    batch = pa.RecordBatch.from_pydict({
        "value": values, "id": [bytes(range(16))] + [None] * (len(values) - 1),
        "headers": pa.array([None, [("h", b"x")]] + [None] * (len(values) - 2),
                            pa.map_(pa.string(), pa.binary()))})
    [request] = encode_batch(batch, spec, OPTIONS, lambda s, t: 1, 1 << 20, stored=True)
    starts = check_stored_records(bytes(request.region), request.positions)
    assert len(starts) == request.count == len(values)
    stored = list(iter_polled_messages(request.region, len(values)))
    assert [m.payload for m in stored] == values
    assert stored[0].id_bytes == bytes(range(16))
    assert all(m.id_bytes[6] >> 4 == 7 for m in stored[1:])  # UUIDv7s made by the writer
    assert {k: v.value for k, v in stored[1].headers.items()} == {"h": b"x"}


def test_keys_ids_headers_and_explicit_partitions() -> None:
    spec = check_schema(schema(value=BinaryType(), key=StringType(), id=BinaryType(),
                               partition=IntegerType(),
                               headers=MapType(StringType(), StringType())), OPTIONS)
    batch = pa.RecordBatch.from_pydict({
        "value": [b"k1", b"k2", b"explicit", b"none"],
        "key": ["user-1", "user-2", "user-1", None],
        "id": [bytes(range(16)), None, None, None],
        "partition": [None, None, 2, None],
        "headers": pa.array([[("h", "v")], None, None, None], pa.map_(pa.string(), pa.string())),
    })
    requests = list(encode_batch(batch, spec, OPTIONS, lambda s, t: 3, 1 << 20))
    routed = {}
    for request in requests:
        kind = request.partitioning.kind
        key = "balanced" if kind == PartitioningKind.BALANCED else int.from_bytes(
            request.partitioning.value, "little")
        routed[key] = messages(request.region)
    for key, value in ((b"user-1", b"k1"), (b"user-2", b"k2")):
        partition = xxhash.xxh32_intdigest(key) % 3 or 3
        assert any(m[1] == value and m[2][KEY_HEADER] == key for m in routed[partition])
    assert [m[1] for m in routed["balanced"]] == [b"none"]
    assert any(m[1] == b"explicit" for m in routed[2])
    [first] = [m for msgs in routed.values() for m in msgs if m[1] == b"k1"]
    assert first[0] == bytes(range(16)) and first[2] == {"h": b"v", KEY_HEADER: b"user-1"}


def test_big_batches_are_split_and_bad_values_refused() -> None:
    spec = check_schema(schema(value=BinaryType()), OPTIONS)
    batch = pa.RecordBatch.from_pydict({"value": [b"x" * 1000] * 100})
    requests = list(encode_batch(batch, spec, OPTIONS, lambda s, t: 1, 10_000))
    assert len(requests) == 12 and sum(r.count for r in requests) == 100  # 9 a request
    assert all(len(r.region) <= 10_000 for r in requests)
    for bad in ([b"ok", b""], [b"ok", None]):
        with pytest.raises(RillOptionError, match="column 'value'"):
            list(encode_batch(pa.RecordBatch.from_pydict({"value": pa.array(bad, pa.binary())}),
                              spec, OPTIONS, lambda s, t: 1, 1 << 20))
    ids = check_schema(schema(value=BinaryType(), id=BinaryType()), OPTIONS)
    with pytest.raises(RillOptionError, match="column 'id'"):
        list(encode_batch(pa.RecordBatch.from_pydict({"value": [b"a"], "id": [b"short"]}),
                          ids, OPTIONS, lambda s, t: 1, 1 << 20))


TYPED = MapType(StringType(), StructType([StructField("kind", StringType()),
                                          StructField("value", BinaryType())]))


def typed_batch(*entries) -> pa.RecordBatch:
    kind = pa.map_(pa.string(), pa.struct([("kind", pa.string()), ("value", pa.binary())]))
    return pa.RecordBatch.from_pydict({
        "value": pa.array([b"v"] * len(entries), pa.binary()),
        "headers": pa.array([[entry] for entry in entries], kind)})


def test_typed_headers_are_encoded_with_their_kind() -> None:
    spec = check_schema(schema(value=BinaryType(), headers=TYPED), OPTIONS)
    assert spec.typed_headers
    batch = typed_batch(("n", {"kind": "int32", "value": (5).to_bytes(4, "little")}),
                        ("s", {"kind": "STRING", "value": b"text"}))
    [request] = encode_batch(batch, spec, OPTIONS, lambda s, t: 1, 1 << 20)
    region = bytes(request.region)
    first_length = int.from_bytes(region[16:20], "little")
    first = decode_header_map(region[20:20 + first_length])
    assert (first["n"].kind.name, first["n"].value) == ("INT32", (5).to_bytes(4, "little"))
    assert [m[2] for m in messages(request.region)] == [{"n": (5).to_bytes(4, "little")},
                                                       {"s": b"text"}]


@pytest.mark.parametrize("entry, message", [
    (("trace", {"kind": "uuid", "value": b"x"}),
     "column 'headers': header 'trace' has kind 'uuid'; the kinds are raw, string, bool, int8"),
    (("trace", {"kind": None, "value": b"x"}), "column 'headers': header 'trace' has kind None"),
    (("n", {"kind": "int32", "value": b"abc"}),
     "column 'headers': header 'n' of kind int32 must hold 4 byte"),
    (("n", {"kind": "raw", "value": None}), "column 'headers': header 'n' .* null value"),
    (("n", {"kind": "raw", "value": b"x" * 256}), "column 'headers': the value of header 'n'"),
])
def test_bad_typed_headers_name_the_column_the_header_and_the_kinds(entry, message) -> None:
    spec = check_schema(schema(value=BinaryType(), headers=TYPED), OPTIONS)
    with pytest.raises(RillOptionError, match=message):
        list(encode_batch(typed_batch(entry), spec, OPTIONS, lambda s, t: 1, 1 << 20))


def test_many_tiny_messages_are_split_by_request_size_not_only_payload() -> None:
    spec = check_schema(schema(value=BinaryType()), OPTIONS)
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"x"] * 100_000, pa.binary())})
    requests = list(encode_batch(batch, spec, OPTIONS, lambda s, t: 1, 1 << 20, stored=True))
    assert sum(r.count for r in requests) == 100_000 and len(requests) > 1
    assert max(len(r.region) + len(r.positions) for r in requests) <= 1 << 20
