"""Bulk columnar reads (rill extension, code 1000): a partition range by offset, as columns.

Owns: POLL_MESSAGES_COLUMNAR. It reads by offset only (no consumer, no stored offset, no
auto-commit), so a reader that keeps its own positions -- the Spark connector, which keeps
them in Spark's checkpoint -- can fetch ranges fast. The work is done by the partition log
(``PartitionLog.read_columnar``): index columns and one log read, no per-message work.
"""

from __future__ import annotations

from rill.protocol.commands.columnar import (
    DEFAULT_COLUMNAR_BYTES,
    MAX_COLUMNAR_BYTES,
    PollMessagesColumnar,
)
from rill.protocol.responses.columnar import ColumnarMessages
from rill.server.core.model import Session
from rill.server.core.state import CoreState


class ColumnarReadService:
    def __init__(self, state: CoreState) -> None:
        self.state = state

    def poll_messages_columnar(
        self, session: Session, command: PollMessagesColumnar
    ) -> ColumnarMessages:
        state = self.state
        topic = state.find_topic(command.stream_id, command.topic_id)
        state.authorize(session, "poll_messages_columnar", topic.stream_id, topic.id)
        partition = state.find_partition(topic, command.partition_id)
        max_bytes = min(command.max_bytes or DEFAULT_COLUMNAR_BYTES, MAX_COLUMNAR_BYTES)
        log = partition.log
        found = log.read_columnar(command.offset, command.count, max_bytes)
        return ColumnarMessages(
            partition.id, log.first_offset, log.next_offset, found.base_offset, found.count,
            found.base_position, found.timestamps, found.boundaries, found.records,
        )
