"""Bulk columnar reads (rill extension, code 1000): a partition range by offset, as columns.

Owns: the columnar read. It reads by offset only (no consumer, no stored offset, no
auto-commit), so a reader that keeps its own positions -- the Spark connector, which keeps
them in Spark's checkpoint -- can fetch ranges fast. The work is done by the partition log
(``Log.read_columnar``): index columns and one log read, no per-message work.

In a cluster, as every read by offset: only the partition's leader answers (a follower refuses,
``NotLeaderForPartition`` naming the leader, or ``LeaderNotAvailable``), and only records below
the high watermark are returned, with the high watermark as the reply's next offset (records
above it may not survive a failover).
"""

from __future__ import annotations

from dataclasses import dataclass

from rill.server.auth.permissioner import Action
from rill.server.core.cluster_view import ACKS_LEADER
from rill.server.core.messages import check_leads, log_bounds
from rill.server.core.model import LEADER, Session
from rill.server.core.state import CoreState
from rill.server.core.types import LogBounds, Ref
from rill.server.storage.columnar import ColumnarRange


@dataclass(frozen=True, slots=True)
class ColumnarRead:
    partition_id: int
    bounds: LogBounds  # at the read
    found: ColumnarRange


class ColumnarReadService:
    def __init__(self, state: CoreState) -> None:
        self.state = state

    def poll_messages_columnar(self, session: Session, stream_id: Ref, topic_id: Ref,
                               partition_id: int, offset: int, count: int, max_bytes: int
                               ) -> ColumnarRead:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        partition = state.find_partition(topic, partition_id)
        log = partition.log
        if partition.placement is None:  # standalone: the log as it is
            return ColumnarRead(partition.id, log_bounds(partition),
                                log.read_columnar(offset, count, max_bytes))
        if partition.role != LEADER:
            check_leads(partition, topic, ACKS_LEADER)
        high_watermark = partition.high_watermark
        count = max(0, min(count, high_watermark - max(offset, log.first_offset)))
        return ColumnarRead(partition.id,
                            LogBounds(log.first_offset, high_watermark, high_watermark),
                            log.read_columnar(offset, count, max_bytes))
