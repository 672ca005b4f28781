"""Segment: a ``.log`` of stored records and its ``.index``, named by the segment's first offset.

Owns a segment's files: creating and opening them, appends (``write`` then ``publish``),
sealing, the index kept in memory or mapped, closing and deleting; its reads and index lookups
are ``segment_reads.SegmentReads`` and its verification and index rebuilds
``segment_checks.SegmentChecks``, its two base classes.

This class is the per-record kind (one index entry per offset, looked up directly, e.g.
iggy-v1); formats that index batches use its subclass ``batch_segment.BatchSegment``. The
record layout is the segment's ``format``'s (``formats.RecordFormat``).

The ``.log`` holds records exactly as a reader of the format gets them (``formats``). The
``.index`` holds one entry per record (``index_entry``: ``relative_offset u32 | position u32 |
timestamp u64``). A per-record format gives every offset of a segment a record (its offsets are
dense; holes exist only inside the batches of a batch format), so entry ``i`` is offset
``start_offset + i``: offset -> position is arithmetic, and timestamp -> offset is a binary
search over the timestamp column (a ``memoryview.cast`` view).

Invariants:
  * A segment's files are ``CachedFile``s of the process's descriptor cache (``descriptors``):
    a descriptor is opened when the file is read or written, pinned for that read or write (in
    whichever thread), and may be closed by the cache afterwards; a segment nobody uses holds
    none. The active segment's log and index are opened read-write; the log is the file the
    durability policy syncs.
  * The active segment keeps a mirror of its index in a bytearray with spare capacity; the
    mirror is replaced, never resized in place, when it grows, so short-lived views of it can
    never block an append.
  * An append is one positioned write of the log bytes and one of the index bytes; if either
    fails, both files are cut back to their previous size and the segment is unchanged. It comes
    in two halves, ``write`` (files; may run in a worker thread) then ``publish`` (memory, on
    the event loop): reads only ever see published batches.
  * A sealed segment's log is opened read-only when read; its index is memory-mapped on first
    use (a ``MappedFile``: a mapping holds a descriptor too, and counts against the same
    budget).
  * Every record a read returns was verified since it was last written (``verification``):
    records this process appended count as verified; any other range is checked by its first
    read (its format's ``verify``; iggy-v1's: layout, checksum, header map, against the index)
    before it is returned. A read stops before a bad record (logged once, refused with
    ``CannotReadMessage`` naming its offset when it is the first asked for); the records around
    it are served.
  * An index that disagrees with the log never takes the segment offline: it is rebuilt from
    the log (``index_rebuild``), written back safely, and reads go on with it
    (``index_generation`` counts rebuilds, so work begun with an older index is redone).
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from pathlib import Path

from rill.errors import (
    CannotCreateSegmentIndexFile,
    CannotCreateSegmentLogFile,
    CannotReadMessage,
    CannotSaveMessagesToSegment,
)
from rill.server.storage.descriptors import CachedFile, MappedFile, shared
from rill.server.storage.durability import Durability
from rill.server.storage.file_io import write_all_at
from rill.server.storage.paths import DataPaths
from rill.server.storage.formats import IGGY_V1, RecordFormat
from rill.server.storage.index_entry import INDEX_ENTRY_SIZE
from rill.server.storage.segment_checks import SegmentChecks
from rill.server.storage.segment_reads import SegmentReads
from rill.server.storage.verification import SegmentVerification

logger = logging.getLogger(__name__)

_POSITION_AT = struct.Struct("<4xI")
_TIMESTAMP_AT = struct.Struct("<8xQ")
_INITIAL_INDEX_CAPACITY = 64 * INDEX_ENTRY_SIZE


class Segment(SegmentReads, SegmentChecks):
    """One segment of a partition log; active (appendable) until sealed."""

    def __init__(
        self, directory: str | os.PathLike[str], start_offset: int, durability: Durability,
        record_format: RecordFormat = IGGY_V1,
    ) -> None:
        self.directory = Path(directory)
        self.format = record_format  # how its records are laid out, checked and found
        self.start_offset = start_offset
        self.log_path = DataPaths.segment_log(self.directory, start_offset)
        self.index_path = DataPaths.segment_index(self.directory, start_offset)
        self.messages_count = 0
        self.size_bytes = 0
        self.first_timestamp: int | None = None
        self.last_timestamp: int | None = None
        self.sealed = False
        self.verification = SegmentVerification(self.log_path)
        self.index_generation = 0  # rebuilds of the index from the log since open
        self._durability = durability
        self._log_file: CachedFile | None = None  # read-write while active, then read-only
        self._index_file: CachedFile | None = None  # active segments
        self._index_mirror: bytearray | None = None  # active segments
        self._index_map: MappedFile | None = None  # sealed segments, mapped on first use

    # ------------------------------------------------------------------ opening
    @classmethod
    def create(
        cls, directory: str | os.PathLike[str], start_offset: int, durability: Durability,
        record_format: RecordFormat = IGGY_V1,
    ) -> Segment:
        """A new, empty, active segment (existing files of that name are emptied)."""
        segment = cls(directory, start_offset, durability, record_format)
        files = shared()
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC
        try:
            segment._log_file = files.create(segment.log_path, flags)
        except OSError as error:
            raise CannotCreateSegmentLogFile(str(segment.log_path)) from error
        try:
            segment._index_file = files.create(segment.index_path, flags)
        except OSError as error:
            durability.close_file(segment._log_file)
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
        verified: bool = False,
        bad: dict[int, str] | None = None,
        record_format: RecordFormat = IGGY_V1,
        messages_count: int | None = None,
    ) -> Segment:
        """Reopen the last segment of a partition; its files must already agree (see recovery).
        ``verified``: recovery checked every record, and found ``bad`` refused.
        ``messages_count``: the offsets it holds, when that is not one per index entry."""
        segment = cls(directory, start_offset, durability, record_format)
        segment._log_file = shared().file(segment.log_path, os.O_RDWR)
        segment._index_file = shared().file(segment.index_path, os.O_RDWR)
        mirror = bytearray(max(_INITIAL_INDEX_CAPACITY, 2 * len(index_entries)))
        mirror[: len(index_entries)] = index_entries
        segment._index_mirror = mirror
        segment.messages_count = (len(index_entries) // INDEX_ENTRY_SIZE
                                  if messages_count is None else messages_count)
        segment.size_bytes = size_bytes
        if segment.messages_count:
            segment.first_timestamp = _TIMESTAMP_AT.unpack_from(mirror, 0)[0]
            segment.last_timestamp = _TIMESTAMP_AT.unpack_from(
                mirror, len(index_entries) - INDEX_ENTRY_SIZE
            )[0]
        if verified:
            segment.verification.reset(start_offset, segment.next_offset, bad or {})
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
        verified: bool = False,
        bad: dict[int, str] | None = None,
        record_format: RecordFormat = IGGY_V1,
    ) -> Segment:
        """A sealed segment whose files were checked at start; it opens nothing until read.
        ``verified``: recovery checked every record, and found ``bad`` refused."""
        segment = cls(directory, start_offset, durability, record_format)
        segment._open_read_only()
        segment.messages_count = messages_count
        segment.size_bytes = size_bytes
        segment.first_timestamp = first_timestamp
        segment.last_timestamp = last_timestamp
        if verified:
            segment.verification.reset(start_offset, segment.next_offset, bad or {})
        return segment

    # ------------------------------------------------------------------ properties
    @property
    def next_offset(self) -> int:
        return self.start_offset + self.messages_count

    @property
    def records_count(self) -> int:
        """Records stored (one per offset here; a batch-index segment's may hold fewer)."""
        return self.messages_count

    @property
    def end_offset(self) -> int:
        """Offset of the last message (start_offset - 1 when empty)."""
        return self.start_offset + self.messages_count - 1

    @property
    def log_file(self) -> CachedFile:
        """The active segment's log: the file appends make dirty and the policy syncs."""
        if self._log_file is None or self.sealed:
            raise RuntimeError(f"segment {self.log_path} is not active")
        return self._log_file

    @property
    def has_open_reader(self) -> bool:
        """Whether a sealed segment's log holds a descriptor now."""
        return self.sealed and self._log_file is not None and self._log_file.is_open

    # ------------------------------------------------------------------ writing
    def append(
        self,
        records: bytes,
        index_entries: bytes | bytearray,
        first_timestamp: int,
        last_timestamp: int,
        count: int | None = None,
    ) -> None:
        """Write one stamped batch: one write to the log, one to the index. ``count``: the
        offsets it holds (a batch-index format's; a per-record one's index entries tell)."""
        self.write(records, index_entries)
        self.publish(len(records), index_entries, first_timestamp, last_timestamp, count)

    def write(self, records: bytes | bytearray, index_entries: bytes | bytearray) -> None:
        """The file half of ``append``: write a batch after the published end of both files.

        Readers only see what ``publish`` made visible, so this half may run in a worker thread
        while the event loop serves reads, provided nothing else writes to, publishes on or
        closes this segment meanwhile (the partition log keeps one append in flight).
        """
        self._write_files(records, index_entries, self.messages_count * INDEX_ENTRY_SIZE)

    def _write_files(self, records: bytes | bytearray, index_entries: bytes | bytearray,
                     index_length: int) -> None:
        """``write`` after ``index_length`` bytes of index (one entry per record here)."""
        if self.sealed or self._index_mirror is None:
            raise RuntimeError(f"segment {self.log_path} is sealed")
        assert self._log_file is not None and self._index_file is not None
        log_file, index_file = self._log_file, self._index_file
        try:
            log_descriptor = log_file.pin()
        except OSError as error:
            raise self._cannot_save(error) from error
        try:
            try:
                index_descriptor = index_file.pin()
            except OSError as error:
                raise self._cannot_save(error) from error
            try:
                totals = self._durability.io_totals
                write_all_at(log_descriptor, records, self.size_bytes, totals)
                write_all_at(index_descriptor, index_entries, index_length, totals)
            except OSError as error:
                for descriptor, length in (
                    (log_descriptor, self.size_bytes),
                    (index_descriptor, index_length),
                ):
                    try:
                        os.ftruncate(descriptor, length)
                    except OSError:
                        logger.exception("cannot cut %s back after a failed append",
                                         self.log_path)
                raise self._cannot_save(error) from error
            finally:
                index_file.unpin()
        finally:
            log_file.unpin()

    def _cannot_save(self, error: OSError) -> CannotSaveMessagesToSegment:
        return CannotSaveMessagesToSegment(
            reason=f"Cannot save messages to segment {self.log_path}: {error}")

    def publish(
        self,
        records_size: int,
        index_entries: bytes | bytearray,
        first_timestamp: int,
        last_timestamp: int,
        count: int | None = None,
    ) -> None:
        """The memory half of ``append`` (event loop): make a batch ``write`` wrote readable.
        One index entry per record: ``count`` is not needed (see ``BatchSegment``)."""
        if self.sealed or self._index_mirror is None:
            raise RuntimeError(f"segment {self.log_path} is sealed")
        self._mirror_entries(index_entries, self.messages_count * INDEX_ENTRY_SIZE)
        if self.messages_count == 0:
            self.first_timestamp = first_timestamp
        first_new = self.next_offset
        self.messages_count += len(index_entries) // INDEX_ENTRY_SIZE
        self.verification.add_verified(first_new, self.next_offset)  # stamped here
        self.size_bytes += records_size
        self.last_timestamp = last_timestamp

    def _mirror_entries(self, index_entries: bytes | bytearray, index_length: int) -> None:
        """Put ``index_entries`` in the in-memory index after its first ``index_length`` bytes
        (growing it by doubling)."""
        mirror = self._index_mirror
        needed = index_length + len(index_entries)
        if needed > len(mirror):
            grown = bytearray(max(needed, 2 * len(mirror)))
            grown[:index_length] = memoryview(mirror)[:index_length]
            self._index_mirror = mirror = grown
        mirror[index_length:needed] = index_entries

    def seal(self) -> None:
        """Make the segment durable (per policy) and read-only; its descriptors are closed.

        The segment is sealed even if the sync fails (the failure is raised): it is never
        appended to again.
        """
        if self.sealed:
            return
        try:
            self._close_files(sync=True)
        finally:
            self._index_mirror = None
            self._open_read_only()

    def _open_read_only(self) -> None:
        """From now on the segment is sealed: its log is read through a read-only descriptor,
        its index through a mapping (both made on first use)."""
        self.sealed = True
        files = shared()
        self._log_file = files.file(self.log_path, os.O_RDONLY)
        self._index_map = files.mapped(self.index_path)

    def _position(self, index: bytearray | mmap.mmap | bytes, offset: int) -> int:
        return _POSITION_AT.unpack_from(index, (offset - self.start_offset) * INDEX_ENTRY_SIZE)[0]

    def _index(self) -> bytearray | mmap.mmap | bytes:
        if self._index_mirror is not None:
            return self._index_mirror
        if self.messages_count == 0 or self._index_map is None:
            return b""
        for attempt in range(2):
            try:
                mapping = self._index_map.get()
            except ValueError:  # an empty file cannot be mapped
                mapping = None
            except OSError as error:
                raise CannotReadMessage(
                    reason=f"Cannot read message: cannot map the index {self.index_path}: "
                    f"{error}"
                ) from error
            if mapping is not None and len(mapping) >= self.messages_count * INDEX_ENTRY_SIZE:
                return mapping
            if attempt:
                break
            self._rebuild_index("the index file shrank after start")
            if self._index_mirror is not None:  # the rebuilt index could not be written
                return self._index_mirror
        raise CannotReadMessage(
            reason=f"Cannot read message: the index of {self.log_path} is shorter than its "
            f"{self.messages_count} messages, also after a rebuild"
        )

    # ------------------------------------------------------------------ index rebuilds
    def _install_index(self, entries: bytearray, written: bool) -> None:
        """Use a rebuilt index: the active segment's is rewritten in place (recovery rebuilds
        the tail's index after an unclean stop anyway); a sealed one's file was replaced
        (``written``), so its mapping is dropped, or it is kept in memory when that failed."""
        if not self.sealed and self._index_mirror is not None:
            mirror = bytearray(self._index_mirror)  # replaced, never changed under a view
            mirror[: len(entries)] = entries
            self._index_mirror = mirror
            index_file = self._index_file
            assert index_file is not None
            try:
                descriptor = index_file.pin()
                try:
                    write_all_at(descriptor, entries, 0, self._durability.io_totals)
                finally:
                    index_file.unpin()
                self._durability.sync_now(index_file)
            except Exception as error:  # noqa: BLE001 - the next start rebuilds it again
                logger.error("cannot write the rebuilt index %s: %s", self.index_path, error)
            return
        if self._index_map is not None:
            self._index_map.drop()  # the file was replaced: map the new one when read
        self._index_mirror = None if written else bytearray(entries)

    def bad_end(self, offset: int) -> int:
        """Where the unit a read refuses with the bad record ``offset`` ends: the record."""
        return offset + 1

    def _index_hints(self) -> bytes | None:
        """The index as it is, for a rebuild to find records with (None when unreadable)."""
        length = self.messages_count * INDEX_ENTRY_SIZE
        if self._index_mirror is not None:
            return bytes(self._index_mirror[:length])
        try:
            return self.index_path.read_bytes()[:length]
        except OSError:
            return None

    # ------------------------------------------------------------------ closing
    def close(self, sync: bool = True) -> None:
        """Close every descriptor and mapping; an active segment is synced first (per policy)."""
        self._close_files(sync=sync and not self.sealed)
        if self._index_map is not None:
            self._index_map.drop()
            self._index_map = None

    def delete(self) -> None:
        self.close(sync=False)
        self._index_mirror = None
        for path in (self.log_path, self.index_path):
            path.unlink(missing_ok=True)

    def _close_files(self, sync: bool) -> None:
        """Close both files even if a sync fails; the first failure is raised afterwards."""
        failure: BaseException | None = None
        for name in ("_log_file", "_index_file"):
            file = getattr(self, name)
            if file is None:
                continue
            setattr(self, name, None)
            try:
                if sync:
                    self._durability.sync_now(file)
            except BaseException as error:  # noqa: BLE001 - re-raised below
                failure = failure or error
            finally:
                self._durability.close_file(file)
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        state = "sealed" if self.sealed else "active"
        return (
            f"Segment({self.log_path.name}, {state}, "
            f"{self.messages_count} messages, {self.size_bytes} bytes)"
        )
