"""Fixtures for the storage tests: real files under tmp_path, real fsync."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

import pytest

from rill.server.storage import descriptors
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.partition_log import LogSettings, PartitionLog


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
