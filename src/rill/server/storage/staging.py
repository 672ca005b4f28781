"""Staged appends on disk: one file per (producer, batch, task, attempt) under ``staging/``.

File layout (little-endian)::

    header   b"RILLSTG1" | u8 producer_id length | producer_id UTF-8 | u64 batch_id |
             u32 task_id | u64 attempt_id
    entries  back to back, one per stage call:
             u32 records_length | u32 stream_id | u32 topic_id | u32 partition_id |
             u32 messages_count | u32 crc32(positions + records) |
             positions (messages_count x u32: where each record starts) |
             records (stored layout, stamped for offset 0 at position 0: see
             ``PartitionLog.append_stamped``, which only re-stamps offsets and timestamp)

Owns: creating, appending to, reading, loading and deleting these files, and a bounded memory
cache of recent entries (a commit that follows its stage calls reads them from memory, which
is the common case; the file stays the truth). Invariants: an entry
is one positioned write at the end of the file, made durable per the fsync policy before the
stage call is acknowledged; on load, a torn or corrupt tail (an unacknowledged stage call cut
by a crash) is cut off at the last whole entry, and a file with a bad header is removed. The
file is the only record of staged data; memory only remembers where the entries are.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from rill.server.storage.durability import Durability
from rill.server.storage.paths import STAGED_SUFFIX, DataPaths
from rill.server.storage.formats.iggy_v1 import crc32
from rill.server.storage.file_io import read_all_at, write_all_at

log = logging.getLogger(__name__)

MAGIC = b"RILLSTG1"
_HEADER_TAIL = struct.Struct("<QIQ")  # batch_id, task_id, attempt_id
_ENTRY_HEAD = struct.Struct("<IIIIII")  # records length, stream, topic, partition, count, crc


def producer_key(producer_id: str) -> str:
    """A fixed-length, file-name-safe key for any producer id."""
    return hashlib.sha256(producer_id.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class StagedEntry:
    """One stage call: ``count`` records for one partition; its positions column starts at
    ``position`` in the file, followed by ``length`` bytes of records."""

    stream_id: int
    topic_id: int
    partition_id: int
    count: int
    position: int
    length: int


class CacheBudget:
    """Bytes of staged entries that may be kept in memory as well, for all files together, so
    that a commit soon after its stage calls need not read them back from disk."""

    def __init__(self, limit: int) -> None:
        self.available = limit

    def take(self, size: int) -> bool:
        if size > self.available:
            return False
        self.available -= size
        return True

    def give(self, size: int) -> None:
        self.available += size


class StagedFile:
    """The staged messages of one task attempt; append-only until committed or aborted."""

    def __init__(self, path: Path, producer_id: str, batch_id: int, task_id: int,
                 attempt_id: int, durability: Durability, budget: CacheBudget | None = None
                 ) -> None:
        self.path = path
        self.producer_id = producer_id
        self.batch_id = batch_id
        self.task_id = task_id
        self.attempt_id = attempt_id
        self.entries: list[StagedEntry] = []
        self.size = 0
        self._durability = durability
        self._descriptor: int | None = None
        self._budget = budget
        self._cached: dict[int, tuple[bytes, bytes]] = {}  # entry position -> its two parts
        # µs: when the handle was last staged to (its expiry counts from there); set by the
        # owner on create and append, and from the file's modification time on load
        self.last_active_us = 0

    @property
    def messages_count(self) -> int:
        return sum(entry.count for entry in self.entries)

    def records_bytes_by_topic(self) -> dict[tuple[int, int], int]:
        """(stream id, topic id) -> bytes of records staged for it: what a commit adds to the
        topic's size (the stored layout is the log's)."""
        sizes: dict[tuple[int, int], int] = {}
        for entry in self.entries:
            key = (entry.stream_id, entry.topic_id)
            sizes[key] = sizes.get(key, 0) + entry.length
        return sizes

    def _header(self) -> bytes:
        producer = self.producer_id.encode("utf-8")
        tail = _HEADER_TAIL.pack(self.batch_id, self.task_id, self.attempt_id)
        return MAGIC + bytes((len(producer),)) + producer + tail

    def _open(self) -> int:
        if self._descriptor is None:
            self._descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._descriptor

    def append(self, stream_id: int, topic_id: int, partition_id: int, positions: bytes,
               records: bytes) -> None:
        """Write one entry at the end of the file (the header first if the file is new)."""
        descriptor = self._open()
        head = b"" if self.size else self._header()
        count = len(positions) // 4
        checksum = crc32(records, crc32(positions))
        entry_head = _ENTRY_HEAD.pack(len(records), stream_id, topic_id, partition_id, count,
                                      checksum)
        position = self.size + len(head) + len(entry_head)
        try:
            totals = self._durability.io_totals
            write_all_at(descriptor, head + entry_head + positions, self.size, totals)
            write_all_at(descriptor, records, position + len(positions), totals)
        except OSError:
            os.ftruncate(descriptor, self.size)
            raise
        self._durability.mark_dirty(descriptor)
        self.entries.append(StagedEntry(stream_id, topic_id, partition_id, count, position,
                                        len(records)))
        self.size = position + len(positions) + len(records)
        if self._budget is not None and self._budget.take(len(records)):
            self._cached[position] = (positions, records)

    async def wait_durable(self) -> None:
        if self._descriptor is not None:
            await self._durability.wait_durable(self._descriptor)

    def read_entry(self, entry: StagedEntry) -> tuple[bytearray, array]:
        """(records, positions) of one entry, from memory if it is still cached (and then no
        longer: the cached records themselves are handed over, no copy), else from the file;
        the records are the caller's to stamp in place."""
        cached = self._cached.pop(entry.position, None)
        if cached is not None:
            self._budget.give(len(cached[1]))  # type: ignore[union-attr]
            head, body = cached
            if type(body) is bytearray:
                positions = array("I")
                positions.frombytes(head)
                if sys.byteorder != "little":
                    positions.byteswap()
                return body, positions
        else:
            data = memoryview(read_all_at(self._open(), 4 * entry.count + entry.length,
                                          entry.position, self._durability.io_totals))
            head, body = data[: 4 * entry.count], data[4 * entry.count :]
        positions = array("I")
        positions.frombytes(head)
        if sys.byteorder != "little":
            positions.byteswap()
        return bytearray(body), positions

    def close(self) -> None:
        for _, records in self._cached.values():
            self._budget.give(len(records))  # type: ignore[union-attr]
        self._cached.clear()
        if self._descriptor is not None:
            descriptor, self._descriptor = self._descriptor, None
            self._durability.close_file(descriptor)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: Path, durability: Durability) -> StagedFile | None:
        """Read a staged file back, cutting a torn tail; None (and the file removed) if its
        header is unreadable."""
        data = path.read_bytes()
        header_end = len(MAGIC) + 1
        producer_end = header_end + (data[len(MAGIC)] if len(data) > len(MAGIC) else 0)
        if data[: len(MAGIC)] != MAGIC or len(data) < producer_end + _HEADER_TAIL.size:
            log.warning("removing staged file with a bad header: %s", path)
            path.unlink(missing_ok=True)
            return None
        producer_id = data[header_end:producer_end].decode("utf-8", "replace")
        batch_id, task_id, attempt_id = _HEADER_TAIL.unpack_from(data, producer_end)
        staged = cls(path, producer_id, batch_id, task_id, attempt_id, durability)
        position = producer_end + _HEADER_TAIL.size
        while position + _ENTRY_HEAD.size <= len(data):
            length, stream, topic, partition, count, checksum = _ENTRY_HEAD.unpack_from(
                data, position)
            start = position + _ENTRY_HEAD.size
            stop = start + 4 * count + length
            if stop > len(data) or crc32(data[start:stop]) != checksum:
                break
            staged.entries.append(StagedEntry(stream, topic, partition, count, start, length))
            position = stop
        if position != len(data):
            log.warning("cutting the torn tail of staged file %s at byte %d", path, position)
            os.truncate(path, position)
        staged.size = position
        staged.last_active_us = path.stat().st_mtime_ns // 1000
        return staged


class StagingArea:
    """The ``staging/`` directory: builds, and at start finds, every StagedFile."""

    def __init__(self, paths: DataPaths, durability: Durability,
                 cache_bytes: int = 256 * 1024 * 1024) -> None:
        self.paths = paths
        self.durability = durability
        self.budget = CacheBudget(cache_bytes)

    def create(self, producer_id: str, batch_id: int, task_id: int, attempt_id: int) -> StagedFile:
        directory = self.paths.staging_dir
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            self.durability.sync_directory(directory.parent)
        path = self.paths.staged_file(producer_key(producer_id), batch_id, task_id, attempt_id)
        path.unlink(missing_ok=True)  # a leftover of the same handle is never appended to
        staged = StagedFile(path, producer_id, batch_id, task_id, attempt_id, self.durability,
                            self.budget)
        staged._open()
        self.durability.sync_directory(directory)
        return staged

    def load_all(self) -> list[StagedFile]:
        directory = self.paths.staging_dir
        if not directory.is_dir():
            return []
        found = []
        for path in sorted(directory.iterdir()):
            if path.suffix == STAGED_SUFFIX:
                staged = StagedFile.load(path, self.durability)
                if staged is not None:
                    found.append(staged)
        return found
