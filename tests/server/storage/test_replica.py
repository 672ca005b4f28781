"""The replica side of a partition log (``storage.replica``): truncation at every boundary, in
both record formats, across a restart and across a stop in the middle of it (a real process
killed between the file steps); leader epochs of a per-record log (its checkpoint); the
high-watermark checkpoint.

The reference for a truncated log is a second log that received the same appends up to the
offset cut to: the two directories must hold the same files, byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from storage_helpers import read_messages, snapshot
from formats.test_kafka_v2 import EPOCH, build, produce, read_back

from rill.errors import CannotAppendMessage, RillError
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.partition_log import LogSettings, PartitionLog
from rill.server.storage.paths import DataPaths
from rill.server.storage.truncation import TruncationRefused

FORMATS = ("iggy-v1", "kafka-v2")
BATCHES = 12  # of 3 records each: offsets 0..35
SEGMENT_SIZE = {"iggy-v1": 700, "kafka-v2": 500}  # a few batches per segment


def settings(record_format: str) -> LogSettings:
    return LogSettings(segment_size=SEGMENT_SIZE[record_format], record_format=record_format)


def open_at(directory: Path, record_format: str, clean_shutdown: bool = True) -> PartitionLog:
    return PartitionLog.open(directory, settings(record_format), Durability(FsyncPolicy.ALWAYS),
                             clean_shutdown=clean_shutdown)


def append_batch(log: PartitionLog, number: int) -> None:
    """Batch ``number`` (offsets 3n..3n+2), the same bytes whenever it is appended."""
    if log.format.name == "kafka-v2":
        produce(log, build(3, base_ms=1_700_000_000_000 + 10 * number, first=3 * number))
    else:
        log.append(encode_messages([Message(b"m%d" % (3 * number + n) * 20, id=3 * number + n + 1)
                                    for n in range(3)]), 1_000 + number)


def filled(directory: Path, record_format: str, batches: int = BATCHES) -> PartitionLog:
    log = open_at(directory, record_format)
    log.leader_epoch = EPOCH
    for number in range(batches):
        append_batch(log, number)
    return log


def offsets_read(log: PartitionLog) -> list[int]:
    if log.format.name == "kafka-v2":
        _, chunks = log.read(0, 1_000)
        return [found[0] for found in read_back(b"".join(chunks))]
    return [message.offset for message in read_messages(log, 0, 1_000)]


def cut_points(log: PartitionLog) -> dict[str, int]:
    """The boundaries a truncation can meet, by name."""
    starts = [segment.start_offset for segment in log.segments]
    assert len(starts) >= 4
    inside = starts[1] + 3  # a batch boundary inside the second segment
    assert starts[1] < inside < starts[2]
    return {"log start": starts[0], "segment start": starts[2], "inside a segment": inside,
            "last segment start": starts[-1], "whole later segments": starts[1]}


def reference(directory: Path, record_format: str, offset: int) -> dict[str, bytes]:
    """The files of a log that received the appends up to ``offset`` only."""
    log = filled(directory, record_format, offset // 3)
    log.close()
    return snapshot(directory)


# ---------------------------------------------------------------------- truncation
@pytest.mark.parametrize("record_format", FORMATS)
def test_truncation_at_every_boundary_leaves_the_files_of_a_log_that_stopped_there(
        tmp_path: Path, record_format: str) -> None:
    probe = filled(tmp_path / "probe", record_format)
    points = cut_points(probe)
    probe.close()
    for name, offset in points.items():
        directory = tmp_path / name.replace(" ", "-")
        log = filled(directory, record_format)
        log.truncate_to(offset)
        assert (log.next_offset, offsets_read(log)) == (offset, list(range(offset))), name
        assert log.last_epoch == (EPOCH if offset else None), name
        log.close()
        assert snapshot(directory) == reference(tmp_path / f"{name}-ref", record_format,
                                                offset), name


@pytest.mark.parametrize("record_format", FORMATS)
@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_appends_go_on_at_the_offset_cut_to_and_after_a_restart(
        tmp_path: Path, record_format: str, clean_shutdown: bool) -> None:
    log = filled(tmp_path / "log", record_format)
    cut = log.segments[2].start_offset
    log.truncate_to(cut)
    log.leader_epoch = EPOCH + 1
    append_batch(log, cut // 3)  # the batch that followed, again, at a later epoch
    assert log.next_offset == cut + 3 and log.epoch_end(EPOCH) == (EPOCH, cut)
    log.close()
    reopened = open_at(tmp_path / "log", record_format, clean_shutdown)
    assert offsets_read(reopened) == list(range(cut + 3))
    assert reopened.epoch_end(EPOCH) == (EPOCH, cut)
    assert reopened.epoch_end(EPOCH + 1) == (EPOCH + 1, cut + 3)
    reopened.leader_epoch = EPOCH + 1
    for number in range(cut // 3 + 1, BATCHES):
        append_batch(reopened, number)
    assert offsets_read(reopened) == list(range(3 * BATCHES))
    reopened.close()


def test_a_cut_inside_a_batch_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    log = filled(tmp_path / "log", "kafka-v2")
    before = snapshot(tmp_path / "log")
    for offset in (1, 2, 4, log.segments[1].start_offset + 1, 35):
        with pytest.raises(TruncationRefused, match="inside the batch"):
            log.truncate_to(offset)
    assert log.next_offset == 36 and snapshot(tmp_path / "log") == before
    log.truncate_to(33)  # the start of the last batch is fine
    assert log.next_offset == 33
    log.close()


@pytest.mark.parametrize("record_format", FORMATS)
def test_cuts_below_the_floor_the_log_start_or_past_the_end_are_refused(
        tmp_path: Path, record_format: str) -> None:
    log = filled(tmp_path / "log", record_format)
    assert log.delete_oldest_segment()
    first = log.first_offset
    before = snapshot(tmp_path / "log")
    for offset, floor, reason in ((first + 3, first + 6, "below the floor"),
                                  (first - 3, 0, "the log holds offsets"),
                                  (37, 0, "the log holds offsets")):
        with pytest.raises(TruncationRefused, match=reason):
            log.truncate_to(offset, floor)
    assert snapshot(tmp_path / "log") == before and log.next_offset == 36
    log.truncate_to(first + 6, floor=first + 6)  # at the floor is fine
    log.truncate_to(first)  # to the log start: empty, starting there
    assert (log.first_offset, log.next_offset, log.messages_count) == (first, first, 0)
    append_batch(log, first // 3)
    assert log.next_offset == first + 3 and log.last_epoch == EPOCH
    log.close()


@pytest.mark.parametrize("record_format", FORMATS)
def test_an_empty_log_truncates_only_to_its_end(tmp_path: Path, record_format: str) -> None:
    log = open_at(tmp_path / "log", record_format)
    log.truncate_to(0)  # nothing to cut
    with pytest.raises(TruncationRefused):
        log.truncate_to(1)
    assert log.next_offset == 0 and log.last_epoch is None
    log.close()


_CRASHING = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from rill.server.storage import truncation
    sys.path.insert(0, sys.argv[4])
    from test_replica import open_at

    stop_at = int(sys.argv[3])
    calls = 0

    def stopping(step):
        def run(*args, **kwargs):
            global calls
            calls += 1
            if calls == stop_at:
                os._exit(17)  # the process dies here: nothing after it runs
            return step(*args, **kwargs)
        return run

    for name in ("write_atomically", "_delete_segment", "_cut_file", "trim_leader_epochs",
                 "clamp_high_watermark"):
        setattr(truncation, name, stopping(getattr(truncation, name)))
    log = open_at(Path(sys.argv[1]), sys.argv[2])
    log.truncate_to(int(sys.argv[5]))
    print("finished")
""")


