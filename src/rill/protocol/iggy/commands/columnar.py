"""Bulk reads by offset, rill extensions (docs/extensions.md): code 1000 (as columns) and 1001
(the stored bytes as they are), outside Iggy's ranges."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import IDENT, U32, U64, Command
from rill.protocol.iggy.primitives import Identifier
from rill.protocol.iggy.responses.columnar import ColumnarMessages, StoredBatches

MAX_COLUMNAR_BYTES = 64 * 1024 * 1024  # a larger max_bytes is clipped to this
DEFAULT_COLUMNAR_BYTES = 16 * 1024 * 1024  # max_bytes 0 means this


@dataclass(frozen=True, slots=True)
class PollMessagesColumnar(Command):
    """1000 POLL_MESSAGES_COLUMNAR: ident stream_id; ident topic_id; u32 partition_id;
    u64 offset; u32 count; u32 max_bytes (0 = 16 MiB; at most 64 MiB). OK: ColumnarMessages.

    Reads messages from ``offset`` (raised to the oldest stored offset) by offset only: no
    consumer, no stored offset, no auto-commit. At most ``count`` messages come back, fewer when
    the records would exceed ``max_bytes`` (at least one is always returned), when the partition
    ends, or at a segment boundary; continue from ``ColumnarMessages.end_offset`` (the last
    record's offset + 1: ``base_offset + count`` unless a sparse log's records skip offsets,
    where the read answers from the next stored record). ``count`` 0 returns
    only the partition's bounds (``first_offset``, ``next_offset``). Permission: as POLL_MESSAGES.
    """

    CODE = 1000
    NAME = "poll_messages_columnar"
    LAYOUT = (IDENT, IDENT, U32, U64, U32, U32)
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    offset: int
    count: int
    max_bytes: int = 0

    @staticmethod
    def decode_response(payload: memoryview | bytes) -> ColumnarMessages:
        return ColumnarMessages.from_payload(payload)


@dataclass(frozen=True, slots=True)
class PollStoredBatches(Command):
    """1001 POLL_STORED_BATCHES: ident stream_id; ident topic_id; u32 partition_id;
    u64 offset; u32 count; u32 max_bytes (0 = 16 MiB; at most 64 MiB). OK: StoredBatches.

    The partition's records from ``offset`` (raised to the oldest stored offset) exactly as
    its log stores them, in the topic's record format, with no conversion: a ``kafka`` topic's
    whole RecordBatch v2 batches from the one holding ``offset`` (so its records may start
    before ``offset`` and end past ``offset + count``), an ``iggy`` topic's messages of
    offsets ``[offset, offset + count)`` in the POLL layout. Fewer when they would exceed
    ``max_bytes`` (one record or batch is always returned), none at the high watermark.
    Reads by offset only, as POLL_MESSAGES_COLUMNAR; permission: as POLL_MESSAGES.
    """

    CODE = 1001
    NAME = "poll_stored_batches"
    LAYOUT = (IDENT, IDENT, U32, U64, U32, U32)
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    offset: int
    count: int
    max_bytes: int = 0

    @staticmethod
    def decode_response(payload: memoryview | bytes) -> StoredBatches:
        return StoredBatches.from_payload(payload)
