"""ColumnarMessages: the reply of the rill extension POLL_MESSAGES_COLUMNAR (code 1000), and
StoredBatches, the reply of POLL_STORED_BATCHES (code 1001; its layout is in its docstring).

Layout (little-endian)::

    u32 partition_id
    u64 first_offset        oldest offset still stored in the partition (retention moves it)
    u64 next_offset         offset the next appended message will get (exclusive end)
    u64 base_offset         offset of the first returned message
    u32 count               messages returned
    u32 base_position       boundaries[0]: where the records region starts in its segment
    count x u64             timestamps (µs), one per message
    (count + 1) x u32       boundaries: record i spans region[b[i] - base : b[i + 1] - base]
    rest                    records region: the messages in POLL layout (§4.5), back to back

Offsets are dense (message i has offset ``base_offset + i``) except on a sparse log (TANK's
explicit sequence numbers leave holes: ``count`` records from the first stored one at or after
the offset asked for, each carrying its own offset; ``end_offset`` is where to go on). The
two fixed-width columns come straight from the segment index, and the region straight from
the segment file, so the server does no per-message work; a client builds columns (ids, payloads, ...) from the boundaries with
vectorised slicing (the Spark connector does it with Arrow). With ``count`` 0 the reply carries
only the partition bounds (one boundary equal to ``base_position``, an empty region).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.iggy.messages import PolledMessage, iter_polled_messages
from rill.protocol.iggy.responses.base import Record

COLUMNAR_PREFIX = struct.Struct("<IQQQII")  # partition_id .. base_position
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")  # a stored record's first field: its offset


@dataclass(frozen=True)
class ColumnarMessages(Record):
    partition_id: int
    first_offset: int
    next_offset: int
    base_offset: int
    count: int
    base_position: int
    timestamps: bytes | memoryview = b""  # count x u64
    boundaries: bytes | memoryview = b""  # (count + 1) x u32
    records: bytes | memoryview = b""

    def parts(self) -> list[bytes | memoryview]:
        """The reply as buffers to write back to back (the region is not copied)."""
        prefix = COLUMNAR_PREFIX.pack(
            self.partition_id, self.first_offset, self.next_offset, self.base_offset,
            self.count, self.base_position,
        )
        return [prefix, self.timestamps, self.boundaries, self.records]

    def encode(self, writer: Writer) -> None:
        for part in self.parts():
            writer.raw(part)

    def to_bytes(self) -> bytes:
        return b"".join(self.parts())

    @classmethod
    def decode(cls, reader: Reader) -> ColumnarMessages:
        partition_id = reader.u32()
        first_offset, next_offset, base_offset = reader.u64(), reader.u64(), reader.u64()
        count, base_position = reader.u32(), reader.u32()
        timestamps = reader.view(8 * count)
        boundaries = reader.view(4 * (count + 1))
        records = reader.rest()
        if _U32.unpack_from(boundaries, 0)[0] != base_position:
            raise DecodeError("columnar boundaries do not start at base_position")
        if _U32.unpack_from(boundaries, 4 * count)[0] - base_position != len(records):
            raise DecodeError("columnar boundaries do not end with the records region")
        return cls(partition_id, first_offset, next_offset, base_offset, count, base_position,
                   timestamps, boundaries, records)

    @classmethod
    def from_payload(cls, payload: bytes | memoryview) -> ColumnarMessages:
        return cls.decode(Reader(payload))

    @property
    def end_offset(self) -> int:
        """The offset after the last returned message (where the next read continues): its
        own offset + 1, which is ``base_offset + count`` unless the records skip offsets (a
        sparse log's holes)."""
        if not self.count:
            return self.base_offset
        at = _U32.unpack_from(self.boundaries, 4 * (self.count - 1))[0] - self.base_position
        return _U64.unpack_from(self.records, at)[0] + 1

    @cached_property
    def messages(self) -> list[PolledMessage]:
        """The returned messages as PolledMessage values (a convenience; not the fast path)."""
        return list(iter_polled_messages(self.records, self.count))

    def __len__(self) -> int:
        return self.count


STORED_PREFIX = struct.Struct("<IQQ")  # partition_id, first_offset, next_offset


@dataclass(frozen=True)
class StoredBatches(Record):
    """POLL_STORED_BATCHES' reply (little-endian)::

        u32 partition_id
        u64 first_offset        oldest offset still stored in the partition
        u64 next_offset         offset the next appended record will get (exclusive end)
        str8 record_format      the topic's: ``kafka`` (RecordBatch v2) or ``iggy``
        rest                    the records as stored: whole RecordBatch v2 batches back to
                                back (``kafka``), or messages in POLL layout (``iggy``)

    Every record or batch carries its own offsets: a reader goes on after the last one."""

    partition_id: int
    first_offset: int
    next_offset: int
    record_format: str
    records: bytes | memoryview = b""

    def prefix(self) -> bytes:
        name = self.record_format.encode()
        return STORED_PREFIX.pack(self.partition_id, self.first_offset,
                                  self.next_offset) + bytes([len(name)]) + name

    def encode(self, writer: Writer) -> None:
        writer.raw(self.prefix())
        writer.raw(self.records)

    def to_bytes(self) -> bytes:
        return self.prefix() + bytes(self.records)

    @classmethod
    def decode(cls, reader: Reader) -> StoredBatches:
        partition_id, first_offset, next_offset = reader.u32(), reader.u64(), reader.u64()
        return cls(partition_id, first_offset, next_offset, reader.str8(), reader.rest())

    @classmethod
    def from_payload(cls, payload: bytes | memoryview) -> StoredBatches:
        return cls.decode(Reader(payload))
