"""The replica side of a partition log: leader epochs, a follower's appends, truncation and the
high-watermark checkpoint (room for replication, cluster-design.md §2.7-2.9).

``ReplicaLog`` is a part of ``PartitionLog`` (its base class), kept apart by job; it works on
the log's segments through the log's own helpers.

Leader epochs: every append stamps ``leader_epoch`` (0 without replication; set by the owner)
and epochs never decrease along the log (an append below the last stored epoch is refused).
Where they are kept depends on the format: a batch-index format that keeps epochs (kafka-v2)
has each batch's epoch in its index entry (its only record: a follower copies those bytes);
a per-record format (iggy-v1), whose records carry none, has the partition's
``leader-epoch-checkpoint`` (``checkpoints.LeaderEpochs``: epoch -> first offset, as Kafka
keeps beside its log; written only once an epoch above 0 is appended, so a standalone log has
no such file). ``last_epoch`` and ``epoch_end`` (Kafka's OffsetsForLeaderEpoch) answer from
either.

Truncation (``truncate_to``, KIP-101's follower truncation): the log and index tails are cut
at a unit boundary (a record; a whole batch for a batch format), never below a floor the
caller gives nor below the log start, through ``storage.truncation`` (a marker makes a stop
mid-way complete at the next open). Appends continue at the offset cut to; the epochs that
start at or after it are dropped, a stored high watermark above it is lowered to it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rill.errors import CannotAppendMessage
from rill.protocol.buffer import DecodeError
from rill.server.storage.batch_segment import BatchSegment
from rill.server.storage.checkpoints import (
    LeaderEpochs,
    read_high_watermark,
    read_incarnation,
    write_high_watermark,
    write_incarnation,
)
from rill.server.storage.durability import Durability
from rill.server.storage.formats.iggy_v1_checks import KIND_GOOD, ScanResult
from rill.server.storage.index_entry import INDEX_ENTRY, MAX_POSITION
from rill.server.storage.recovery import recover_tail
from rill.server.storage.truncation import TruncationPlan, carry_out, check_cut

if TYPE_CHECKING:
    from rill.server.storage.formats import RecordFormat
    from rill.server.storage.partition_log import LogSettings
    from rill.server.storage.segment import Segment


# one write of a follower's append: (segment, records, index entries, first timestamp, count,
# last timestamp)
_Write = tuple[Any, Any, bytearray, int, int, int]


class ReplicaLog:
    """Leader epochs, follower appends, truncation and the high-watermark checkpoint of a
    ``PartitionLog`` (see the module docstring)."""

    directory: Path
    settings: LogSettings
    format: RecordFormat
    _durability: Durability
    _segments: list[Segment]
    _starts: list[int]
    _last_timestamp: int
    _closed: bool
    _leader_epoch = 0  # see ``leader_epoch``
    _epochs: LeaderEpochs | None = None  # a per-record format's checkpoint

    if TYPE_CHECKING:  # the log's own helpers
        next_offset: int
        first_offset: int

        def _settle(self) -> None: ...
        def _seal_active(self) -> None: ...
        def _segment_for(self, size: int) -> Segment: ...
        def _write(self, active: Segment, records: bytes | bytearray,
                   index_entries: bytearray, timestamp: int, count: int,
                   written: bool = False, last_timestamp: int | None = None) -> None: ...
        async def _write_async(self, active: Segment, records: Any, index_entries: bytearray,
                               timestamp: int, count: int, last_timestamp: int) -> None: ...

    def _open_replica_state(self) -> None:
        """At open: a per-record format's leader-epoch checkpoint, the stored high watermark
        and incarnation."""
        if self.format.entry_epoch is None:
            self._epochs = LeaderEpochs(self.directory, self._durability)
        self._stored_high_watermark = read_high_watermark(self.directory)
        self._incarnation = read_incarnation(self.directory)

    # ------------------------------------------------------------------ leader epochs
    @property
    def leader_epoch(self) -> int:
        """The leader epoch every append stamps: 0 for a log without replication; a
        replication layer sets it to the partition's current epoch when this node becomes its
        leader (after every open too: what is stored is the epochs of the records, not this).
        It never goes below the log's ``last_epoch`` (it may come down to it: a follower whose
        truncation removed a later epoch's records), and an append refuses an epoch below
        ``last_epoch``, so epochs never decrease along the log. A batch format keeps it in each batch's index
        entry, a per-record one in the leader-epoch checkpoint (the module docstring)."""
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        last = self.last_epoch
        if epoch < min(self._leader_epoch, last if last is not None else 0):
            raise ValueError(f"leader epoch {epoch} is below this log's {last}")
        self._leader_epoch = epoch

    @property
    def last_epoch(self) -> int | None:
        """Leader epoch of the last stored record (batch); None when the log holds none."""
        if self._epochs is not None:
            return self._epochs.last_epoch(self.first_offset, self.next_offset)
        for segment in reversed(self._segments):
            assert isinstance(segment, BatchSegment)
            epoch = segment.last_epoch
            if epoch is not None:
                return epoch
        return None

    def epoch_end(self, epoch: int) -> tuple[int, int] | None:
        """Kafka's OffsetsForLeaderEpoch over the stored records: ``(the largest epoch <=
        epoch stored in the log, its end offset)``, the end offset being the first offset of
        the first record (batch) of a larger epoch, or ``next_offset`` when there is none. None
        when every stored record has a larger epoch (including below what retention left), or
        there is none: Kafka's broker answers that case with ``(epoch, start offset of the
        first epoch it knows)`` = ``(epoch, first_offset)`` here, so that a follower truncates
        to the leader's log start; the caller chooses. A batch format: newest segment first, a
        binary search over each one's entries; a per-record one: its checkpoint."""
        if self._epochs is not None:
            return self._epochs.epoch_end(epoch, self.first_offset, self.next_offset)
        end = self.next_offset
        for segment in reversed(self._segments):
            assert isinstance(segment, BatchSegment)
            found, larger_from = segment.epoch_split(epoch)
            if larger_from is not None:
                end = larger_from
            if found is not None:
                return found, end
        return None

    def epochs_from(self, offset: int) -> list[tuple[int, int]]:
        """The leader epochs of the records from ``offset`` on, as (epoch, first offset) pairs
        in order: the epoch of the record at ``offset`` (with ``offset``), then each later
        epoch's start: what a follower sets before appending each run of a per-record format,
        whose records carry no epoch. Empty when no record is there, and for a batch format
        (its batches carry their epochs)."""
        if offset >= self.next_offset or self._epochs is None:
            return []
        return epochs_after(self._epochs._live(self.first_offset, self.next_offset),
                            max(offset, self.first_offset))

    def _stamping_epoch(self) -> int:
        """The epoch an append stamps, refused if below the last stored record's. A per-record
        format's checkpoint learns it here, before the records are written (a pair whose
        records never came holds no offset: it is not answered, and the next epoch's pair takes
        its place, ``checkpoints.LeaderEpochs``)."""
        epoch, epochs = self._leader_epoch, self._epochs
        # a checkpoint's last pair bounds every stored record's epoch: an epoch at or above it
        # (every append of a standalone log, at epoch 0 with no pair) needs no lookup
        if epochs is None or (epochs.pairs and epoch < epochs.pairs[-1][0]):
            last = self.last_epoch
            if last is not None and epoch < last:
                raise CannotAppendMessage(reason=(
                    f"Cannot append message: leader epoch {epoch} is below the epoch "
                    f"{last} of the last records of {self.directory}"))
        # written before the records: never behind them (only a new epoch changes it: an
        # epoch 0 with no pair, or the last pair's, is already there)
        if epochs is not None and epoch != (epochs.pairs[-1][0] if epochs.pairs else 0):
            epochs.note(epoch, self.next_offset, self.first_offset)
        return epoch

    # ------------------------------------------------------------------ incarnation
    _incarnation: int | None = None

    @property
    def incarnation(self) -> int | None:
        """Which incarnation of its partition this log holds, as ``store_incarnation`` last
        stored it (read at open); None when none was stored (the partition's first)."""
        return self._incarnation

    def store_incarnation(self, incarnation: int) -> None:
        """Write the incarnation checkpoint (atomically), once the log was emptied for it."""
        write_incarnation(self.directory, incarnation, self._durability)
        self._incarnation = incarnation

    # ------------------------------------------------------------------ high watermark
    _stored_high_watermark: int | None = None

    @property
    def stored_high_watermark(self) -> int | None:
        """The high watermark last stored with ``store_high_watermark`` (read at open; never
        past the log end: a truncation lowers it); None when none was stored (standalone)."""
        stored = self._stored_high_watermark
        return None if stored is None else min(stored, self.next_offset)

    def store_high_watermark(self, offset: int) -> None:
        """Write the partition's high-watermark checkpoint (atomically; a replication layer
        calls this now and then, as Kafka checkpoints its high watermarks)."""
        if not 0 <= offset <= self.next_offset:
            raise ValueError(f"high watermark {offset} is outside the log (0..{self.next_offset})")
        write_high_watermark(self.directory, offset, self._durability)
        self._stored_high_watermark = offset

    # ------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int, floor: int = 0) -> None:
        """Cut the log so that ``offset`` is its next offset (KIP-101's follower truncation):
        later segments removed, the one holding ``offset`` cut (log and index), synced, the
        epochs that start at or after ``offset`` dropped, a stored high watermark lowered to
        it. Refused (``TruncationRefused``, nothing changed) below ``floor`` (what the caller
        knows is committed), below ``first_offset``, past ``next_offset`` and inside a batch of
        a batch format. A stop part-way is completed when the log is opened next
        (``storage.truncation``); an I/O error part-way closes the log (reopen it to finish)."""
        self._settle()
        if self._closed:
            raise CannotAppendMessage(
                reason=f"Cannot append message: partition log {self.directory} is closed")
        if not check_cut(self.directory, offset, floor, self.first_offset, self.next_offset):
            return
        number = bisect_right(self._starts, offset) - 1
        boundary = self._segments[number]
        log_size, index_size = boundary.cut_point(offset)  # refuses a cut inside a batch
        plan = TruncationPlan(offset, boundary.start_offset, log_size, index_size)
        cut = self._segments[number:]
        del self._segments[number:]
        del self._starts[number:]
        try:
            for segment in cut:
                segment.close(sync=False)  # (the cut syncs what is kept)
            carry_out(self.directory, plan, self._durability)
            tail = recover_tail(self.directory, plan.segment, self._durability,
                                clean_shutdown=True, validate_checksum=False,
                                record_format=self.format)
        except BaseException:
            self._closed = True  # half cut: the next open completes it (the marker)
            for segment in self._segments:
                segment.close(sync=False)
            raise
        self._segments.append(tail)
        self._starts.append(tail.start_offset)
        self._last_timestamp = max((s.last_timestamp or 0 for s in self._segments), default=0)
        if self._epochs is not None:
            self._epochs.reload()
        if self._stored_high_watermark is not None:
            self._stored_high_watermark = min(self._stored_high_watermark, offset)
        if tail.size_bytes >= self.settings.segment_size:
            self._seal_active()

    def append_replicated(self, records: bytes, first_offset: int,
                          epochs: Sequence[Sequence[int]] | None = None) -> tuple[int, int]:
        """A follower's append (cluster-design.md): a leader's records as the leader stored
        them -- offsets, timestamps, ids and checksums (a batch format: whole batches, their
        leader epochs too) kept byte for byte -- at exactly the offsets they carry, which must
        run on from ``first_offset`` = this log's end. A rejected append writes nothing.
        Returns (first, last) offsets.

        Per-record formats (iggy-v1): one ``scan`` of the records (in C when built) checks
        each as recovery does (layout, checksum, header map), the offsets (``first_offset`` +
        i), the timestamps (never below the log's last) and builds the index entries at the
        places the records take in the active segment. Their records carry no epoch:
        ``epochs`` gives the leader's (epoch, first offset) runs over them (None: all at
        ``leader_epoch``), each appended at its epoch. Batch-index formats: see
        ``_replicated_batch_writes``."""
        self._settle()
        for write in self._replicated_writes(records, first_offset, epochs):
            self._write(*write[:5], last_timestamp=write[5])
        return first_offset, self.next_offset - 1

    async def append_replicated_async(self, records: bytes, first_offset: int,
                                      epochs: Sequence[Sequence[int]] | None = None
                                      ) -> tuple[int, int]:
        """``append_replicated`` for the event loop: the same checks and index entries here,
        each write's file half in a worker thread, published here (``_write_async``), for
        ``append_thread_min_size`` bytes or more (less: inline, as the hop would cost more
        than the write) unless the log's ``append_threads`` is "never"."""
        if (len(records) < self.settings.append_thread_min_size
                or self.settings.append_threads == "never"):
            return self.append_replicated(records, first_offset, epochs)
        self._settle()
        for write in self._replicated_writes(records, first_offset, epochs):
            await self._write_async(*write)
        return first_offset, self.next_offset - 1

    def _replicated_writes(self, records: bytes, first_offset: int,
                           epochs: Sequence[Sequence[int]] | None) -> Iterator[_Write]:
        """The checked writes of ``append_replicated``, each planned at the end the one before
        it left (its caller writes and publishes each before asking for the next); every
        check runs before the first is handed out."""
        if first_offset != self.next_offset:
            raise CannotAppendMessage(reason=(
                f"Cannot append message: the leader's records start at offset {first_offset}, "
                f"this log's next offset is {self.next_offset}"))
        if self.format.batch_index:
            return self._replicated_batch_writes(records, first_offset)
        active = self._segment_for(len(records))
        scanned = self.format.scan(records, 0, first_offset, active.start_offset,
                                   self._last_timestamp, position_base=active.size_bytes)
        check_replicated(scanned, records, first_offset)
        runs = [(int(epoch), int(start)) for epoch, start in epochs or ()
                if start < first_offset + scanned.count]
        if len(runs) <= 1:
            if runs:
                self.leader_epoch = runs[0][0]
            self._stamping_epoch()  # the leader's epoch of these records
            return iter([(active, records, scanned.index_entries, scanned.first_timestamp,
                          scanned.count, scanned.last_timestamp)])
        return self._epoch_runs(records, first_offset, scanned, active.size_bytes, runs)

    def _epoch_runs(self, records: bytes, first_offset: int, scanned: ScanResult, base: int,
                    runs: list[tuple[int, int]]) -> Iterator[_Write]:
        """One write per epoch run of checked per-record records, split where the scan put
        their records; each planned once the one before it is published (its segment may
        have been sealed in between)."""
        entries, count = memoryview(scanned.index_entries), scanned.count

        def byte_at(record: int) -> int:
            return (INDEX_ENTRY.unpack_from(entries, record * INDEX_ENTRY.size)[1] - base
                    if record < count else len(records))

        for number, (epoch, start) in enumerate(runs):
            start = max(start, first_offset)
            end = runs[number + 1][1] if number + 1 < len(runs) else first_offset + count
            if end <= start:
                continue
            piece = records[byte_at(start - first_offset):byte_at(end - first_offset)]
            active = self._segment_for(len(piece))
            placed = self.format.scan(piece, 0, start, active.start_offset,
                                      self._last_timestamp, position_base=active.size_bytes,
                                      verify_checksums=False)
            self.leader_epoch = epoch  # the leader's epoch of this run (never below the last)
            self._stamping_epoch()
            yield (active, piece, placed.index_entries, placed.first_timestamp, placed.count,
                   placed.last_timestamp)

    def _replicated_batch_writes(self, records: bytes, first_offset: int) -> Iterator[_Write]:
        """``_replicated_writes`` for a batch-index format: ``records`` must be whole batches
        that the format's ``scan`` walks cleanly to their end (checksums verified), offsets
        dense from ``first_offset``, timestamps from the log's last on, leader epochs never
        decreasing from the log's last; the entries ``scan`` builds (epochs included) are the
        index entries, moved to the segment's offsets and positions. The batches go into
        segments as the leader's appends put them (after each batch, a segment of
        ``segment_size`` bytes or more is sealed), so a follower with the leader's settings
        holds the leader's files byte for byte however the bytes are shipped."""
        entry_size = self.format.index_entry_size
        scanned = self.format.scan(records, 0, first_offset, first_offset, self._last_timestamp)
        check_replicated(scanned, records, first_offset)
        entries = scanned.index_entries
        numbers = len(entries) // entry_size
        heads = [INDEX_ENTRY.unpack_from(entries, number * entry_size)
                 for number in range(numbers)]  # (first offset - first_offset, position, ts)
        entry_epoch = self.format.entry_epoch
        if entry_epoch is not None:
            previous = self.last_epoch
            for number in range(numbers):
                epoch = entry_epoch(entries, number * entry_size)
                if previous is not None and epoch < previous:
                    raise DecodeError(f"the leader's batch at offset "
                                      f"{first_offset + heads[number][0]} has leader epoch "
                                      f"{epoch}, below the {previous} before it")
                previous = epoch
        return self._batch_groups(records, first_offset, scanned.count, entries, heads)

    def _batch_groups(self, records: bytes, first_offset: int, count: int, entries: bytearray,
                      heads: list[tuple[int, int, int]]) -> Iterator[_Write]:
        """One write per run of checked batches that share a segment, each planned once the
        one before it is published (a full segment is sealed in between)."""
        entry_size = self.format.index_entry_size
        numbers = len(heads)
        ends = [head[1] for head in heads[1:]] + [len(records)]
        end_offset = first_offset + count
        number = 0
        while number < numbers:
            active = self._segment_for(ends[number] - heads[number][1])
            start, base = heads[number][1], active.size_bytes
            last = number
            while (last + 1 < numbers and base + ends[last] - start < self.settings.segment_size
                   and base + ends[last + 1] - start <= MAX_POSITION):
                last += 1
            group = bytearray(entries[number * entry_size:(last + 1) * entry_size])
            shift = first_offset - active.start_offset
            for at in range(last + 1 - number):
                relative, position, timestamp = heads[number + at]
                INDEX_ENTRY.pack_into(group, at * entry_size, relative + shift,
                                      position - start + base, timestamp)
            group_end = (first_offset + heads[last + 1][0]) if last + 1 < numbers else end_offset
            yield (active, records[start:ends[last]], group, heads[number][2],
                   group_end - (first_offset + heads[number][0]), heads[last][2])
            number = last + 1


def epochs_after(pairs: list[tuple[int, int]], offset: int) -> list[tuple[int, int]]:
    """Of (epoch, start) ``pairs`` in order, the one holding ``offset`` (starting there) and
    every later one."""
    return [(epoch, max(start, offset)) for number, (epoch, start) in enumerate(pairs)
            if number + 1 >= len(pairs) or pairs[number + 1][1] > offset]


def check_replicated(scanned: ScanResult, records: bytes, first_offset: int) -> None:
    """A leader's records must scan cleanly to their end: else DecodeError, nothing written."""
    if scanned.stop_kind != KIND_GOOD or scanned.end_position != len(records) or not (
            scanned.count):
        raise DecodeError(
            f"the leader's records from offset {first_offset} do not scan cleanly: "
            f"{scanned.stop_reason or 'no record'} (byte {scanned.end_position} of "
            f"{len(records)})")
