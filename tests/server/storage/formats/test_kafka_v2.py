"""The ``kafka-v2`` record format (``formats.kafka_v2``) through a real partition log.

Batches come from kafka-python's own record builder (an independent encoder), and what the log
stores is read back with kafka-python's reader. Only gzip can be produced here; a snappy, lz4 or
zstd batch is an otherwise valid batch with those codec bits set and its CRC-32C recomputed
(kafka-python's own CRC): the format never decompresses.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from array import array
from pathlib import Path

import pytest
from kafka.codec import has_gzip, has_lz4, has_snappy, has_zstd
from kafka.record import MemoryRecords
from kafka.record._crc32c import crc as kafka_crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.errors import CannotReadMessage, FeatureUnavailable
from rill.protocol.buffer import DecodeError
from rill.server.storage.formats import kafka_v2
from rill.server.storage.batch_segment import BatchSegment
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.formats import KAFKA_V2, format_named
from rill.server.storage.formats.kafka_v2 import InvalidRecordBatch, batch_time_us
from rill.server.storage.partition_log import LogSettings, PartitionLog
from rill.server.storage.verification import verify_in_background

ENTRY = struct.Struct("<IIQII")  # relative_offset, position, timestamp, epoch, reserved
EPOCH = 3
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
AVAILABLE = {"none": True, "gzip": has_gzip(), "snappy": has_snappy(), "lz4": has_lz4(),
             "zstd": has_zstd()}


def record(number: int, base_ms: int) -> tuple[int, bytes | None, bytes | None,
                                                list[tuple[str, bytes | None]]]:
    """(timestamp ms, key, value, headers) of a test record: null keys, null and empty values,
    duplicate header keys."""
    key = None if number % 3 == 0 else b"key-%d" % number
    value = None if number % 5 == 4 else (b"" if number % 5 == 3 else b"value %d " % number * 8)
    headers = [("h", b"1"), ("h", None), ("n", b"%d" % number)] if number % 2 else []
    return base_ms + number, key, value, headers


def build(count: int, base_ms: int = 1_700_000_000_000, codec: str = "none",
          producer: tuple[int, int, int] | None = None, first: int = 0) -> bytes:
    """One RecordBatch v2 of ``count`` records by kafka-python's builder."""
    builder = DefaultRecordBatchBuilder(2, CODECS[codec] if AVAILABLE[codec] else 0, False,
                                        -1, -1, -1, batch_size=1 << 30)
    if producer is not None:
        builder.set_producer_state(*producer, False)
    for number in range(count):
        timestamp, key, value, headers = record(first + number, base_ms)
        assert builder.append(number, timestamp, key, value, headers) is not None
    data = bytes(builder.build())
    if not AVAILABLE[codec]:  # set the codec bits only, and re-sign the batch
        data = with_attributes(data, (struct.unpack_from(">h", data, 21)[0] & ~7) | CODECS[codec])
    return data


def resign(data: bytes | bytearray) -> bytes:
    """``data`` (one batch) with its CRC-32C recomputed (kafka-python's implementation)."""
    data = bytearray(data)
    struct.pack_into(">I", data, 17, kafka_crc32c(bytes(data[21:])))
    return bytes(data)


def with_attributes(data: bytes, attributes: int) -> bytes:
    changed = bytearray(data)
    struct.pack_into(">h", changed, 21, attributes)
    return resign(changed)


def read_back(data: bytes) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every record in stored bytes, by
    kafka-python's reader (which checks nothing of rill's)."""
    found = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        found += [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    return found


def expected(first_offset: int, count: int, base_ms: int = 1_700_000_000_000,
             first: int = 0) -> list[tuple]:
    return [(first_offset + number, *record(first + number, base_ms)[:3],
             record(first + number, base_ms)[3]) for number in range(count)]


def heads(data: bytes) -> list[tuple[int, int, int]]:
    """(baseOffset, partitionLeaderEpoch, records count) of each batch in ``data``."""
    found, at = [], 0
    while at < len(data):
        base, length, epoch = struct.unpack_from(">qii", data, at)
        found.append((base, epoch, struct.unpack_from(">i", data, at + 57)[0]))
        at += 12 + length
    return found


def without_rewritten(data: bytes) -> bytes:
    """``data`` with every batch's baseOffset and partitionLeaderEpoch zeroed."""
    plain, at = bytearray(data), 0
    while at < len(plain):
        length = struct.unpack_from(">i", plain, at + 8)[0]
        struct.pack_into(">q4xi", plain, at, 0, 0)
        at += 12 + length
    return bytes(plain)


