"""Segment checks: the verification and index-rebuild side of a ``Segment`` (a mixin).

Owns: cutting a segment's unverified records into chunks the background verifier checks off
the event loop (``unverified_chunk``, ``record_verification``), and rebuilding a segment's
index from its log (``rebuild_job`` may run in a worker thread, ``apply_rebuild`` installs its
result on the event loop; ``_rebuild_index`` does both at once, for a read that cannot wait).

Invariants: whatever a job found is applied only if the segment's index is still the one the
job started from (``index_generation``); an applied rebuild leaves every record of the segment
either verified or bad, and the segment's timestamps and (sealed) size those of its records.
"""

from __future__ import annotations

import logging
import mmap
from pathlib import Path
from typing import TYPE_CHECKING

from rill.errors import CannotReadMessage
from rill.server.storage.durability import Durability
from rill.server.storage.file_io import IoTotals
from rill.server.storage.formats import RecordFormat
from rill.server.storage.index_rebuild import LocatedRecords, RebuildJob
from rill.server.storage.formats.iggy_v1_checks import KIND_CONTENT, KIND_GOOD
from rill.server.storage.index_entry import INDEX_ENTRY_SIZE, POSITION_FIELD, search_entries
from rill.server.storage.verification import SegmentVerification, VerificationJob

logger = logging.getLogger("rill.server.storage.segment")


class SegmentChecks:
    """Mixed into ``Segment``, whose state it reads and whose index it replaces."""

    if TYPE_CHECKING:  # what Segment provides
        log_path: Path
        index_path: Path
        start_offset: int
        messages_count: int
        size_bytes: int
        sealed: bool
        first_timestamp: int | None
        last_timestamp: int | None
        verification: SegmentVerification
        index_generation: int
        format: RecordFormat
        _durability: Durability

        @property
        def next_offset(self) -> int: ...

        def _index(self) -> bytearray | mmap.mmap | bytes: ...

        def _position(self, index: bytearray | mmap.mmap | bytes, offset: int) -> int: ...

        def _install_index(self, entries: bytearray, written: bool) -> None: ...

        def _index_hints(self) -> bytes | None: ...

        def bad_end(self, offset: int) -> int: ...

    @property
    def io_totals(self) -> IoTotals:
        """Where reads and writes of this segment's files are counted (its server's)."""
        return self._durability.io_totals

    def unverified_chunk(self, offset: int, max_bytes: int) -> VerificationJob | None:
        """The first unverified records at or after ``offset`` that are not known bad (about
        ``max_bytes`` of log, at least one record), to verify off the event loop; None when
        everything from ``offset`` on is verified or bad."""
        verification = self.verification
        for first, end in verification.gaps(offset, self.next_offset):
            while first < end and first in verification.bad:
                first += 1
            if first == end:
                continue
            end = verification.first_bad(first, end)
            index = self._index()
            base = min(self._position(index, first), self.size_bytes)
            start = self.start_offset  # the records past the first within max_bytes:
            end = start + search_entries(index, first + 1 - start, end - start,
                                         INDEX_ENTRY_SIZE, POSITION_FIELD, base + max_bytes, True)
            end_position = (
                self.size_bytes if end == self.next_offset else self._position(index, end)
            )
            return VerificationJob(
                self.log_path, first, end, first - start, base,
                min(max(end_position, base), self.size_bytes),
                bytes(index[(first - start) * INDEX_ENTRY_SIZE : (end - start) * INDEX_ENTRY_SIZE]),
                self.index_generation, self.format,
            )
        return None

    def record_verification(
        self, job: VerificationJob, count: int, kind: int, reason: str | None
    ) -> tuple[int, str | None]:
        """Take the outcome of a ``VerificationJob``: ``(offset to go on from, problem)``, the
        problem set when the index disagrees with the log (``rebuild_job`` then)."""
        if job.generation != self.index_generation:
            return job.first_offset, None  # the index was rebuilt meanwhile: check again
        self.verification.add_verified(job.first_offset, job.first_offset + count)
        if kind == KIND_GOOD:
            return job.end_offset, None
        bad = job.first_offset + count
        if kind == KIND_CONTENT:
            bad_end = self.bad_end(bad)
            self.verification.mark_bad(bad, bad_end, reason or "")
            return bad_end, None
        return bad, f"offset {bad}: {reason}"

    def rebuild_job(self) -> RebuildJob:
        """A rebuild of the index from the log as they are now (``RebuildJob.run`` may run in a
        worker thread; ``apply_rebuild`` then installs it)."""
        return RebuildJob(
            self.log_path, self.index_path, self.size_bytes, self.start_offset,
            self.messages_count, self._index_hints(), self.sealed, self._durability,
            self.index_generation, self.format,
        )

    def apply_rebuild(
        self, job: RebuildJob, result: tuple[LocatedRecords, bool], reason: str
    ) -> None:
        """Install what a ``RebuildJob`` found (on the event loop): the index, what is verified
        and what is bad. A job begun before another rebuild is dropped."""
        located, written = result
        if job.generation != self.index_generation:
            return
        if located.index_entries != job.hints:
            logger.warning("segment %s: the index disagrees with the log (%s); rebuilt from the "
                           "log", self.log_path, reason)
            self._install_index(located.index_entries, written)
        end = self.start_offset + job.count
        self.verification.reset(self.start_offset, end, located.bad)
        self.verification.add_verified(end, self.next_offset)  # appended since: stamped here
        if job.count:
            self.first_timestamp = located.first_timestamp
            if end == self.next_offset:
                self.last_timestamp = located.last_timestamp
        if self.sealed and located.end_position < self.size_bytes:
            logger.warning("segment %s: %d bytes after its last record are not served",
                           self.log_path, self.size_bytes - located.end_position)
            self.size_bytes = located.end_position
        self.index_generation += 1

    def _rebuild_index(self, reason: str) -> None:
        """The index disagrees with the log (``reason``): rebuild it now."""
        job = self.rebuild_job()
        try:
            result = job.run()
        except OSError as error:
            raise CannotReadMessage(
                reason=f"Cannot read message: cannot rebuild the index of {self.log_path}: "
                f"{error}"
            ) from error
        self.apply_rebuild(job, result, reason)
