"""A follower's append (room for replication, cluster-design.md): a leader's stored records are
appended verbatim at the offsets they carry, so a follower's log is the leader's byte for byte,
and whatever is out of place is refused with nothing written."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from storage_helpers import read_messages, snapshot
from formats.test_formats import ANSWERS, FRAME, NAME, TEST_BATCH_V1, epoch_answers, fill_epochs

from rill.errors import CannotAppendMessage
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage import formats
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.partition_log import LogSettings, PartitionLog

SETTINGS = LogSettings(segment_size=2_000)


def shipped(log: PartitionLog, offset: int, count: int) -> bytes:
    """What a leader ships: its stored records from ``offset``."""
    _, chunks = log.read(offset, count)
    return b"".join(chunks)


def test_a_follower_holds_the_leaders_bytes(tmp_path: Path) -> None:
    durability = Durability(FsyncPolicy.NEVER)
    leader = PartitionLog.open(tmp_path / "leader", SETTINGS, durability, clean_shutdown=True)
    follower = PartitionLog.open(tmp_path / "follower", SETTINGS, durability, clean_shutdown=True)
    for number in range(12):  # several segments, one timestamp per batch
        leader.append(encode_messages([Message(b"m" * 90, id=10 * number + n) for n in range(3)]),
                      1_000 + number)
    for offset in range(0, 36, 5):  # shipped in pieces that do not follow the batches
        records = shipped(leader, offset, 5)
        assert follower.append_replicated(records, offset) == (
            offset, min(offset + 4, 35))
    assert follower.next_offset == leader.next_offset == 36
    assert follower.segments_count == leader.segments_count > 1
    for name in ("leader", "follower"):
        assert snapshot(tmp_path / name) == snapshot(tmp_path / "leader")
    leader.close()
    follower.close()
    reopened = PartitionLog.open(tmp_path / "follower", SETTINGS, durability, clean_shutdown=False)
    assert [m.offset for m in read_messages(reopened, 0, 100)] == list(range(36))
    assert reopened.offset_for_timestamp(1_005) == 15
    reopened.close()


def test_records_out_of_place_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    durability = Durability(FsyncPolicy.NEVER)
    leader = PartitionLog.open(tmp_path / "leader", SETTINGS, durability, clean_shutdown=True)
    follower = PartitionLog.open(tmp_path / "follower", SETTINGS, durability, clean_shutdown=True)
    leader.append(encode_messages([b"a", b"b", b"c"]), 1_000)
    records = shipped(leader, 0, 3)
    before = snapshot(tmp_path / "follower")
    with pytest.raises(CannotAppendMessage, match="start at offset 1, this log's next offset is 0"):
        follower.append_replicated(records, 1)
    later = shipped(leader, 1, 2)
    with pytest.raises(DecodeError, match="has offset 1, expected 0"):
        follower.append_replicated(later, 0)  # offsets 1, 2 where 0 belongs
    corrupt = bytearray(records)
    corrupt[-1] ^= 0xFF  # a payload byte: the checksum no longer matches
    with pytest.raises(DecodeError):
        follower.append_replicated(bytes(corrupt), 0)
    assert snapshot(tmp_path / "follower") == before and follower.next_offset == 0
    assert follower.append_replicated(records, 0) == (0, 2)
    leader.close()
    follower.close()


def test_records_older_than_the_logs_last_are_refused(tmp_path: Path) -> None:
    """Timestamps never go back along a log: a leader's records stamped before what this
    replica last holds (another leader's history) are refused, nothing written."""
    durability = Durability(FsyncPolicy.NEVER)
    newer = PartitionLog.open(tmp_path / "newer", SETTINGS, durability, clean_shutdown=True)
    older = PartitionLog.open(tmp_path / "older", SETTINGS, durability, clean_shutdown=True)
    follower = PartitionLog.open(tmp_path / "follower", SETTINGS, durability, clean_shutdown=True)
    newer.append(encode_messages([b"a", b"b"]), 2_000)
    older.append(encode_messages([b"a", b"b", b"c"]), 1_000)
    assert follower.append_replicated(shipped(newer, 0, 2), 0) == (0, 1)
    before = snapshot(tmp_path / "follower")
    with pytest.raises(DecodeError, match="timestamp 1000, before 2000"):
        follower.append_replicated(shipped(older, 2, 1), 2)
    assert snapshot(tmp_path / "follower") == before and follower.next_offset == 2
    for log in (newer, older, follower):
        log.close()


# ---------------------------------------------------------------------- a batch-index format
BATCH_SETTINGS = LogSettings(segment_size=80, record_format=NAME)  # three batches a segment


@pytest.fixture
def batch_logs(tmp_path: Path, monkeypatch):
    """Open logs of the test batch format (``formats/test_formats.py``) under ``tmp_path``, by name."""
    monkeypatch.setitem(formats.FORMATS, NAME, TEST_BATCH_V1)
    durability = Durability(FsyncPolicy.NEVER)
    opened: list[PartitionLog] = []

    def opener(name: str, clean_shutdown: bool = True) -> PartitionLog:
        log = PartitionLog.open(tmp_path / name, BATCH_SETTINGS, durability, clean_shutdown)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


def leader_bytes(log: PartitionLog, offset: int, count: int) -> tuple[int, bytes]:
    """What a leader ships: whole stored batches from the one holding ``offset``; the first
    offset they carry."""
    _, chunks = log.read(offset, count)
    data = b"".join(chunks)
    return FRAME.unpack_from(data, 0)[0], data


def test_a_follower_of_a_batch_format_holds_the_leaders_bytes(batch_logs, tmp_path: Path
                                                              ) -> None:
    leader = batch_logs("leader")
    fill_epochs(leader)  # 15 offsets in 7 batches over 3 segments, epochs 1, 3, 5
    whole = batch_logs("whole")  # everything in one append: split into the leader's segments
    first, data = leader_bytes(leader, 0, 100)
    assert whole.append_replicated(data, first) == (0, 14)
    pieces = batch_logs("pieces")  # batch runs that do not follow the segments
    offset = 0
    while offset < leader.next_offset:
        first, data = leader_bytes(leader, offset, 3)
        assert first == offset
        offset = pieces.append_replicated(data, first)[1] + 1
    for follower in (whole, pieces):
        assert snapshot(tmp_path / follower.directory.name) == snapshot(tmp_path / "leader")
        assert follower.next_offset == 15 and follower.segments_count == 3
        assert follower.last_timestamp == leader.last_timestamp
        assert epoch_answers(follower) == ANSWERS
        assert follower.read(7, 5) == leader.read(7, 5)
        assert follower.offset_for_timestamp(1_004) == leader.offset_for_timestamp(1_004) == 10
    whole.close()
    reopened = batch_logs("whole", clean_shutdown=False)
    assert epoch_answers(reopened) == ANSWERS
    assert reopened.read(0, 100) == leader.read(0, 100)


def test_a_follower_refuses_batches_out_of_place_and_writes_nothing(batch_logs, tmp_path: Path
                                                                     ) -> None:
    leader = batch_logs("leader")
    fill_epochs(leader)
    follower = batch_logs("follower")
    _, first_batches = leader_bytes(leader, 0, 5)  # offsets 0-4: two batches
    first_offset, later = leader_bytes(leader, 6, 4)  # offsets 6-9
    assert follower.append_replicated(first_batches, 0) == (0, 4)
    before = snapshot(tmp_path / "follower")
    with pytest.raises(CannotAppendMessage, match="start at offset 6, this log's next offset is 5"):
        follower.append_replicated(later, first_offset)
    with pytest.raises(DecodeError, match="do not scan cleanly: batch at byte 0 is not offset 5"):
        follower.append_replicated(later, 5)  # offsets 6-9 where 5 belongs
    _, batch = leader_bytes(leader, 5, 1)  # offset 5, epoch 1
    corrupt = bytearray(batch)
    corrupt[-1] ^= 0xFF  # a body byte: the checksum no longer matches
    with pytest.raises(DecodeError, match="bad checksum"):
        follower.append_replicated(bytes(corrupt), 5)
    with pytest.raises(DecodeError, match="do not scan cleanly"):
        follower.append_replicated(batch + later[:20], 5)  # a torn batch after a good one
    with pytest.raises(DecodeError, match="do not scan cleanly: no record"):
        follower.append_replicated(b"", 5)
    stale = bytearray(batch)
    struct.pack_into("<I", stale, 20, 0)  # the frame's epoch (not in its checksum): 0 after 1
    with pytest.raises(DecodeError, match="leader epoch 0, below the 1 before it"):
        follower.append_replicated(bytes(stale), 5)
    assert snapshot(tmp_path / "follower") == before and follower.next_offset == 5
    assert follower.append_replicated(batch + later, 5) == (5, 9)


def test_a_follower_append_off_the_event_loop_leaves_the_same_files(tmp_path: Path,
                                                                     monkeypatch) -> None:
    """``append_replicated_async`` (its file writes in a worker thread, so a write waiting on
    the disk never holds up the event loop) leaves the files the synchronous append leaves, in
    both kinds of format and across segments; what it refuses writes nothing; a caller
    cancelled while its write runs still gets the write published whole."""
    monkeypatch.setitem(formats.FORMATS, NAME, TEST_BATCH_V1)
    durability = Durability(FsyncPolicy.NEVER)

    async def scenario() -> None:
        leader = PartitionLog.open(tmp_path / "leader", SETTINGS, durability, clean_shutdown=True)
        for number in range(12):
            leader.append(encode_messages([Message(b"m" * 90, id=10 * number + n)
                                           for n in range(3)]), 1_000 + number)
        threaded = replace(SETTINGS, append_thread_min_size=1)
        follower = PartitionLog.open(tmp_path / "follower", threaded, durability,
                                     clean_shutdown=True)
        corrupt = bytearray(shipped(leader, 0, 5))
        corrupt[-1] ^= 0xFF
        before = snapshot(tmp_path / "follower")
        with pytest.raises(DecodeError):
            await follower.append_replicated_async(bytes(corrupt), 0)
        assert snapshot(tmp_path / "follower") == before and follower.next_offset == 0
        copying = asyncio.ensure_future(follower.append_replicated_async(shipped(leader, 0, 5), 0))
        await asyncio.sleep(0)  # its write is in the worker now
        copying.cancel()
        with pytest.raises(asyncio.CancelledError):
            await copying
        for offset in range(5, 30, 5):  # (settles the cancelled one first)
            assert await follower.append_replicated_async(shipped(leader, offset, 5), offset) == (
                offset, offset + 4)
        # the last two batches at once: the log's last timestamp is the last record's
        assert await follower.append_replicated_async(shipped(leader, 30, 6), 30) == (30, 35)
        assert follower.last_timestamp == leader.last_timestamp == 1_011
        assert follower.segments_count == leader.segments_count > 1
        assert snapshot(tmp_path / "follower") == snapshot(tmp_path / "leader")

        batch_leader = PartitionLog.open(tmp_path / "batch-leader", BATCH_SETTINGS, durability,
                                         clean_shutdown=True)
        fill_epochs(batch_leader)
        batch_follower = PartitionLog.open(tmp_path / "batch-follower", replace(
            BATCH_SETTINGS, append_thread_min_size=1), durability, clean_shutdown=True)
        first, data = leader_bytes(batch_leader, 0, 100)
        assert await batch_follower.append_replicated_async(data, first) == (0, 14)
        assert batch_follower.segments_count == 3
        assert snapshot(tmp_path / "batch-follower") == snapshot(tmp_path / "batch-leader")
        assert epoch_answers(batch_follower) == ANSWERS
        assert batch_follower.last_timestamp == batch_leader.last_timestamp
        for log in (leader, follower, batch_leader, batch_follower):
            log.close()
        await durability.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("threaded", [False, True])
def test_records_of_several_leader_epochs_are_appended_each_at_its_epoch(tmp_path: Path,
                                                                         threaded: bool) -> None:
    """A per-record format's records carry no epoch: the leader's answer says where each of
    its epochs starts, and the follower's log keeps the same runs (its epoch checkpoint, and
    its files, are the leader's), including when a run starts a new segment."""
    durability = Durability(FsyncPolicy.NEVER)
    settings = replace(SETTINGS, append_thread_min_size=1 if threaded else 1 << 30)

    async def scenario() -> None:
        leader = PartitionLog.open(tmp_path / "leader", settings, durability, clean_shutdown=True)
        for epoch, number in ((1, 0), (1, 1), (3, 2), (3, 3), (4, 4)):
            leader.leader_epoch = epoch
            leader.append(encode_messages([Message(b"m" * 300, id=10 * number + n)
                                           for n in range(3)]), 1_000 + number)
        assert leader.segments_count > 1
        follower = PartitionLog.open(tmp_path / "follower", settings, durability,
                                     clean_shutdown=True)
        runs = [list(pair) for pair in leader.epochs_from(0)]
        assert runs == [[1, 0], [3, 6], [4, 12]]
        assert await follower.append_replicated_async(shipped(leader, 0, 15), 0, runs) == (0, 14)
        assert [follower.epoch_end(epoch) for epoch in (1, 2, 3, 4)] == [
            leader.epoch_end(epoch) for epoch in (1, 2, 3, 4)] == [(1, 6), (1, 6), (3, 12),
                                                                   (4, 15)]
        assert follower.leader_epoch == 4
        assert snapshot(tmp_path / "follower") == snapshot(tmp_path / "leader")
        leader.close()
        follower.close()
        await durability.stop()

    asyncio.run(scenario())
