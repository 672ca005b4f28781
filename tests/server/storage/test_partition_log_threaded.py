"""PartitionLog.append_async: batches stamped and written in a worker thread, published on the
event loop. Same bytes as ``append``, one append in flight per log, reads see only published
batches, and every other mutation settles the append in flight first."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from storage_helpers import read_messages, snapshot

from rill.errors import CannotSaveMessagesToSegment, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage import partition_log as partition_log_module
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.partition_log import LogSettings, PartitionLog
from rill.server.storage.formats.iggy_v1 import MAX_PAYLOAD_BYTES
from rill.server.storage.segment import Segment

SECOND = 1_000_000


def batch(first_id: int, count: int = 3, size: int = 100) -> bytes:
    """Messages with non-zero ids, so that two logs given the same batches hold the same bytes."""
    return encode_messages(
        [Message(bytes([(first_id + n) % 256]) * size, id=first_id + n) for n in range(count)]
    )


@pytest.fixture(autouse=True)
def every_append_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition_log_module, "APPEND_THREAD_MODE", "always")
    monkeypatch.setattr(partition_log_module, "APPEND_THREAD_MIN_BYTES", 1)


class Gate:
    """Holds the worker's stamping and writing until ``open`` (to look at the log meanwhile)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.event = threading.Event()
        self.entered = threading.Event()
        original = partition_log_module._stamp_and_write

        def gated(*args):  # type: ignore[no-untyped-def]
            self.entered.set()
            assert self.event.wait(10), "the test never opened the gate"
            return original(*args)

        monkeypatch.setattr(partition_log_module, "_stamp_and_write", gated)

    def open(self) -> None:
        self.event.set()

    def open_later(self, seconds: float = 0.05) -> None:
        threading.Timer(seconds, self.event.set).start()

    async def wait_entered(self) -> None:
        while not self.entered.is_set():
            await asyncio.sleep(0.001)


