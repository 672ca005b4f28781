"""Segment: a ``.log`` of stored records and its ``.index``, named by the segment's first offset.

The ``.log`` holds records exactly as a poll returns them (see ``records``). The ``.index`` holds
one 16-byte entry per message: ``relative_offset u32 | position u32 | timestamp u64``. Offsets
are dense, so entry ``i`` is offset ``start_offset + i``: offset -> position is arithmetic, and
timestamp -> offset is a binary search over the timestamp column (a ``memoryview.cast`` view).

Invariants:
  * The active segment holds two descriptors (log and index) and a mirror of its index in a
    bytearray with spare capacity; the mirror is replaced, never resized in place, when it grows,
    so short-lived views of it can never block an append.
  * An append is one positioned write of the log bytes and one of the index bytes; if either
    fails, both files are cut back to their previous size and the segment is unchanged. It comes
    in two halves, ``write`` (files; may run in a worker thread) then ``publish`` (memory, on
    the event loop): reads only ever see published batches.
  * A sealed segment holds no descriptor until read; the partition log keeps few of them open.
    Its index is memory-mapped on first use.
  * A corrupt segment is never served: every read raises ``CannotReadMessage`` with the reason.
    Each read also checks that the bytes at its two ends are the records the index promises.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import sys
from bisect import bisect_left
from pathlib import Path

from rill.errors import (
    CannotCreateSegmentIndexFile,
    CannotCreateSegmentLogFile,
    CannotReadMessage,
    CannotSaveMessagesToSegment,
)
from rill.server.storage.durability import Durability
from rill.server.storage.paths import DataPaths
from rill.server.storage.records import INDEX_ENTRY, INDEX_ENTRY_SIZE, check_read_boundaries

logger = logging.getLogger(__name__)

_POSITION_AT = struct.Struct("<4xI")
_TIMESTAMP_AT = struct.Struct("<8xQ")
_LITTLE_ENDIAN_HOST = sys.byteorder == "little"
_INITIAL_INDEX_CAPACITY = 64 * INDEX_ENTRY_SIZE


class Segment:
    """One segment of a partition log; active (appendable) until sealed."""

    def __init__(
        self, directory: str | os.PathLike[str], start_offset: int, durability: Durability
    ) -> None:
        self.directory = Path(directory)
        self.start_offset = start_offset
        self.log_path = DataPaths.segment_log(self.directory, start_offset)
        self.index_path = DataPaths.segment_index(self.directory, start_offset)
        self.messages_count = 0
        self.size_bytes = 0
        self.first_timestamp: int | None = None
        self.last_timestamp: int | None = None
        self.sealed = False
        self.corrupt_reason: str | None = None
        self._durability = durability
        self._log_descriptor: int | None = None
        self._index_descriptor: int | None = None
        self._index_mirror: bytearray | None = None  # active segments
        self._index_map: mmap.mmap | None = None  # sealed segments, mapped on first use

    # ------------------------------------------------------------------ opening
    @classmethod
    def create(
        cls, directory: str | os.PathLike[str], start_offset: int, durability: Durability
    ) -> Segment:
        """A new, empty, active segment (existing files of that name are emptied)."""
        segment = cls(directory, start_offset, durability)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC
        try:
            segment._log_descriptor = os.open(segment.log_path, flags, 0o644)
        except OSError as error:
            raise CannotCreateSegmentLogFile(str(segment.log_path)) from error
        try:
            segment._index_descriptor = os.open(segment.index_path, flags, 0o644)
        except OSError as error:
            durability.close_file(segment._log_descriptor)
            raise CannotCreateSegmentIndexFile(str(segment.index_path)) from error
        segment._index_mirror = bytearray(_INITIAL_INDEX_CAPACITY)
        return segment

    @classmethod
    def open_active(
        cls,
        directory: str | os.PathLike[str],
        start_offset: int,
        durability: Durability,
        index_entries: bytes | bytearray,
        size_bytes: int,
    ) -> Segment:
        """Reopen the last segment of a partition; its files must already agree (see recovery)."""
        segment = cls(directory, start_offset, durability)
        flags = os.O_RDWR
        segment._log_descriptor = os.open(segment.log_path, flags)
        segment._index_descriptor = os.open(segment.index_path, flags | os.O_CREAT, 0o644)
        mirror = bytearray(max(_INITIAL_INDEX_CAPACITY, 2 * len(index_entries)))
        mirror[: len(index_entries)] = index_entries
        segment._index_mirror = mirror
        segment.messages_count = len(index_entries) // INDEX_ENTRY_SIZE
        segment.size_bytes = size_bytes
        if segment.messages_count:
            segment.first_timestamp = _TIMESTAMP_AT.unpack_from(mirror, 0)[0]
            segment.last_timestamp = _TIMESTAMP_AT.unpack_from(
                mirror, len(index_entries) - INDEX_ENTRY_SIZE
            )[0]
        return segment

    @classmethod
    def open_sealed(
        cls,
        directory: str | os.PathLike[str],
        start_offset: int,
        durability: Durability,
        *,
        messages_count: int,
        size_bytes: int,
        first_timestamp: int | None,
        last_timestamp: int | None,
        corrupt_reason: str | None = None,
    ) -> Segment:
        """A sealed segment whose files were checked at start; it opens nothing until read."""
        segment = cls(directory, start_offset, durability)
        segment.sealed = True
        segment.messages_count = messages_count
        segment.size_bytes = size_bytes
        segment.first_timestamp = first_timestamp
        segment.last_timestamp = last_timestamp
        if corrupt_reason is not None:
            segment.mark_corrupt(corrupt_reason)
        return segment

    # ------------------------------------------------------------------ properties
    @property
    def next_offset(self) -> int:
        return self.start_offset + self.messages_count

    @property
    def end_offset(self) -> int:
        """Offset of the last message (start_offset - 1 when empty)."""
        return self.start_offset + self.messages_count - 1

    @property
    def log_descriptor(self) -> int:
        if self._log_descriptor is None or self.sealed:
            raise RuntimeError(f"segment {self.log_path} is not active")
        return self._log_descriptor

    @property
    def has_open_reader(self) -> bool:
        return self.sealed and self._log_descriptor is not None

    def mark_corrupt(self, reason: str) -> None:
        if self.corrupt_reason is None:
            logger.error("segment %s is corrupt and will not be served: %s", self.log_path, reason)
        self.corrupt_reason = reason

    def corrupt_error(self) -> CannotReadMessage:
        """The error every read touching this corrupt segment raises (4011, with the reason)."""
        return CannotReadMessage(
            reason=f"Cannot read message: segment {self.log_path} is corrupt: {self.corrupt_reason}"
        )

    # ------------------------------------------------------------------ writing
    def append(
        self,
        records: bytes,
        index_entries: bytes | bytearray,
        first_timestamp: int,
        last_timestamp: int,
    ) -> None:
        """Write one stamped batch: one write to the log, one to the index."""
        self.write(records, index_entries)
        self.publish(len(records), index_entries, first_timestamp, last_timestamp)

    def write(self, records: bytes | bytearray, index_entries: bytes | bytearray) -> None:
        """The file half of ``append``: write a batch after the published end of both files.

        Readers only see what ``publish`` made visible, so this half may run in a worker thread
        while the event loop serves reads, provided nothing else writes to, publishes on or
        closes this segment meanwhile (the partition log keeps one append in flight).
        """
        if self.sealed or self._index_mirror is None:
            raise RuntimeError(f"segment {self.log_path} is sealed")
        assert self._log_descriptor is not None and self._index_descriptor is not None
        index_length = self.messages_count * INDEX_ENTRY_SIZE
        try:
            write_all_at(self._log_descriptor, records, self.size_bytes)
            write_all_at(self._index_descriptor, index_entries, index_length)
        except OSError as error:
            for descriptor, length in (
                (self._log_descriptor, self.size_bytes),
                (self._index_descriptor, index_length),
            ):
                try:
                    os.ftruncate(descriptor, length)
                except OSError:
                    logger.exception("cannot cut %s back after a failed append", self.log_path)
            raise CannotSaveMessagesToSegment(
                reason=f"Cannot save messages to segment {self.log_path}: {error}"
            ) from error

    def publish(
        self,
        records_size: int,
        index_entries: bytes | bytearray,
        first_timestamp: int,
        last_timestamp: int,
    ) -> None:
        """The memory half of ``append`` (event loop): make a batch ``write`` wrote readable."""
        if self.sealed or self._index_mirror is None:
            raise RuntimeError(f"segment {self.log_path} is sealed")
        index_length = self.messages_count * INDEX_ENTRY_SIZE
        needed = index_length + len(index_entries)
        mirror = self._index_mirror
        if needed > len(mirror):
            grown = bytearray(max(needed, 2 * len(mirror)))
            grown[:index_length] = memoryview(mirror)[:index_length]
            self._index_mirror = mirror = grown
        mirror[index_length:needed] = index_entries
        if self.messages_count == 0:
            self.first_timestamp = first_timestamp
        self.messages_count += len(index_entries) // INDEX_ENTRY_SIZE
        self.size_bytes += records_size
        self.last_timestamp = last_timestamp

    def seal(self) -> None:
        """Make the segment durable (per policy) and read-only; its descriptors are closed.

        The segment is sealed even if the sync fails (the failure is raised): it is never
        appended to again.
        """
        if self.sealed:
            return
        try:
            self._close_descriptors(sync=True)
        finally:
            self._index_mirror = None
            self.sealed = True

    # ------------------------------------------------------------------ reading
    def read(self, first_offset: int, end_offset: int) -> bytes:
        """Records of offsets [first_offset, end_offset), which must lie in this segment."""
        if self.corrupt_reason is not None:
            raise self.corrupt_error()
        if not self.start_offset <= first_offset < end_offset <= self.next_offset:
            raise ValueError(
                f"offsets [{first_offset}, {end_offset}) are not in segment {self.log_path}"
            )
        index = self._index()
        first_position = _POSITION_AT.unpack_from(
            index, (first_offset - self.start_offset) * INDEX_ENTRY_SIZE
        )[0]
        last_position = _POSITION_AT.unpack_from(
            index, (end_offset - 1 - self.start_offset) * INDEX_ENTRY_SIZE
        )[0]
        if end_offset == self.next_offset:
            end_position = self.size_bytes
        else:
            end_position = _POSITION_AT.unpack_from(
                index, (end_offset - self.start_offset) * INDEX_ENTRY_SIZE
            )[0]
        if not first_position <= last_position < end_position <= self.size_bytes:
            problem: str | None = (
                f"index positions {first_position}..{end_position} are out of order"
            )
        else:
            data = read_all_at(self._reader(), end_position - first_position, first_position)
            problem = check_read_boundaries(
                data, first_offset, end_offset - 1, last_position - first_position
            )
        if problem is not None:
            self.mark_corrupt(problem)
            raise self.corrupt_error()
        return data

    def find_timestamp(self, timestamp_us: int) -> int | None:
        """Offset of the first message with timestamp >= ``timestamp_us`` in this segment."""
        if self.corrupt_reason is not None:
            raise self.corrupt_error()
        if (
            not self.messages_count
            or self.last_timestamp is None
            or self.last_timestamp < timestamp_us
        ):
            return None
        index = self._index()
        if _LITTLE_ENDIAN_HOST:
            with memoryview(index) as raw, raw[: self.messages_count * INDEX_ENTRY_SIZE] as used:
                with used.cast("Q") as words, words[1::2] as timestamps:
                    found = bisect_left(timestamps, timestamp_us)
        else:  # the cast view would read native (big-endian) words
            found = bisect_left(
                range(self.messages_count),
                timestamp_us,
                key=lambda i: _TIMESTAMP_AT.unpack_from(index, i * INDEX_ENTRY_SIZE)[0],
            )
        return self.start_offset + found

    def index_columns(self, first_offset: int, end_offset: int) -> tuple[bytes, bytes]:
        """``(boundaries, timestamps)`` of offsets [first_offset, end_offset) from the index.

        ``boundaries`` holds end - first + 1 little-endian u32 positions: each record's start,
        then the end of the last one; ``timestamps`` holds one little-endian u64 per record.
        Both are strided copies of the index bytes (no per-entry Python work, any host order).
        """
        if self.corrupt_reason is not None:
            raise self.corrupt_error()
        if not self.start_offset <= first_offset < end_offset <= self.next_offset:
            raise ValueError(
                f"offsets [{first_offset}, {end_offset}) are not in segment {self.log_path}"
            )
        index = self._index()
        first = (first_offset - self.start_offset) * INDEX_ENTRY_SIZE
        end = (end_offset - self.start_offset) * INDEX_ENTRY_SIZE
        with memoryview(index) as raw, raw[first:end] as entries:
            with entries.cast("I") as words, words[1::4] as positions:
                starts = positions.tobytes()
            with entries.cast("Q") as double_words, double_words[1::2] as stamps:
                timestamps = stamps.tobytes()
        if end_offset == self.next_offset:
            last = self.size_bytes.to_bytes(4, "little")
        else:
            last = bytes(index[end + 4 : end + 8])
        return starts + last, timestamps

    def index_entry(self, offset: int) -> tuple[int, int, int]:
        """``(relative_offset, position, timestamp)`` of one message (for tests and tools)."""
        return INDEX_ENTRY.unpack_from(
            self._index(), (offset - self.start_offset) * INDEX_ENTRY_SIZE
        )

    def _index(self) -> bytearray | mmap.mmap | bytes:
        if self._index_mirror is not None:
            return self._index_mirror
        if self._index_map is None:
            if self.messages_count == 0:
                return b""
            descriptor = os.open(self.index_path, os.O_RDONLY)
            try:
                self._index_map = mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
            finally:
                os.close(descriptor)  # read-only, never dirty: the mapping outlives it
            if len(self._index_map) < self.messages_count * INDEX_ENTRY_SIZE:
                self.mark_corrupt("index file shrank after start")
                raise CannotReadMessage(
                    reason=f"Cannot read message: index {self.index_path} shrank"
                )
        return self._index_map

    def _reader(self) -> int:
        if self._log_descriptor is None:
            self._log_descriptor = os.open(self.log_path, os.O_RDONLY)
        return self._log_descriptor

    # ------------------------------------------------------------------ closing
    def close_reader(self) -> None:
        """Close the read descriptor of a sealed segment (it reopens on the next read)."""
        if self.sealed and self._log_descriptor is not None:
            self._durability.close_file(self._log_descriptor)
            self._log_descriptor = None

    def close(self, sync: bool = True) -> None:
        """Close every descriptor and mapping; an active segment is synced first (per policy)."""
        self._close_descriptors(sync=sync and not self.sealed)
        if self._index_map is not None:
            try:
                self._index_map.close()
            except BufferError:  # a view is still alive somewhere; the mapping goes with it
                pass
            self._index_map = None

    def delete(self) -> None:
        self.close(sync=False)
        self._index_mirror = None
        for path in (self.log_path, self.index_path):
            path.unlink(missing_ok=True)

    def _close_descriptors(self, sync: bool) -> None:
        """Close both descriptors even if a sync fails; the first failure is raised afterwards."""
        failure: BaseException | None = None
        for name in ("_log_descriptor", "_index_descriptor"):
            descriptor = getattr(self, name)
            if descriptor is None:
                continue
            setattr(self, name, None)
            try:
                if sync:
                    self._durability.sync_now(descriptor)
            except BaseException as error:  # noqa: BLE001 - re-raised below
                failure = failure or error
            finally:
                self._durability.close_file(descriptor)
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        state = "corrupt" if self.corrupt_reason else "sealed" if self.sealed else "active"
        return (
            f"Segment({self.log_path.name}, {state}, "
            f"{self.messages_count} messages, {self.size_bytes} bytes)"
        )


# ---------------------------------------------------------------------- file primitives
def write_all_at(descriptor: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """Positioned write of all of ``data``, continuing after short writes."""
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, position)
        if written <= 0:
            raise OSError("write made no progress")
        view = view[written:]
        position += written


def read_all_at(descriptor: int, length: int, position: int) -> bytes:
    """Positioned read of exactly ``length`` bytes (fewer only if the file is shorter)."""
    data = os.pread(descriptor, length, position)
    if len(data) == length:
        return data
    parts = [data]
    received = len(data)
    while received < length:
        more = os.pread(descriptor, length - received, position + received)
        if not more:
            break
        parts.append(more)
        received += len(more)
    return b"".join(parts)
