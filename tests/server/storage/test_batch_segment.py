"""BatchSegment's zero-copy reads: ``PartitionLog.read(..., regions=True)`` on a kafka-v2 log
answers large ranges of verified whole batches as file regions (sent with sendfile), the same
batches and count ``read`` gives, and everything else (small, unverified or bad ranges) as
bytes, so a region never holds a byte no check has passed. Its one-lookup read
(``read_within``, a tailing reader's ``PartitionLog.read`` with a byte budget) gives what
``end_within`` and ``read`` give, and passes unverified or bad batches to them. The other
batch-index rules are in formats/test_kafka_v2.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.errors import CannotReadMessage

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


def careful(segment, first: int, end: int, max_bytes: int) -> tuple[int, bytes]:
    """``LogReads.read``'s way without the one-lookup read: ``end_within``, then ``read``."""
    fitting = segment.end_within(first, end, max_bytes)
    if fitting == first:
        fitting += 1
    return segment.read(first, fitting)


def test_read_within_gives_the_batches_end_within_and_read_give(open_log) -> None:
    log = filled(open_log)
    segment = log.segments[-1]
    total = BATCHES * PER_BATCH
    batch_bytes = segment.size_bytes // BATCHES
    for first in (0, 1, PER_BATCH - 1, PER_BATCH, PER_BATCH * 7 + 3, total - 1):
        for end in {first + 1, min(first + PER_BATCH, total), min(first + PER_BATCH * 5 + 2, total),
                    total}:
            for max_bytes in (1, batch_bytes - 1, batch_bytes, batch_bytes * 3 + 5, 1 << 30):
                found = segment.read_within(first, end, max_bytes)
                assert found == careful(segment, first, end, max_bytes), (first, end,
                                                                          max_bytes)
                assert log.read(first, end - first, max_bytes) == (found[0], [found[1]])
    assert segment.read_within(0, total, 0) is None  # no budget: the careful path's answer


def test_read_within_passes_unverified_and_bad_batches_to_the_careful_path(
        open_log, partition_dir: Path) -> None:
    log = filled(open_log)
    stored = plain(log, 0, BATCHES * PER_BATCH)[1]
    log.close()
    log_file = next(partition_dir.glob("*.log"))
    data = bytearray(log_file.read_bytes())
    batch_size = len(data) // BATCHES
    bad_batch = BATCHES // 2
    data[bad_batch * batch_size + 200] ^= 0xFF
    log_file.write_bytes(bytes(data))
    reopened = open_log(record_format="kafka-v2")  # opened unverified, checked on read
    segment = reopened.segments[0]
    total = BATCHES * PER_BATCH
    assert segment.read_within(0, total, 1 << 30) is None  # nothing verified yet
    assert reopened.read(0, total, 1 << 30) == (bad_batch * PER_BATCH,
                                                [stored[: bad_batch * batch_size]])
    # checked now: the good batches before the bad one are read in one lookup ...
    assert segment.read_within(0, PER_BATCH * 2, 1 << 30) == (PER_BATCH * 2,
                                                              stored[: batch_size * 2])
    # ... but never a range holding the bad one, nor the bad one itself
    bad_first = bad_batch * PER_BATCH
    assert segment.read_within(0, total, 1 << 30) is None
    assert segment.read_within(bad_first + 1, bad_first + 2, 1) is None
    for _ in range(2):
        assert reopened.read(0, total, 1 << 30) == (bad_first, [stored[:bad_first // PER_BATCH
                                                                       * batch_size]])
    with pytest.raises(CannotReadMessage):
        reopened.read(bad_first + 1, 1, 1 << 30)
