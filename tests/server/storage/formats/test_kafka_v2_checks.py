"""``kafka_v2.check_produced`` (issue 27 item 5): a client's RecordBatch v2 checked and
repaired as Kafka's broker does before it is stored -- maxTimestamp recomputed from the records
(Sarama 1.22 sends -1) with a correct CRC-32C, every record walked (counts, lengths, offset
deltas 0..count-1), a producer's LogAppendTime refused -- and ``walk_records``' C twin
(``_stamp.walk_kafka_records``) giving the Python reference's answers and texts."""

from __future__ import annotations

import gzip
import random
import struct

import cramjam
import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.protocol.kafka import record_batch
from rill.server.storage.formats import _stamp
from rill.server.storage.formats import kafka_v2
from rill.server.storage.formats.kafka_v2 import (
    InvalidRecordBatch,
    check_produced,
    walk_records_python,
)

HEADER = record_batch.HEADER
c_walk = _stamp.walk_kafka_records


def client_batch(timestamps: list[int], codec: int = 0, max_timestamp: int | None = None,
                 attributes: int = 0, offset_deltas: list[int] | None = None) -> bytes:
    """A RecordBatch v2 of one record per timestamp (ms) as a client sends it, optionally with
    its header's maxTimestamp, extra attributes or the records' offsetDeltas set otherwise."""
    block = bytearray()
    base = timestamps[0]
    for number, timestamp in enumerate(timestamps):
        delta = number if offset_deltas is None else offset_deltas[number]
        record_batch.put_record(block, delta, timestamp - base, b"k%d" % number,
                                b"value %d" % number, [(b"h%d" % number, b"x")])
    block = bytes(block)
    if codec:
        block = {1: gzip.compress, 2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
                 3: lambda b: bytes(cramjam.lz4.compress(b)),
                 4: lambda b: bytes(cramjam.zstd.compress(b))}[codec](block)
    newest = max(timestamps) if max_timestamp is None else max_timestamp
    return record_batch.build(block, len(timestamps), len(timestamps) - 1, base, newest,
                              codec | attributes)


def header(raw: bytes | bytearray, at: int = 0) -> tuple:
    return HEADER.unpack_from(raw, at)


def crc_holds(raw: bytes | bytearray, at: int = 0) -> bool:
    fields = header(raw, at)
    end = at + 12 + fields[1]
    return crc32c(bytes(raw[at + 21:end])) == fields[4]