@pytest.fixture
def kafka_log(open_log):
    def opener(epoch: int = EPOCH, **options) -> PartitionLog:
        log = open_log(record_format="kafka-v2", **options)
        log.leader_epoch = epoch
        return log

    return opener


def produce(log: PartitionLog, raw: bytes) -> tuple[int, int]:
    """Append as the Kafka handler does: at the batches' own time."""
    return log.append(raw, batch_time_us(raw))


def read_all(log: PartitionLog, offset: int = 0, count: int = 1_000) -> tuple[int, bytes]:
    returned, chunks = log.read(offset, count)
    return returned, b"".join(chunks)


def index_entries(path: Path) -> list[tuple[int, int, int, int, int]]:
    data = path.read_bytes()
    return [ENTRY.unpack_from(data, at) for at in range(0, len(data), ENTRY.size)]


# ---------------------------------------------------------------------- append and read
def test_the_format_is_registered_with_a_batch_index() -> None:
    found = format_named("kafka-v2")
    assert found is KAFKA_V2 and found.batch_index and found.growth_per_message == 0
    assert found.index_entry_size == 24 and found.min_record_size == 61
    assert found.find(b"", 0, 0, 1) is None


@pytest.mark.parametrize("codec", list(CODECS))
def test_stored_bytes_are_the_clients_with_offsets_and_epoch(kafka_log, codec: str) -> None:
    log = kafka_log()
    sent = [build(3, codec=codec), build(5, codec=codec, first=3), build(1, codec=codec, first=8)]
    assert [produce(log, raw) for raw in sent] == [(0, 2), (3, 7), (8, 8)]
    assert log.next_offset == 9 and log.messages_count == 9
    returned, stored = read_all(log)
    assert returned == 9
    assert heads(stored) == [(0, EPOCH, 3), (3, EPOCH, 5), (8, EPOCH, 1)]
    assert without_rewritten(stored) == without_rewritten(b"".join(sent))
    assert len(stored) == sum(len(raw) for raw in sent)
    if AVAILABLE[codec]:
        assert read_back(stored) == expected(0, 9)
    else:
        assert struct.unpack_from(">h", stored, 21)[0] & 7 == CODECS[codec]


def test_several_batches_in_one_produce_get_consecutive_offsets(kafka_log,
                                                                partition_dir: Path) -> None:
    log = kafka_log()
    produce(log, build(2))
    raw = build(4, first=2) + build(3, first=6, codec="gzip")
    assert produce(log, raw) == (2, 8)
    returned, stored = read_all(log)
    assert heads(stored) == [(0, EPOCH, 2), (2, EPOCH, 4), (6, EPOCH, 3)]
    assert read_back(stored) == expected(0, 9)
    positions = [entry[1] for entry in index_entries(partition_dir / "00000000000000000000.index")]
    assert [entry[0] for entry in index_entries(
        partition_dir / "00000000000000000000.index")] == [0, 2, 6]
    first_length = len(build(2))
    assert positions == [0, first_length, first_length + len(build(4, first=2))]