@pytest.mark.parametrize("record_format", FORMATS)
def test_a_stop_at_any_step_of_a_truncation_is_completed_or_undone_at_the_next_open(
        tmp_path: Path, record_format: str) -> None:
    """A process killed before each file step of a cut (the marker written first, the
    segments deleted, the index and log cut, the checkpoints trimmed): the next open finishes
    the cut once the marker is written, and finds the log untouched before."""
    probe = filled(tmp_path / "probe", record_format)
    cut = probe.segments[1].start_offset + 3
    probe.store_high_watermark(30)
    probe.close()
    untouched = snapshot(tmp_path / "probe")
    truncated = reference(tmp_path / "reference", record_format, cut)
    truncated["high-watermark-checkpoint"] = b"0\n%d\n" % min(cut, 30)  # lowered to the cut
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    stop_at, outcomes = 1, []
    while True:
        directory = tmp_path / f"stop-{stop_at}"
        log = filled(directory, record_format)
        log.store_high_watermark(30)
        log.close()
        done = subprocess.run(
            [sys.executable, "-c", _CRASHING, str(directory), record_format, str(stop_at),
             str(Path(__file__).parent), str(cut)],
            env=environment, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 17), done.stderr
        log = open_at(directory, record_format, clean_shutdown=False)
        assert log.stored_high_watermark == min(log.next_offset, 30)
        assert not DataPaths.truncation_marker(directory).exists()
        outcomes.append(log.next_offset)
        assert offsets_read(log) == list(range(log.next_offset))
        log.close()
        files = snapshot(directory)
        assert files == (truncated if log.next_offset == cut else untouched), stop_at
        if done.returncode == 0:
            break
        stop_at += 1
    # the first stop came before the marker: untouched; every later one: completed
    assert outcomes[0] == 36 and set(outcomes[1:]) == {cut} and len(outcomes) >= 5