def test_put_record_helper_matches_kafka_python():
    """The batches built here are the ones a client builds (kafka-python's builder)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for offset, timestamp in enumerate([1000, 3000, 2000]):
        builder.append(offset, timestamp=timestamp, key=b"k%d" % offset,
                       value=b"value %d" % offset, headers=[(f"h{offset}", b"x")])
    theirs = bytes(builder.build())
    ours = client_batch([1000, 3000, 2000])
    assert ours[61:] == theirs[61:]
    assert header(ours)[7:9] == header(theirs)[7:9] == (1000, 3000)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_a_max_timestamp_of_minus_one_is_recomputed_with_its_crc(codec):
    sent = client_batch([5000, 9000, 7000], codec=codec, max_timestamp=-1)
    assert header(sent)[8] == -1 and crc_holds(sent)
    checked = check_produced(sent)  # read-only bytes: repaired in a copy
    assert header(checked.records)[8] == 9000 and crc_holds(checked.records)
    assert checked.time_us == 9000 * 1000
    assert header(sent)[8] == -1  # the caller's bytes are untouched
    repaired = bytes(checked.records)  # only maxTimestamp (35..43) and the CRC (17..21) differ
    assert repaired[:17] == sent[:17] and repaired[21:35] == sent[21:35]
    assert repaired[43:] == sent[43:]


def test_a_writable_buffer_is_repaired_in_place_and_a_right_one_left_alone():
    right = client_batch([1000, 2000])
    checked = check_produced(right)
    assert checked.records is right and checked.time_us == 2_000_000
    wrong = bytearray(client_batch([1000, 2000], max_timestamp=1500))  # a wrong, not -1, one
    checked = check_produced(wrong)
    assert checked.records is wrong and header(wrong)[8] == 2000 and crc_holds(wrong)


def test_every_batch_of_a_field_is_checked_and_the_time_is_the_newest():
    first = client_batch([1000, 2000], max_timestamp=-1)
    second = client_batch([8000, 4000], max_timestamp=-1)
    checked = check_produced(first + second)
    assert header(checked.records)[8] == 2000 and header(checked.records, len(first))[8] == 8000
    assert crc_holds(checked.records) and crc_holds(checked.records, len(first))
    assert checked.time_us == 8_000_000


def test_records_without_timestamps_keep_minus_one():
    sent = client_batch([-1, -1])  # baseTimestamp -1, deltas 0: no timestamps (as Kafka keeps)
    checked = check_produced(sent)
    assert checked.records is sent and header(sent)[8] == -1 and checked.time_us == 0


def refusal(raw: bytes) -> InvalidRecordBatch:
    with pytest.raises(InvalidRecordBatch) as raised:
        check_produced(raw)
    return raised.value


@pytest.mark.parametrize("codec", [0, 3])
def test_offset_deltas_out_of_order_are_invalid(codec):
    error = refusal(client_batch([1, 2, 3], codec=codec, offset_deltas=[0, 2, 1]))
    assert not error.corrupt and not error.timestamp
    assert str(error).endswith("batch 0 at byte 0: record 1: offsetDelta 2, not 1 (offsets "
                               "0..count-1)")


def test_a_count_the_records_do_not_match_is_invalid():
    sent = bytearray(client_batch([1, 2, 3]))
    struct.pack_into(">i", sent, 57, 2)  # recordsCount 2 with lastOffsetDelta 2
    struct.pack_into(">I", sent, 17, crc32c(bytes(sent[21:])))
    assert "recordsCount 2 with lastOffsetDelta 2" in str(refusal(bytes(sent)))
    struct.pack_into(">i", sent, 23, 1)  # and lastOffsetDelta 1: three records, two declared
    struct.pack_into(">I", sent, 17, crc32c(bytes(sent[21:])))
    error = refusal(bytes(sent))
    assert not error.corrupt
    assert str(error).endswith("batch 0 at byte 0: 21 bytes after the last of 2 records")


def test_a_producer_cannot_set_log_append_time():
    error = refusal(client_batch([1, 2], attributes=record_batch.LOG_APPEND_TIME))
    assert error.timestamp and "LogAppendTime" in str(error)


def test_a_compressed_block_that_does_not_decompress_is_corrupt():
    sent = bytearray(client_batch([1, 2]))
    struct.pack_into(">h", sent, 21, record_batch.GZIP)  # the plain records called gzip
    struct.pack_into(">I", sent, 17, crc32c(bytes(sent[21:])))
    error = refusal(bytes(sent))
    assert error.corrupt and "gzip records do not decompress" in str(error)


def test_header_checks_still_come_first():
    sent = bytearray(client_batch([1, 2], max_timestamp=-1))
    sent[-1] ^= 1
    error = refusal(bytes(sent))
    assert error.corrupt and "CRC-32C mismatch" in str(error)  # never repaired over


# -- the C twin --------------------------------------------------------------------------------

BLOCK = client_batch([10, 30, 20])[61:]
MALFORMED = [
    (BLOCK, 3), (BLOCK, 2), (BLOCK, 4), (BLOCK[:-1], 3), (BLOCK + b"\0", 3), (b"", 1),
    (b"\x01", 1),  # length -1
    (b"\x7e", 1),  # length 63, overruns
    (b"\x02\x00", 1),  # length 1: attributes only, the rest missing
    (b"\x02\x00\x00\x00", 1),
    (b"\x0e\x00\x00\x00\x03\x00\x00\x00", 1),  # key length -2
    (b"\x0e\x00\x00\x00\x01\x01\x00\x00", 1),  # value length -1 (null): fine, then 1 byte left
    (b"\x0c\x00\x00\x00\x01\x01\x01", 1),  # header count -1
    (b"\x10\x00\x00\x00\x01\x01\x02\x03\x00", 1),  # header key length -2
    (b"\x0e\x00" + b"\xff" * 10 + b"\x01", 1),  # a varint past 64 bits
    (b"\x14\x00" + b"\xff" * 9 + b"\x01\x00\x01\x01\x00", 1),  # 10 bytes, the 64th bit set
    (b"\x0a\x00\x00\x02\x01\x01\x00", 1),  # offsetDelta 1 for record 0
]


def test_produce_runs_the_c_walk():
    assert kafka_v2.WALK_ACCELERATED and kafka_v2.walk_records is c_walk


@pytest.mark.parametrize("block,count", MALFORMED)
def test_the_c_walk_answers_as_the_reference(block, count):
    assert c_walk(block, count) == walk_records_python(block, count)


def test_the_c_walk_answers_as_the_reference_on_mutated_blocks():
    rng = random.Random(27)
    large = client_batch(list(range(1000, 1000 + 2000 * 7, 7)))[61:]  # above the GIL release
    assert c_walk(large, 2000) == walk_records_python(large, 2000) == 13993
    for _ in range(3000):
        block = bytearray(BLOCK)
        for _ in range(rng.randint(1, 3)):
            block[rng.randrange(len(block))] = rng.randrange(256)
        count = rng.choice([3, 3, 3, 2, 4])
        assert (c_walk(bytes(block), count)
                == walk_records_python(bytes(block), count)), (bytes(block), count)
