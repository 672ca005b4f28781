"""The columnar read (``core.columnar``) of a partition in a cluster: only its leader answers,
and only records below the high watermark (records above it may not survive a failover). A
real partition on a memory log; the state stands in for the core's lookups only."""

from __future__ import annotations

import pytest

from rill import errors
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.core.cluster_view import Placement
from rill.server.core.columnar import ColumnarReadService
from rill.server.core.model import FOLLOWER, LEADER, Partition
from rill.server.storage.memory_log import MemoryLogs


class Topic:
    name = "t"
    stream_id = 1
    id = 1


class State:
    """``CoreState``'s three lookups the columnar read makes, for one partition."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition

    def find_topic(self, stream_id, topic_id):
        return Topic()

    def authorize(self, session, action, stream_id, topic_id) -> None:
        pass

    def find_partition(self, topic, partition_id):
        return self.partition


def partition_of(records: int, role: str = LEADER, leader: int | None = 1) -> Partition:
    log = MemoryLogs(segment_size=1 << 20).open(1, 1, 1, "iggy-v1", True)
    for n in range(records):
        log.append(memoryview(encode_messages([Message(f"m{n}".encode(), id=n + 1)])), 1000 + n)
    partition = Partition(1, 1, 1, 0, log, role=role)
    partition.placement = Placement(leader, 1, (1, 2, 3), (1, 2, 3), 2)
    return partition


def test_the_leader_answers_up_to_its_high_watermark_only() -> None:
    partition = partition_of(10)
    partition.high_watermark = 6
    read = ColumnarReadService(State(partition)).poll_messages_columnar(None, 1, 1, 1, 0, 100, 1 << 20)
    assert (read.found.count, read.bounds.next_offset) == (6, 6)
    later = ColumnarReadService(State(partition)).poll_messages_columnar(None, 1, 1, 1, 6, 100, 1 << 20)
    assert later.found.count == 0
    partition.high_watermark = 10
    rest = ColumnarReadService(State(partition)).poll_messages_columnar(None, 1, 1, 1, 6, 100, 1 << 20)
    assert (rest.found.base_offset, rest.found.count, rest.bounds.next_offset) == (6, 4, 10)


@pytest.mark.parametrize("leader, refusal", [(2, errors.NotLeaderForPartition),
                                             (None, errors.LeaderNotAvailable)])
def test_a_follower_refuses_the_read(leader, refusal) -> None:
    partition = partition_of(3, role=FOLLOWER, leader=leader)
    with pytest.raises(refusal):
        ColumnarReadService(State(partition)).poll_messages_columnar(None, 1, 1, 1, 0, 10, 1 << 20)


def test_a_standalone_partition_reads_to_its_log_end() -> None:
    partition = partition_of(5)
    partition.placement = None
    read = ColumnarReadService(State(partition)).poll_messages_columnar(None, 1, 1, 1, 0, 100, 1 << 20)
    assert (read.found.count, read.bounds.next_offset) == (5, 5)
