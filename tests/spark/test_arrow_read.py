"""The fast read path: columnar replies -> Arrow batches (schema, nullability, headers, keys),
and the fetch loop's gaps and data-loss checks, against the session's rill server."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from rill.client import HeaderKind, HeaderValue, Message

from pyspark_rill.arrow_read import RangeSpec, RillDataLossError, read_range, to_record_batch
from pyspark_rill.connection import connect
from pyspark_rill.options import ConnectionOptions
from pyspark_rill.schema import KEY_HEADER, arrow_schema, read_ddl


@pytest.fixture
def client(rill):
    return connect(ConnectionOptions(rill.address, "tcp", "iggy", "iggy", None))


@pytest.mark.parametrize("typed", [False, True])
def test_the_arrow_schema_is_what_spark_expects(spark, typed) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    expected = to_arrow_schema(StructType.fromDDL(read_ddl(typed)), timezone="UTC")
    assert arrow_schema(typed).equals(expected, check_metadata=True)
    assert [field.nullable for field in arrow_schema(typed)] == [
        False, False, False, False, False, False, True, False, True]


def test_plain_messages_take_the_vectorised_path(admin, stream, client) -> None:
    admin.create_topic(stream, "t", partitions_count=1)
    admin.send_messages(stream, "t", [Message(b"a" * 30, id=7), b"bb"], partitioning=1)
    reply = client.poll_messages_columnar(stream, "t", 1, 0, 10)
    batch = to_record_batch(reply, RangeSpec(stream, "t", 1, 0, 2), typed_headers=False)
    assert batch.schema == arrow_schema(False)
    rows = batch.to_pylist()
    assert [(r["stream"], r["topic"], r["partition"], r["offset"], r["value"]) for r in rows] == [
        (stream, "t", 1, 0, b"a" * 30), (stream, "t", 1, 1, b"bb")]
    assert rows[0]["id"] == (7).to_bytes(16, "little")
    assert rows[0]["key"] is None and rows[0]["headers"] is None
    polled = reply.messages
    assert [r["timestamp"] for r in rows] == [
        pa.scalar(m.timestamp, pa.timestamp("us", tz="UTC")).as_py() for m in polled]


@pytest.mark.parametrize("typed", [False, True])
def test_headers_and_keys(admin, stream, client, typed) -> None:
    admin.create_topic(stream, "t", partitions_count=1)
    admin.send_messages(stream, "t", [
        Message(b"with", headers={"trace": HeaderValue.string("x"),
                                  "n": HeaderValue.int(HeaderKind.INT32, 5),
                                  KEY_HEADER: HeaderValue.raw(b"user-1")}),
        b"plain",
    ], partitioning=1)
    reply = client.poll_messages_columnar(stream, "t", 1, 0, 10)
    rows = to_record_batch(reply, RangeSpec(stream, "t", 1, 0, 2), typed).to_pylist()
    assert [r["value"] for r in rows] == [b"with", b"plain"]
    assert [r["key"] for r in rows] == [b"user-1", None]
    if typed:
        assert dict(rows[0]["headers"]) == {
            "trace": {"kind": "string", "value": b"x"},
            "n": {"kind": "int32", "value": (5).to_bytes(4, "little")}}
    else:
        assert dict(rows[0]["headers"]) == {"trace": b"x", "n": (5).to_bytes(4, "little")}
    assert rows[1]["headers"] is None


def test_read_range_fills_short_replies_in_order(admin, stream, client) -> None:
    admin.create_topic(stream, "t", partitions_count=1)
    for start in range(0, 40, 10):
        admin.send_messages(stream, "t", [bytes([65 + i % 26]) * 50 for i in range(start, start + 10)],
                            partitioning=1)
    spec = RangeSpec(stream, "t", 1, 3, 37)
    batches = list(read_range(client, spec, False, max_messages=8, max_bytes=400,
                              fail_on_data_loss=True))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(3, 37))
    assert max(b.num_rows for b in batches) <= 4  # 95-byte records, 400-byte replies


def test_data_loss_is_reported_or_skipped(admin, stream, client) -> None:
    admin.create_topic(stream, "t", partitions_count=1)
    admin.send_messages(stream, "t", [b"x"] * 5, partitioning=1)
    spec = RangeSpec(stream, "t", 1, 0, 5)
    admin.purge_topic(stream, "t")  # the planned range is gone
    with pytest.raises(RillDataLossError, match="failOnDataLoss"):
        list(read_range(client, spec, False, 100, 1 << 20, fail_on_data_loss=True))
    assert list(read_range(client, spec, False, 100, 1 << 20, fail_on_data_loss=False)) == []
    fresh = RangeSpec(stream, "t", 1, 0, 0, from_earliest=True)
    assert list(read_range(client, fresh, False, 100, 1 << 20, True)) == []


def test_records_of_one_size_take_the_fixed_size_path(admin, stream, client) -> None:
    admin.create_topic(stream, "t", partitions_count=1)
    admin.send_messages(stream, "t", [Message(b"%05d" % i, id=i + 1) for i in range(5)],
                        partitioning=1)
    reply = client.poll_messages_columnar(stream, "t", 1, 0, 10)
    batch = to_record_batch(reply, RangeSpec(stream, "t", 1, 0, 5), typed_headers=False)
    assert batch.schema == arrow_schema(False)
    assert batch.column("value").to_pylist() == [b"%05d" % i for i in range(5)]
    assert batch.column("id").to_pylist() == [(i + 1).to_bytes(16, "little") for i in range(5)]
    assert batch.column("offset").to_pylist() == list(range(5))
    assert batch.column("key").null_count == 5 and batch.column("headers").null_count == 5
    tail = batch.slice(3)  # what a reply cut to its range gives Spark
    assert tail.column("value").to_pylist() == [b"00003", b"00004"]
    # records of one size where one carries headers: the per-record path
    admin.create_topic(stream, "mixed", partitions_count=1)
    with_header = Message(b"abc", headers={"k": HeaderValue.raw(b"v")})  # 4+1+1+4+1 = 11 B
    admin.send_messages(stream, "mixed", [with_header, b"x" * 14], partitioning=1)
    reply = client.poll_messages_columnar(stream, "mixed", 1, 0, 10)
    first, second, end = struct.unpack_from("<3I", reply.boundaries)
    assert second - first == end - second  # really one size
    rows = to_record_batch(reply, RangeSpec(stream, "mixed", 1, 0, 2), False).to_pylist()
    assert [(r["value"], r["headers"]) for r in rows] == [(b"abc", [("k", b"v")]),
                                                          (b"x" * 14, None)]