def test_a_read_only_buffer_is_stamped_in_a_copy_a_writable_one_in_place() -> None:
    raw = build(2)
    stamped = kafka_v2.stamp_batches(raw, 40, 5, 100, 30, 9)
    assert raw == build(2)  # bytes: left alone
    assert heads(bytes(stamped.records)) == [(40, 9, 2)]
    handed_over = bytearray(raw)
    in_place = kafka_v2.stamp_batches(memoryview(handed_over), 40, 5, 100, 30, 9)
    assert in_place.records.obj is handed_over  # no copy: the request's own buffer
    assert bytes(handed_over) == bytes(stamped.records)
    assert heads(bytes(stamped.records)) == [(40, 9, 2)]
    assert ENTRY.unpack(stamped.index_entries) == (10, 100, 5, 9, 0)
    assert (stamped.count, stamped.first_offset, stamped.last_offset) == (2, 40, 41)


def test_a_read_inside_a_batch_returns_whole_batches(kafka_log) -> None:
    log = kafka_log()
    for first, count in ((0, 3), (3, 1), (4, 5), (9, 2)):
        produce(log, build(count, first=first))
    returned, stored = read_all(log, 6, 1)
    assert [head[0] for head in heads(stored)] == [4] and returned == 3
    returned, stored = read_all(log, 1, 3)
    assert [head[0] for head in heads(stored)] == [0, 3] and returned == 3
    assert [item[0] for item in read_back(stored)] == [0, 1, 2, 3]  # the client drops 0
    returned, chunks = log.read(1, 100, max_bytes=1)
    assert heads(b"".join(chunks)) == [(0, EPOCH, 3)]  # at least one whole batch


def test_producer_ids_and_sequences_are_kept(kafka_log) -> None:
    log = kafka_log()
    produce(log, build(2, producer=(77, 1, 0)))
    _, stored = read_all(log)
    batch = MemoryRecords(stored).next_batch()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 1, 0)


# ---------------------------------------------------------------------- timestamps
def test_the_index_holds_the_running_maximum_of_the_batches_timestamps(
    kafka_log, partition_dir: Path
) -> None:
    log = kafka_log()
    for base in (1_000_000, 2_000_000, 1_500_000, 3_000_000):  # a producer clock goes back
        produce(log, build(2, base_ms=base))  # maxTimestamp = base + 1
    index = partition_dir / "00000000000000000000.index"
    assert [entry[2] for entry in index_entries(index)] == [
        1_000_001_000, 2_000_001_000, 2_000_001_000, 3_000_001_000]
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1_000_001_000) == 0
    assert log.offset_for_timestamp(1_500_000_000) == 2  # first batch whose max is >= it
    assert log.offset_for_timestamp(2_500_000_000) == 6
    assert log.offset_for_timestamp(3_000_001_001) is None
    entries = index.read_bytes()
    log.close()
    index.unlink()
    rebuilt = kafka_log(clean_shutdown=False)
    assert index.read_bytes() == entries  # scan rebuilds the same running maximum
    assert rebuilt.offset_for_timestamp(1_500_000_000) == 2


def test_batch_time_us_is_the_largest_max_timestamp() -> None:
    raw = build(2, base_ms=5_000) + build(1, base_ms=4_000)
    assert batch_time_us(raw) == 5_001_000
    assert batch_time_us(b"") == 0 and batch_time_us(b"\x00" * 10) == 0
    no_time = bytearray(build(1))
    struct.pack_into(">q", no_time, 35, -1)
    assert batch_time_us(no_time) == 0


# ---------------------------------------------------------------------- recovery
SEGMENT = 700  # a few 3-record batches a segment


def fill(log: PartitionLog, batches: int, size: int = 3) -> None:
    for number in range(batches):
        produce(log, build(size, base_ms=1_000_000 + 1_000 * number, first=number * size))


