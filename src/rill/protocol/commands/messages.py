"""Message commands 100-102 (wire reference §3.4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.commands.base import (
    BOOL,
    CONSUMER,
    IDENT,
    STRATEGY,
    U32,
    Command,
)
from rill.protocol.messages import Message, encode_messages
from rill.protocol.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.protocol.responses.messages import PolledMessages


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

    @staticmethod
    def decode_response(payload: memoryview | bytes) -> PolledMessages:
        return PolledMessages.from_payload(payload)


@dataclass(frozen=True, slots=True)
class SendMessages(Command):
    """101 SEND_MESSAGES: ident stream_id; ident topic_id; partitioning; then messages back to
    back until the end of the payload (id u128, headers_length u32, headers, payload_length u32,
    payload). OK: empty.

    ``messages`` is the raw message region. Decoding does not walk it: the server validates and
    stamps it in one pass when it appends (rill.server.storage.records), so no per-message
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
