"""Checkpoints beside a partition's segments: its leader epochs, its high watermark and its
incarnation.

Owns three small files of a partition directory (``paths``) and their atomic writes:

  * ``leader-epoch-checkpoint`` (Kafka keeps one of the same shape beside its log): for a
    per-record format (iggy-v1), whose records carry no leader epoch, which epoch each run of
    offsets was appended at, as ``(epoch, start offset)`` pairs, epochs and start offsets
    increasing. Text: a version line (0), a count line, then one ``epoch start`` line per
    pair. A log whose records were all appended at epoch 0 (every standalone log) has no such
    file: the pairs are written once an epoch above 0 is appended (``LeaderEpochs``).
    A batch-index format (kafka-v2) keeps each batch's epoch in its index entry instead, the
    only record of it (a follower copies those bytes); it has no checkpoint.
  * ``high-watermark-checkpoint``: the last high watermark a replication layer stored (the
    version line, then the offset). A standalone log has none: its high watermark is its end.
  * ``incarnation-checkpoint``: which incarnation of its partition a replica log holds, a
    number the replication layer gives (the version line, then the number), written when the
    log is emptied for a new incarnation (a purge in a cluster). A log without one holds the
    partition's first incarnation.

Every write is atomic: a temporary file, synced, renamed over the file, the directory synced
(per the durability policy, as every other storage write): a crash leaves the old file or the
new one. A file that cannot be parsed is reported once (logged) and read as absent.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path

from rill.server.storage.durability import Durability
from rill.server.storage.file_io import write_all_at
from rill.server.storage.paths import DataPaths

logger = logging.getLogger(__name__)

VERSION = 0


def write_atomically(path: Path, data: bytes | bytearray, durability: Durability,
                     temporary: Path | None = None) -> None:
    """Replace ``path`` with ``data``: a temporary file beside it (``temporary``, or
    ``DataPaths.temporary(path)``), synced per the policy, renamed over it, the directory
    synced. A crash leaves the old or the new file, never a part of one."""
    temporary = temporary or DataPaths.temporary(path)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all_at(descriptor, data, 0, durability.io_totals)
        durability.sync_now(descriptor)
    finally:
        durability.close_file(descriptor)
    os.replace(temporary, path)
    durability.sync_directory(path.parent)


def _read_numbers(path: Path) -> list[list[int]] | None:
    """The lines of a checkpoint as integers, after checking its version; None when the file
    is absent or cannot be parsed (logged)."""
    try:
        text = path.read_text("ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        logger.error("checkpoint %s cannot be read (%s); ignored", path, error)
        return None
    try:
        lines = [[int(word) for word in line.split()] for line in text.splitlines()]
        if not lines or lines[0] != [VERSION]:
            raise ValueError(f"version line {lines[0] if lines else 'missing'}, expected "
                             f"{VERSION}")
        return lines[1:]
    except ValueError as error:
        logger.error("checkpoint %s cannot be parsed (%s); ignored", path, error)
        return None


# ---------------------------------------------------------------------- leader epochs
def read_leader_epochs(directory: Path) -> list[tuple[int, int]]:
    """The ``(epoch, start offset)`` pairs of a partition's checkpoint ([] when none)."""
    path = DataPaths.leader_epoch_checkpoint(directory)
    lines = _read_numbers(path)
    if not lines:
        return []
    try:
        count = lines[0][0]
        pairs = [(line[0], line[1]) for line in lines[1:] if len(line) == 2]
        if len(lines[0]) != 1 or len(pairs) != count or len(lines) != count + 1:
            raise ValueError(f"{count} pairs announced, {len(lines) - 1} lines found")
        for (epoch, start), (later_epoch, later_start) in zip(pairs, pairs[1:]):
            if not (epoch < later_epoch and start <= later_start):
                raise ValueError(f"pair ({later_epoch}, {later_start}) after ({epoch}, {start})")
    except (IndexError, ValueError) as error:
        logger.error("checkpoint %s cannot be parsed (%s); ignored", path, error)
        return []
    return pairs


def write_leader_epochs(directory: Path, pairs: list[tuple[int, int]],
                        durability: Durability) -> None:
    lines = [str(VERSION), str(len(pairs))] + [f"{epoch} {start}" for epoch, start in pairs]
    write_atomically(DataPaths.leader_epoch_checkpoint(directory),
                     ("\n".join(lines) + "\n").encode("ascii"), durability)


