"""A follower's append (room for replication, cluster-design.md): a leader's stored records are
appended verbatim at the offsets they carry, so a follower's log is the leader's byte for byte,
and whatever is out of place is refused with nothing written."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest
from storage_helpers import read_messages, snapshot

from rill.errors import CannotAppendMessage
from rill.protocol.buffer import DecodeError
from rill.protocol.layout import walk_stored
from rill.protocol.messages import Message, encode_messages
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.partition_log import LogSettings, PartitionLog

SETTINGS = LogSettings(segment_size=2_000)


def shipped(log: PartitionLog, offset: int, count: int) -> tuple[bytes, bytes]:
    """What a leader ships: its stored records from ``offset`` and where each starts."""
    _, chunks = log.read(offset, count)
    records = b"".join(chunks)
    return records, array("I", [parts.start for parts in walk_stored(records)]).tobytes()


def test_a_follower_holds_the_leaders_bytes(tmp_path: Path) -> None:
    durability = Durability(FsyncPolicy.NEVER)
    leader = PartitionLog.open(tmp_path / "leader", SETTINGS, durability, clean_shutdown=True)
    follower = PartitionLog.open(tmp_path / "follower", SETTINGS, durability, clean_shutdown=True)
    for number in range(12):  # several segments, one timestamp per batch
        leader.append(encode_messages([Message(b"m" * 90, id=10 * number + n) for n in range(3)]),
                      1_000 + number)
    for offset in range(0, 36, 5):  # shipped in pieces that do not follow the batches
        records, positions = shipped(leader, offset, 5)
        assert follower.append_replicated(records, positions, offset) == (
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
    records, positions = shipped(leader, 0, 3)
    before = snapshot(tmp_path / "follower")
    with pytest.raises(CannotAppendMessage, match="start at offset 1, this log's next offset is 0"):
        follower.append_replicated(records, positions, 1)
    later, later_positions = shipped(leader, 1, 2)
    with pytest.raises(DecodeError, match="expected offset 0"):
        follower.append_replicated(later, later_positions, 0)  # offsets 1, 2 where 0 belongs
    corrupt = bytearray(records)
    corrupt[-1] ^= 0xFF  # a payload byte: the checksum no longer matches
    with pytest.raises(DecodeError):
        follower.append_replicated(bytes(corrupt), positions, 0)
    assert snapshot(tmp_path / "follower") == before and follower.next_offset == 0
    assert follower.append_replicated(records, positions, 0) == (0, 2)
    leader.close()
    follower.close()
