"""Fixtures for the storage tests: real files under tmp_path, real fsync; ``make_log`` opens
either implementation of the partition-log port (``core.log``): segment files or the memory
twin, so one body of tests runs on both."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

import pytest

from rill.server.storage import descriptors
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.memory_log import MemoryLogs
from rill.server.storage.partition_log import LogSettings, PartitionLog

LOG_KINDS = ("file", "memory")  # the implementations of the partition-log port


@pytest.fixture
def durability() -> Durability:
    """ALWAYS policy: every seal, truncation and close really fsyncs."""
    return Durability(FsyncPolicy.ALWAYS)


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    return tmp_path / "streams" / "1" / "topics" / "1" / "partitions" / "1"


@pytest.fixture
def open_log(partition_dir: Path, durability: Durability) -> Iterable[Callable[..., PartitionLog]]:
    """Open the partition log in ``partition_dir``; every log opened is closed at teardown."""
    opened: list[PartitionLog] = []

    def opener(
        segment_size: int = 1_000_000,
        clean_shutdown: bool = True,
        validate_checksum: bool = False,
        **extra,
    ) -> PartitionLog:
        settings = LogSettings(
            segment_size=segment_size, validate_checksum=validate_checksum, **extra
        )
        log = PartitionLog.open(partition_dir, settings, durability, clean_shutdown=clean_shutdown)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


@pytest.fixture(params=LOG_KINDS)
def log_kind(request) -> str:
    return request.param


@pytest.fixture
def make_log(log_kind: str, open_log, tmp_path: Path, durability: Durability
             ) -> Iterable[Callable[..., PartitionLog]]:
    """``open_log`` on the implementation ``log_kind`` names (the test runs once on each):
    ``make_log(segment_size=..., record_format=..., name=...)``. A second call with the same
    ``name`` after ``close`` opens the same log again (a restart; the memory twin keeps it, as
    ``MemoryLogs`` does for a Core). ``clean_shutdown`` and ``validate_checksum`` only matter
    to files; ``name`` None is ``partition_dir``."""
    memory = MemoryLogs()
    names: dict[str, int] = {}
    opened: list[PartitionLog] = []

    def opener(segment_size: int = 1_000_000, clean_shutdown: bool = True,
               validate_checksum: bool = False, name: str | None = None, **extra):
        if log_kind == "memory":
            memory.segment_size = segment_size
            number = names.setdefault(name or "", len(names) + 1)
            return memory.open(1, 1, number, extra.get("record_format", "iggy-v1"),
                               clean_shutdown)
        if name is None:
            return open_log(segment_size, clean_shutdown, validate_checksum, **extra)
        settings = LogSettings(segment_size=segment_size, validate_checksum=validate_checksum,
                               **extra)
        log = PartitionLog.open(tmp_path / name, settings, durability, clean_shutdown)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


@pytest.fixture
def descriptor_budget() -> Iterable[Callable[[int], descriptors.DescriptorCache]]:
    """Shrink the process's descriptor cache (``budget(n)``) for one test; restored after."""
    cache = descriptors.shared()
    budget, max_maps = cache.budget, cache.max_maps

    def shrink(limit: int) -> descriptors.DescriptorCache:
        cache.resize(limit)
        return cache

    yield shrink
    cache.resize(budget, max_maps)
