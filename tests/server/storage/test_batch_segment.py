"""BatchSegment's zero-copy reads: ``PartitionLog.read(..., regions=True)`` on a kafka-v2 log
answers large ranges of verified whole batches as file regions (sent with sendfile), the same
batches and count ``read`` gives, and everything else (small, unverified or bad ranges) as
bytes, so a region never holds a byte no check has passed. The other batch-index rules are in
formats/test_kafka_v2.py."""

from __future__ import annotations

import os
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.server.storage.file_region import MIN_REGION_BYTES, FileRegion
from rill.server.storage.formats.kafka_v2 import batch_time_us
from rill.server.storage.partition_log import PartitionLog

BATCHES = 30
PER_BATCH = 8  # records of 1000 bytes: ~8 KB a batch, ~240 KB in all


def batch(number: int) -> bytes:
    """One uncompressed RecordBatch v2 of PER_BATCH random 1000-byte values."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 30)
    for index in range(PER_BATCH):
        assert builder.append(index, 1_700_000_000_000 + number, None, os.urandom(1000),
                              []) is not None
    return bytes(builder.build())


def filled(open_log, **options) -> PartitionLog:
    log = open_log(record_format="kafka-v2", **options)
    for number in range(BATCHES):
        raw = batch(number)
        log.append(raw, batch_time_us(raw))
    return log


def materialized(chunks) -> bytes:
    return b"".join(chunk.read() if isinstance(chunk, FileRegion) else chunk for chunk in chunks)


def plain(log: PartitionLog, offset: int, count: int, max_bytes: int | None = None
          ) -> tuple[int, bytes]:
    returned, chunks = log.read(offset, count, max_bytes)
    assert not any(isinstance(chunk, FileRegion) for chunk in chunks)
    return returned, b"".join(chunks)


def test_verified_batches_are_a_region_with_the_bytes_and_count_a_read_gives(open_log) -> None:
    log = filled(open_log)
    total = BATCHES * PER_BATCH
    count, chunks = log.read(0, total, regions=True)
    assert count == total and [type(chunk) for chunk in chunks] == [FileRegion]
    assert len(chunks[0]) >= MIN_REGION_BYTES
    assert materialized(chunks) == plain(log, 0, total)[1]
    # from inside a batch to inside another: whole batches, as ``read`` gives them
    zero_copy = log.read(PER_BATCH * 3 + 5, PER_BATCH * 20, regions=True)
    assert isinstance(zero_copy[1][0], FileRegion)
    assert (zero_copy[0], materialized(zero_copy[1])) == plain(log, PER_BATCH * 3 + 5,
                                                               PER_BATCH * 20)
    # cut by max_bytes between batches, like a bytes read
    zero_copy = log.read(2, total, max_bytes=150_000, regions=True)
    assert isinstance(zero_copy[1][0], FileRegion)
    assert (zero_copy[0], materialized(zero_copy[1])) == plain(log, 2, total, 150_000)


def test_small_ranges_are_bytes(open_log) -> None:
    log = filled(open_log)
    count, chunks = log.read(PER_BATCH + 1, PER_BATCH, regions=True)  # two batches, ~16 KB
    assert count == PER_BATCH * 2 - 1
    assert chunks and all(isinstance(chunk, bytes) for chunk in chunks)
    assert log.segments[0].read_region(PER_BATCH + 1, PER_BATCH * 3) is None


def test_unverified_batches_are_read_and_checked_first(open_log) -> None:
    log = filled(open_log)
    log.close()
    reopened = open_log(record_format="kafka-v2")  # clean: opened unverified, checked on read
    total = BATCHES * PER_BATCH
    assert reopened.segments[0].read_region(0, total) is None
    first = reopened.read(0, total, regions=True)
    assert first[0] == total and [type(chunk) for chunk in first[1]] == [bytes]
    second = reopened.read(0, total, regions=True)  # checked now: sent from the file
    assert [type(chunk) for chunk in second[1]] == [FileRegion]
    assert second[0] == total and second[1][0].read() == first[1][0]


def test_a_corrupt_batch_is_never_in_a_region(open_log, partition_dir: Path) -> None:
    log = filled(open_log)
    stored = plain(log, 0, BATCHES * PER_BATCH)[1]
    log.close()
    log_file = next(partition_dir.glob("*.log"))
    data = bytearray(log_file.read_bytes())
    assert data == stored
    batch_size = len(data) // BATCHES
    bad_batch = BATCHES // 2
    data[bad_batch * batch_size + 200] ^= 0xFF  # a value byte of the middle batch
    log_file.write_bytes(bytes(data))
    reopened = open_log(record_format="kafka-v2")  # clean: opened unverified, checked on read
    for _ in range(3):  # the first read finds it, the later ones know it
        count, chunks = reopened.read(0, BATCHES * PER_BATCH, regions=True)
        served = materialized(chunks)
        assert count == bad_batch * PER_BATCH
        assert served == stored[: bad_batch * batch_size]
    segment = reopened.segments[0]
    assert segment.read_region(0, BATCHES * PER_BATCH) is None  # holds the bad batch
    assert segment.read_region(PER_BATCH * (bad_batch - 1), PER_BATCH * (bad_batch + 2)) is None
    # the good batches after it: read (checked) first, then a region
    after = (bad_batch + 1) * PER_BATCH
    checked = reopened.read(after, BATCHES * PER_BATCH, regions=True)
    again = reopened.read(after, BATCHES * PER_BATCH, regions=True)
    assert [type(chunk) for chunk in again[1]] == [FileRegion]
    assert materialized(again[1]) == materialized(checked[1]) == stored[(bad_batch + 1)
                                                                       * batch_size:]
