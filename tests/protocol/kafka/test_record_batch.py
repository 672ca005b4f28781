"""RecordBatch v2 record by record: what ``record_batch`` writes, kafka-python's independent
reader reads (keys, values, headers, nulls, timestamps, CRC), and what it reads back is what was
written; compressed blocks of every codec inflate, never past the limit."""

from __future__ import annotations

import gzip

import cramjam
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from rill.protocol.kafka import record_batch
from rill.protocol.kafka.record_batch import TooLarge, build, decompress, put_record, read_record

NOW = 1_760_000_000_000
RECORDS = [  # (key, value, timestamp ms, headers)
    (b"k1", b"v1", NOW, [(b"h", b"x"), (b"h", None)]),
    (None, b"", NOW + 5, []),
    (b"", None, NOW - 3, [(b"empty", b"")]),
    (b"\xff" * 300, b"v" * 70_000, NOW + 1, []),  # multi-byte varint lengths
]


def _records_block() -> bytearray:
    block = bytearray()
    for delta, (key, value, timestamp, headers) in enumerate(RECORDS):
        put_record(block, delta, timestamp - NOW, key, value, headers)
    return block


def test_varints_round_trip_at_their_edges():
    for value in (0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -2**31, 2**63 - 1, -2**63):
        out = bytearray()
        record_batch.put_varint(out, value)
        assert record_batch.read_varint(out, 0) == (value, len(out))
    with pytest.raises(ValueError):
        record_batch.read_varint(b"\xff" * 11, 0)


def test_a_built_batch_is_what_kafka_python_reads():
    block = _records_block()
    stamps = [timestamp for _, _, timestamp, _ in RECORDS]
    raw = build(block, len(RECORDS), len(RECORDS) - 1, NOW, max(stamps), producer_id=7,
                producer_epoch=1, base_sequence=40)
    batch = DefaultRecordBatch(raw)
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 40)
    assert (batch.base_offset, batch.max_timestamp) == (0, max(stamps))
    read = [(r.key, r.value, r.timestamp, [(k.encode(), v) for k, v in r.headers])
            for r in batch]
    assert read == RECORDS


def test_read_record_gives_back_what_kafka_python_wrote():
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for delta, (key, value, timestamp, headers) in enumerate(RECORDS):
        builder.append(delta, timestamp=timestamp, key=key, value=value,
                       headers=[(k.decode(), v) for k, v in headers])
    raw = bytes(builder.build())
    block = memoryview(raw)[record_batch.HEADER_SIZE:]
    at, read = 0, []
    for _ in RECORDS:
        at, timestamp_delta, offset_delta, key, value, headers = read_record(block, at)
        read.append((offset_delta, None if key is None else bytes(key),
                     None if value is None else bytes(value), timestamp_delta,
                     [(bytes(k), None if v is None else bytes(v)) for k, v in headers]))
    assert at == len(block)
    assert read == [(delta, key, value, timestamp - NOW, headers)
                    for delta, (key, value, timestamp, headers) in enumerate(RECORDS)]
    first_end = read_record(block, 0)[0]
    with pytest.raises((ValueError, IndexError)):
        read_record(block[:first_end - 1], 0)  # a record cut short


def _xerial(data: bytes) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(data))
    return b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2 + len(block).to_bytes(4, "big") + block


@pytest.mark.parametrize("codec, compress", [
    (1, gzip.compress),
    (2, lambda data: bytes(cramjam.snappy.compress_raw(data))),
    (2, _xerial),
    (3, lambda data: bytes(cramjam.lz4.compress(data))),
    (4, lambda data: bytes(cramjam.zstd.compress(data))),
], ids=["gzip", "snappy-raw", "snappy-xerial", "lz4", "zstd"])
def test_every_codec_inflates_within_the_limit_and_not_past_it(codec, compress):
    data = bytes(_records_block()) * 4
    packed = compress(data)
    assert decompress(codec, packed) == data
    assert decompress(codec, packed, limit=len(data)) == data
    with pytest.raises(TooLarge):
        decompress(codec, packed, limit=len(data) - 1)


def test_an_unknown_codec_or_broken_block_is_refused():
    with pytest.raises(ValueError):
        decompress(5, b"x")
    with pytest.raises(Exception):
        decompress(1, b"not gzip at all")


def test_a_batch_built_in_place_is_the_batch_built():
    """``build_in_place`` writes ``build``'s header (CRC included) before records already in
    the buffer: the same bytes, the same buffer returned."""
    records = bytearray()
    for index in range(3):
        put_record(records, index, index, b"k", b"v" * index)
    expected = build(bytes(records), 3, 2, 1_000, 1_002, attributes=0, leader_epoch=0)
    buffer = bytearray(record_batch.HEADER_SIZE) + records
    assert record_batch.build_in_place(buffer, 3, 2, 1_000, 1_002, leader_epoch=0) is buffer
    assert buffer == expected
