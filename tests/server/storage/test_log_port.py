"""The partition-log port (``core.log``) on both of its implementations: the segment files
(``PartitionLog``) and the memory twin (``MemoryLog``). Every test taking ``make_log`` runs once
on each (``conftest.make_log``); what only files have -- the files themselves, descriptors,
fsyncs, a stop in the middle of a truncation, torn and corrupt records -- stays in the file
tests (``test_partition_log``, ``test_replica``, ``test_recovery``, ...).

Two kinds of test: the replica side (truncation, leader epochs, the high watermark, a
follower's appends) as behaviour both must show, and a random walk of appends, conversions,
truncations and retention run on a file log and a memory log side by side, after every step of
which every read and bound of the port must answer the same (the same bytes included)."""

from __future__ import annotations

import asyncio

import re
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from formats.test_kafka_v2 import EPOCH, build, produce, read_back
from test_replica import BATCHES, SEGMENT_SIZE, append_batch, offsets_read
from test_staging import index_positions

from rill.errors import CannotAppendMessage
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.formats.iggy_v1 import stamp_batch
from rill.server.storage.memory_log import MemoryLogs
from rill.server.storage.partition_log import LogSettings, PartitionLog
from rill.server.storage.truncation import TruncationRefused

FORMATS = ("iggy-v1", "kafka-v2")


def filled(make_log, record_format: str, batches: int = BATCHES, name: str | None = None):
    log = make_log(segment_size=SEGMENT_SIZE[record_format], record_format=record_format,
                   name=name)
    log.leader_epoch = EPOCH
    for number in range(batches):
        append_batch(log, number)
    return log


def starts(log) -> list[int]:
    return [segment.start_offset for segment in log.segments]


def everything(log) -> tuple:
    """What a reader of the log can see of it."""
    count, chunks = log.read(0, 1_000_000)
    return (log.first_offset, log.next_offset, log.messages_count, log.size_bytes,
            log.last_timestamp, log.last_epoch, count, b"".join(chunks))


