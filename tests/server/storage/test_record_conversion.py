"""Record conversion between ``kafka-v2`` and ``iggy-v1`` (storage.record_conversion): every
codec, keys, headers, timestamps, offsets and the lossy cases, read back by the Iggy SDK's
decoder and kafka-python's record parser; and a log's ``read_as`` / columnar read of a
Kafka-format log."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from rill.errors import CannotReadMessage, FeatureUnavailable, InvalidMessagesCount
from rill.protocol.buffer import DecodeError
from rill.protocol.headers import HeaderKind, HeaderValue
from rill.protocol.messages import Message, encode_messages, iter_polled_messages
from rill.protocol.stored import crc32
from rill.server.storage.kafka_records import stamp_batches
from rill.server.storage.record_conversion import (
    convert,
    convert_batch,
    iggy_to_kafka,
    kafka_to_iggy,
)
from rill.server.storage.records import stamp_batch


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
