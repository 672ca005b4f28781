"""Zero-copy reads: ``PartitionLog.read(..., regions=True)`` answers large ranges of verified
records as file regions (sent with sendfile), and everything else as bytes, so a region never
holds a byte no check has passed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rill.server.storage.file_region import MIN_REGION_BYTES, FileRegion

from storage_helpers import region

PAYLOADS = [os.urandom(1000) for _ in range(300)]  # ~ 300 KB of records, above the minimum


def _materialized(chunks) -> bytes:
    return b"".join(chunk.read() if isinstance(chunk, FileRegion) else chunk for chunk in chunks)


def test_large_verified_ranges_are_regions_with_the_bytes_a_read_gives(open_log) -> None:
    log = open_log()
    log.append(region(*PAYLOADS), 1)
    count, chunks = log.read(0, 300, regions=True)
    assert count == 300 and [type(chunk) for chunk in chunks] == [FileRegion]
    assert len(chunks[0]) >= MIN_REGION_BYTES
    assert _materialized(chunks) == b"".join(log.read(0, 300)[1])
    # a range inside the log, cut by max_bytes like a bytes read
    plain = log.read(17, 250, max_bytes=200_000)
    zero_copy = log.read(17, 250, max_bytes=200_000, regions=True)
    assert zero_copy[0] == plain[0] and _materialized(zero_copy[1]) == b"".join(plain[1])


def test_small_ranges_are_bytes(open_log) -> None:
    log = open_log()
    log.append(region(*PAYLOADS), 1)
    count, chunks = log.read(0, 10, regions=True)
    assert count == 10 and all(isinstance(chunk, bytes) for chunk in chunks)


def test_unverified_records_are_read_and_checked_first(open_log, partition_dir: Path) -> None:
    log = open_log(segment_size=200_000)
    for payload in PAYLOADS:
        log.append(region(payload), 1)
    assert log.segments_count > 1
    log.close()
    reopened = open_log(segment_size=200_000, clean_shutdown=False)
    sealed = reopened.read(0, 300, regions=True)[1][0]  # not checked since the start
    assert isinstance(sealed, bytes) and len(sealed) >= MIN_REGION_BYTES
    checked = reopened.read(0, 300, regions=True)[1][0]  # checked now: sent from the file
    assert isinstance(checked, FileRegion) and checked.read() == sealed


def test_a_corrupt_record_is_never_in_a_region(open_log, partition_dir: Path) -> None:
    log = open_log()
    log.append(region(*PAYLOADS), 1)
    log.close()
    log_file = next(partition_dir.glob("*.log"))
    data = bytearray(log_file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a payload byte of a record in the middle
    log_file.write_bytes(bytes(data))
    reopened = open_log(clean_shutdown=False)
    for _ in range(2):  # the first read finds it, the second knows it
        count, chunks = reopened.read(0, 300, regions=True)
        served = _materialized(chunks)
        assert 0 < count < 300
        assert len(served) <= len(data) // 2 and served == bytes(data[: len(served)])


def test_a_region_stays_readable_after_its_segment_is_gone(open_log, partition_dir: Path) -> None:
    log = open_log()
    log.append(region(*PAYLOADS), 1)
    expected = b"".join(log.read(0, 300)[1])
    _, (found,) = log.read(0, 300, regions=True)
    log.close()
    shutil.rmtree(partition_dir)  # retention or a deleted topic took the files meanwhile
    assert found.read() == expected
    found.close()
    assert found.descriptor == -1
