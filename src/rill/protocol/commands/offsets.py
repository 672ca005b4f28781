"""Consumer offset commands 120-121 (wire reference §3.5)."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.commands.base import (
    CONSUMER,
    IDENT,
    U32,
    U64,
    Command,
    optional_response,
)
from rill.protocol.primitives import Consumer, Identifier
from rill.protocol.responses.groups import ConsumerOffsetInfo


@dataclass(frozen=True, slots=True)
class GetConsumerOffset(Command):
    """120 GET_CONSUMER_OFFSET: consumer (u8 kind + ident); ident stream_id; ident topic_id;
    u32 partition_id (0 = none). OK: ConsumerOffsetInfo (§4.6), or empty on any failure."""

    CODE = 120
    NAME = "get_consumer_offset"
    LAYOUT = (CONSUMER, IDENT, IDENT, U32)
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int = 0

    decode_response = staticmethod(optional_response(ConsumerOffsetInfo.decode))


@dataclass(frozen=True, slots=True)
class StoreConsumerOffset(Command):
    """121 STORE_CONSUMER_OFFSET: consumer; ident stream_id; ident topic_id; u32 partition_id
    (0 = none); u64 offset. OK: empty (offset beyond the partition's current offset: 4100)."""

    CODE = 121
    NAME = "store_consumer_offset"
    LAYOUT = (CONSUMER, IDENT, IDENT, U32, U64)
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    offset: int