def test_rollover_and_reopens_keep_every_batch(kafka_log, partition_dir: Path, caplog) -> None:
    log = kafka_log(segment_size=SEGMENT)
    fill(log, 12)
    assert log.segments_count >= 3
    assert all(isinstance(segment, BatchSegment) for segment in log.segments)
    before = read_all(log)
    assert read_back(before[1]) == [
        item for number in range(12) for item in expected(3 * number, 3, 1_000_000 + 1_000 * number,
                                                          3 * number)]
    files = {path.name: path.read_bytes() for path in partition_dir.iterdir()}
    starts = [segment.start_offset for segment in log.segments]
    log.close()
    for clean in (True, False):
        caplog.clear()
        reopened = kafka_log(segment_size=SEGMENT, clean_shutdown=clean)
        assert [r.message for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert [segment.start_offset for segment in reopened.segments] == starts
        assert {path.name: path.read_bytes() for path in partition_dir.iterdir()} == files
        assert read_all(reopened) == before
        assert reopened.offset_for_timestamp(1_005_000_000) == 15
        reopened.close()
    for index in partition_dir.glob("*.index"):
        index.unlink()
    rebuilt = kafka_log(segment_size=SEGMENT)
    assert {path.name: path.read_bytes() for path in partition_dir.iterdir()} == files
    assert read_all(rebuilt) == before
    assert produce(rebuilt, build(2, base_ms=9_000_000)) == (36, 37)


def test_a_torn_last_batch_is_cut_after_an_unclean_stop(kafka_log, partition_dir: Path) -> None:
    log = kafka_log()
    fill(log, 2)
    log.close()
    log_path = partition_dir / "00000000000000000000.log"
    index_path = partition_dir / "00000000000000000000.index"
    whole, entries = log_path.read_bytes(), index_path.read_bytes()
    torn = bytearray(build(4, first=6))
    struct.pack_into(">q4xi", torn, 0, 6, EPOCH)
    log_path.write_bytes(whole + bytes(torn[: len(torn) - 7]))
    index_path.write_bytes(entries + ENTRY.pack(6, len(whole), 1_000_003_000, EPOCH, 0))
    recovered = kafka_log(clean_shutdown=False)
    assert recovered.next_offset == 6 and log_path.read_bytes() == whole
    assert index_path.read_bytes() == entries
    assert produce(recovered, build(4, base_ms=2_000_000, first=6)) == (6, 9)
    assert [head[0] for head in heads(read_all(recovered)[1])] == [0, 3, 6]


def test_a_corrupt_batch_is_refused_whole_and_the_others_are_served(
    kafka_log, partition_dir: Path
) -> None:
    log = kafka_log()
    fill(log, 3)  # offsets 0-2, 3-5, 6-8
    first_length = len(build(3))
    log.close()
    log_path = partition_dir / "00000000000000000000.log"
    data = bytearray(log_path.read_bytes())
    data[first_length + 70] ^= 0xFF  # inside the second batch's CRC range
    log_path.write_bytes(bytes(data))
    reopened = kafka_log()  # clean: opened unverified, checked when read
    with pytest.raises(CannotReadMessage, match="offset 3"):
        reopened.read(4, 1)
    returned, stored = read_all(reopened, 1, 10)
    assert [head[0] for head in heads(stored)] == [0] and returned == 2
    assert [head[0] for head in heads(read_all(reopened, 6, 10)[1])] == [6]
    assert reopened.segments[0].verification.bad.keys() == {3, 4, 5}


def test_the_background_verifier_checks_batches(kafka_log, partition_dir: Path) -> None:
    log = kafka_log(segment_size=SEGMENT)
    fill(log, 8)
    log.close()
    first_log = partition_dir / "00000000000000000000.log"
    data = bytearray(first_log.read_bytes())
    data[len(build(3)) + 70] ^= 0xFF  # offsets 3-5
    first_log.write_bytes(bytes(data))
    reopened = kafka_log(segment_size=SEGMENT)
    asyncio.run(verify_in_background(lambda: [reopened], chunk_bytes=1))
    first = reopened.segments[0]
    assert first.verification.bad.keys() == {3, 4, 5}
    assert first.verification.intervals[0] == (0, 3)


# ---------------------------------------------------------------------- refused input
def corrupted(raw: bytes, at: int, value: bytes) -> bytes:
    changed = bytearray(raw)
    changed[at : at + len(value)] = value
    return bytes(changed)


GOOD = build(3)
REFUSED = {
    "empty": (b"", True, "no record batch"),
    "short header": (GOOD[:40], True, "less than a 61-byte batch header"),
    "wrong magic": (corrupted(GOOD, 16, b"\x01"), False, "magic 1"),
    "bad crc": (corrupted(GOOD, 17, b"\x00\x00\x00\x00"), True, "CRC-32C mismatch"),
    "flipped record byte": (corrupted(GOOD, 70, bytes([GOOD[70] ^ 1])), True, "CRC-32C"),
    "length overruns": (corrupted(GOOD, 8, struct.pack(">i", len(GOOD))), True,
                        "does not fit"),
    "length too small": (corrupted(GOOD, 8, struct.pack(">i", 10)), True, "does not fit"),
    "trailing garbage": (GOOD + b"\x00" * 5, True, "batch 1 at byte"),
    "second batch torn": (GOOD + GOOD[:-1], True, "batch 1"),
    "zero records": (resign(corrupted(GOOD, 57, struct.pack(">i", 0))), False,
                     "recordsCount 0"),
    "last offset delta": (resign(corrupted(GOOD, 23, struct.pack(">i", 5))), False,
                          "lastOffsetDelta 5"),
    "unknown codec": (with_attributes(GOOD, 5), False, "unknown compression codec 5"),
    "control batch": (with_attributes(GOOD, 0x20), False, "control batch"),
    "producer without sequence": (resign(corrupted(GOOD, 43, struct.pack(">q", 7))), False,
                                  "without a base sequence"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_bad_input_is_refused_with_nothing_written(kafka_log, partition_dir: Path,
                                                   name: str) -> None:
    raw, corrupt, reason = REFUSED[name]
    log = kafka_log()
    produce(log, build(2))
    before = {path.name: path.read_bytes() for path in partition_dir.iterdir()}
    with pytest.raises(InvalidRecordBatch, match=reason) as refused:
        log.append(raw, 1_000)
    assert refused.value.corrupt is corrupt and isinstance(refused.value, DecodeError)
    assert {path.name: path.read_bytes() for path in partition_dir.iterdir()} == before
    assert log.next_offset == 2
    assert produce(log, build(1, first=2)) == (2, 2)


def test_log_append_time_batches_are_accepted_as_sent(kafka_log) -> None:
    log = kafka_log()
    raw = with_attributes(build(2), 0x08)
    assert produce(log, raw) == (0, 1)
    assert without_rewritten(read_all(log)[1]) == without_rewritten(raw)


def test_staged_appends_are_not_available(kafka_log) -> None:
    log = kafka_log()
    with pytest.raises(FeatureUnavailable, match="staged"):
        log.append_stamped(bytearray(GOOD), array("I", [0]), 1)
    with pytest.raises(FeatureUnavailable):
        KAFKA_V2.check_stored(GOOD, b"")
    assert log.next_offset == 0


# ---------------------------------------------------------------------- leader epochs, followers
def test_epoch_end_across_appends_at_several_leader_epochs(kafka_log, partition_dir: Path
                                                           ) -> None:
    log = kafka_log(segment_size=SEGMENT, epoch=0)
    for number, epoch in enumerate([1, 1, 1, 4, 4, 4, 4, 9]):  # 3 offsets a batch
        log.leader_epoch = epoch
        produce(log, build(3, base_ms=1_000_000 + number, first=3 * number))
    assert log.segments_count >= 2 and log.last_epoch == 9
    answers = {0: None, 1: (1, 9), 3: (1, 9), 4: (4, 21), 8: (4, 21), 9: (9, 24), 10: (9, 24)}
    assert {epoch: log.epoch_end(epoch) for epoch in answers} == answers
    assert [head[1] for head in heads(read_all(log)[1])] == [1, 1, 1, 4, 4, 4, 4, 9]
    log.close()
    for index in partition_dir.glob("*.index"):
        index.unlink()
    rebuilt = kafka_log(segment_size=SEGMENT, epoch=0, clean_shutdown=False)
    assert {epoch: rebuilt.epoch_end(epoch) for epoch in answers} == answers


def test_an_append_off_the_event_loop_stamps_the_same(kafka_log) -> None:
    log = kafka_log(append_threads="always", append_thread_min_size=1, epoch=6)
    raw = build(4)
    assert asyncio.run(log.append_async(raw, batch_time_us(raw))) == (0, 3)
    assert heads(read_all(log)[1]) == [(0, 6, 4)]


def test_a_follower_ends_byte_identical(tmp_path: Path) -> None:
    settings = LogSettings(segment_size=SEGMENT, record_format="kafka-v2")
    durability = Durability(FsyncPolicy.NEVER)
    leader = PartitionLog.open(tmp_path / "leader", settings, durability, True)
    follower = PartitionLog.open(tmp_path / "follower", settings, durability, True)
    try:
        for number, epoch in enumerate([2, 2, 5, 5, 5, 7, 7, 7, 7]):
            leader.leader_epoch = epoch
            produce(leader, build(3, base_ms=1_000_000 - 10 * (number % 2), first=3 * number))
        offset = 0
        while offset < leader.next_offset - 3:  # all but the last batch, a few at a time
            _, shipped = read_all(leader, offset, 4)
            first = struct.unpack_from(">q", shipped, 0)[0]
            offset = follower.append_replicated(shipped, first)[1] + 1
        _, last = read_all(leader, offset, 1)
        bad = bytearray(last)
        bad[70] ^= 1
        with pytest.raises(DecodeError, match="CRC-32C"):
            follower.append_replicated(bytes(bad), offset)
        assert follower.append_replicated(last, offset) == (24, 26)
        for name in sorted(path.name for path in (tmp_path / "leader").iterdir()):
            assert (tmp_path / "follower" / name).read_bytes() == (
                tmp_path / "leader" / name).read_bytes(), name
        assert follower.epoch_end(5) == leader.epoch_end(5) == (5, 15)
    finally:
        leader.close()
        follower.close()


def test_a_follower_refuses_batches_that_do_not_carry_its_next_offset(tmp_path: Path) -> None:
    settings = LogSettings(record_format="kafka-v2")
    durability = Durability(FsyncPolicy.NEVER)
    leader = PartitionLog.open(tmp_path / "leader", settings, durability, True)
    follower = PartitionLog.open(tmp_path / "follower", settings, durability, True)
    try:
        produce(leader, build(2))
        produce(leader, build(3, first=2))
        _, first = read_all(leader, 0, 1)
        _, second = read_all(leader, 2, 1)
        with pytest.raises(DecodeError, match="carries offset 2, not 0"):
            follower.append_replicated(second, 0)
        assert follower.next_offset == 0
        assert follower.append_replicated(first + second, 0) == (0, 4)
    finally:
        leader.close()
        follower.close()


def test_a_stored_batch_holds_last_offset_delta_plus_one_offsets(tmp_path: Path) -> None:
    """A compacted batch (fewer records than offsets) from a leader keeps its offset range."""
    log = PartitionLog.open(tmp_path / "follower", LogSettings(record_format="kafka-v2"),
                            Durability(FsyncPolicy.NEVER), True)
    try:
        compacted = resign(corrupted(build(3), 23, struct.pack(">i", 4)))  # offsets 0..4
        assert log.append_replicated(compacted, 0) == (0, 4)
        assert log.next_offset == 5
    finally:
        log.close()


def test_an_append_with_gaps_holds_last_offset_delta_plus_one_offsets(kafka_log) -> None:
    """A server-built batch whose offsets skip (TANK's explicit numbers) is stored only when the
    caller says so; a client's (Kafka's LogValidator rule) must be dense; and no batch may
    claim fewer offsets than records."""
    log = kafka_log()
    skipping = resign(corrupted(build(3), 23, struct.pack(">i", 4)))  # 3 records, offsets 0..4
    with pytest.raises(InvalidRecordBatch, match="lastOffsetDelta 4"):
        log.append(skipping, 1_000)
    assert log.append(skipping, 1_000, gaps=True) == (0, 4)
    assert produce(log, build(1)) == (5, 5)
    stored = read_all(log)[1]
    assert [head[0] for head in kafka_v2.producer_batches(stored)] == [0, 5]
    too_few = resign(corrupted(build(3), 23, struct.pack(">i", 1)))
    with pytest.raises(InvalidRecordBatch, match="lastOffsetDelta 1"):
        log.append(too_few, 1_000, gaps=True)
    assert log.next_offset == 6


# ---------------------------------------------------------------------- the format's functions
def stamped(*counts: int, epoch: int = EPOCH) -> tuple[bytes, bytes]:
    raw = b"".join(build(count) for count in counts)
    result = kafka_v2.stamp_batches(raw, 10, 5_000, 0, 10, epoch)
    return bytes(result.records), bytes(result.index_entries)


def test_verify_checks_batches_against_their_entries() -> None:
    data, entries = stamped(2, 3)
    assert kafka_v2.verify_batches(data, entries, 10, 0, 0) == (5, 0, None)
    second = ENTRY.size
    second = ENTRY.size
    cases = (  # (field of the second entry, change, offsets verified, reason)
        (0, 1, 0, "holds 2 offsets, the index's next entry disagrees"),
        (1, 5, 0, "ends at"),
        (3, 1, 2, "leader epoch 3, its index says 4"),
    )
    for field, change, good, reason in cases:
        changed = list(ENTRY.unpack_from(entries, second))
        changed[field] += change
        bad = entries[:second] + ENTRY.pack(*changed)
        verified, kind, text = kafka_v2.verify_batches(data, bad, 10, 0, 0)
        assert (verified, kind) == (good, 2) and reason in text
    first = list(ENTRY.unpack_from(entries, 0))
    first[0] += 1  # the first entry is not offset 10's
    assert kafka_v2.verify_batches(data, ENTRY.pack(*first) + entries[second:], 10, 0,
                                        0)[:2] == (0, 2)
    flipped = bytearray(data)
    flipped[70] ^= 1
    assert kafka_v2.verify_batches(flipped, entries, 10, 0, 0)[:2] == (0, 1)  # content


def test_scan_stops_at_a_batch_overrunning_the_data_even_without_checksums() -> None:
    data, entries = stamped(2, 3)
    torn = data[:-5]
    found = kafka_v2.scan_batches(torn, 0, 10, 10, 0, verify_checksums=False)
    assert (found.count, found.stop_kind) == (2, 2) and "overruns" in found.stop_reason
    assert ENTRY.unpack(found.index_entries) == (0, 0, 1_700_000_000_001_000, EPOCH, 0)
    found = kafka_v2.scan_batches(data, 0, 10, 10, 0)
    assert (found.count, found.end_position, found.stop_kind) == (5, len(data), 0)
    assert bytes(found.index_entries) == bytes(
        ENTRY.pack(*ENTRY.unpack_from(entries, 0)[:2], 1_700_000_000_001_000, EPOCH, 0)
        + ENTRY.pack(*ENTRY.unpack_from(entries, ENTRY.size)[:2], 1_700_000_000_002_000,
                     EPOCH, 0))


def test_heads_and_ends_of_stored_batches() -> None:
    data, _ = stamped(2)
    assert kafka_v2.batch_head(data, 0) == (10, 2, 1_700_000_000_001_000)
    assert kafka_v2.batch_end(data, 0) == len(data)
    assert kafka_v2.batch_end(data[:-1], 0) is None
    assert kafka_v2.batch_end(data[:11], 0) is None
    no_time = bytearray(data)
    struct.pack_into(">q", no_time, 35, -1)  # maxTimestamp -1: no timestamp
    assert kafka_v2.batch_head(no_time, 0)[2] == 0
    assert kafka_v2.entry_epoch(ENTRY.pack(1, 2, 3, 77, 0), 0) == 77
