"""PartitionLog: dense offsets, one write per batch, reads across segments, retention. The
tests taking ``make_log`` run on both implementations of the partition-log port (files and
the memory twin); the others are about files (directories, descriptors, fsyncs, restarts)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import read_messages, region, snapshot

from rill.errors import InvalidMessagesCount, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import HeaderValue
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.partition_log import LogSettings, PartitionLog

SECOND = 1_000_000


def test_a_new_log_is_empty_with_a_first_segment_at_zero(open_log, partition_dir: Path) -> None:
    log = open_log()
    assert log.is_empty
    assert (
        log.current_offset,
        log.next_offset,
        log.first_offset,
        log.messages_count,
        log.size_bytes,
    ) == (0, 0, 0, 0, 0)
    assert log.segments_count == 1
    assert sorted(path.name for path in partition_dir.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
    ]
    assert log.read(0, 10) == (0, [])


def test_offsets_are_dense_from_zero(make_log) -> None:
    log = make_log()
    assert log.append(region(b"a"), 1) == (0, 0)
    assert not log.is_empty and log.current_offset == 0
    assert log.append(region(b"b", b"c", b"d"), 2) == (1, 3)
    assert log.append(region(b"e"), 3) == (4, 4)
    assert (log.current_offset, log.next_offset, log.messages_count) == (4, 5, 5)
    messages = read_messages(log, 0, 100)
    assert [m.offset for m in messages] == [0, 1, 2, 3, 4]
    assert [m.payload for m in messages] == [b"a", b"b", b"c", b"d", b"e"]


def test_timestamps_never_decrease_even_if_the_clock_goes_back(make_log) -> None:
    log = make_log()
    log.append(region(b"a"), 5000)
    log.append(region(b"b"), 4000)
    log.append(region(b"c"), 6000)
    assert [m.timestamp for m in read_messages(log, 0, 3)] == [5000, 5000, 6000]
    assert log.last_timestamp == 6000


def test_reads_span_segment_boundaries(open_log, partition_dir: Path) -> None:
    log = open_log(segment_size=200)
    payloads = [b"payload-%03d" % number for number in range(40)]
    for first in range(0, 40, 3):
        log.append(region(*payloads[first : first + 3]), 1000 + first)
    assert log.segments_count > 5
    assert len(list(partition_dir.glob("*.log"))) == log.segments_count
    for offset in range(0, 40, 7):
        for count in (1, 2, 5, 13, 100):
            messages = read_messages(log, offset, count)
            assert [m.offset for m in messages] == list(range(offset, min(offset + count, 40)))
            assert [m.payload for m in messages] == payloads[offset : offset + count]
    returned, chunks = log.read(0, 40)
    assert returned == 40 and len(chunks) == log.segments_count - (
        1 if log.segments[-1].messages_count == 0 else 0
    )


def test_segments_roll_over_once_full(make_log) -> None:
    log = make_log(segment_size=100)
    log.append(region(b"x" * 60), 1)  # 105 bytes: full after this write
    assert log.segments_count == 2
    assert [s.start_offset for s in log.segments] == [0, 1]
    assert log.segments[0].sealed and not log.segments[1].sealed


def test_rejected_batches_leave_the_files_byte_identical(open_log, partition_dir: Path) -> None:
    log = open_log()
    log.append(region(b"kept", b"data"), 10)
    before = snapshot(partition_dir)
    good = encode_messages([b"fine"])
    for bad, error in (
        (b"", InvalidMessagesCount),
        (good + b"\x00" * 7, DecodeError),
        (good + bytes(16) + b"\x00" * 8, DecodeError),
        (encode_messages([b"a" * 6_000_000, b"b" * 5_000_000]), TooBigMessagePayload),
    ):
        with pytest.raises(error):
            log.append(memoryview(bad), 20)
    assert snapshot(partition_dir) == before
    assert log.next_offset == 2
    assert log.append(region(b"next"), 30) == (2, 2)


def test_offset_for_timestamp(make_log) -> None:
    log = make_log(segment_size=150)
    for number in range(10):
        log.append(region(b"m%d" % (2 * number), b"m%d" % (2 * number + 1)), (number + 1) * SECOND)
    assert log.segments_count > 2
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(SECOND) == 0
    assert log.offset_for_timestamp(SECOND + 1) == 2
    assert log.offset_for_timestamp(7 * SECOND) == 12
    assert log.offset_for_timestamp(10 * SECOND) == 18
    assert log.offset_for_timestamp(10 * SECOND + 1) is None


def test_reads_beyond_the_end_or_of_nothing_return_no_messages(make_log) -> None:
    log = make_log()
    log.append(region(b"a", b"b"), 1)
    assert log.read(2, 10) == (0, [])
    assert log.read(1000, 10) == (0, [])
    assert log.read(0, 0) == (0, [])
    assert [m.offset for m in read_messages(log, 1, 1000)] == [1]


def test_delete_expired_segments_keeps_the_active_one(make_log) -> None:
    log = make_log(segment_size=100)
    for number in range(4):
        log.append(region(b"x" * 60), (number + 1) * SECOND)  # one sealed segment per message
    assert log.segments_count == 5  # 4 sealed + the empty active one
    assert log.delete_expired_segments(now_us=2 * SECOND + 500_000, expiry_us=SECOND // 2) == 2
    assert log.first_offset == 2 and log.next_offset == 4
    assert [m.offset for m in read_messages(log, 0, 10)] == [
        2,
        3,
    ]  # below first_offset starts there
    assert log.delete_expired_segments(now_us=100 * SECOND, expiry_us=SECOND) == 2
    assert log.segments_count == 1 and log.messages_count == 0
    assert log.first_offset == log.next_offset == 4 and log.current_offset == 3 and not log.is_empty
    assert log.read(0, 10) == (0, [])
    assert log.append(region(b"y"), 200 * SECOND) == (4, 4)


def test_the_active_segment_is_never_deleted_even_when_expired(make_log) -> None:
    log = make_log()
    log.append(region(b"a"), SECOND)
    assert log.delete_expired_segments(now_us=1000 * SECOND, expiry_us=1) == 0
    assert log.delete_oldest_segment() is False
    assert log.messages_count == 1


def test_delete_oldest_segment(open_log, partition_dir: Path) -> None:
    log = open_log(segment_size=100)
    log.append(region(b"x" * 60), 1)
    log.append(region(b"y" * 60), 2)
    assert log.delete_oldest_segment() is True
    assert log.first_offset == 1
    assert not (partition_dir / "00000000000000000000.log").exists()
    assert [m.payload for m in read_messages(log, 0, 5)] == [b"y" * 60]


def test_purge_starts_fresh_at_zero(open_log, partition_dir: Path) -> None:
    log = open_log(segment_size=100)
    for number in range(3):
        log.append(region(b"x" * 60), number + 1)
    log.purge()
    assert log.is_empty and log.segments_count == 1 and log.next_offset == 0 and log.size_bytes == 0
    assert sorted(path.name for path in partition_dir.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
    ]
    assert log.append(region(b"new"), 5) == (0, 0)
    assert [m.payload for m in read_messages(log, 0, 5)] == [b"new"]


def test_close_and_reopen_keeps_everything(make_log) -> None:
    log = make_log(segment_size=200)
    for number in range(12):
        log.append(region(b"message-%d" % number), (number + 1) * SECOND)
    before = read_messages(log, 0, 100)
    log.close()
    reopened = make_log(segment_size=200)
    assert read_messages(reopened, 0, 100) == before
    assert (reopened.next_offset, reopened.last_timestamp) == (12, 12 * SECOND)
    assert reopened.append(region(b"later"), 1) == (
        12,
        12,
    )  # the clock went back across the restart
    assert read_messages(reopened, 12, 1)[0].timestamp == 12 * SECOND


def test_size_bytes_is_the_sum_of_log_files(open_log, partition_dir: Path) -> None:
    log = open_log(segment_size=150)
    for number in range(7):
        log.append(region(b"z" * (number + 1)), 1)
    assert log.size_bytes == sum(path.stat().st_size for path in partition_dir.glob("*.log"))


def test_sealed_segments_hold_no_descriptor_until_read(open_log) -> None:
    log = open_log(segment_size=50)
    for number in range(8):
        log.append(region(b"message %d" % number), 1)
    assert not any(segment.has_open_reader for segment in log.segments)
    read_messages(log, 0, 8)
    assert all(segment.has_open_reader for segment in log.segments if segment.sealed)


@pytest.mark.parametrize("policy", list(FsyncPolicy))
def test_many_logs_share_a_small_descriptor_budget(
    tmp_path: Path, descriptor_budget, policy: FsyncPolicy
) -> None:
    """30 logs (60 active files, and sealed ones) with 6 descriptors: every append and read
    reopens what it needs, and every byte is where it belongs, before and after a restart."""
    cache = descriptor_budget(6)
    settings = LogSettings(segment_size=200)
    durability = Durability(policy)
    directories = [tmp_path / f"p{number}" for number in range(30)]

    async def scenario() -> None:
        logs = [PartitionLog.open(directory, settings, durability, clean_shutdown=True)
                for directory in directories]
        for round_number in range(6):
            for number, log in enumerate(logs):
                log.append(region(b"log %d round %d" % (number, round_number)), round_number)
                await log.wait_durable()
                assert cache.open_count <= 6
        for number, log in enumerate(logs):
            assert [m.payload for m in read_messages(log, 0, 10)] == [
                b"log %d round %d" % (number, r) for r in range(6)]
            assert log.segments_count > 1
        assert cache.open_count <= 6 and cache.evictions > 100
        for log in logs:
            log.close()
        await durability.stop()

    asyncio.run(scenario())
    for restart, clean_shutdown in enumerate((True, False)):
        logs = [PartitionLog.open(directory, settings, durability, clean_shutdown=clean_shutdown)
                for directory in directories]
        for number, log in enumerate(logs):
            log.append(region(b"restart %d" % restart), 10)
            assert [m.payload for m in read_messages(log, 0, 10)] == [
                b"log %d round %d" % (number, r) for r in range(6)
            ] + [b"restart %d" % r for r in range(restart + 1)]
            log.close()
    assert cache.open_count == 0


def test_destroy_removes_the_directory(open_log, partition_dir: Path) -> None:
    log = open_log()
    log.append(region(b"a"), 1)
    log.destroy()
    assert not partition_dir.exists()


def test_concurrent_appends_share_fsync_rounds(partition_dir: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        await durability.start()
        log = PartitionLog.open(partition_dir, LogSettings(), durability, clean_shutdown=True)

        async def producer(number: int) -> None:
            log.append(region(b"message %d" % number), number)
            await log.wait_durable()

        await asyncio.gather(*(producer(number) for number in range(16)))
        assert durability.sync_rounds < 16
        assert not durability.is_dirty(log.segments[-1].log_file)
        log.close()
        await durability.stop()

    asyncio.run(scenario())


def test_append_throughput_under_interval_policy_is_measurable(partition_dir: Path) -> None:
    """Not a benchmark (see DESIGN habit 12): a smoke test that a 1000 x 1 KB batch goes through."""

    async def scenario() -> None:
        durability = Durability(FsyncPolicy.INTERVAL, interval_seconds=0.05)
        await durability.start()
        log = PartitionLog.open(
            partition_dir, LogSettings(segment_size=2_000_000), durability, clean_shutdown=True
        )
        batch = memoryview(encode_messages([os.urandom(1024) for _ in range(1000)]))
        for number in range(5):
            log.append(batch, number)
            await log.wait_durable()
        assert log.next_offset == 5000 and log.segments_count >= 3
        log.close()
        await durability.stop()

    asyncio.run(scenario())


message_strategy = st.builds(
    Message,
    payload=st.binary(min_size=1, max_size=300),
    id=st.one_of(st.just(0), st.integers(min_value=1, max_value=2**128 - 1)),
    headers=st.one_of(
        st.none(),
        st.dictionaries(
            st.text(min_size=1, max_size=8),
            st.binary(min_size=1, max_size=20).map(HeaderValue.raw),
            max_size=3,
        ),
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(st.lists(message_strategy, min_size=1, max_size=8), min_size=1, max_size=8))
def test_random_batches_read_back_identical(tmp_path_factory, batches: list[list[Message]]) -> None:
    directory = tmp_path_factory.mktemp("partition")
    durability = Durability(FsyncPolicy.NEVER)
    log = PartitionLog.open(
        directory, LogSettings(segment_size=700), durability, clean_shutdown=True
    )
    sent: list[Message] = []
    for number, batch in enumerate(batches):
        first, last = log.append(memoryview(encode_messages(batch)), number * SECOND)
        assert (first, last) == (len(sent), len(sent) + len(batch) - 1)
        sent.extend(batch)
    for reopen in (False, True):
        if reopen:
            log.close()
            log = PartitionLog.open(
                directory, LogSettings(segment_size=700), durability, clean_shutdown=False
            )
        polled = read_messages(log, 0, len(sent) + 5)
        assert [m.offset for m in polled] == list(range(len(sent)))
        assert [m.payload for m in polled] == [m.payload for m in sent]
        assert [m.headers for m in polled] == [m.headers or {} for m in sent]
        for original, stored in zip(sent, polled):
            if original.id:
                assert stored.id == original.id
            else:
                assert stored.id != 0
    log.close()


def test_sync_flushes_the_active_segment_whatever_the_policy(partition_dir: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.NEVER)
        log = PartitionLog.open(partition_dir, LogSettings(), durability, clean_shutdown=True)
        log.append(region(b"flush me"), 1)
        await log.sync()
        assert durability.fsync_calls == 1
        log.close()
        await log.sync()  # a closed log has nothing to flush
        await durability.stop()

    asyncio.run(scenario())


def test_a_read_is_cut_to_max_bytes_across_segments(make_log) -> None:
    """Each record is 45 + 100 bytes; segments roll over at 1,000 bytes (7 records each)."""
    log = make_log(segment_size=1000)
    for number in range(30):
        log.append(region(bytes([number]) * 100), 1_000 + number)
    assert log.segments_count > 3
    record = 145
    for max_bytes, expected in ((10 * record, 10), (10 * record + 144, 10), (record, 1),
                                (1, 1), (7 * record, 7), (8 * record, 8), (10**9, 30)):
        count, chunks = log.read(0, 2**32 - 1, max_bytes)
        assert count == expected, max_bytes
        assert sum(map(len, chunks)) == count * record <= max(max_bytes, record)
    count, chunks = log.read(5, 2**32 - 1, 3 * record)  # from inside a segment, across two
    assert count == 3 and b"".join(chunks)[45:145] == bytes([5]) * 100
    assert log.read(0, 4, 10**9)[0] == 4  # the count still bounds it


def test_one_record_larger_than_max_bytes_is_still_returned_alone(make_log) -> None:
    log = make_log()
    log.append(region(b"x" * 5000, b"small"), 1_000)
    count, chunks = log.read(0, 10, 1024)
    assert count == 1 and sum(map(len, chunks)) == 45 + 5000
