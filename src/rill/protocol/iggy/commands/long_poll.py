"""Long polling, rill extensions (docs/extensions.md) outside Iggy's ranges: 1030
WAIT_FOR_MESSAGES (until messages are there; the client then polls) and 1031
POLL_MESSAGES_WAITING (a POLL_MESSAGES that waits for its messages: one request, not two)."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.iggy.commands.base import IDENT, Command, list_response
from rill.protocol.iggy.commands.messages import PollMessages
from rill.protocol.iggy.primitives import Identifier
from rill.protocol.iggy.responses.long_poll import PartitionEnd
from rill.protocol.iggy.responses.messages import PolledMessages

MAX_WAIT_MS = 30_000  # a longer wait is cut to this: a reply within the SDK's request timeout
_POSITION_SIZE = 12  # u32 partition_id; u64 offset


@dataclass(frozen=True, slots=True)
class WaitForMessages(Command):
    """1030 WAIT_FOR_MESSAGES: ident stream_id; ident topic_id; u32 max_wait_ms (at most 30 s);
    u32 min_bytes; u32 count; count x (u32 partition_id; u64 offset). OK: one PartitionEnd per
    partition, in the request's order.

    Answers as soon as the partitions hold at least ``min_bytes`` bytes of records (at least one
    record when 0) from the given offsets on, taken together, or when ``max_wait_ms`` has passed
    (then with what there is, possibly nothing). It reads no message: a client then polls the
    partitions whose ``next_offset`` moved past its offset. Woken by appends, not by a timer.
    Permission: as POLL_MESSAGES on the topic."""

    CODE = 1030
    NAME = "wait_for_messages"
    stream_id: Identifier
    topic_id: Identifier
    positions: tuple[tuple[int, int], ...]  # (partition_id, offset)
    max_wait_ms: int = MAX_WAIT_MS
    min_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", tuple((int(p), int(o)) for p, o in self.positions))
        if not self.positions:
            raise ValueError("wait_for_messages needs at least one partition")

    def encode(self) -> bytes:
        writer = Writer()
        IDENT.write(writer, self.stream_id)
        IDENT.write(writer, self.topic_id)
        writer.u32(self.max_wait_ms).u32(self.min_bytes).u32(len(self.positions))
        for partition_id, offset in self.positions:
            writer.u32(partition_id).u64(offset)
        return writer.getvalue()

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> WaitForMessages:
        reader = Reader(payload)
        stream_id, topic_id = IDENT.read(reader), IDENT.read(reader)
        max_wait_ms, min_bytes, count = reader.u32(), reader.u32(), reader.u32()
        if count * _POSITION_SIZE != reader.remaining:
            raise DecodeError(f"{count} partitions do not fill {reader.remaining} bytes")
        positions = tuple((reader.u32(), reader.u64()) for _ in range(count))
        try:
            return cls(stream_id, topic_id, positions, max_wait_ms, min_bytes)
        except ValueError as error:
            raise DecodeError(str(error)) from None

    decode_response = staticmethod(list_response(PartitionEnd.decode))


@dataclass(frozen=True, slots=True)
class PollMessagesWaiting(Command):
    """1031 POLL_MESSAGES_WAITING: u32 max_wait_ms; then POLL_MESSAGES' payload (``poll``).
    OK: PolledMessages, as POLL_MESSAGES answers.

    The poll is answered at once when it finds messages; when it finds none, the server waits
    until the partition holds a message the poll would return, or ``max_wait_ms`` passed (at
    most 30 s: a longer wait is cut), and answers the poll then (possibly with nothing). Woken
    by appends, not by a timer. Permission: as POLL_MESSAGES on the topic."""

    CODE = 1031
    NAME = "poll_messages_waiting"
    poll: PollMessages
    max_wait_ms: int = MAX_WAIT_MS

    def encode(self) -> bytes:
        return Writer().u32(self.max_wait_ms).getvalue() + self.poll.encode()

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> PollMessagesWaiting:
        reader = Reader(payload)
        max_wait_ms = reader.u32()
        poll = PollMessages.read(reader)
        reader.expect_end()  # (POLL_MESSAGES would ignore bytes after its fields; not here)
        return cls(poll, max_wait_ms)

    @staticmethod
    def decode_response(payload: memoryview | bytes) -> PolledMessages:
        return PolledMessages.from_payload(payload)
