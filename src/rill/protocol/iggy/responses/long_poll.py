"""WAIT_FOR_MESSAGES' answer (rill extension 1030, docs/extensions.md).

PartitionEnd (20 bytes): u32 partition_id; u64 next_offset (the offset the partition's next
message will get); u64 bytes_after (bytes of records from the offset the request asked about
to the end). The answer is one record per partition asked, in the request's order.
"""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import U32, U64
from rill.protocol.iggy.responses.base import Record


@dataclass(frozen=True, slots=True)
class PartitionEnd(Record):
    LAYOUT = (U32, U64, U64)

    partition_id: int
    next_offset: int
    bytes_after: int
