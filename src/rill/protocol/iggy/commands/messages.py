"""Message commands 100-102 (wire reference §3.4)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

from rill.protocol.buffer import Reader, Writer
from rill.protocol.iggy.commands.base import (
    BOOL,
    CONSUMER,
    IDENT,
    STRATEGY,
    U32,
    Command,
)
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.iggy.primitives import (
    Consumer,
    ConsumerKind,
    Identifier,
    Partitioning,
    PartitioningKind,
    PollingKind,
    PollingStrategy,
    numeric_identifier,
)
from rill.protocol.iggy.responses.messages import PolledMessages

# The hot paths' fast decoders (POLL and SEND with numeric identifiers, what clients nearly always
# send): one unpack instead of a Reader call per field. Anything else -- names, bad kinds, short
# payloads -- goes through the declared layout, which also produces every decode error; the fast
# path accepts exactly what the layout accepts (tests/protocol/iggy/test_commands.py compares them).
# consumer kind, (kind, length, id) x 3, partition_id, strategy kind, value, count, auto_commit
_NUMERIC_POLL = struct.Struct("<BBBIBBIBBIIBQIB")
# (kind, length, id) x 2, partitioning kind, its length
_NUMERIC_SEND_HEAD = struct.Struct("<BBIBBIBB")
_CONSUMER_KINDS = (None, ConsumerKind.CONSUMER, ConsumerKind.CONSUMER_GROUP)
_POLLING_KINDS = (None, *PollingKind)
_PARTITIONING_KINDS = (None, *PartitioningKind)


@dataclass(frozen=True, slots=True)
class PollMessages(Command):
    """100 POLL_MESSAGES: consumer; ident stream_id; ident topic_id; u32 partition_id (0 = none);
    u8 strategy kind; u64 strategy value; u32 count; u8 auto_commit (1 = true). OK: PolledMessages.
    """

    CODE = 100
    NAME = "poll_messages"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (CONSUMER, IDENT, IDENT, U32, STRATEGY, U32, BOOL)
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    strategy: PollingStrategy
    count: int
    auto_commit: bool

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> PollMessages:
        if len(payload) >= _NUMERIC_POLL.size:  # (bytes after the fields are ignored)
            (consumer_kind, kind1, length1, consumer_id, kind2, length2, stream_id, kind3,
             length3, topic_id, partition_id, strategy_kind, value, count, auto_commit
             ) = _NUMERIC_POLL.unpack_from(payload)
            if (kind1 == kind2 == kind3 == 1 and length1 == length2 == length3 == 4
                    and 1 <= consumer_kind <= 2 and 1 <= strategy_kind <= 5):
                return cls(
                    Consumer(_CONSUMER_KINDS[consumer_kind], numeric_identifier(consumer_id)),
                    numeric_identifier(stream_id), numeric_identifier(topic_id), partition_id,
                    PollingStrategy(_POLLING_KINDS[strategy_kind], value), count,
                    auto_commit == 1,
                )
        return Command.decode.__func__(cls, payload)  # type: ignore[attr-defined, return-value]

    @staticmethod
    def decode_response(payload: memoryview | bytes) -> PolledMessages:
        return PolledMessages.from_payload(payload)


@dataclass(frozen=True, slots=True)
class SendMessages(Command):
    """101 SEND_MESSAGES: ident stream_id; ident topic_id; partitioning; then messages back to
    back until the end of the payload (id u128, headers_length u32, headers, payload_length u32,
    payload). OK: empty.

    ``messages`` is the raw message region. Decoding does not walk it: the server validates and
    stamps it in one pass when it appends (rill.server.storage.formats.iggy_v1), so no per-message
    Python objects are made on the hot path. ``SendMessages.of`` builds one from Message values.
    """

    CODE = 101
    NAME = "send_messages"
    stream_id: Identifier
    topic_id: Identifier
    partitioning: Partitioning
    messages: bytes | memoryview

    @classmethod
    def of(
        cls,
        stream_id: int | str | Identifier,
        topic_id: int | str | Identifier,
        partitioning: Partitioning,
        messages: Iterable[Message | bytes],
    ) -> SendMessages:
        return cls(
            Identifier.of(stream_id), Identifier.of(topic_id), partitioning, encode_messages(messages)
        )

    def encode(self) -> bytes:
        writer = Writer()
        self.stream_id.encode(writer)
        self.topic_id.encode(writer)
        self.partitioning.encode(writer)
        writer.raw(self.messages)
        return writer.getvalue()

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> SendMessages:
        if len(payload) >= _NUMERIC_SEND_HEAD.size:
            (kind1, length1, stream_id, kind2, length2, topic_id, partitioning_kind,
             key_length) = _NUMERIC_SEND_HEAD.unpack_from(payload)
            end = _NUMERIC_SEND_HEAD.size + key_length
            if (kind1 == kind2 == 1 and length1 == length2 == 4 and 1 <= partitioning_kind <= 3
                    and len(payload) >= end):
                view = memoryview(payload)
                return cls(
                    numeric_identifier(stream_id), numeric_identifier(topic_id),
                    Partitioning(_PARTITIONING_KINDS[partitioning_kind],
                                 bytes(view[_NUMERIC_SEND_HEAD.size:end])),
                    view[end:],
                )
        return Command.decode.__func__(cls, payload)  # type: ignore[attr-defined, return-value]

    @classmethod
    def read(cls, reader: Reader) -> SendMessages:
        stream_id = Identifier.decode(reader)
        topic_id = Identifier.decode(reader)
        partitioning = Partitioning.decode(reader)
        return cls(stream_id, topic_id, partitioning, reader.rest())


@dataclass(frozen=True, slots=True)
class FlushUnsavedBuffer(Command):
    """102 FLUSH_UNSAVED_BUFFER: ident stream_id; ident topic_id; u32 partition_id; u8 fsync."""

    CODE = 102
    NAME = "flush_unsaved_buffer"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, U32, BOOL)
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    fsync: bool