def test_append_async_writes_the_same_bytes_as_append(tmp_path: Path) -> None:
    durability = Durability(FsyncPolicy.NEVER)
    settings = LogSettings(segment_size=2_000)
    inline = PartitionLog.open(tmp_path / "inline", settings, durability, clean_shutdown=True)
    threaded = PartitionLog.open(tmp_path / "threaded", settings, durability, clean_shutdown=True)

    async def scenario() -> None:
        for number in range(12):
            raw = batch(10 * number + 1, count=1 + number % 4)
            now = (100 + number // 3) * SECOND
            assert await threaded.append_async(raw, now) == inline.append(raw, now)

    asyncio.run(scenario())
    assert threaded.segments_count == inline.segments_count > 1  # rollovers happened
    assert snapshot(tmp_path / "threaded") == snapshot(tmp_path / "inline")
    assert [m.offset for m in read_messages(threaded, 0, 1000)] == list(range(threaded.next_offset))
    inline.close()
    threaded.close()


def test_worker_appends_to_many_logs_within_a_small_descriptor_budget(
    tmp_path: Path, descriptor_budget
) -> None:
    """Workers pin the files they write: with 4 descriptors for 12 logs, the event loop's
    reads and the other workers close what is not pinned, never a file being written."""
    cache = descriptor_budget(4)
    durability = Durability(FsyncPolicy.ALWAYS)
    settings = LogSettings(segment_size=3_000)
    logs = [PartitionLog.open(tmp_path / f"p{n}", settings, durability, clean_shutdown=True)
            for n in range(12)]

    async def producer(log: PartitionLog, number: int) -> None:
        for step in range(10):
            await log.append_async(batch(1000 * number + 10 * step + 1), (step + 1) * SECOND)
            await log.wait_durable()
            read_messages(log, 0, 1)  # a read on the loop meanwhile

    async def scenario() -> None:
        await asyncio.gather(*(producer(log, n) for n, log in enumerate(logs)))
        await durability.stop()

    asyncio.run(scenario())
    for number, log in enumerate(logs):
        messages = read_messages(log, 0, 1000)
        assert [m.id for m in messages] == [
            1000 * number + 10 * step + 1 + k for step in range(10) for k in range(3)]
        log.close()
    assert cache.open_count == 0 and cache.evictions > 0


def test_concurrent_appends_keep_offsets_dense_and_in_arrival_order(open_log) -> None:
    log = open_log(segment_size=5_000)

    async def scenario() -> list[tuple[int, int]]:
        return await asyncio.gather(
            *(log.append_async(batch(100 * n + 1, count=2), (50 - n) * SECOND) for n in range(20))
        )

    results = asyncio.run(scenario())
    assert results == [(2 * n, 2 * n + 1) for n in range(20)]
    messages = read_messages(log, 0, 100)
    assert [m.offset for m in messages] == list(range(40))
    assert [m.id for m in messages] == [100 * n + 1 + k for n in range(20) for k in range(2)]
    timestamps = [m.timestamp for m in messages]
    assert timestamps == sorted(timestamps)  # the clock went backwards; timestamps did not


def test_reads_see_only_published_batches(open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    log.append(batch(1), 1 * SECOND)
    gate = Gate(monkeypatch)

    async def scenario() -> None:
        appending = asyncio.ensure_future(log.append_async(batch(10), 2 * SECOND))
        await gate.wait_entered()
        assert (log.next_offset, log.messages_count) == (3, 3)
        assert len(read_messages(log, 0, 100)) == 3
        gate.open()
        assert await appending == (3, 5)
        assert [m.offset for m in read_messages(log, 0, 100)] == [0, 1, 2, 3, 4, 5]

    asyncio.run(scenario())


def test_a_rejected_batch_writes_nothing(open_log, partition_dir: Path) -> None:
    log = open_log()

    async def scenario() -> None:
        await log.append_async(batch(1), SECOND)
        before = snapshot(partition_dir)
        with pytest.raises(DecodeError):
            await log.append_async(batch(5) + b"\x00\x01", 2 * SECOND)
        with pytest.raises(TooBigMessagePayload):
            await log.append_async(
                encode_messages([Message(b"x" * MAX_PAYLOAD_BYTES, id=9), Message(b"y", id=10)]),
                3 * SECOND,
            )
        assert snapshot(partition_dir) == before
        assert await log.append_async(batch(20), 4 * SECOND) == (3, 5)

    asyncio.run(scenario())


def test_a_failed_write_leaves_the_log_as_it_was(
    open_log, partition_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()

    def failing_write(self, records, index_entries):  # type: ignore[no-untyped-def]
        raise CannotSaveMessagesToSegment(reason="disk on fire")

    async def scenario() -> None:
        await log.append_async(batch(1), SECOND)
        before = snapshot(partition_dir)
        with monkeypatch.context() as patch:
            patch.setattr(Segment, "write", failing_write)
            with pytest.raises(CannotSaveMessagesToSegment):
                await log.append_async(batch(5), 2 * SECOND)
        assert snapshot(partition_dir) == before and log.next_offset == 3
        assert await log.append_async(batch(9), 3 * SECOND) == (3, 5)

    asyncio.run(scenario())


def test_a_synchronous_append_settles_the_one_in_flight_first(
    open_log, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    gate = Gate(monkeypatch)

    async def scenario() -> None:
        appending = asyncio.ensure_future(log.append_async(batch(1), SECOND))
        await gate.wait_entered()
        gate.open_later()  # the synchronous append below blocks until the worker is done
        assert log.append(batch(10, count=1), 2 * SECOND) == (3, 3)
        assert await appending == (0, 2)
        assert [m.id for m in read_messages(log, 0, 10)] == [1, 2, 3, 10]

    asyncio.run(scenario())


def test_purge_settles_the_append_in_flight_then_empties_the_log(
    open_log, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    gate = Gate(monkeypatch)

    async def scenario() -> None:
        appending = asyncio.ensure_future(log.append_async(batch(1), SECOND))
        await gate.wait_entered()
        gate.open_later()
        log.purge()
        assert await appending == (0, 2)  # accepted, then purged
        assert log.is_empty and log.read(0, 10) == (0, [])
        assert await log.append_async(batch(7), 2 * SECOND) == (0, 2)

    asyncio.run(scenario())


def test_close_settles_the_append_in_flight_and_a_reopen_finds_it(
    partition_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    durability = Durability(FsyncPolicy.ALWAYS)
    settings = LogSettings(segment_size=1_000_000)
    log = PartitionLog.open(partition_dir, settings, durability, clean_shutdown=True)
    gate = Gate(monkeypatch)

    async def scenario() -> None:
        appending = asyncio.ensure_future(log.append_async(batch(1), SECOND))
        await gate.wait_entered()
        gate.open_later()
        log.close()
        assert await appending == (0, 2)

    asyncio.run(scenario())
    reopened = PartitionLog.open(partition_dir, settings, durability, clean_shutdown=False)
    assert [m.id for m in read_messages(reopened, 0, 10)] == [1, 2, 3]
    reopened.close()


def test_a_cancelled_append_is_still_published(open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    gate = Gate(monkeypatch)

    async def scenario() -> None:
        appending = asyncio.ensure_future(log.append_async(batch(1), SECOND))
        await gate.wait_entered()
        appending.cancel()
        gate.open()
        with pytest.raises(asyncio.CancelledError):
            await appending
        for _ in range(1000):  # the worker finishes on its own; its callback publishes
            if log.next_offset:
                break
            await asyncio.sleep(0.005)
        assert log.next_offset == 3
        assert await log.append_async(batch(4), 2 * SECOND) == (3, 5)

    asyncio.run(scenario())


def test_published_is_called_once_the_batch_is_readable_even_after_a_cancel(
        open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    """``published`` (what a SEND's deduplication remembers its ids with) runs when the
    records become readable, also when the coroutine that started the append was cancelled
    meanwhile, and never for an append that failed."""
    log = open_log()
    gate = Gate(monkeypatch)
    calls: list[int] = []

    async def scenario() -> None:
        appending = asyncio.ensure_future(
            log.append_async(batch(1), SECOND, published=lambda: calls.append(log.next_offset)))
        await gate.wait_entered()
        assert calls == []  # not before it is written and published
        appending.cancel()
        gate.open()
        with pytest.raises(asyncio.CancelledError):
            await appending
        for _ in range(1000):
            if calls:
                break
            await asyncio.sleep(0.005)
        assert calls == [3]  # called once, with the batch readable
        with pytest.raises(DecodeError):
            await log.append_async(batch(5) + b"\x00\x01", 2 * SECOND,
                                   published=lambda: calls.append(-1))
        assert await log.append_async(batch(8), 3 * SECOND,
                                      published=lambda: calls.append(log.next_offset)) == (3, 5)
        assert calls == [3, 6]

    asyncio.run(scenario())


def test_small_batches_stay_inline(open_log, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition_log_module, "APPEND_THREAD_MIN_BYTES", 10_000)
    log = open_log()
    submitted: list[object] = []
    original = partition_log_module._stamp_and_write
    monkeypatch.setattr(partition_log_module, "_stamp_and_write",
                        lambda *args: submitted.append(args) or original(*args))

    async def scenario() -> None:
        assert await log.append_async(batch(1, count=2, size=10), SECOND) == (0, 1)
        assert not submitted
        assert await log.append_async(batch(5, count=2, size=6_000), SECOND) == (2, 3)
        assert len(submitted) == 1

    asyncio.run(scenario())


def test_threaded_appends_roll_segments_and_survive_a_restart(partition_dir: Path) -> None:
    durability = Durability(FsyncPolicy.ALWAYS)
    settings = LogSettings(segment_size=3_000)
    log = PartitionLog.open(partition_dir, settings, durability, clean_shutdown=True)

    async def scenario() -> None:
        await asyncio.gather(*(log.append_async(batch(10 * n + 1, count=5), SECOND + n)
                               for n in range(30)))
        await log.wait_durable()

    asyncio.run(scenario())
    assert log.segments_count > 5 and log.next_offset == 150
    log.close()
    reopened = PartitionLog.open(partition_dir, settings, durability, clean_shutdown=False)
    assert [m.offset for m in read_messages(reopened, 0, 1000)] == list(range(150))
    reopened.close()


def test_auto_mode_uses_threads_only_while_other_partitions_are_appended_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partition_log_module, "APPEND_THREAD_MODE", "auto")
    monkeypatch.setattr(partition_log_module, "APPEND_CONCURRENCY_WINDOW", 3600.0)
    durability = Durability(FsyncPolicy.NEVER)
    first, second = (
        PartitionLog.open(tmp_path / name, LogSettings(), durability, clean_shutdown=True)
        for name in ("first", "second")
    )
    submitted: list[object] = []
    original = partition_log_module._stamp_and_write
    monkeypatch.setattr(partition_log_module, "_stamp_and_write",
                        lambda *args: submitted.append(args[0]) or original(*args))

    async def scenario() -> None:
        for number in range(3):  # one producer, one partition: inline
            await first.append_async(batch(10 * number + 1), SECOND)
        assert not submitted
        for number in range(4):  # two partitions in turn: each append after the first of
            await (first, second)[number % 2].append_async(batch(100 + number), SECOND)
        assert len(submitted) == 3  # them (which follows ``first`` itself) goes to a worker

    asyncio.run(scenario())
    assert (first.next_offset, second.next_offset) == (15, 6)
    first.close()
    second.close()


def test_auto_mode_always_takes_very_large_batches_off_the_event_loop(
    open_log, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One producer, one partition (no other activity): a batch of APPEND_THREAD_LARGE_BYTES or
    more is still stamped, or rejected, in a worker thread."""
    monkeypatch.setattr(partition_log_module, "APPEND_THREAD_MODE", "auto")
    monkeypatch.setattr(partition_log_module, "APPEND_THREAD_MIN_BYTES", 1000)
    monkeypatch.setattr(partition_log_module, "APPEND_THREAD_LARGE_BYTES", 50_000)
    log = open_log()
    threads: list[str] = []
    original = partition_log_module._stamp_and_write
    monkeypatch.setattr(partition_log_module, "_stamp_and_write", lambda *args: threads.append(
        threading.current_thread().name) or original(*args))

    async def scenario() -> None:
        await log.append_async(batch(1, count=5, size=1000), SECOND)  # large, not very large
        assert not threads
        assert await log.append_async(batch(10, count=60, size=1000), SECOND) == (5, 64)
        with pytest.raises(DecodeError):  # a malformed one is rejected there too
            await log.append_async(batch(100, count=60, size=1000) + b"\x00" * 7, SECOND)
        assert len(threads) == 2 and all(n.startswith("rill-append") for n in threads)

    asyncio.run(scenario())
    assert log.next_offset == 65