def test_a_truncation_lowers_the_stored_high_watermark(
        tmp_path: Path) -> None:
    log = filled(tmp_path / "log", "iggy-v1")
    log.store_high_watermark(30)
    log.truncate_to(21)
    assert log.stored_high_watermark == 21
    log.close()
    reopened = open_at(tmp_path / "log", "iggy-v1")
    assert reopened.stored_high_watermark == 21
    reopened.close()


# ---------------------------------------------------------------------- leader epochs
def test_a_per_record_log_keeps_its_epochs_in_a_checkpoint(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = open_at(directory, "iggy-v1")
    for number, epoch in enumerate((0, 0, 2, 2, 5)):
        log.leader_epoch = epoch
        append_batch(log, number)
    checkpoint = DataPaths.leader_epoch_checkpoint(directory)
    assert checkpoint.read_text() == "0\n3\n0 0\n2 6\n5 12\n"
    answers = {0: (0, 6), 1: (0, 6), 2: (2, 12), 3: (2, 12), 5: (5, 15), 9: (5, 15)}
    assert {epoch: log.epoch_end(epoch) for epoch in answers} == answers
    assert log.last_epoch == 5
    log.leader_epoch = 5
    log.close()
    reopened = open_at(directory, "iggy-v1", clean_shutdown=False)
    assert {epoch: reopened.epoch_end(epoch) for epoch in answers} == answers
    with pytest.raises(CannotAppendMessage, match="leader epoch 0 is below the epoch 5"):
        append_batch(reopened, 5)  # its leader epoch is 0 again until the owner sets it
    reopened.truncate_to(9)  # epoch 5 goes, epoch 2 ends at the cut
    assert checkpoint.read_text() == "0\n2\n0 0\n2 6\n"
    assert reopened.last_epoch == 2 and reopened.epoch_end(5) == (2, 9)
    reopened.truncate_to(6)
    assert reopened.last_epoch == 0 and reopened.epoch_end(2) == (0, 6)
    reopened.close()


def test_an_epoch_whose_append_wrote_nothing_holds_no_record(tmp_path: Path) -> None:
    """An append at a new epoch that wrote nothing (refused after its epoch was noted) leaves
    that epoch with no record: OffsetsForLeaderEpoch answers the epoch before it, a follower
    is told no such run, and the next epoch's append takes the pair's place in the
    checkpoint -- after a restart too. (Found by the memory twin's comparison: the files
    answered ``(1, 3)`` where no record has epoch 1.)"""
    directory = tmp_path / "log"
    log = open_at(directory, "iggy-v1")
    append_batch(log, 0)  # offsets 0..2, epoch 0
    log.leader_epoch = 1
    with pytest.raises(RillError):
        log.append(b"not a batch", 0)  # noted epoch 1 from offset 3, wrote nothing
    checkpoint = DataPaths.leader_epoch_checkpoint(directory)
    assert log.next_offset == 3 and log.last_epoch == 0
    log.leader_epoch = 2
    append_batch(log, 1)  # offsets 3..5, epoch 2
    assert checkpoint.read_text() == "0\n2\n0 0\n2 3\n"
    answers = {0: (0, 3), 1: (0, 3), 2: (2, 6), 7: (2, 6)}
    assert {epoch: log.epoch_end(epoch) for epoch in answers} == answers
    assert log.epochs_from(0) == [(0, 0), (2, 3)]
    log.close()
    reopened = open_at(directory, "iggy-v1", clean_shutdown=False)
    assert {epoch: reopened.epoch_end(epoch) for epoch in answers} == answers
    reopened.close()
    checkpoint.write_text("0\n3\n0 0\n1 3\n2 3\n")  # as an earlier version left it
    reopened = open_at(directory, "iggy-v1", clean_shutdown=False)
    assert {epoch: reopened.epoch_end(epoch) for epoch in answers} == answers
    assert reopened.epochs_from(0) == [(0, 0), (2, 3)] and reopened.last_epoch == 2
    reopened.close()


def test_a_standalone_log_writes_no_epoch_checkpoint(tmp_path: Path) -> None:
    log = open_at(tmp_path / "log", "iggy-v1")
    for number in range(4):
        append_batch(log, number)
    assert log.last_epoch == 0 and log.epoch_end(0) == (0, 12) and log.epoch_end(3) == (0, 12)
    assert not DataPaths.leader_epoch_checkpoint(tmp_path / "log").exists()
    log.leader_epoch = 1  # the first epoch above 0 writes the epoch 0 before it too
    append_batch(log, 4)
    assert DataPaths.leader_epoch_checkpoint(tmp_path / "log").read_text() == "0\n2\n0 0\n1 12\n"
    log.purge()
    assert not DataPaths.leader_epoch_checkpoint(tmp_path / "log").exists()
    assert log.last_epoch is None
    log.close()


def test_epochs_below_what_retention_left_are_not_answered(tmp_path: Path) -> None:
    log = open_at(tmp_path / "log", "iggy-v1")
    for number in range(BATCHES):
        log.leader_epoch = number // 4  # epochs 0, 1, 2: four batches each
        append_batch(log, number)
    while log.first_offset < 12:
        assert log.delete_oldest_segment()
    assert log.first_offset < 24 and log.epoch_end(0) is None  # every epoch-0 record is gone
    assert log.epoch_end(1) == (1, 24) and log.epoch_end(2) == (2, 36)
    log.close()


# ---------------------------------------------------------------------- high watermark
@pytest.mark.parametrize("record_format", FORMATS)
def test_the_high_watermark_checkpoint_survives_a_restart(tmp_path: Path,
                                                          record_format: str) -> None:
    log = filled(tmp_path / "log", record_format)
    assert log.stored_high_watermark is None  # standalone: none stored, no file
    assert not DataPaths.high_watermark_checkpoint(tmp_path / "log").exists()
    log.store_high_watermark(12)
    with pytest.raises(ValueError, match="outside the log"):
        log.store_high_watermark(37)
    log.close()
    reopened = open_at(tmp_path / "log", record_format, clean_shutdown=False)
    assert reopened.stored_high_watermark == 12
    assert DataPaths.high_watermark_checkpoint(tmp_path / "log").read_text() == "0\n12\n"
    reopened.close()


# ---------------------------------------------------------------------- incarnation
@pytest.mark.parametrize("record_format", FORMATS)
def test_a_purged_replica_keeps_its_incarnation_and_no_high_watermark_above_0(
        tmp_path: Path, record_format: str) -> None:
    """A log emptied for a new incarnation (a purge in a cluster) stores which one it holds,
    read again at the next open; its stored high watermark went back to 0 with the purge, so a
    restart does not take the old one for the new records'. A damaged checkpoint reads as
    none (the partition's first incarnation)."""
    log = filled(tmp_path / "log", record_format)
    assert log.incarnation is None  # never purged: no file
    assert not DataPaths.incarnation_checkpoint(tmp_path / "log").exists()
    log.store_high_watermark(20)
    log.purge()
    log.store_incarnation(41)
    append_batch(log, 0)
    log.close()
    reopened = open_at(tmp_path / "log", record_format, clean_shutdown=False)
    assert reopened.incarnation == 41 and reopened.stored_high_watermark == 0
    assert reopened.first_offset == 0 and reopened.next_offset > 0
    assert DataPaths.incarnation_checkpoint(tmp_path / "log").read_text() == "0\n41\n"
    reopened.close()
    DataPaths.incarnation_checkpoint(tmp_path / "log").write_text("0\nforty\n")
    damaged = open_at(tmp_path / "log", record_format)
    assert damaged.incarnation is None
    damaged.close()
