"""Verification: which records of a segment were verified since they were last written, which
were found bad, and the background walk that verifies the rest after an unclean stop.

Owns:
  * ``SegmentVerification``: per segment, the verified offsets as a few merged ``[start, end)``
    intervals, and the bad records (offset -> reason). Records this process wrote count as
    verified (they were stamped here); everything else (sealed segments, and the part of the
    active segment recovery did not scan) is unverified after each start until verified. A
    bad record is logged once (one error line naming the file, offsets and reason) and
    refused with ``CannotReadMessage`` (4011) naming its offset, never sent.
  * ``VerificationJob``: one chunk of a segment checked off the event loop (its own read of
    the log, then its record format's ``verify``; iggy-v1's C twin releases the GIL).
  * ``verify_in_background``: walks every segment not yet verified, chunk by chunk in a worker
    thread, yielding to the event loop between chunks, and logs what it finds.

Invariants: an offset is never both verified and bad; the intervals stay sorted, disjoint and
merged; a rebuilt index (``Segment``) resets the state to what its scan proved.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from bisect import bisect_left, bisect_right
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from rill.errors import CannotReadMessage
from rill.server.storage.file_io import IoTotals, read_all_at

if TYPE_CHECKING:
    from rill.server.storage.formats import RecordFormat
    from rill.server.storage.partition_log import PartitionLog

logger = logging.getLogger(__name__)

VERIFY_CHUNK_BYTES = 8 * 1024 * 1024  # bytes of log one background step reads and checks


class SegmentVerification:
    """What is known of one segment's records: verified intervals and bad records."""

    __slots__ = ("log_path", "_starts", "_ends", "bad", "_bad_offsets")

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._starts: list[int] = []  # verified [start, end) intervals, sorted and merged
        self._ends: list[int] = []
        self.bad: dict[int, str] = {}
        self._bad_offsets: list[int] = []  # the keys of ``bad``, sorted

    # ------------------------------------------------------------------ verified offsets
    def add_verified(self, start: int, end: int) -> None:
        """Offsets [start, end) verified (or written by this process)."""
        if start >= end:
            return
        starts, ends = self._starts, self._ends
        if ends and ends[-1] == start:  # the common case: appending to the last interval
            ends[-1] = end
            return
        first = bisect_left(ends, start)  # first interval that ends at or after ``start``
        last = bisect_right(starts, end)  # intervals before this one start at or before ``end``
        if first < last:
            start = min(start, starts[first])
            end = max(end, ends[last - 1])
        starts[first:last] = [start]
        ends[first:last] = [end]

    def is_verified(self, start: int, end: int) -> bool:
        if start >= end:
            return True
        number = bisect_right(self._starts, start) - 1
        return number >= 0 and self._ends[number] >= end

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The unverified sub-ranges of [start, end), in order."""
        found: list[tuple[int, int]] = []
        number = max(bisect_right(self._starts, start) - 1, 0)
        position = start
        starts, ends = self._starts, self._ends
        while position < end and number < len(starts):
            if ends[number] <= position:
                number += 1
                continue
            if starts[number] > position:
                found.append((position, min(starts[number], end)))
            position = max(position, ends[number])
            number += 1
        if position < end:
            found.append((position, end))
        return found

    @property
    def intervals(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._ends))

    # ------------------------------------------------------------------ bad records
    def mark_bad(self, start: int, end: int, reason: str) -> None:
        """Records [start, end) are bad for ``reason``; logged once, refused from now on."""
        new = [offset for offset in range(start, end) if offset not in self.bad]
        if not new:
            return
        for offset in new:
            self.bad[offset] = reason
        self._bad_offsets = sorted(self.bad)
        span = f"offset {start}" if end - start == 1 else f"offsets {start}..{end - 1}"
        logger.error("segment %s: %s corrupt, refused to readers: %s", self.log_path, span, reason)

    def first_bad(self, start: int, end: int) -> int:
        """The first bad offset in [start, end), or ``end`` when none is."""
        if not self._bad_offsets:
            return end
        number = bisect_left(self._bad_offsets, start)
        if number < len(self._bad_offsets) and self._bad_offsets[number] < end:
            return self._bad_offsets[number]
        return end

    def error(self, offset: int) -> CannotReadMessage:
        """What a read of the bad record ``offset`` raises (4011)."""
        return CannotReadMessage(
            reason=f"Cannot read message: offset {offset} of {self.log_path} is corrupt: "
            f"{self.bad.get(offset, 'it cannot be located')}"
        )

    def reset(self, start: int, end: int, bad: dict[int, str]) -> None:
        """A scan checked all of [start, end): everything verified but ``bad`` (logged here
        unless known already)."""
        known = self.bad
        self._starts, self._ends = [], []
        self.bad, self._bad_offsets = {}, []
        runs: list[tuple[int, int, str]] = []  # new bad runs, one log line each
        for offset in sorted(bad):
            if offset in known:
                self.bad[offset] = known[offset]
                self._bad_offsets.append(offset)
            elif runs and runs[-1][1] == offset and runs[-1][2] == bad[offset]:
                runs[-1] = (runs[-1][0], offset + 1, bad[offset])
            else:
                runs.append((offset, offset + 1, bad[offset]))
        for run_start, run_end, reason in runs:
            self.mark_bad(run_start, run_end, reason)
        position = start
        for offset in self._bad_offsets:
            self.add_verified(position, offset)
            position = offset + 1
        self.add_verified(position, end)


@dataclass(frozen=True, slots=True)
class VerificationJob:
    """Records [first_offset, end_offset) of a segment to check off the event loop: its log
    from ``base_position`` to ``end_position``, and their index entries as they were when the
    job was made (``generation``: the segment's index generation then)."""

    log_path: Path
    first_offset: int
    end_offset: int
    relative_first: int
    base_position: int
    end_position: int
    entries: bytes
    generation: int
    record_format: RecordFormat

    def run(self, totals: IoTotals) -> tuple[int, int, str | None]:
        """In a worker thread: read the range (own descriptor; counted in ``totals``, the
        server's) and verify it."""
        descriptor = os.open(self.log_path, os.O_RDONLY)
        try:
            data = read_all_at(descriptor, self.end_position - self.base_position,
                               self.base_position, totals)
        finally:
            os.close(descriptor)
        return self.record_format.verify(data, self.entries, self.first_offset,
                                         self.relative_first, self.base_position)


async def verify_in_background(
    partition_logs: Callable[[], Iterable[PartitionLog]], chunk_bytes: int = VERIFY_CHUNK_BYTES
) -> None:
    """Verify every segment of every log that is not verified yet, off the event loop.

    Meant for the start after an unclean stop (the Core starts it). Reads go through the same
    ``Segment`` methods as client reads, so the two never disagree: whichever meets a bad record
    or a wrong index entry first marks it or rebuilds the index."""
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(1, thread_name_prefix="rill-verify")
    started = time.monotonic()
    segments = 0
    logger.info("verifying the segments recovery did not, in the background")
    try:
        for log in list(partition_logs()):
            for segment in log.segments:
                offset = segment.start_offset
                while log.holds(segment):
                    job = segment.unverified_chunk(offset, chunk_bytes)
                    if job is None:
                        break
                    try:
                        found = await loop.run_in_executor(executor, job.run, segment.io_totals)
                    except OSError as error:  # the file went away (retention) or cannot be read
                        logger.warning("background verification of %s: %s", job.log_path, error)
                        break
                    if not log.holds(segment):
                        break
                    offset, problem = segment.record_verification(job, *found)
                    if problem is not None:  # the index disagrees with the log: rebuild it
                        rebuild = segment.rebuild_job()
                        located = await loop.run_in_executor(executor, rebuild.run)
                        if log.holds(segment):
                            segment.apply_rebuild(rebuild, located, problem)
                    await asyncio.sleep(0)  # let the event loop serve between chunks
                segments += 1
    except Exception:  # noqa: BLE001 - reads still verify what they serve
        logger.exception("background verification stopped")
        return
    finally:
        executor.shutdown(wait=False)
    logger.info("background verification done: %d segments in %.1f s", segments,
                time.monotonic() - started)
