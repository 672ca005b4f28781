"""Truncation: cutting a partition's log back to an offset, safely across a crash.

Owns the ``truncation`` marker of a partition directory and the file steps of a cut. A cut to
``offset`` is planned by the log (``PartitionLog.truncate_to``: the segment holding the offset,
the log and index lengths that end before it), then carried out:

  1. the plan is written as the marker (atomically: ``checkpoints.write_atomically``);
  2. the later segments' files are deleted, newest first;
  3. the boundary segment's index, then its log, is cut to the planned length and synced;
  4. the directory is synced;
  5. the leader-epoch checkpoint loses the epochs that start at or after ``offset`` and a
     stored high watermark above ``offset`` is lowered to it (``checkpoints``);
  6. the marker is removed (the directory synced).

Every step is idempotent, so a stop anywhere is completed by ``complete_truncation`` when the
log is opened next (before recovery reads the segments): the cut happens whole or, when the
stop came before the marker was written, not at all. Recovery then treats the cut segment as
the tail (``recovery``).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from rill.server.storage.checkpoints import (
    clamp_high_watermark,
    trim_leader_epochs,
    write_atomically,
)
from rill.server.storage.durability import Durability
from rill.server.storage.paths import LOG_SUFFIX, DataPaths, parse_segment_file_name

logger = logging.getLogger(__name__)


class TruncationRefused(ValueError):
    """A cut the log refuses: below its floor or its start, past its end, inside a batch."""


def check_cut(name: object, offset: int, floor: int, first_offset: int, end: int) -> bool:
    """Whether cutting log ``name`` (its offsets ``first_offset``..``end - 1``) to ``offset``
    cuts anything (False: ``offset`` is its end already); ``TruncationRefused`` below
    ``floor`` or ``first_offset`` or past ``end``. Every log implementation's first step."""
    if offset < floor:
        raise TruncationRefused(f"cannot truncate {name} to offset {offset}: "
                                f"below the floor {floor}")
    if not first_offset <= offset <= end:
        raise TruncationRefused(
            f"cannot truncate {name} to offset {offset}: the log holds offsets "
            f"{first_offset}..{end - 1}")
    return offset != end


@dataclass(frozen=True, slots=True)
class TruncationPlan:
    offset: int  # the log's next offset after the cut
    segment: int  # start offset of the segment the cut falls in (kept, cut)
    log_size: int  # its log's length after the cut
    index_size: int  # its index's length after the cut


def carry_out(directory: Path, plan: TruncationPlan, durability: Durability) -> None:
    """Steps 1 to 6 (the module docstring); the segments must be closed."""
    write_atomically(DataPaths.truncation_marker(directory),
                     json.dumps(asdict(plan)).encode("ascii"), durability)
    _finish(directory, plan, durability)


def complete_truncation(directory: Path, durability: Durability) -> TruncationPlan | None:
    """Finish a truncation a stop interrupted (the marker is there): steps 2 to 6. Returns its
    plan, or None when there was none. A leftover temporary marker (a stop before step 1
    renamed it) is removed: that cut never started."""
    DataPaths.temporary(DataPaths.truncation_marker(directory)).unlink(missing_ok=True)
    marker = DataPaths.truncation_marker(directory)
    try:
        plan = TruncationPlan(**json.loads(marker.read_bytes()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as error:  # written atomically: never torn by a stop
        raise ValueError(f"truncation marker {marker} cannot be read: {error}") from error
    logger.warning("%s: completing a truncation to offset %d that a stop interrupted",
                   directory, plan.offset)
    _finish(directory, plan, durability)
    return plan


def _finish(directory: Path, plan: TruncationPlan, durability: Durability) -> None:
    _delete_later_segments(directory, plan.segment)
    boundary = DataPaths.segment_log(directory, plan.segment)
    _cut_file(DataPaths.segment_index(directory, plan.segment), plan.index_size, durability)
    _cut_file(boundary, plan.log_size, durability)
    durability.sync_directory(directory)
    trim_leader_epochs(directory, plan.offset, durability)
    clamp_high_watermark(directory, plan.offset, durability)
    DataPaths.truncation_marker(directory).unlink(missing_ok=True)
    durability.sync_directory(directory)


def _delete_later_segments(directory: Path, segment: int) -> None:
    """Delete the files of every segment that starts after ``segment``, newest first."""
    later = sorted((parsed[0] for parsed in map(parse_segment_file_name, os.listdir(directory))
                    if parsed is not None and parsed[0] > segment and parsed[1] == LOG_SUFFIX),
                   reverse=True)
    for start in later:
        _delete_segment(directory, start)
    # an index whose log went first (a stop between the two) is recovery's stray index


def _delete_segment(directory: Path, start: int) -> None:
    DataPaths.segment_log(directory, start).unlink(missing_ok=True)
    DataPaths.segment_index(directory, start).unlink(missing_ok=True)


def _cut_file(path: Path, size: int, durability: Durability) -> None:
    """Cut ``path`` to ``size`` bytes when longer, and sync it (per policy). A missing index
    is left to recovery (it rebuilds one from the log)."""
    try:
        descriptor = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        if path.name.endswith(LOG_SUFFIX):
            raise
        return
    try:
        if os.fstat(descriptor).st_size > size:
            os.ftruncate(descriptor, size)
        durability.sync_now(descriptor)
    finally:
        durability.close_file(descriptor)
