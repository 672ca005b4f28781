"""Consumer offset commands 120-121 (wire reference §3.5), and rill's GET_CONSUMER_LAG (1020,
docs/extensions.md)."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import (
    CONSUMER,
    IDENT,
    U32,
    U64,
    Command,
    list_response,
    optional_response,
)
from rill.protocol.iggy.primitives import Consumer, Identifier
from rill.protocol.iggy.responses.groups import ConsumerLag, ConsumerOffsetInfo


@dataclass(frozen=True, slots=True)
class GetConsumerOffset(Command):
    """120 GET_CONSUMER_OFFSET: consumer (u8 kind + ident); ident stream_id; ident topic_id;
    u32 partition_id (0 = none). OK: ConsumerOffsetInfo (§4.6; stored_offset 0 when nothing
    was stored, as Iggy 0.4.95), or empty on any failure (read as None)."""

    CODE = 120
    NAME = "get_consumer_offset"
    TRAILING_BYTES_IGNORED = True
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
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (CONSUMER, IDENT, IDENT, U32, U64)
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class GetConsumerLag(Command):
    """1020 GET_CONSUMER_LAG (rill extension): ident stream_id; ident topic_id. OK: concatenated
    ConsumerLag records: every consumer with a stored offset in the topic, and every consumer
    group of the topic in every partition (committed or not)."""

    CODE = 1020
    NAME = "get_consumer_lag"
    LAYOUT = (IDENT, IDENT)
    stream_id: Identifier
    topic_id: Identifier

    decode_response = staticmethod(list_response(ConsumerLag.decode))
