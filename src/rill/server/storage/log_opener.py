"""FileLogs: opens partitions' file logs (``PartitionLog``) in a data directory; the file
implementation of the core's ``Logs`` port (``core.log``), the Core's default.

Owns the settings every log of a server shares (segment size, checksum validation at open,
append threads) and where a partition's log lives (``DataPaths.partition_dir``); the log
takes its topic's record format. ``verify`` is the background check after an unclean stop
(``verification.verify_in_background``). Its memory twin is ``memory_log.MemoryLogs``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable

from rill.server.storage.durability import Durability
from rill.server.storage.partition_log import LogSettings, PartitionLog
from rill.server.storage.paths import DataPaths
from rill.server.storage.verification import verify_in_background


class FileLogs:
    """Partition logs as segment files under ``paths`` (see the module docstring)."""

    def __init__(self, paths: DataPaths, durability: Durability, settings: LogSettings) -> None:
        self.paths = paths
        self.durability = durability
        self.settings = settings  # every log's, but its record format (the topic's)

    @classmethod
    def with_settings(cls, paths: DataPaths, durability: Durability, *, segment_size: int,
                      validate_checksum: bool, append_threads: str,
                      append_thread_min_size: int) -> FileLogs:
        return cls(paths, durability, LogSettings(
            segment_size=segment_size, validate_checksum=validate_checksum,
            append_threads=append_threads, append_thread_min_size=append_thread_min_size))

    def open(self, stream_id: int, topic_id: int, partition_id: int, record_format: str,
             clean_shutdown: bool, sync_parent: bool = True) -> PartitionLog:
        return PartitionLog.open(self.paths.partition_dir(stream_id, topic_id, partition_id),
                                 replace(self.settings, record_format=record_format),
                                 self.durability, clean_shutdown, sync_parent=sync_parent)

    def sync_created(self, stream_id: int, topic_id: int) -> None:
        self.durability.sync_directory(self.paths.partitions_dir(stream_id, topic_id))

    async def verify(self, logs: Callable[[], Iterable[PartitionLog]]) -> None:
        await verify_in_background(logs)
