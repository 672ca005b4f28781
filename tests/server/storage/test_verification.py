"""Verification state (verified intervals, bad records) and the background verifier."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from storage_helpers import read_messages, region

from rill.errors import CannotReadMessage
from rill.server.storage.paths import DataPaths
from rill.server.storage.verification import SegmentVerification, verify_in_background

SECOND = 1_000_000
RECORD = 45 + len(b"message-000")


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=25),
       st.integers(0, 70), st.integers(0, 30))
def test_intervals_behave_like_a_set_of_offsets(ranges: list, start: int, length: int) -> None:
    verification = SegmentVerification(Path("x.log"))
    model: set[int] = set()
    for first, size in ranges:
        verification.add_verified(first, first + size)
        model.update(range(first, first + size))
    intervals = verification.intervals
    assert intervals == sorted(intervals)
    assert all(end < following for (_, end), (following, _) in zip(intervals, intervals[1:]))
    assert {o for first, end in intervals for o in range(first, end)} == model
    gaps = verification.gaps(start, start + length)
    assert {o for first, end in gaps for o in range(first, end)} == set(
        range(start, start + length)) - model
    assert verification.is_verified(start, start + length) == (
        set(range(start, start + length)) <= model)


def test_bad_records_are_logged_once_and_never_verified(caplog: pytest.LogCaptureFixture) -> None:
    verification = SegmentVerification(Path("00000000000000000010.log"))
    with caplog.at_level(logging.ERROR):
        verification.mark_bad(12, 13, "checksum 1 where 2 is stored")
        verification.mark_bad(12, 13, "checksum 1 where 2 is stored")
        verification.reset(10, 20, {12: "checksum 1 where 2 is stored", 15: "gone",
                                    16: "gone"})
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2 and "offset 12" in lines[0] and "offsets 15..16" in lines[1]
    assert verification.intervals == [(10, 12), (13, 15), (17, 20)]
    assert verification.first_bad(10, 20) == 12 and verification.first_bad(13, 20) == 15
    assert verification.first_bad(17, 20) == 20
    error = verification.error(15)
    assert isinstance(error, CannotReadMessage) and "offset 15" in error.reason


def fill(log, count: int) -> None:  # type: ignore[no-untyped-def]
    for number in range(count):
        log.append(region(b"message-%03d" % number), (number + 1) * SECOND)


def test_the_background_verifier_checks_everything_off_the_event_loop(
    open_log, partition_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(segment_size=10 * RECORD)
    fill(log, 45)  # segments [0-9] [10-19] [20-29] [30-39] and the tail [40-44]
    log.close()
    payload = DataPaths.segment_log(partition_dir, 10)
    data = bytearray(payload.read_bytes())
    data[3 * RECORD + 46] ^= 0x08  # offset 13's payload
    payload.write_bytes(bytes(data))
    index = DataPaths.segment_index(partition_dir, 20)
    original_index = index.read_bytes()
    data = bytearray(original_index)
    data[5 * 16 + 4] ^= 0x40  # offset 25's index position
    index.write_bytes(bytes(data))
    log = open_log(segment_size=10 * RECORD, clean_shutdown=False)
    assert not log.segments[1].verification.intervals  # sealed: not verified at start

    async def run() -> int:
        ticks = 0
        verifier = asyncio.create_task(
            verify_in_background(lambda: [log], chunk_bytes=3 * RECORD))
        while not verifier.done():
            ticks += 1
            await asyncio.sleep(0)
        await verifier
        return ticks

    with caplog.at_level(logging.WARNING, logger="rill.server.storage"):
        ticks = asyncio.run(run())
    assert ticks > 10  # the event loop ran between the chunks
    for segment in log.segments:  # everything verified but what is bad
        bad = set(segment.verification.bad)
        unverified = {o for first, end in segment.verification.gaps(
            segment.start_offset, segment.next_offset) for o in range(first, end)}
        assert unverified == bad
    assert set(log.segments[1].verification.bad) == {13}
    assert index.read_bytes() == original_index  # rebuilt from the log
    messages = [record.getMessage() for record in caplog.records]
    assert any("offset 13" in line and payload.name in line for line in messages)
    assert any("rebuilt" in line and index.name[:20] in line for line in messages)
    assert [m.offset for m in read_messages(log, 10, 3)] == [10, 11, 12]
    with pytest.raises(CannotReadMessage):
        log.read(13, 1)
    assert [m.offset for m in read_messages(log, 14, 100)] == list(range(14, 45))


def test_the_background_verifier_skips_segments_retention_deleted(
    open_log, partition_dir: Path
) -> None:
    log = open_log(segment_size=10 * RECORD)
    fill(log, 30)
    log.close()
    log = open_log(segment_size=10 * RECORD, clean_shutdown=False)

    async def run() -> None:
        verifier = asyncio.create_task(verify_in_background(lambda: [log], chunk_bytes=RECORD))
        await asyncio.sleep(0)
        log.delete_oldest_segment()  # while the verifier may be on it
        await verifier

    asyncio.run(run())
    assert log.first_offset == 10
    assert all(segment.verification.is_verified(segment.start_offset, segment.next_offset)
               for segment in log.segments if segment.messages_count)