class LeaderEpochs:
    """The leader epochs of a per-record log, kept in its ``leader-epoch-checkpoint``.

    ``pairs`` (epoch, start offset): each epoch's first offset; an epoch runs to the next
    one's start (the last one to the log end). No pair at all stands for "epoch 0 from the log
    start" when the log holds records. ``note`` is told of every append, ``truncated`` of every
    truncation of the log (whose files and checkpoint ``storage.truncation`` already cut)."""

    def __init__(self, directory: Path, durability: Durability) -> None:
        self.directory = directory
        self._durability = durability
        self.pairs = read_leader_epochs(directory)

    def last_epoch(self, first_offset: int, next_offset: int) -> int | None:
        """The epoch of the last stored record; None when the log holds none."""
        live = self._live(first_offset, next_offset)
        return live[-1][0] if live else None

    def _live(self, first_offset: int, next_offset: int) -> list[tuple[int, int]]:
        """The pairs whose offsets the log still holds (retention drops whole runs), with the
        implicit epoch 0 when there is no pair. A pair whose run holds no offset (an epoch
        noted for an append that wrote nothing, then a later one from the same offset) is
        not one: no record has its epoch."""
        if next_offset <= first_offset:
            return []
        pairs = self.pairs or [(0, first_offset)]
        starts = [start for _, start in pairs]
        keep = max(bisect_right(starts, first_offset) - 1, 0)  # the run holding the log start
        held = [pair for pair in pairs[keep:] if pair[1] < next_offset]
        return [pair for pair, after in zip(held, held[1:] + [(None, next_offset)])
                if pair[1] < after[1]]

    def epoch_end(self, epoch: int, first_offset: int, next_offset: int
                  ) -> tuple[int, int] | None:
        """``(the largest stored epoch <= epoch, the start of the next one or the log end)``;
        None when every stored record has a larger epoch or there is none (as
        ``PartitionLog.epoch_end``)."""
        live = self._live(first_offset, next_offset)
        found = bisect_right([stored for stored, _ in live], epoch) - 1
        if found < 0:
            return None
        end = live[found + 1][1] if found + 1 < len(live) else next_offset
        return live[found][0], end

    def note(self, epoch: int, first_offset: int, log_start: int) -> None:
        """Records from ``first_offset`` were appended at ``epoch`` (never below the last one:
        the log checks that first). ``log_start``: the log's first offset, where the implicit
        epoch 0 starts when records came before. Writes the checkpoint when the epoch is new
        and above 0 (or follows stored pairs). A last pair from ``first_offset`` itself holds
        no record (the append it was noted for wrote nothing): it gives way."""
        pairs = self.pairs
        if pairs and pairs[-1][1] == first_offset and pairs[-1][0] != epoch:
            pairs = pairs[:-1]
        if pairs:
            if pairs[-1][0] == epoch:
                if pairs is not self.pairs:
                    write_leader_epochs(self.directory, pairs, self._durability)
                    self.pairs = pairs
                return
            if epoch < pairs[-1][0]:
                raise ValueError(f"leader epoch {epoch} is below the stored "
                                 f"{pairs[-1][0]}")
            pairs = pairs + [(epoch, first_offset)]
        elif epoch == 0 and not self.pairs:
            return  # epoch 0 from the log start: implicit, no file
        else:
            pairs = ([(0, log_start)] if first_offset > log_start else []) + [
                (epoch, first_offset)]
        write_leader_epochs(self.directory, pairs, self._durability)
        self.pairs = pairs

    def reload(self) -> None:
        """Read the checkpoint again (after a truncation cut it)."""
        self.pairs = read_leader_epochs(self.directory)

    def clear(self) -> None:
        """The log was purged: no epoch is stored any more."""
        DataPaths.leader_epoch_checkpoint(self.directory).unlink(missing_ok=True)
        self._durability.sync_directory(self.directory)
        self.pairs = []


def trim_leader_epochs(directory: Path, offset: int, durability: Durability) -> None:
    """Drop the pairs of epochs that start at or after ``offset`` (a truncation to it); the
    file goes when none is left (as a log that never had any)."""
    pairs = read_leader_epochs(directory)
    kept = [pair for pair in pairs if pair[1] < offset]
    if kept == pairs:
        return
    if kept:
        write_leader_epochs(directory, kept, durability)
    else:
        DataPaths.leader_epoch_checkpoint(directory).unlink(missing_ok=True)


# ---------------------------------------------------------------------- high watermark
def _read_one_number(path: Path, what: str) -> int | None:
    """A checkpoint holding one number (after the version line); None when there is none or
    it cannot be parsed (logged)."""
    lines = _read_numbers(path)
    if lines is None:
        return None
    if len(lines) != 1 or len(lines[0]) != 1 or lines[0][0] < 0:
        logger.error("checkpoint %s: expected one %s; ignored", path, what)
        return None
    return lines[0][0]


def _write_one_number(path: Path, number: int, what: str, durability: Durability) -> None:
    if number < 0:
        raise ValueError(f"{what} {number} is negative")
    write_atomically(path, f"{VERSION}\n{number}\n".encode("ascii"), durability)


def read_high_watermark(directory: Path) -> int | None:
    """The stored high watermark; None when none was stored (or it cannot be parsed)."""
    return _read_one_number(DataPaths.high_watermark_checkpoint(directory), "offset")


def write_high_watermark(directory: Path, offset: int, durability: Durability) -> None:
    _write_one_number(DataPaths.high_watermark_checkpoint(directory), offset,
                      "high watermark", durability)


def clamp_high_watermark(directory: Path, offset: int, durability: Durability) -> None:
    """A truncation to ``offset``: a stored high watermark above it is lowered to it."""
    stored = read_high_watermark(directory)
    if stored is not None and stored > offset:
        write_high_watermark(directory, offset, durability)


# ---------------------------------------------------------------------- incarnation
def read_incarnation(directory: Path) -> int | None:
    """The stored incarnation; None when none was stored (or it cannot be parsed)."""
    return _read_one_number(DataPaths.incarnation_checkpoint(directory), "number")


def write_incarnation(directory: Path, incarnation: int, durability: Durability) -> None:
    _write_one_number(DataPaths.incarnation_checkpoint(directory), incarnation, "incarnation",
                      durability)
