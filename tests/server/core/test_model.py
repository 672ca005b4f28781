"""The in-memory model (``core.model``): a partition's replica state, standalone defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.core.model import FOLLOWER, LEADER, Partition, Topic
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.memory_log import MemoryLogs
from rill.server.storage.partition_log import LogSettings, PartitionLog


@pytest.fixture(params=["memory", "file"])
def partition(tmp_path: Path, request):
    if request.param == "memory":
        log = MemoryLogs().open(1, 1, 1, "iggy-v1", clean_shutdown=True)
    else:
        log = PartitionLog.open(tmp_path / "1", LogSettings(), Durability(FsyncPolicy.NEVER),
                                clean_shutdown=True)
    yield Partition(1, 1, 1, 0, log)
    log.close()


def append(partition: Partition, count: int) -> None:
    partition.log.append(encode_messages([Message(b"x", id=n + 1) for n in range(count)]), 1)


def test_a_standalone_partition_leads_at_epoch_0_up_to_its_log_end(partition) -> None:
    assert (partition.role, partition.leader_epoch, partition.high_watermark) == (LEADER, 0, 0)
    append(partition, 3)
    assert partition.high_watermark == 3 == partition.log.next_offset  # derived, not stored


def test_replica_state_set_by_a_replication_layer(partition) -> None:
    append(partition, 5)
    partition.role = FOLLOWER
    partition.leader_epoch = 4
    assert partition.log.leader_epoch == 4  # one place: the log's
    append(partition, 1)  # a record of epoch 4: the epoch may not go below it any more
    with pytest.raises(ValueError, match="below"):
        partition.leader_epoch = 3
    partition.high_watermark = 2
    append(partition, 1)
    assert partition.high_watermark == 2
    partition.log.truncate_to(1)
    assert partition.high_watermark == 1  # never past the log end
    with pytest.raises(ValueError):
        Partition(1, 1, 2, 0, partition.log, role="observer")


def test_a_purged_partition_starts_again_at_0_with_nothing_committed(partition) -> None:
    """A purge empties the log and the positions; a replicated partition's high watermark
    goes back to 0 with it, so records appended after the purge are not committed (served)
    before replication moves it; a standalone one's stays the log end."""
    append(partition, 5)
    partition.positions["reader"], partition.position_notes["reader"] = 4, "note"
    partition.position_epochs["reader"] = 1
    partition.high_watermark = 5
    partition.log.store_high_watermark(5)
    partition.purge()
    assert (partition.log.first_offset, partition.log.next_offset) == (0, 0)
    assert not (partition.positions or partition.position_notes or partition.position_epochs)
    assert partition.log.stored_high_watermark == 0
    append(partition, 2)
    assert partition.high_watermark == 0 and partition.log.stored_high_watermark == 0
    standalone = Partition(1, 1, 2, 0, partition.log)
    standalone.purge()
    append(standalone, 2)
    assert standalone.high_watermark == 2


def test_a_topics_room_is_summed_from_its_logs_only_when_it_runs_out(monkeypatch) -> None:
    """``Topic.room_left``: the sum over every partition's log is what an append pays only
    when the room counted before has run out, is smaller than asked, or was forgotten."""
    logs = MemoryLogs()
    topic = Topic(1, 1, "t", 0, 1, 0, 10_000, 1, "iggy-v1")
    for number in range(1, 101):
        topic.partitions[number] = Partition(1, 1, number, 0,
                                             logs.open(1, 1, number, "iggy-v1", True))
    append(topic.partitions[7], 2)
    stored = topic.size_bytes
    sums = []
    summed = Topic.size_bytes.fget
    monkeypatch.setattr(Topic, "size_bytes", property(lambda t: sums.append(1) or summed(t)))
    assert topic.room_left() == 10_000 - stored and len(sums) == 1
    topic.room -= 500  # (what an append's growth takes off: MessageService.append)
    assert topic.room_left() == 9_500 - stored and len(sums) == 1  # not summed again
    assert topic.room_left(needed=9_800) == 10_000 - stored and len(sums) == 2  # exact
    topic.room = 0  # run out: summed again
    assert topic.room_left() == 10_000 - stored and len(sums) == 3
    topic.room = None  # forgotten (a commit, a new maximum): summed again
    assert topic.room_left() == 10_000 - stored and len(sums) == 4
