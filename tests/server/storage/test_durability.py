"""Durability: one policy, group commit under ALWAYS, background syncs under INTERVAL."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from rill.errors import CannotSyncFile
from rill.server.storage.durability import Durability, FsyncPolicy


def open_written(path: Path) -> int:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(descriptor, b"data")
    return descriptor


def test_policy_accepts_its_config_spelling() -> None:
    assert Durability("always").policy is FsyncPolicy.ALWAYS
    assert FsyncPolicy("interval") is FsyncPolicy.INTERVAL
    with pytest.raises(ValueError):
        Durability("sometimes")


def test_group_commit_shares_rounds_between_concurrent_waiters(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        descriptors = [open_written(tmp_path / f"file{number}") for number in range(20)]

        async def writer(descriptor: int) -> None:
            os.write(descriptor, b"more")
            durability.mark_dirty(descriptor)
            await durability.wait_durable(descriptor)
            assert not durability.is_dirty(descriptor)

        await asyncio.gather(*(writer(descriptor) for descriptor in descriptors))
        assert durability.fsync_calls == 20  # every file synced once
        assert durability.sync_rounds < 20  # ... in far fewer rounds than waiters
        assert durability.sync_rounds == 1
        for descriptor in descriptors:
            durability.close_file(descriptor)
        await durability.stop()

    asyncio.run(scenario())


def test_waiter_arriving_during_a_round_joins_the_next_round(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        first, second = open_written(tmp_path / "a"), open_written(tmp_path / "b")
        durability.mark_dirty(first)
        first_wait = asyncio.ensure_future(durability.wait_durable(first))
        while not durability.sync_in_progress:
            await asyncio.sleep(0)
        durability.mark_dirty(second)  # written after the round took its files
        await durability.wait_durable(second)
        assert first_wait.done()
        assert durability.sync_rounds == 2
        assert durability.fsync_calls == 2
        durability.close_file(first)
        durability.close_file(second)

    asyncio.run(scenario())


def test_wait_durable_returns_at_once_when_nothing_is_dirty(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        descriptor = open_written(tmp_path / "f")
        await durability.wait_durable(descriptor)
        assert durability.sync_rounds == 0
        durability.close_file(descriptor)

    asyncio.run(scenario())


def test_fsync_failure_fails_the_waiters_instead_of_hanging() -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        read_end, write_end = os.pipe()  # fsync of a pipe fails with EINVAL
        os.write(write_end, b"x")
        durability.mark_dirty(write_end)
        results = await asyncio.gather(
            durability.wait_durable(write_end),
            durability.wait_durable(write_end),
            return_exceptions=True,
        )
        assert all(
            isinstance(result, CannotSyncFile) and result.code == 10009 for result in results
        )
        with pytest.raises(CannotSyncFile):  # the failure sticks to the file
            await durability.wait_durable(write_end)
        durability.close_file(write_end)
        os.close(read_end)

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_failing_file_does_not_fail_waiters_of_other_files(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        read_end, write_end = os.pipe()
        healthy = open_written(tmp_path / "ok")
        durability.mark_dirty(write_end)
        durability.mark_dirty(healthy)
        bad, good = await asyncio.gather(
            durability.wait_durable(write_end),
            durability.wait_durable(healthy),
            return_exceptions=True,
        )
        assert isinstance(bad, CannotSyncFile)
        assert good is None
        for descriptor in (write_end, read_end, healthy):
            durability.close_file(descriptor)

    asyncio.run(scenario())


def test_close_file_forgets_the_descriptor(tmp_path: Path) -> None:
    durability = Durability(FsyncPolicy.ALWAYS)
    descriptor = open_written(tmp_path / "old")
    durability.mark_dirty(descriptor)
    durability.close_file(descriptor)
    assert not durability.is_dirty(descriptor)
    reused = os.open(
        tmp_path / "new", os.O_RDWR | os.O_CREAT
    )  # the kernel reuses the lowest number
    assert reused == descriptor
    assert not durability.is_dirty(reused)
    asyncio.run(durability.wait_durable(reused))
    assert durability.fsync_calls == 0
    durability.close_file(reused)


def test_close_during_a_round_is_deferred_until_the_round_ends(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        descriptor = open_written(tmp_path / "f")
        durability.mark_dirty(descriptor)
        waiting = asyncio.ensure_future(durability.wait_durable(descriptor))
        while not durability.sync_in_progress:
            await asyncio.sleep(0)
        durability.close_file(descriptor)
        os.fstat(descriptor)  # still open: the worker thread may be syncing it
        await waiting
        with pytest.raises(OSError):
            os.fstat(descriptor)

    asyncio.run(scenario())


def test_interval_policy_syncs_in_the_background(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.INTERVAL, interval_seconds=0.02)
        await durability.start()
        descriptor = open_written(tmp_path / "f")
        durability.mark_dirty(descriptor)
        await durability.wait_durable(descriptor)  # returns at once under INTERVAL
        assert durability.is_dirty(descriptor)
        for _ in range(500):
            if durability.sync_rounds:
                break
            await asyncio.sleep(0.01)
        assert durability.sync_rounds >= 1 and durability.fsync_calls >= 1
        assert not durability.is_dirty(descriptor)
        durability.close_file(descriptor)
        await durability.stop()

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_stop_syncs_everything_still_dirty(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.INTERVAL, interval_seconds=3600)
        await durability.start()
        descriptor = open_written(tmp_path / "f")
        durability.mark_dirty(descriptor)
        await durability.stop()
        assert not durability.is_dirty(descriptor)
        assert durability.fsync_calls == 1
        durability.close_file(descriptor)

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_never_policy_syncs_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.NEVER)
        await durability.start()
        descriptor = open_written(tmp_path / "f")
        durability.mark_dirty(descriptor)
        assert not durability.is_dirty(descriptor)
        await durability.wait_durable(descriptor)
        durability.sync_now(descriptor)
        durability.sync_directory(tmp_path)
        await durability.stop()
        assert durability.fsync_calls == 0
        durability.close_file(descriptor)

    asyncio.run(scenario())


def test_sync_now_and_sync_directory_fsync_under_always(tmp_path: Path) -> None:
    durability = Durability(FsyncPolicy.ALWAYS)
    descriptor = open_written(tmp_path / "f")
    durability.mark_dirty(descriptor)
    durability.sync_now(descriptor)
    durability.sync_directory(tmp_path)
    assert not durability.is_dirty(descriptor)
    assert durability.fsync_calls == 2
    durability.close_file(descriptor)


def test_a_cancelled_waiter_does_not_break_the_round(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        descriptor = open_written(tmp_path / "f")
        durability.mark_dirty(descriptor)
        cancelled = asyncio.ensure_future(durability.wait_durable(descriptor))
        kept = asyncio.ensure_future(durability.wait_durable(descriptor))
        await asyncio.sleep(0)
        cancelled.cancel()
        await kept
        assert cancelled.cancelled()
        durability.close_file(descriptor)

    asyncio.run(asyncio.wait_for(scenario(), 10))


@pytest.mark.parametrize("policy", list(FsyncPolicy))
def test_sync_file_is_an_explicit_flush_under_every_policy(
    tmp_path: Path, policy: FsyncPolicy
) -> None:
    async def scenario() -> None:
        durability = Durability(policy)
        descriptor = open_written(tmp_path / "f")
        durability.mark_dirty(descriptor)
        await durability.sync_file(descriptor)
        assert not durability.is_dirty(descriptor)
        assert durability.fsync_calls == 1
        durability.close_file(descriptor)
        await durability.stop()

    asyncio.run(scenario())


def test_a_waiter_on_a_file_held_by_a_flush_waits_for_a_sync_after_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        descriptor = open_written(tmp_path / "f")
        flush = asyncio.ensure_future(durability.sync_file(descriptor))
        while not durability.sync_in_progress:
            await asyncio.sleep(0)
        await durability.wait_durable(descriptor)  # not dirty, but the flush still holds it
        # the waiter got a sync of its own, started after it came (rounds run in parallel
        # threads, so it may even end before the flush's)
        await flush
        assert durability.fsync_calls == 2 and durability.sync_rounds == 2
        durability.close_file(descriptor)

    asyncio.run(scenario())


def test_the_files_of_a_round_are_synced_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two fsyncs of one round meet at a barrier: done one after the other, they never would."""
    barrier = threading.Barrier(2, timeout=10)
    real_fsync = os.fsync

    def meeting_fsync(descriptor: int) -> None:
        barrier.wait()
        real_fsync(descriptor)

    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS, threads=2)
        first, second = open_written(tmp_path / "a"), open_written(tmp_path / "b")
        durability.mark_dirty(first)
        durability.mark_dirty(second)
        monkeypatch.setattr(os, "fsync", meeting_fsync)
        await asyncio.gather(durability.wait_durable(first), durability.wait_durable(second))
        monkeypatch.setattr(os, "fsync", real_fsync)
        assert durability.sync_rounds == 1 and durability.fsync_calls == 2
        durability.close_file(first)
        durability.close_file(second)
        await durability.stop()

    asyncio.run(asyncio.wait_for(scenario(), 20))
