"""The in-memory model (``core.model``): a partition's replica state, standalone defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.core.model import FOLLOWER, LEADER, Partition
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
