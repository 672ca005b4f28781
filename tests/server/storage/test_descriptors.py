"""The descriptor cache: files open on demand within one budget, least recently used closed
first, pinned ones never; reopened files keep their bytes; a dirty file the cache closed is
still synced as the durability policy promises."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import threading
from pathlib import Path

import pytest

from rill.errors import CannotSyncFile
from rill.server.storage import descriptors, durability as durability_module
from rill.server.storage.descriptors import (
    MIN_OPEN_FILES,
    DescriptorCache,
    FileClosed,
    budget_for,
)
from rill.server.storage.durability import Durability, FsyncPolicy

CREATE = os.O_RDWR | os.O_CREAT | os.O_TRUNC


def written(cache: DescriptorCache, path: Path, data: bytes = b"data"):
    """A file created through ``cache`` holding ``data``, its descriptor left unpinned."""
    file = cache.create(path, CREATE)
    descriptor = file.pin()
    os.pwrite(descriptor, data, 0)
    file.unpin()
    return file


def use(file) -> None:
    file.pin()
    file.unpin()


def test_nothing_is_opened_until_a_file_is_used(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    cache = DescriptorCache(4)
    file = cache.file(tmp_path / "a", os.O_RDONLY)
    assert cache.open_count == 0 and not file.is_open
    assert os.pread(file.pin(), 1, 0) == b"a"
    file.unpin()
    assert cache.open_count == 1 and file.is_open
    file.close()
    assert cache.open_count == 0


def test_the_least_recently_used_file_is_closed_first(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    a, b = written(cache, tmp_path / "a"), written(cache, tmp_path / "b")
    use(a)  # b is now the least recently used
    c = written(cache, tmp_path / "c")
    assert (a.is_open, b.is_open, c.is_open) == (True, False, True)
    assert cache.open_count == 2 and cache.evictions == 1
    use(b)
    assert (a.is_open, b.is_open, c.is_open) == (False, True, True)


def test_pinned_files_are_never_closed_and_the_budget_holds_again_once_unpinned(
    tmp_path: Path,
) -> None:
    cache = DescriptorCache(1)
    a, b = written(cache, tmp_path / "a"), written(cache, tmp_path / "b")
    held = a.pin()
    b.pin()  # a is pinned: both are open, over the budget while pinned
    assert a.is_open and b.is_open and cache.open_count == 2
    assert os.pread(held, 4, 0) == b"data"
    a.unpin()  # over the budget: the least recently used unpinned file, a, is closed
    assert cache.open_count == 1 and not a.is_open and b.is_open
    b.unpin()
    use(a)
    assert cache.open_count == 1 and a.is_open and not b.is_open


def test_closing_a_pinned_file_waits_for_its_last_unpin(tmp_path: Path) -> None:
    cache = DescriptorCache(4)
    file = written(cache, tmp_path / "a")
    descriptor = file.pin()
    file.close()
    os.fstat(descriptor)  # still open: a thread may be writing through it
    assert cache.open_count == 1
    file.unpin()
    assert cache.open_count == 0 and not file.is_open
    with pytest.raises(FileClosed):
        file.pin()


def test_a_reopened_file_keeps_its_bytes_and_writes_land_in_the_right_file(
    tmp_path: Path,
) -> None:
    cache = DescriptorCache(1)  # every switch between the two files closes the other
    files = [cache.create(tmp_path / name, CREATE) for name in ("a", "b")]
    for round_number in range(5):
        for number, file in enumerate(files):
            descriptor = file.pin()
            os.pwrite(descriptor, b"%d%d" % (number, round_number), 2 * round_number)
            file.unpin()
    assert cache.opens >= 10 and cache.open_count == 1
    assert (tmp_path / "a").read_bytes() == b"0001020304"
    assert (tmp_path / "b").read_bytes() == b"1011121314"
    reader = cache.file(tmp_path / "b", os.O_RDONLY)
    assert os.pread(reader.pin(), 4, 0) == b"1011"
    reader.unpin()


def test_many_files_stay_within_the_budget(tmp_path: Path) -> None:
    budget = 8
    cache = DescriptorCache(budget)
    before = len(os.listdir("/proc/self/fd"))
    files = [written(cache, tmp_path / f"f{number}", b"%03d" % number) for number in range(100)]
    randomly = random.Random(7)
    for _ in range(1000):
        number = randomly.randrange(100)
        descriptor = files[number].pin()
        assert os.pread(descriptor, 3, 0) == b"%03d" % number
        files[number].unpin()
        assert cache.open_count <= budget
    assert len(os.listdir("/proc/self/fd")) - before <= budget
    for file in files:
        file.close()
    assert cache.open_count == 0


def test_threads_pinning_at_once_never_see_a_descriptor_closed_under_them(
    tmp_path: Path,
) -> None:
    cache = DescriptorCache(4)
    files = [written(cache, tmp_path / f"f{number}", b"") for number in range(16)]
    failures: list[BaseException] = []

    def worker(seed: int) -> None:
        randomly = random.Random(seed)
        try:
            for step in range(300):
                number = randomly.randrange(16)
                descriptor = files[number].pin()
                try:
                    os.fstat(descriptor)
                    os.pwrite(descriptor, b"%02d" % number, 0)
                finally:
                    files[number].unpin()
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert cache.open_count <= 4
    for number in range(16):
        content = (tmp_path / f"f{number}").read_bytes()
        assert content in (b"", b"%02d" % number)  # never another file's bytes


def test_an_open_that_hits_the_process_limit_closes_one_and_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = DescriptorCache(100)
    a = written(cache, tmp_path / "a")
    real_open = os.open
    refusals = iter([True])

    def open_at_the_limit(path, flags, mode=0o777):
        if next(refusals, False):
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, mode)

    monkeypatch.setattr(descriptors.os, "open", open_at_the_limit)
    b = cache.file(tmp_path / "a", os.O_RDONLY)
    assert os.pread(b.pin(), 4, 0) == b"data"
    b.unpin()
    assert not a.is_open and cache.evictions == 1


def test_a_sync_reopen_does_not_push_out_files_in_use(tmp_path: Path) -> None:
    cache = DescriptorCache(2)
    synced = written(cache, tmp_path / "synced")
    a, b = written(cache, tmp_path / "a"), written(cache, tmp_path / "b")
    assert not synced.is_open
    synced.pin(recent=False)
    synced.unpin()
    use(a)  # the file opened for a sync goes first, not b
    assert not synced.is_open and b.is_open and a.is_open


def test_index_mappings_are_bounded_and_remapped_on_demand(tmp_path: Path) -> None:
    cache = DescriptorCache(16, max_maps=2)
    mapped = []
    for number in range(3):
        path = tmp_path / f"i{number}"
        path.write_bytes(bytes([number]) * 32)
        mapped.append(cache.mapped(path))
    assert [m.get()[0] for m in mapped] == [0, 1, 2]
    assert cache.map_count == 2 and not mapped[0].is_mapped
    assert mapped[0].get()[:32] == bytes(32)  # mapped again, dropping the least recent
    assert not mapped[1].is_mapped and cache.map_count == 2


def test_mappings_hold_a_descriptor_each_within_the_same_budget(tmp_path: Path) -> None:
    """CPython's mmap keeps a duplicate of the descriptor it maps: 3 mappings and a file
    within a budget of 3 leave 3 descriptors open, the least recently used dropped."""
    cache = DescriptorCache(3)
    before = len(os.listdir("/proc/self/fd"))
    mapped = []
    for number in range(3):
        (tmp_path / f"i{number}").write_bytes(b"index %d" % number)
        mapped.append(cache.mapped(tmp_path / f"i{number}"))
        mapped[-1].get()
    assert cache.open_count == 3 and len(os.listdir("/proc/self/fd")) - before == 3
    file = written(cache, tmp_path / "log")
    assert not mapped[0].is_mapped and cache.open_count == 3
    assert len(os.listdir("/proc/self/fd")) - before == 3
    file.close()
    for m in mapped:
        m.drop()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_mapping_dropped_while_read_stays_valid_for_its_reader(tmp_path: Path) -> None:
    cache = DescriptorCache(1)
    (tmp_path / "i").write_bytes(b"entries")
    index = cache.mapped(tmp_path / "i").get()
    written(cache, tmp_path / "log")  # the budget is spent: the mapping is dropped ...
    assert cache.map_count == 0
    assert index[:7] == b"entries"  # ... but whoever holds it reads on; it closes with it


def test_auto_is_half_the_limit() -> None:
    assert budget_for("auto", 1024) == 512
    assert budget_for("auto", 20) == MIN_OPEN_FILES
    assert budget_for(300, 1024) == 300


# ---------------------------------------------------------------------- with durability
class RecordedFsync:
    """``os.fsync`` for the durability module: records the inode of every file synced."""

    def __init__(self) -> None:
        self.inodes: list[int] = []
        self.fsync = os.fsync

    def __call__(self, descriptor: int) -> None:
        self.inodes.append(os.fstat(descriptor).st_ino)
        self.fsync(descriptor)


def dirty_and_closed(cache: DescriptorCache, tmp_path: Path, durability: Durability):
    """File ``a``, written and marked dirty, then closed by the cache (budget 1) when ``b``
    was used."""
    a = written(cache, tmp_path / "a")
    durability.mark_dirty(a)
    use(written(cache, tmp_path / "b"))
    assert not a.is_open and durability.is_dirty(a)
    return a


def test_always_a_dirty_file_closed_by_the_cache_is_synced_before_its_waiter_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = RecordedFsync()
    monkeypatch.setattr(durability_module.os, "fsync", recorded)

    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        a = dirty_and_closed(DescriptorCache(1), tmp_path, durability)
        await durability.wait_durable(a)
        assert recorded.inodes == [(tmp_path / "a").stat().st_ino]
        assert not durability.is_dirty(a)
        await durability.stop()

    asyncio.run(scenario())


def test_interval_a_dirty_file_closed_by_the_cache_is_synced_within_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = RecordedFsync()
    monkeypatch.setattr(durability_module.os, "fsync", recorded)

    async def scenario() -> None:
        durability = Durability(FsyncPolicy.INTERVAL, interval_seconds=0.02)
        await durability.start()
        a = dirty_and_closed(DescriptorCache(1), tmp_path, durability)
        for _ in range(100):
            if recorded.inodes:
                break
            await asyncio.sleep(0.01)
        assert recorded.inodes == [(tmp_path / "a").stat().st_ino]
        assert not durability.is_dirty(a)
        await durability.stop()

    asyncio.run(scenario())


def test_never_closing_syncs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = RecordedFsync()
    monkeypatch.setattr(durability_module.os, "fsync", recorded)

    async def scenario() -> None:
        durability = Durability(FsyncPolicy.NEVER)
        cache = DescriptorCache(1)
        a = written(cache, tmp_path / "a")
        durability.mark_dirty(a)
        use(written(cache, tmp_path / "b"))
        await durability.wait_durable(a)
        await durability.stop()
        assert not recorded.inodes

    asyncio.run(scenario())


def test_a_round_keeps_the_file_it_syncs_open_and_a_close_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    released = threading.Event()
    syncing: list[int] = []
    real_fsync = os.fsync

    def held_fsync(descriptor: int) -> None:
        syncing.append(descriptor)
        released.wait(10)
        real_fsync(descriptor)

    monkeypatch.setattr(durability_module.os, "fsync", held_fsync)

    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        cache = DescriptorCache(1)
        a = dirty_and_closed(cache, tmp_path, durability)
        waiting = asyncio.ensure_future(durability.wait_durable(a))
        while not syncing:
            await asyncio.sleep(0.001)
        descriptor = syncing[0]
        use(written(cache, tmp_path / "c"))  # the cache must not close the one being synced
        durability.close_file(a)  # nor may its owner
        assert a.is_open and os.fstat(descriptor).st_ino == (tmp_path / "a").stat().st_ino
        released.set()
        await waiting
        assert not a.is_open
        await durability.stop()

    try:
        asyncio.run(scenario())
    finally:
        released.set()


def test_a_failed_sync_keeps_failing_the_file_after_it_is_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_fsync(descriptor: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    async def scenario() -> None:
        durability = Durability(FsyncPolicy.ALWAYS)
        cache = DescriptorCache(1)
        a = dirty_and_closed(cache, tmp_path, durability)
        monkeypatch.setattr(durability_module.os, "fsync", failing_fsync)
        with pytest.raises(CannotSyncFile):
            await durability.wait_durable(a)
        monkeypatch.undo()
        use(written(cache, tmp_path / "c"))  # a is closed again
        use(a)
        durability.mark_dirty(a)
        with pytest.raises(CannotSyncFile):  # the kernel may have dropped what failed
            await durability.wait_durable(a)
        await durability.stop()

    asyncio.run(scenario())