# ---------------------------------------------------------------------- truncation
@pytest.mark.parametrize("record_format", FORMATS)
def test_a_truncated_log_is_the_log_that_stopped_there(make_log, record_format: str) -> None:
    probe = filled(make_log, record_format, name="probe")
    segment_starts = starts(probe)
    assert len(segment_starts) >= 4
    points = {"log start": segment_starts[0], "segment start": segment_starts[2],
              "inside a segment": segment_starts[1] + 3, "last segment start": segment_starts[-1],
              "whole later segments": segment_starts[1]}
    for name, offset in points.items():
        log = filled(make_log, record_format, name=name)
        log.truncate_to(offset)
        assert (log.next_offset, offsets_read(log)) == (offset, list(range(offset))), name
        assert log.last_epoch == (EPOCH if offset else None), name
        reference = filled(make_log, record_format, offset // 3, name=f"{name} reference")
        assert everything(log) == everything(reference), name
        assert log.segments_count == reference.segments_count, name


@pytest.mark.parametrize("record_format", FORMATS)
@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_appends_go_on_at_the_offset_cut_to_and_after_a_reopen(
        make_log, record_format: str, clean_shutdown: bool) -> None:
    log = filled(make_log, record_format)
    cut = starts(log)[2]
    log.truncate_to(cut)
    log.leader_epoch = EPOCH + 1
    append_batch(log, cut // 3)
    assert log.next_offset == cut + 3 and log.epoch_end(EPOCH) == (EPOCH, cut)
    log.close()
    reopened = make_log(segment_size=SEGMENT_SIZE[record_format], record_format=record_format,
                        clean_shutdown=clean_shutdown)
    assert offsets_read(reopened) == list(range(cut + 3))
    assert reopened.epoch_end(EPOCH) == (EPOCH, cut)
    assert reopened.epoch_end(EPOCH + 1) == (EPOCH + 1, cut + 3)
    assert reopened.leader_epoch == 0  # the owner sets it again after every open
    reopened.leader_epoch = EPOCH + 1
    for number in range(cut // 3 + 1, BATCHES):
        append_batch(reopened, number)
    assert offsets_read(reopened) == list(range(3 * BATCHES))


def test_a_cut_inside_a_batch_is_refused_and_changes_nothing(make_log) -> None:
    log = filled(make_log, "kafka-v2")
    before = everything(log)
    for offset in (1, 2, 4, starts(log)[1] + 1, 35):
        with pytest.raises(TruncationRefused, match="inside the batch"):
            log.truncate_to(offset)
    assert everything(log) == before
    log.truncate_to(33)
    assert log.next_offset == 33


@pytest.mark.parametrize("record_format", FORMATS)
def test_cuts_below_the_floor_the_log_start_or_past_the_end_are_refused(
        make_log, record_format: str) -> None:
    log = filled(make_log, record_format)
    assert log.delete_oldest_segment()
    first = log.first_offset
    before = everything(log)
    for offset, floor, reason in ((first + 3, first + 6, "below the floor"),
                                  (first - 3, 0, "the log holds offsets"),
                                  (37, 0, "the log holds offsets")):
        with pytest.raises(TruncationRefused, match=reason):
            log.truncate_to(offset, floor)
    assert everything(log) == before
    log.truncate_to(first + 6, floor=first + 6)
    log.truncate_to(first)
    assert (log.first_offset, log.next_offset, log.messages_count) == (first, first, 0)
    append_batch(log, first // 3)
    assert log.next_offset == first + 3 and log.last_epoch == EPOCH


@pytest.mark.parametrize("record_format", FORMATS)
def test_an_empty_log_truncates_only_to_its_end(make_log, record_format: str) -> None:
    log = make_log(record_format=record_format)
    log.truncate_to(0)
    with pytest.raises(TruncationRefused):
        log.truncate_to(1)
    assert log.next_offset == 0 and log.last_epoch is None


def test_a_closed_log_refuses_appends_and_cuts(make_log) -> None:
    log = filled(make_log, "iggy-v1", 2)
    log.close()
    with pytest.raises(CannotAppendMessage, match="is closed"):
        append_batch(log, 2)
    with pytest.raises(CannotAppendMessage, match="is closed"):
        log.truncate_to(3)


# ---------------------------------------------------------------------- leader epochs
def test_a_per_record_log_answers_its_epochs(make_log) -> None:
    log = make_log(segment_size=SEGMENT_SIZE["iggy-v1"], record_format="iggy-v1")
    for number, epoch in enumerate((0, 0, 2, 2, 5)):
        log.leader_epoch = epoch
        append_batch(log, number)
    answers = {0: (0, 6), 1: (0, 6), 2: (2, 12), 3: (2, 12), 5: (5, 15), 9: (5, 15)}
    assert {epoch: log.epoch_end(epoch) for epoch in answers} == answers
    assert log.last_epoch == 5
    with pytest.raises(ValueError, match="below"):
        log.leader_epoch = 4
    log.close()
    reopened = make_log(segment_size=SEGMENT_SIZE["iggy-v1"], record_format="iggy-v1",
                        clean_shutdown=False)
    assert {epoch: reopened.epoch_end(epoch) for epoch in answers} == answers
    with pytest.raises(CannotAppendMessage, match="leader epoch 0 is below the epoch 5"):
        append_batch(reopened, 5)
    reopened.truncate_to(9)
    assert reopened.last_epoch == 2 and reopened.epoch_end(5) == (2, 9)
    reopened.truncate_to(6)
    assert reopened.last_epoch == 0 and reopened.epoch_end(2) == (0, 6)
    reopened.purge()
    assert reopened.last_epoch is None and reopened.epoch_end(0) is None and reopened.is_empty


@pytest.mark.parametrize("record_format", FORMATS)
def test_epochs_below_what_retention_left_are_not_answered(make_log, record_format: str) -> None:
    log = make_log(segment_size=SEGMENT_SIZE[record_format], record_format=record_format)
    for number in range(BATCHES):
        log.leader_epoch = number // 4
        append_batch(log, number)
    while log.first_offset < 12:
        assert log.delete_oldest_segment()
    assert log.first_offset < 24 and log.epoch_end(0) is None
    assert log.epoch_end(1) == (1, 24) and log.epoch_end(2) == (2, 36)


# ---------------------------------------------------------------------- high watermark
@pytest.mark.parametrize("record_format", FORMATS)
def test_the_stored_high_watermark_survives_a_reopen_and_follows_a_cut(
        make_log, record_format: str) -> None:
    log = filled(make_log, record_format)
    assert log.stored_high_watermark is None
    log.store_high_watermark(30)
    with pytest.raises(ValueError, match="outside the log"):
        log.store_high_watermark(37)
    log.truncate_to(21)
    assert log.stored_high_watermark == 21
    log.close()
    reopened = make_log(segment_size=SEGMENT_SIZE[record_format], record_format=record_format,
                        clean_shutdown=False)
    assert reopened.stored_high_watermark == 21


# ---------------------------------------------------------------------- a follower's appends
def shipped(log, offset: int, count: int) -> bytes:
    _, chunks = log.read(offset, count)
    return b"".join(chunks)


def test_a_follower_holds_the_leaders_records(make_log) -> None:
    leader = make_log(segment_size=2_000, name="leader")
    follower = make_log(segment_size=2_000, name="follower")
    for number in range(12):
        leader.append(encode_messages([Message(b"m" * 90, id=10 * number + n + 1)
                                       for n in range(3)]), 1_000 + number)
    for offset in range(0, 36, 5):
        records = shipped(leader, offset, 5)
        assert follower.append_replicated(records, offset) == (
            offset, min(offset + 4, 35))
    assert everything(follower) == everything(leader)
    assert starts(follower) == starts(leader) and len(starts(leader)) > 1
    assert follower.offset_for_timestamp(1_005) == 15


def test_a_follower_keeps_the_leaders_epoch_runs_of_per_record_records(make_log) -> None:
    """One answer of records from several leader epochs, appended with the leader's runs
    (each at its epoch, a run may start a segment), off the event loop or not."""
    leader = make_log(segment_size=2_000, name="leader")
    for epoch, number in ((1, 0), (1, 1), (3, 2), (3, 3), (4, 4)):
        leader.leader_epoch = epoch
        leader.append(encode_messages([Message(b"m" * 300, id=10 * number + n + 1)
                                       for n in range(3)]), 1_000 + number)
    runs = [list(pair) for pair in leader.epochs_from(0)]
    for name, threaded in (("follower", False), ("threaded", True)):
        follower = make_log(segment_size=2_000, name=name)
        if threaded:
            appended = asyncio.run(follower.append_replicated_async(shipped(leader, 0, 15), 0,
                                                                    runs))
        else:
            appended = follower.append_replicated(shipped(leader, 0, 15), 0, runs)
        assert appended == (0, 14)
        assert everything(follower) == everything(leader)
        assert starts(follower) == starts(leader) and len(starts(leader)) > 1
        assert [follower.epoch_end(epoch) for epoch in (1, 2, 3, 4)] == [
            (1, 6), (1, 6), (3, 12), (4, 15)]


def test_records_out_of_place_are_refused_and_nothing_is_written(make_log) -> None:
    leader = make_log(name="leader")
    follower = make_log(name="follower")
    leader.append(encode_messages([Message(b"a", id=1), Message(b"b", id=2),
                                   Message(b"c", id=3)]), 1_000)
    records = shipped(leader, 0, 3)
    before = everything(follower)
    with pytest.raises(CannotAppendMessage, match="start at offset 1, this log's next offset is 0"):
        follower.append_replicated(records, 1)
    later = shipped(leader, 1, 2)
    with pytest.raises(DecodeError, match="has offset 1, expected 0"):
        follower.append_replicated(later, 0)
    corrupt = bytearray(records)
    corrupt[-1] ^= 0xFF
    with pytest.raises(DecodeError):
        follower.append_replicated(bytes(corrupt), 0)
    assert everything(follower) == before
    assert follower.append_replicated(records, 0) == (0, 2)


def test_a_follower_of_kafka_batches_holds_the_leaders_batches(make_log) -> None:
    leader = filled(make_log, "kafka-v2", name="leader")
    whole = make_log(segment_size=SEGMENT_SIZE["kafka-v2"], record_format="kafka-v2",
                     name="whole")
    _, chunks = leader.read(0, 1_000)
    assert whole.append_replicated(b"".join(chunks), 0) == (0, 35)
    assert everything(whole) == everything(leader) and starts(whole) == starts(leader)
    assert whole.epoch_end(EPOCH) == (EPOCH, 36)
    with pytest.raises(DecodeError, match="do not scan cleanly"):
        whole.append_replicated(b"".join(chunks)[:30], 36)
    assert everything(whole) == everything(leader)


# ---------------------------------------------------------------------- side by side
TS = 1_700_000_000_000  # ms
step = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 3)),  # records, clock step
    st.tuples(st.just("convert"), st.integers(1, 4), st.integers(0, 3)),  # the other format
    st.tuples(st.just("stamped"), st.integers(1, 4), st.integers(0, 3)),  # staged records
    st.tuples(st.just("epoch"), st.integers(0, 2)),
    st.tuples(st.just("truncate"), st.integers(0, 100)),
    st.tuples(st.just("delete oldest"),),
    st.tuples(st.just("expire"), st.integers(0, 40)),
    st.tuples(st.just("purge"),),
)


class Walk:
    """The same steps on several logs; a step one refuses, all must refuse."""

    def __init__(self, record_format: str, logs: list) -> None:
        self.format = record_format
        self.logs = logs
        self.number = 0  # records made so far (ids and times follow it)
        self.clock = 0  # ms after TS

    def run(self, kind: str, *values: int) -> None:
        if kind in ("append", "convert"):
            count, clock_step = values
            self.clock += clock_step
            native = (kind == "append") == (self.format == "iggy-v1")
            if native:
                raw = encode_messages([Message(b"r%d" % (self.number + n) * (n + 1),
                                               id=self.number + n + 1) for n in range(count)])
            else:
                raw = build(count, base_ms=TS + self.clock, first=self.number)
            self.number += count
            now = (TS + self.clock) * 1000
            other = "kafka-v2" if self.format == "iggy-v1" else "iggy-v1"
            if kind == "append" and self.format == "kafka-v2":
                self._each(lambda log: produce(log, raw))
            elif kind == "append":
                self._each(lambda log: log.append(raw, now))
            else:
                self._each(lambda log: log.append_as(other, raw, now))
        elif kind == "stamped":  # records staged earlier (iggy-v1), given offsets now
            count, clock_step = values
            self.clock += clock_step
            batch = stamp_batch(encode_messages([Message(b"s%d" % (self.number + n),
                                                         id=self.number + n + 1)
                                                 for n in range(count)]), 0, 1_000, 0, 0)
            self.number += count
            positions = array("I")
            positions.frombytes(index_positions(batch.index_entries))
            now = (TS + self.clock) * 1000
            self._each(lambda log: log.append_stamped(bytearray(batch.records), positions, now))
        elif kind == "epoch":
            for log in self.logs:
                log.leader_epoch = log.leader_epoch + values[0]
        elif kind == "truncate":
            self._each(lambda log: log.truncate_to(
                log.first_offset + values[0] % (log.next_offset - log.first_offset + 1)))
        elif kind == "delete oldest":
            assert len({log.delete_oldest_segment() for log in self.logs}) == 1
        elif kind == "expire":
            now = (TS + self.clock - values[0]) * 1000
            assert len({log.delete_expired_segments(now, 0) for log in self.logs}) == 1
        else:
            for log in self.logs:
                log.purge()

    def _each(self, change) -> None:
        """``change`` on every log: the same result, or the same refusal (its text, but for
        the log's name)."""
        outcomes = []
        for log in self.logs:
            try:
                outcomes.append(change(log))
            except Exception as error:  # noqa: BLE001 - compared below
                name = str(log.directory) if isinstance(log, PartitionLog) else log.name
                outcomes.append((type(error), re.sub(re.escape(name) + r"\S*", "LOG",
                                                     str(error))))
        assert all(outcome == outcomes[0] for outcome in outcomes), outcomes


def answers(log, other_format: str) -> tuple:
    """Every read and bound of the port, at a few offsets and times."""
    first, end = log.first_offset, log.next_offset
    found: list = [everything(log), log.is_empty, log.current_offset, log.segments_count,
                   starts(log), log.leader_epoch]
    for offset in sorted({0, first, (first + end) // 2, max(end - 1, 0), end}):
        for count, max_bytes in ((1, None), (5, None), (1_000, 120), (1_000, None)):
            returned, chunks = log.read(offset, count, max_bytes)
            converted = log.read_as(other_format, offset, count, max_bytes)
            found += [returned, b"".join(chunks), converted.first_offset, converted.count,
                      bytes(converted.records), converted.end_offset]
            if log.format.name == "iggy-v1" or end > first:
                columns = log.read_columnar(offset, count, max_bytes or 1 << 20)
                found += [columns.base_offset, columns.count, columns.boundaries,
                          columns.timestamps, bytes(columns.records)]
        found += [log.bytes_after(offset)]
    for count in (1, 3, 50):
        found.append(log.start_of_last(count))
    for clock in (-1, 0, 2, 7, 40):
        stamp = (TS + clock) * 1000
        found += [log.offset_for_timestamp(stamp), log.record_at_or_after(stamp),
                  log.record_offset_for_timestamp(stamp)]
    for epoch in range(8):
        found.append(log.epoch_end(epoch))
    if log.format.name == "kafka-v2":
        found.append(read_back(everything(log)[-1]))
    return tuple(found)


@pytest.mark.parametrize("record_format", FORMATS)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=14))
def test_the_memory_twin_answers_as_the_files_do(tmp_path_factory, record_format: str,
                                                 steps) -> None:
    size = 400
    files = PartitionLog.open(tmp_path_factory.mktemp("log"),
                              LogSettings(segment_size=size, record_format=record_format),
                              Durability(FsyncPolicy.NEVER), clean_shutdown=True)
    memory = MemoryLogs(size).open(1, 1, 1, record_format, clean_shutdown=True)
    other = "kafka-v2" if record_format == "iggy-v1" else "iggy-v1"
    walk = Walk(record_format, [files, memory])
    try:
        for number, taken in enumerate(steps):
            walk.run(*taken)
            assert answers(memory, other) == answers(files, other), (number, taken)
    finally:
        files.close()


def test_a_memory_log_of_a_deleted_partition_is_forgotten() -> None:
    logs = MemoryLogs()
    log = logs.open(1, 1, 1, "iggy-v1", clean_shutdown=True)
    log.append(encode_messages([Message(b"kept", id=1)]), 1)
    log.close()
    assert logs.open(1, 1, 1, "iggy-v1", clean_shutdown=True).next_offset == 1  # a restart
    logs.open(1, 1, 1, "iggy-v1", clean_shutdown=True).close(sync=False)  # partition deleted
    assert logs.open(1, 1, 1, "iggy-v1", clean_shutdown=True).next_offset == 0
    logs.open(1, 1, 2, "iggy-v1", clean_shutdown=True).destroy()
    assert len(logs) == 1

