"""Record conversion between ``kafka-v2`` and ``iggy-v1`` (storage.formats.conversion): every
codec, keys, headers, timestamps, offsets and the lossy cases, read back by the Iggy SDK's
decoder and kafka-python's record parser; and a log's ``read_as`` / columnar read of a
Kafka-format log."""

from __future__ import annotations

import gzip
from array import array
import os
import random
import struct
import subprocess
import sys

import cramjam
import pytest
from storage_helpers import read_messages, snapshot
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from rill.errors import CannotReadMessage, FeatureUnavailable, InvalidMessagesCount
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import HeaderKind, HeaderValue
from rill.protocol.iggy.messages import Message, encode_messages, iter_polled_messages
from rill.protocol.kafka import record_batch
from rill.protocol.iggy.stored import crc32
from rill.server.storage.formats import conversion
from rill.server.storage.formats.kafka_v2 import InvalidRecordBatch, stamp_batches
from rill.server.storage.formats.conversion import (
    convert,
    convert_batch,
    iggy_to_kafka,
    kafka_to_iggy,
)
from rill.server.storage.formats.iggy_v1 import stamp_batch


def kafka_batch(records, codec: int = 0, base_timestamp: int | None = None,
                log_append_time: int | None = None, base_offset: int = 0) -> bytes:
    """A RecordBatch v2 of (key, value, timestamp ms, headers) at ``base_offset``, its records
    block compressed with ``codec`` (5 = snappy in xerial framing); with ``log_append_time``
    the LogAppendTime bit set and maxTimestamp that time."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 22)
    for offset, (key, value, timestamp, headers) in enumerate(records):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    raw = bytearray(builder.build())
    block = bytes(raw[61:])
    attributes = 0
    if codec == 1:
        block = gzip.compress(block)
    elif codec == 2:
        block = bytes(cramjam.snappy.compress_raw(block))
    elif codec == 5:
        chunks = [block[i:i + 100] for i in range(0, len(block), 100)]
        block = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
            struct.pack(">I", len(c)) + c
            for c in (bytes(cramjam.snappy.compress_raw(chunk)) for chunk in chunks))
        codec = 2
    elif codec == 3:
        block = bytes(cramjam.lz4.compress(block))
    elif codec == 4:
        block = bytes(cramjam.zstd.compress(block))
    attributes = codec
    if log_append_time is not None:
        attributes |= 0x08
        struct.pack_into(">q", raw, 35, log_append_time)
    out = bytearray(raw[:61]) + block
    struct.pack_into(">qi", out, 0, base_offset, len(out) - 12)
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def stored_kafka(*batches: bytes, base_offset: int = 0) -> bytes:
    """Batches as a kafka-v2 log stores them (offsets given from ``base_offset``)."""
    return bytes(stamp_batches(b"".join(batches), base_offset, 0, 0, base_offset).records)


def polled(converted):
    return list(iter_polled_messages(converted.records, converted.count))


RECORDS = [
    (b"k0", b"v0", 1_700_000_000_001, [("h", b"1"), ("trace", b"abc")]),
    (None, b"v1", 1_700_000_000_005, []),
    (b"k2", b"", 1_700_000_000_003, [("h", b"2")]),
]


@pytest.mark.parametrize("codec", [0, 1, 2, 5, 3, 4],
                         ids=["none", "gzip", "snappy", "snappy-xerial", "lz4", "zstd"])
def test_kafka_records_become_iggy_records(codec):
    data = stored_kafka(kafka_batch(RECORDS, codec), base_offset=10)
    converted = kafka_to_iggy(data, 10, 100)
    assert (converted.first_offset, converted.count) == (10, 3)
    messages = polled(converted)
    assert [m.offset for m in messages] == [10, 11, 12]
    assert [m.payload for m in messages] == [b"v0", b"v1", b""]
    assert [m.timestamp for m in messages] == [1_700_000_000_001_000, 1_700_000_000_005_000,
                                               1_700_000_000_003_000]
    assert [m.id for m in messages] == [0, 0, 0]
    assert [m.checksum for m in messages] == [crc32(b"v0"), crc32(b"v1"), crc32(b"")]
    assert messages[0].headers == {"rill.key": HeaderValue.raw(b"k0"),
                                   "h": HeaderValue.raw(b"1"), "trace": HeaderValue.raw(b"abc")}
    assert list(messages[0].headers) == ["rill.key", "h", "trace"]
    assert messages[1].headers == {}
    assert messages[2].headers == {"rill.key": HeaderValue.raw(b"k2"), "h": HeaderValue.raw(b"2")}
    # the columns a columnar read sends describe exactly those records
    boundaries, timestamps = converted.columns()
    starts = struct.unpack(f"<{converted.count + 1}I", boundaries)
    assert starts[0] == 0 and starts[-1] == len(converted.records)
    assert struct.unpack(f"<{converted.count}Q", timestamps) == tuple(
        m.timestamp for m in messages)


def test_only_the_offsets_asked_for_are_converted():
    data = stored_kafka(kafka_batch(RECORDS), kafka_batch(RECORDS, 1), base_offset=0)
    converted = kafka_to_iggy(data, 2, 3)
    assert [m.offset for m in polled(converted)] == [2, 3, 4]
    assert convert(data, "kafka-v2", "iggy-v1", 5, 10).count == 1
    assert convert(data, "kafka-v2", "iggy-v1", 6, 10).count == 0


def test_a_log_append_time_batch_gives_every_record_its_max_timestamp():
    data = stored_kafka(kafka_batch(RECORDS, log_append_time=1_800_000_000_000))
    assert {m.timestamp for m in polled(kafka_to_iggy(data, 0, 10))} == {1_800_000_000_000_000}


def test_lossy_kafka_to_iggy_cases():
    long = b"x" * 256
    records = [
        # duplicate keys: the last wins, at the first one's place; null and empty values and
        # over-long parts dropped; a Kafka "rill.key" header never stands in for the key
        (b"key", None, 5, [("dup", b"first"), ("other", b"o"), ("dup", b"last"),
                           ("null", None), ("empty", b""), ("long", long),
                           ("rill.key", b"forged"), ("dup", None), ("dup", b""),
                           ("dup", long)]),
        (b"", b"", -1, []),  # empty key: no rill.key; no timestamp: 0
        (long, b"v", 7, [("", b"no-name")]),  # a key over 255 bytes is dropped
    ]
    data = stored_kafka(kafka_batch(records))
    messages = polled(kafka_to_iggy(data, 0, 10))
    assert messages[0].payload == b""  # a null value (a tombstone) is an empty payload
    assert messages[0].headers == {"rill.key": HeaderValue.raw(b"key"),
                                   "dup": HeaderValue.raw(b"last"),
                                   "other": HeaderValue.raw(b"o")}
    assert list(messages[0].headers) == ["rill.key", "dup", "other"]
    assert messages[0].timestamp == 5000
    assert (messages[1].payload, messages[1].headers, messages[1].timestamp) == (b"", {}, 0)
    assert messages[2].headers == {}


def test_a_batch_that_does_not_decompress_is_a_read_error():
    good = bytearray(stored_kafka(kafka_batch(RECORDS, 4)))
    good[70:80] = bytes(10)  # inside the zstd frame
    with pytest.raises(CannotReadMessage, match="offset 0"):
        kafka_to_iggy(bytes(good), 0, 10)


def iggy_records(messages, base_offset: int, timestamp_us: int) -> bytes:
    return bytes(stamp_batch(encode_messages(messages), base_offset, timestamp_us, 0,
                             base_offset).records)


def kafka_view(converted):
    batch = DefaultRecordBatch(converted.records)
    assert batch.validate_crc()
    return batch, list(batch)


def test_iggy_records_become_one_kafka_batch():
    messages = [
        Message(b"p0", headers={"rill.key": HeaderValue.raw(b"k0"),
                                "s": HeaderValue.string("text"),
                                "n": HeaderValue.int(HeaderKind.UINT32, 7),
                                "b": HeaderValue.bool(True)}),
        Message(b"p1", id=42),
        Message(b"p2", headers={"h": HeaderValue.raw(b"raw")}),
    ]
    data = iggy_records(messages, 20, 1_700_000_000_123_999)
    converted = iggy_to_kafka(data, 20, 10)
    assert (converted.first_offset, converted.count) == (20, 3)
    batch, records = kafka_view(converted)
    assert (batch.base_offset, batch.last_offset_delta, batch.compression_type) == (20, 2, 0)
    assert batch.timestamp_type == 0 and batch.producer_id == -1
    assert [r.offset for r in records] == [20, 21, 22]
    assert [r.key for r in records] == [b"k0", None, None]
    assert [r.value for r in records] == [b"p0", b"p1", b"p2"]
    assert {r.timestamp for r in records} == {1_700_000_000_123}  # µs // 1000
    assert records[0].headers == [("s", b"text"), ("n", struct.pack("<I", 7)), ("b", b"\x01")]
    assert records[1].headers == []
    assert records[2].headers == [("h", b"raw")]


def test_iggy_to_kafka_keeps_only_the_offsets_asked_for():
    data = iggy_records([Message(b"a"), Message(b"b"), Message(b"c")], 0, 1_000_000)
    _, records = kafka_view(iggy_to_kafka(data, 1, 1))
    assert [(r.offset, r.value) for r in records] == [(1, b"b")]
    assert iggy_to_kafka(data, 3, 5).count == 0


def test_round_trip_kafka_to_iggy_to_kafka_keeps_what_iggy_can_hold():
    data = stored_kafka(kafka_batch(RECORDS, 3), base_offset=7)
    iggy = kafka_to_iggy(data, 7, 10)
    _, records = kafka_view(iggy_to_kafka(iggy.records, 7, 10))
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (7 + n, key, value, timestamp, headers)
        for n, (key, value, timestamp, headers) in enumerate(RECORDS)]


def test_other_pairs_are_not_converted():
    with pytest.raises(FeatureUnavailable):
        convert(b"", "kafka-v2", "kafka-v9", 0, 1)
    with pytest.raises(FeatureUnavailable):
        convert_batch(b"", "kafka-v2", "iggy-v1", 0)


SENT = [Message(b"p0", id=99, headers={"rill.key": HeaderValue.raw(b"k0"),
                                       "s": HeaderValue.string("text")}),
        Message(b"p1", headers={"n": HeaderValue.int(HeaderKind.UINT32, 7)})]


def test_a_send_region_becomes_one_kafka_batch():
    batch = DefaultRecordBatch(convert_batch(encode_messages(SENT), "iggy-v1", "kafka-v2",
                                             1_700_000_000_123_456))
    assert batch.validate_crc()
    records = list(batch)
    assert (batch.base_offset, batch.last_offset_delta, batch.compression_type) == (0, 1, 0)
    assert batch.timestamp_type == 0 and batch.producer_id == -1 and batch.base_sequence == -1
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (0, b"k0", b"p0", 1_700_000_000_123, [("s", b"text")]),  # the id is dropped
        (1, None, b"p1", 1_700_000_000_123, [("n", struct.pack("<I", 7))])]


def test_a_bad_send_region_raises_iggy_errors_before_anything_is_converted():
    with pytest.raises(InvalidMessagesCount):
        convert_batch(b"", "iggy-v1", "kafka-v2", 0)
    region = encode_messages([Message(b"ok")]) + encode_messages([Message(b"cut")])[:-2]
    with pytest.raises(DecodeError):
        convert_batch(region, "iggy-v1", "kafka-v2", 0)


def test_a_send_region_is_appended_to_a_kafka_log_natively(open_log):
    log = open_log(record_format="kafka-v2")
    log.append(kafka_batch([(b"k", b"kafka", 5_000, [])]), 5_000_000)
    with pytest.raises(DecodeError):
        log.append_as("iggy-v1", encode_messages([Message(b"x")])[:-1], 9_000_500)
    assert log.next_offset == 1  # nothing half-written
    assert log.append_as("iggy-v1", encode_messages(SENT), 9_000_500) == (1, 2)
    # a Kafka reader gets the stored batches as they are: one more RecordBatch v2
    read, chunks = log.read(1, 10)
    batch = DefaultRecordBatch(b"".join(chunks))
    assert batch.validate_crc() and read == 2
    records = list(batch)
    assert batch.base_offset == 1 and [r.value for r in records] == [b"p0", b"p1"]
    assert {r.timestamp for r in records} == {9_000}
    # an Iggy reader gets them back through the read conversion (id 0, key as rill.key)
    back = polled(log.read_as("iggy-v1", 0, 10))
    assert [(m.offset, m.id, m.payload, m.timestamp) for m in back] == [
        (0, 0, b"kafka", 5_000_000), (1, 0, b"p0", 9_000_000), (2, 0, b"p1", 9_000_000)]
    assert back[1].headers == {"rill.key": HeaderValue.raw(b"k0"), "s": HeaderValue.raw(b"text")}
    # the append time never goes back below the log's last one
    log.append(kafka_batch([(None, b"future", 20_000, [])]), 20_000_000)
    log.append_as("iggy-v1", encode_messages([Message(b"late")]), 10_000_000)
    assert polled(log.read_as("iggy-v1", 4, 1))[0].timestamp == 20_000_000


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_batches_are_appended_to_an_iggy_log_record_by_record(open_log, partition_dir,
                                                                   codec):
    """Issue 27 item 1: a Kafka (or TANK) produce into an iggy-v1 log, converted on the way in
    by the read rule backwards; timestamps kept, never going back; a crash keeps them."""
    log = open_log()
    log.append(encode_messages([Message(b"iggy", id=7)]), 2_000_000)
    produced = kafka_batch([(b"k0", b"v0", 5_000, [("h", b"1"), ("trace", b"abc")]),
                            (None, b"v1", 3_000, []),  # earlier: raised to the one before
                            (b"k2", b"v2", -1, [("h", b"2"), ("h", b"3")])],  # none: now
                           codec=codec) + kafka_batch([(b"k3", b"v3", 8_000, [])])
    assert log.append_as("kafka-v2", produced, 6_000_000) == (1, 4)
    read = read_messages(log, 0, 10)
    assert [(m.offset, m.id, m.payload, m.timestamp) for m in read] == [
        (0, 7, b"iggy", 2_000_000), (1, 0, b"v0", 5_000_000), (2, 0, b"v1", 5_000_000),
        (3, 0, b"v2", 6_000_000), (4, 0, b"v3", 8_000_000)]
    assert [m.headers for m in read[1:]] == [
        {"rill.key": HeaderValue.raw(b"k0"), "h": HeaderValue.raw(b"1"),
         "trace": HeaderValue.raw(b"abc")},
        {}, {"rill.key": HeaderValue.raw(b"k2"), "h": HeaderValue.raw(b"3")},
        {"rill.key": HeaderValue.raw(b"k3")}]
    assert all(m.checksum == crc32(m.payload) for m in read)
    assert log.record_offset_for_timestamp(5_500_000) == 3
    # a Kafka reader gets them back converted: keys, headers, ms timestamps
    back = list(DefaultRecordBatch(log.read_as("kafka-v2", 1, 10).records))
    assert [(r.offset, r.key, r.value, r.timestamp) for r in back] == [
        (1, b"k0", b"v0", 5_000), (2, None, b"v1", 5_000), (3, b"k2", b"v2", 6_000),
        (4, b"k3", b"v3", 8_000)]
    # what the kafka-v2 format refuses, and what an Iggy record cannot hold: nothing written
    before = snapshot(partition_dir)
    corrupt = bytearray(kafka_batch([(None, b"x", 1, [])]))
    corrupt[-1] ^= 0xFF
    for bad, error in ((bytes(corrupt), InvalidRecordBatch),
                       (kafka_batch([(None, b"x", 1, []), (b"k", None, 1, [])]),
                        InvalidRecordBatch),
                       (kafka_batch([(None, b"", 1, [])]), InvalidRecordBatch),
                       (b"", InvalidRecordBatch)):
        with pytest.raises(error):
            log.append_as("kafka-v2", bad, 7_000_000)
    with pytest.raises(FeatureUnavailable):  # TANK's numbers that skip: offsets are dense
        log.append_as("kafka-v2", kafka_batch([(None, b"x", 1, [])]), 7_000_000, gaps=True)
    assert snapshot(partition_dir) == before and log.next_offset == 5
    # after a crash the tail is recovered and verified as any Iggy record
    log.close()
    reopened = open_log(clean_shutdown=False, validate_checksum=True)
    assert read_messages(reopened, 0, 10) == read
    assert reopened.last_timestamp == 8_000_000


def test_an_iggy_log_takes_no_other_batch_format(open_log):
    with pytest.raises(FeatureUnavailable):
        open_log().append_as("kafka-v9", b"x", 1)


def test_a_kafka_log_is_read_as_iggy_records_and_columns(open_log):
    log = open_log(record_format="kafka-v2", segment_size=200)
    for number in range(4):  # four batches of three records, over more than one segment
        raw = kafka_batch([(b"k", f"v{number}{n}".encode(), 1000 + number, []) for n in range(3)],
                          codec=number % 5)
        log.append(raw, 0)
    assert log.next_offset == 12 and len(log._segments) > 1
    converted = log.read_as("iggy-v1", 4, 6)
    assert [(m.offset, m.payload) for m in polled(converted)] == [
        (offset, f"v{offset // 3}{offset % 3}".encode()) for offset in range(4, 10)]
    assert log.read_as("iggy-v1", 11, 5).count == 1
    # the columnar read (the Spark connector's): within one segment, from inside a batch
    columns = log.read_columnar(1, 100, 1 << 20)
    assert columns.base_offset == 1 and columns.count >= 2
    records = list(iter_polled_messages(columns.records, columns.count))
    assert [m.offset for m in records] == list(range(1, 1 + columns.count))
    starts = struct.unpack(f"<{columns.count + 1}I", columns.boundaries)
    assert starts[-1] - starts[0] == len(columns.records)
    assert struct.unpack(f"<{columns.count}Q", columns.timestamps) == tuple(
        m.timestamp for m in records)


def test_a_timestamp_is_found_to_the_record_in_a_kafka_log(open_log):
    log = open_log(record_format="kafka-v2")
    log.append(kafka_batch([(None, b"a", 1000, []), (None, b"b", 5000, []),
                            (None, b"c", 3000, [])]), 9_000_000)
    log.append(kafka_batch([(None, b"d", 4000, []), (None, b"e", 7000, [])]), 7_000_000)
    assert log.record_offset_for_timestamp(2_000_000) == 1
    assert log.record_offset_for_timestamp(5_000_000) == 1
    # the index (appended at 9 s) sends 6 s to the first batch: its records are all earlier
    assert log.record_offset_for_timestamp(6_000_000) == 4
    assert log.record_offset_for_timestamp(8_000_000) is None


@pytest.mark.parametrize("codec", [0, 1, 2, 5, 3, 4],
                         ids=["none", "gzip", "snappy", "snappy-xerial", "lz4", "zstd"])
def test_a_record_is_found_by_time_after_retention_in_every_codec(open_log, codec):
    log = open_log(record_format="kafka-v2", segment_size=150)
    for number in range(4):  # batches of offsets 3n..3n+2, times out of order inside each
        times = [10_000 * number + 1000, 10_000 * number + 3000, 10_000 * number + 2000]
        log.append(kafka_batch([(None, b"v" * 20, t, []) for t in times], codec=codec),
                   max(times) * 1000)
    assert len(log._segments) > 2
    while log.first_offset < 6:
        log.delete_oldest_segment()
    first = log.first_offset
    assert log.record_at_or_after(0) == (first, (first // 3) * 10_000_000 + 1_000_000)
    assert log.record_at_or_after(32_500_000) == (10, 33_000_000)  # inside the last batch
    assert log.record_offset_for_timestamp(31_500_000) == 10
    assert log.record_at_or_after(33_000_001) is None


def test_a_record_is_found_by_time_in_an_iggy_log(open_log):
    log = open_log()
    for at in (5_000, 7_000, 9_000):
        log.append(encode_messages([Message(b"x", id=1)]), at)
    assert log.record_at_or_after(6_000) == (1, 7_000)
    assert log.record_at_or_after(9_001) is None


# ------------------------------------------------- the C twin against the Python reference
# ``formats.conversion``'s ``*_accelerated`` functions run the per-record loops in ``_convert.c`` / ``_iggy_to_kafka.c``;
# the ``*_python`` ones are the reference. Same inputs, byte-identical results, same errors.

twin = pytest.mark.skipif(not conversion.ACCELERATED,
                          reason="_stamp is not built with the conversion twins")

_PREFIX = struct.Struct("<QBQ16sII")
KAFKA_CODECS = {
    0: lambda block: block,
    1: gzip.compress,
    2: lambda block: bytes(cramjam.snappy.compress_raw(block)),
    3: lambda block: bytes(cramjam.lz4.compress(block)),
    4: lambda block: bytes(cramjam.zstd.compress(block)),
}


def outcome(function, data, first_offset, max_count):
    """What a conversion gives, comparable field by field: its result or its error."""
    try:
        converted = function(data, first_offset, max_count)
    except CannotReadMessage as error:
        return ("error", error.reason)
    return ("ok", converted.first_offset, converted.count, converted.records,
            converted.positions.tobytes(), converted.timestamps.tobytes(),
            converted.positions.typecode, converted.timestamps.typecode)


def assert_twins_agree(data, first_offset, max_count, direction="kafka"):
    if direction == "kafka":
        python, accelerated = conversion.kafka_to_iggy_python, \
            conversion.kafka_to_iggy_accelerated
    else:
        python, accelerated = conversion.iggy_to_kafka_python, \
            conversion.iggy_to_kafka_accelerated
    expected = outcome(python, data, first_offset, max_count)
    assert outcome(accelerated, data, first_offset, max_count) == expected, (
        data.hex(), first_offset, max_count)
    # every buffer type a read can hand over
    assert outcome(accelerated, bytearray(data), first_offset, max_count) == expected
    assert outcome(accelerated, memoryview(data), first_offset, max_count) == expected
    return expected


def raw_kafka_batch(records: list, base_offset: int, base_timestamp: int, codec: int = 0,
                    log_append_time: int | None = None, count: int | None = None,
                    block: bytes | None = None) -> bytes:
    """A stored RecordBatch v2 (leader epoch 0, no CRC check on this path) of ``records``:
    (offset_delta, timestamp_delta, key, value, headers) with header names as raw bytes; or
    of a given ``block`` (malformed on purpose) claiming ``count`` records."""
    if block is None:
        out = bytearray()
        for offset_delta, timestamp_delta, key, value, headers in records:
            record_batch.put_record(out, offset_delta, timestamp_delta, key, value, headers)
        block = bytes(out)
    last_delta = max((r[0] for r in records), default=0)
    attributes = codec
    max_timestamp = base_timestamp + max((r[1] for r in records), default=0)
    if log_append_time is not None:
        attributes |= record_batch.LOG_APPEND_TIME
        max_timestamp = log_append_time
    return record_batch.build(KAFKA_CODECS[codec](block),
                              len(records) if count is None else count, last_delta,
                              base_timestamp, max_timestamp, attributes=attributes,
                              base_offset=base_offset, leader_epoch=0)


HEADER_NAMES = [b"a", b"dup", b"dup", b"trace", b"rill.key", b"",
                b"\xff\xfe", b"\xed\xa0\x80", "é".encode(), "名前".encode(), b"n" * 255,
                b"m" * 256, b"\xc0\xaf", b"\xf4\x90\x80\x80"]


def random_blob(rng, null_ok=True):
    choice = rng.randrange(8)
    if choice == 0 and null_ok:
        return None
    if choice == 1:
        return b""
    if choice == 2:
        return rng.randbytes(255)
    if choice == 3:
        return rng.randbytes(rng.choice([256, 300, 1000]))
    return rng.randbytes(rng.randrange(1, 40))


def random_kafka_records(rng, count: int, gaps: bool) -> list:
    records = []
    offset_delta = 0
    for _ in range(count):
        headers = [(rng.choice(HEADER_NAMES) if rng.random() < 0.8 else rng.randbytes(
                        rng.randrange(1, 6)), random_blob(rng))
                   for _ in range(rng.choice([0, 0, 1, 2, 3, 6, 20]))]
        value = random_blob(rng)
        if value is not None and rng.random() < 0.05:
            value = rng.randbytes(20_000)  # past the size where the GIL is released
        records.append((offset_delta, rng.randrange(-2_000, 2_000), random_blob(rng), value,
                        headers))
        offset_delta += rng.randrange(1, 4) if gaps else 1
    return records


def random_kafka_log(rng) -> tuple[bytes, int, int]:
    """Stored batches of random records: (data, first offset, next offset)."""
    base = rng.choice([0, 5, 1_000_000, (1 << 62)])
    offset = base
    batches = []
    for _ in range(rng.randrange(1, 5)):
        records = random_kafka_records(rng, rng.randrange(0 if rng.random() < 0.1 else 1, 12),
                                       gaps=rng.random() < 0.2)
        base_timestamp = rng.choice([-1, 0, 1_000, 1_700_000_000_000,
                                     rng.randrange(-(1 << 40), 1 << 40)])
        log_append_time = rng.choice([None, None, None, 1_800_000_000_000, -1, 0])
        batches.append(raw_kafka_batch(records, offset, base_timestamp, rng.randrange(5),
                                       log_append_time))
        offset += (records[-1][0] + 1) if records else 1
    return b"".join(batches), base, offset


@twin
@pytest.mark.parametrize("seed", range(40))
def test_kafka_to_iggy_twin_gives_the_references_bytes(seed):
    rng = random.Random(seed)
    data, first, end = random_kafka_log(rng)
    results = {assert_twins_agree(data, first, end - first + 5)[0]}
    for _ in range(6):  # partial ranges: from inside a batch, cut by max_count
        start = rng.randrange(first - 2, end + 2)
        results.add(assert_twins_agree(data, start, rng.randrange(0, end - first + 3))[0])
    # a truncated read (the last batch cut): the batches before it only
    assert_twins_agree(data[:rng.randrange(len(data) + 1)], first, end - first)
    assert results == {"ok"}


@twin
@pytest.mark.parametrize("codec", sorted(KAFKA_CODECS), ids=["none", "gzip", "snappy", "lz4",
                                                              "zstd"])
def test_kafka_to_iggy_twin_keeps_every_rule_in_every_codec(codec):
    long = b"x" * 256
    records = [
        (0, 5, b"key", None, [(b"dup", b"first"), (b"other", b"o"), (b"dup", b"last"),
                              (b"null", None), (b"empty", b""), (b"long", long),
                              (b"rill.key", b"forged"), (b"dup", None), (b"dup", b""),
                              (b"dup", long), (b"\xff", b"not utf-8"), (b"", b"no name"),
                              (b"n" * 256, b"long name")]),
        (1, -10, b"", b"", []),
        (2, 7, long, b"v", [(b"h%d" % (n % 40), b"%d" % n) for n in range(200)]),  # many
        (3, 0, b"k" * 255, b"p" * 255, [(b"rill.key", b"only a header")]),
    ]
    data = raw_kafka_batch(records, 100, 10, codec)
    expected = assert_twins_agree(data, 100, 10)
    messages = list(iter_polled_messages(expected[3], expected[2]))
    assert list(messages[0].headers) == ["rill.key", "dup", "other"]
    assert messages[0].headers["dup"] == HeaderValue.raw(b"last")
    assert (messages[1].timestamp, messages[1].headers) == (0, {})
    assert len(messages[2].headers) == 40 and messages[2].headers["h0"] == HeaderValue.raw(b"160")
    assert list(messages[3].headers) == ["rill.key"]
    for log_append_time in (1_800_000_000_000, -5):
        assert_twins_agree(raw_kafka_batch(records, 100, 10, codec, log_append_time), 100, 10)
    for first, count in ((101, 2), (103, 1), (100, 0), (104, 3), (90, 11)):
        assert_twins_agree(data, first, count)


def varint(value: int) -> bytes:
    out = bytearray()
    record_batch.put_varint(out, value)
    return bytes(out)


def record_bytes(*fields: bytes, length: int | None = None) -> bytes:
    body = b"".join(fields)
    return varint(len(body) if length is None else length) + body


GOOD_RECORD = record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(1), b"v",
                           varint(0))
MALFORMED_BLOCKS = {
    "empty block": (b"", 1),
    "a truncated varint": (b"\x80", 1),
    "a varint past 10 bytes": (b"\xff" * 11, 1),
    "a 70-bit varint": (b"\xff" * 9 + b"\x7f" + GOOD_RECORD[1:], 1),
    "a record length past the block": (record_bytes(GOOD_RECORD[1:], length=200), 1),
    "a record length too short": (record_bytes(GOOD_RECORD[1:], length=3), 1),
    "a negative record length": (record_bytes(GOOD_RECORD[1:], length=-5), 1),
    "a key past the block": (record_bytes(b"\x00", varint(0), varint(0), varint(50), b"k"), 1),
    "a key length past 63 bits": (record_bytes(b"\x00", varint(0), varint(0), varint(1 << 64),
                                               b"k"), 1),
    "a value past the block": (record_bytes(b"\x00", varint(0), varint(0), varint(-1),
                                            varint(90), b"v"), 1),
    "a header name past the block": (record_bytes(b"\x00", varint(0), varint(0), varint(-1),
                                                  varint(0), varint(1), varint(9), b"n"), 1),
    "a header value past the block": (record_bytes(b"\x00", varint(0), varint(0), varint(-1),
                                                   varint(0), varint(1), varint(1), b"n",
                                                   varint(9), b"v"), 1),
    "a null header key": (record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(0),
                                       varint(1), varint(-1), varint(1), b"v"), 1),
    "a huge header count": (record_bytes(b"\x00", varint(0), varint(0), varint(-1), varint(0),
                                         varint(1 << 40)), 1),
    "more records claimed than held": (GOOD_RECORD * 2, 3),
    "a timestamp past 64 bits of µs": (record_bytes(b"\x00", varint(1 << 62), varint(0),
                                                    varint(-1), varint(0), varint(0)), 1),
    "a negative count": (GOOD_RECORD, -1),
}


@twin
@pytest.mark.parametrize("name", sorted(MALFORMED_BLOCKS))
def test_malformed_kafka_records_are_refused_alike(name):
    block, count = MALFORMED_BLOCKS[name]
    for codec in (0, 1):
        data = raw_kafka_batch([], 10, 1 << 50, codec, count=count, block=block)
        expected = assert_twins_agree(data, 10, 5)
        if name not in ("a negative count", "a 70-bit varint"):
            assert expected[0] == "error", expected
            assert expected[1].startswith(
                "Cannot read message: the batch at offset 10 does not parse: ")
        # a record skipped before the range is walked with its length only
        assert_twins_agree(data, 11, 5)
        assert_twins_agree(data, 5, 5)


@twin
@pytest.mark.parametrize("seed", range(30))
def test_damaged_kafka_batches_are_refused_alike(seed):
    rng = random.Random(1000 + seed)
    records = random_kafka_records(rng, rng.randrange(1, 8), gaps=False)
    block = bytearray()
    for offset_delta, timestamp_delta, key, value, headers in records:
        record_batch.put_record(block, offset_delta, timestamp_delta, key, value, headers)
    outcomes = set()
    for _ in range(40):
        damaged = bytearray(block)
        for _ in range(rng.randrange(1, 4)):
            if damaged and rng.random() < 0.7:
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            else:
                del damaged[rng.randrange(len(damaged) + 1):]
        data = raw_kafka_batch(records, 0, 1_700_000_000_000, rng.choice([0, 0, 4]),
                               count=len(records) + rng.choice([0, 0, 1, -1]),
                               block=bytes(damaged))
        outcomes.add(assert_twins_agree(data, rng.choice([0, 0, 2]), 20)[0])
    assert "error" in outcomes


def iggy_record(offset: int, timestamp: int, headers: bytes, payload: bytes,
                headers_length: int | None = None, payload_length: int | None = None) -> bytes:
    """One stored Iggy record built by hand (its header map as given, unchecked)."""
    return (_PREFIX.pack(offset, 1, timestamp, bytes(16), crc32(payload),
                         len(headers) if headers_length is None else headers_length)
            + headers + struct.pack("<I", len(payload) if payload_length is None
                                    else payload_length) + payload)


def header_entry(name: bytes, kind: int, value: bytes) -> bytes:
    return struct.pack("<I", len(name)) + name + bytes([kind]) + struct.pack("<I",
                                                                             len(value)) + value


def random_iggy_headers(rng) -> bytes:
    entries = []
    names = ["a", "trace", "rill.key", "n", "é", "s" * 255]
    for _ in range(rng.choice([0, 0, 1, 2, 4, 30])):
        name = rng.choice(names) if rng.random() < 0.7 else "h%d" % rng.randrange(1000)
        kind, value = rng.choice([
            (1, rng.randbytes(rng.randrange(1, 40))),  # raw
            (2, "text".encode()),  # string
            (3, b"\x01"),  # bool
            (8, struct.pack("<I", rng.randrange(1 << 32))),  # uint32
            (13, struct.pack("<d", rng.random())),  # float64
            (1, rng.randbytes(255)),
        ])
        entries.append(header_entry(name.encode(), kind, value))
    return b"".join(entries)


def random_iggy_log(rng) -> tuple[bytes, int, int]:
    base = rng.choice([0, 7, 1 << 40, (1 << 63) - 50])  # a Kafka offset is an i64
    records = []
    timestamp = rng.choice([0, 999, 1_700_000_000_123_456])
    count = rng.randrange(0, 25)
    for n in range(count):
        timestamp = max(0, timestamp + rng.randrange(-5_000, 50_000))  # out of order too
        payload = b"" if rng.random() < 0.2 else rng.randbytes(
            rng.choice([1, 10, 100, 30_000 if rng.random() < 0.1 else 5]))
        records.append(iggy_record(base + n, timestamp, random_iggy_headers(rng), payload))
    return b"".join(records), base, base + count


@twin
@pytest.mark.parametrize("seed", range(40))
def test_iggy_to_kafka_twin_gives_the_references_bytes(seed):
    rng = random.Random(seed)
    data, first, end = random_iggy_log(rng)
    assert assert_twins_agree(data, first, end - first + 3, "iggy")[0] == "ok"
    for _ in range(6):
        start = rng.randrange(max(first - 2, 0), end + 2)
        assert_twins_agree(data, start, rng.randrange(0, end - first + 3), "iggy")
    assert_twins_agree(data, -5, 10, "iggy")
    assert_twins_agree(data[:rng.randrange(len(data) + 1)], first, end - first, "iggy")


@twin
def test_iggy_to_kafka_twin_keeps_the_key_rule():
    key = header_entry(b"rill.key", 1, b"k1")
    data = b"".join([
        iggy_record(0, 5_999, key + header_entry(b"s", 2, b"text"), b"p0"),
        iggy_record(1, 1_000, header_entry(b"b", 3, b"\x01") + key, b""),  # key last
        iggy_record(2, 9_000, key + header_entry(b"rill.key", 2, b"second"), b"p2"),
        iggy_record(3, 3_000, b"", b""),
        iggy_record(4, 3_000, header_entry(b"rill.key", 1, b""), b"x"),  # an empty key
        iggy_record(9, 2_000, b"", b"a gap"),
    ])
    expected = assert_twins_agree(data, 0, 20, "iggy")
    batch, records = kafka_view(iggy_to_kafka(data, 0, 20))
    assert (batch.base_offset, batch.last_offset_delta, batch.max_timestamp) == (0, 9, 9)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in records] == [
        (0, b"k1", b"p0", 5, [("s", b"text")]),
        (1, b"k1", b"", 1, [("b", b"\x01")]),
        (2, b"k1", b"p2", 9, [("rill.key", b"second")]),
        (3, None, b"", 3, []),
        (4, b"", b"x", 3, []),
        (9, None, b"a gap", 2, [])]
    assert expected[2] == 10  # the count runs to the last offset's
    for first, count in ((1, 2), (3, 1), (5, 4), (9, 1), (10, 5)):
        assert_twins_agree(data, first, count, "iggy")


IGGY_MALFORMED = {
    "headers past the read": iggy_record(0, 1, b"", b"p", headers_length=500),
    "payload past the read": iggy_record(0, 1, b"", b"p", payload_length=500),
    "a header cut in its key length": iggy_record(0, 1, b"\x03\x00", b"p"),
    "a header key past the map": iggy_record(0, 1, b"\x09\x00\x00\x00abc\x01\x01\x00\x00\x00v",
                                             b"p"),
    "a header value past the map": iggy_record(0, 1, header_entry(b"k", 1, b"value")[:-2],
                                               b"p"),
    "a header missing its value length": iggy_record(0, 1, b"\x01\x00\x00\x00k\x01\x01", b"p"),
}


@twin
@pytest.mark.parametrize("name", sorted(IGGY_MALFORMED))
def test_malformed_iggy_records_are_refused_alike(name):
    good = iggy_record(0, 1_000, header_entry(b"a", 1, b"b"), b"fine")
    bad = IGGY_MALFORMED[name]
    for data in (bad, good + _renumbered(bad, 1)):  # alone, and after a good record
        expected = assert_twins_agree(data, 0, 5, "iggy")
        assert expected[0] == "error" and expected[1].startswith(
            "Cannot read message: the record at offset ")
    # a record past the range still overruns the read; a bad map past the range is not read
    assert assert_twins_agree(good + _renumbered(bad, 1), 0, 1, "iggy")[0] == (
        "error" if "past the read" in name else "ok")


def _renumbered(record: bytes, offset: int) -> bytes:
    return struct.pack("<Q", offset) + record[8:]


@twin
@pytest.mark.parametrize("seed", range(20))
def test_damaged_iggy_records_are_refused_alike(seed):
    rng = random.Random(2000 + seed)
    data, first, end = random_iggy_log(rng)
    if not data:
        data = iggy_record(0, 1, header_entry(b"a", 1, b"b"), b"p")
    for _ in range(30):
        damaged = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(damaged))
            damaged[at] = rng.randrange(256)
        assert_twins_agree(bytes(damaged), first, end - first + 1, "iggy")


@twin
def test_a_send_region_is_converted_alike(monkeypatch):
    region = encode_messages(SENT * 3 + [Message(b"e", headers={"k": HeaderValue.raw(b"v")})])
    accelerated = convert_batch(region, "iggy-v1", "kafka-v2", 1_700_000_000_123_456)
    monkeypatch.setattr(conversion, "iggy_to_kafka", conversion.iggy_to_kafka_python)
    assert convert_batch(region, "iggy-v1", "kafka-v2", 1_700_000_000_123_456) == accelerated


def test_the_twins_are_used_when_built_and_an_older_build_gets_the_reference():
    if conversion.ACCELERATED:
        assert conversion.kafka_to_iggy is conversion.kafka_to_iggy_accelerated
        assert conversion.iggy_to_kafka is conversion.iggy_to_kafka_accelerated
    # an _stamp built before the conversion twins: stamp and the checks only
    script = (
        "import types\n"
        "from rill.server.storage.formats import iggy_v1 as records\n"
        "old = (types.SimpleNamespace(**{name: getattr(records.ACCELERATOR, name) for name in\n"
        "    ('stamp', 'verify', 'scan', 'find_record', 'crc32')}) if records.ACCELERATOR\n"
        "    else None)\n"
        "records.ACCELERATOR = old\n"
        "from rill.server.storage.formats import conversion as c\n"
        "assert not c.ACCELERATED and c.kafka_to_iggy is c.kafka_to_iggy_python\n"
        "assert c.iggy_to_kafka is c.iggy_to_kafka_python\n"
        "region = bytes(20) + (1).to_bytes(4, 'little') + b'x'  # one message, payload x\n"
        "print(c.convert_batch(region, 'iggy-v1', 'kafka-v2', 0)[:8].hex())\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0000000000000000"


# ------------------------------------------- stamp_converted: the twin against the reference

def stamp_outcome(function, records, positions, timestamps, *numbers):
    """What stamping converted records gives: the records after, the result, or the error."""
    records = bytearray(records)
    try:
        entries, first, last = function(records, positions, timestamps, *numbers)
    except InvalidRecordBatch as error:
        return ("empty", str(error))
    except ValueError as error:
        return ("malformed", str(error))
    return ("ok", bytes(records), bytes(entries), first, last)


def assert_stamp_twins_agree(records, positions, timestamps, *numbers):
    assert conversion._STAMP_TWIN is not None, "_stamp is built without stamp_converted"
    expected = stamp_outcome(conversion.stamp_converted_python, records, positions,
                             timestamps, *numbers)
    assert stamp_outcome(conversion.stamp_converted_accelerated, records, positions,
                         timestamps, *numbers) == expected, (records.hex(), numbers)
    return expected


@twin
@pytest.mark.parametrize("seed", range(40))
def test_stamp_converted_twin_gives_the_references_bytes_and_errors(seed):
    rng = random.Random(seed)
    produced = kafka_batch([
        (rng.choice([None, b"k", b"key" * 30]), rng.randbytes(rng.randrange(0, 40)),
         rng.choice([-1, 0, 5_000, 7_000, 1_700_000_000_000 + rng.randrange(10**6)]),
         [("h", b"v")] * rng.randrange(3))
        for _ in range(rng.randrange(1, 30))], codec=rng.randrange(5))
    converted = conversion.kafka_to_iggy(stored_kafka(produced), 0, 1 << 20)
    numbers = (rng.randrange(1 << 40), rng.randrange(1 << 50), rng.choice([0, 6_000_000, 1 << 62]),
               rng.randrange(1000), rng.randrange(1 << 20))
    outcome_ = assert_stamp_twins_agree(converted.records, converted.positions,
                                        converted.timestamps, *numbers)
    if outcome_[0] == "ok":  # offsets and timestamps as the rule says, read back as Iggy records
        back = list(iter_polled_messages(outcome_[1], converted.count))
        assert [m.offset for m in back] == list(range(numbers[0], numbers[0] + converted.count))
        stamps = [m.timestamp for m in back]
        assert stamps == sorted(stamps) and stamps[0] >= numbers[2]
    # damaged positions, and numbers past u32 index entries: the same error from both
    damaged = array("I", converted.positions)
    damaged[rng.randrange(len(damaged))] += rng.choice([1, 7, 1 << 20])
    assert_stamp_twins_agree(converted.records, damaged, converted.timestamps, *numbers)
    past_the_end = array("I", converted.positions)
    past_the_end[-1] += 1
    assert assert_stamp_twins_agree(converted.records, past_the_end, converted.timestamps,
                                    *numbers)[0] in ("malformed", "empty")
    assert assert_stamp_twins_agree(converted.records, converted.positions, converted.timestamps,
                                    numbers[0], numbers[1], numbers[2], (1 << 32) - 1,
                                    numbers[4])[0] in ("malformed", "ok")
    assert assert_stamp_twins_agree(converted.records, converted.positions[:-1],
                                    converted.timestamps, *numbers)[0] == "malformed"


def test_stamp_converted_refuses_an_empty_payload():
    converted = conversion.kafka_to_iggy(
        stored_kafka(kafka_batch([(None, b"x", 1, []), (b"k", None, 2, [])])), 0, 10)
    for function in (conversion.stamp_converted_python, conversion.stamp_converted):
        with pytest.raises(InvalidRecordBatch, match="record 1 has a null or empty value"):
            function(bytearray(converted.records), converted.positions, converted.timestamps,
                     0, 0, 0, 0, 0)
