"""PolledMessages (wire reference §4.5).

u32 partition_id; u64 current_offset; u32 messages_count; then messages_count message records
(layout in ``rill.protocol.iggy.messages``). The records are kept as one raw region: the server
sends bytes straight from its log, and the SDK decodes them only when asked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.iggy.messages import PolledMessage, iter_polled_messages

POLLED_PREFIX = struct.Struct("<IQI")  # partition_id, current_offset, messages_count


@dataclass(frozen=True)
class PolledMessages:
    partition_id: int
    current_offset: int
    count: int
    raw: bytes | memoryview = b""

    def prefix(self) -> bytes:
        return POLLED_PREFIX.pack(self.partition_id, self.current_offset, self.count)

    def encode(self, writer: Writer) -> None:
        writer.raw(self.prefix()).raw(self.raw)

    @classmethod
    def decode(cls, reader: Reader) -> PolledMessages:
        partition_id = reader.u32()
        current_offset = reader.u64()
        count = reader.u32()
        return cls(partition_id, current_offset, count, reader.rest())

    @classmethod
    def from_payload(cls, payload: bytes | memoryview) -> PolledMessages:
        if len(payload) < POLLED_PREFIX.size:
            raise DecodeError("polled messages prefix truncated")
        return cls.decode(Reader(payload))

    @cached_property
    def messages(self) -> list[PolledMessage]:
        return list(iter_polled_messages(self.raw, self.count))

    def __len__(self) -> int:
        return self.count
