"""The ``kafka-v2`` record format: Kafka's RecordBatch v2 stored as the client sent it.

Owns the layout of a stored Kafka batch and everything storage asks of it through the
record-format seam (``formats.RecordFormat``, ``batch_index=True``): stamping a produced
``records`` field, verifying stored batches against their index, walking them without an index
(recovery, index rebuilds, a follower's append), their heads and lengths, and their producer
fields (``producer_batches``: what Kafka's idempotence rule reads, the rule being the Kafka
handler's).

Stored layout: the client's batches byte for byte (../shared/spec/kafka-notes.md §3.1), all
integers big-endian, 61 header bytes then the records block (compressed as one block when the
codec bits are set)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 (=2) | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records

Only ``baseOffset`` (the log's offset of the batch's first record) and
``partitionLeaderEpoch`` (the log's ``leader_epoch``) are rewritten; both lie before the
CRC-32C range (bytes 21..end), so ``stamp`` never recomputes the CRC and nothing is
recompressed: its work is per batch (one header unpack, one CRC-32C over its bytes in C, one
pack); a client's batch was walked per record once before (``check_produced``, below). A Fetch hands the stored bytes back. A writable ``records`` field (a
request's own buffer, ``protocol.framing``) is stamped where it lies, a read-only one in a copy:
a megabyte copied into memory touched for the first time cost as much as its write to the page
cache on this project's machines (docs/performance.md §10).

Index entry, one per batch, 24 bytes, little-endian like every rill index::

    relative_offset u32 (baseOffset - segment start) | position u32 | timestamp u64 (µs) |
    leader_epoch u32 | holes u32 (offsets inside the batch that hold no record: TANK's
    explicit sequence numbers; 0 for a dense batch; what ``messages_count`` subtracts)

The batch holds offsets ``baseOffset .. baseOffset + lastOffsetDelta`` (the next entry starts
after them).

What ``stamp`` accepts (``InvalidRecordBatch`` otherwise, before anything is written; its
``corrupt`` says which Kafka error a handler answers: True -> CORRUPT_MESSAGE (2), False ->
INVALID_RECORD (87)):
  * one or more whole batches back to back, each at least a 61-byte header, its batchLength
    ending inside the bytes given, nothing left over, and not nothing at all (corrupt);
  * magic 2 (invalid: legacy MessageSets are not stored), CRC-32C right (corrupt);
  * recordsCount >= 1 and lastOffsetDelta == recordsCount - 1 (invalid). Kafka's
    LogValidator demands exactly this of produced v2 batches ("inconsistent batch offset
    range"); every client writes it (only compaction leaves gaps, never a producer). A stored
    batch (``scan``: a leader's bytes) is only asked lastOffsetDelta >= 0 and recordsCount >= 1,
    and holds lastOffsetDelta + 1 offsets. ``stamp_sparse`` (``gaps=True``) asks a batch only
    lastOffsetDelta >= recordsCount - 1: a batch the server built with offsets that skip, as
    TANK's explicit sequence numbers do (its records' offsetDeltas are the caller's to get
    right), which then holds lastOffsetDelta + 1 offsets;
  * a codec of none/gzip/snappy/lz4/zstd (0..4; invalid otherwise), not decompressed;
  * not a control batch (attributes bit 5: only a broker writes those), and a producer id
    implies baseSequence >= 0 (invalid), as LogValidator checks.

What a client's batch must also pass, before the append (``check_produced``, the Kafka
handler's call for a producer's batches: Kafka's broker's LogValidator; ``stamp`` alone serves
batches the server built, e.g. from a legacy MessageSet or a TANK bundle): its records walked
one by one (``walk_records``, C twin ``_stamp.walk_kafka_records``; a compressed block is
inflated for it): exactly recordsCount well-formed records, offsetDeltas 0..count-1 in order,
nothing after the last (INVALID_RECORD; Kafka rewrites a compressed batch whose inner offsets
skip, rill stores batches as sent and refuses it); no LogAppendTime timestamp type
(INVALID_TIMESTAMP: the topic's ``message.timestamp.type`` is CreateTime). Its maxTimestamp is
then repaired as the broker does: baseTimestamp + the largest timestampDelta (Sarama before
1.27 sends -1, which indexed the batch at time 0: ListOffsets by time missed it and retention
deleted it), the CRC-32C recomputed over the repaired bytes (after the sent ones were checked).
That is the one per-record pass of the write path, and the only rewrite under the CRC.

Timestamps (the decision): the index timestamp of a batch is the timestamp the log stamps the
append with (``timestamp_us`` = max(now_us, the log's last), never decreasing: what
``BatchSegment`` binary-searches and what the log keeps as the segment's first and last), so
the index and the log's own bookkeeping always agree, whatever the caller passes. The Kafka
handler appends with ``now_us = batch_time_us(raw)``: the largest maxTimestamp of the batches
(ms, CreateTime; for a batch whose attributes say LogAppendTime, maxTimestamp is that append
time) x 1000. The index timestamp is then max(this batch's maxTimestamp, the one before it),
Kafka's own time index (a running maximum), and a timestamp search finds the first batch whose
maxTimestamp is >= the time asked for, as ListOffsets needs; the exact record inside the batch
is found by ``PartitionLog.record_at_or_after`` (any codec). ``scan`` rebuilds exactly that
from the bytes: max(maxTimestamp x 1000, the previous entry's timestamp; negative maxTimestamps
count as 0), ``batch_head`` gives maxTimestamp x 1000. Limits of that (the seam gives ``stamp``
no previous entry, and the log keeps its own timestamp): a caller appending at the wall clock
gets an append-time index instead (a rebuild then turns it into the CreateTime one); an append
of several batches indexes all of them at the append's timestamp (a rebuild gives each its
running maximum: Kafka itself takes one batch per partition per produce). Where the running
maximum is above a batch's own maxTimestamp (a producer's clock going back), recovery's
structural check compares it as the running maximum it is, so a clean stop is not taken for a
damaged one. Offsets and positions are never affected.

Staged appends (``restamp``, ``check_stored``) are an Iggy extension laid out per record:
FeatureUnavailable here. A follower's ``append_replicated`` walks the leader's bytes with
``scan``, whose entries carry each batch's own partitionLeaderEpoch.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c

from rill.errors import FeatureUnavailable
from rill.protocol.buffer import DecodeError
from rill.protocol.kafka import record_batch
from rill.server.storage.formats.iggy_v1_checks import (
    KIND_CONTENT,
    KIND_GOOD,
    KIND_STRUCTURE,
    ScanResult,
)
from rill.server.storage.formats.iggy_v1 import StampedBatch

NAME = "kafka-v2"

# the whole fixed header, in wire order (``protocol.kafka.record_batch`` has the layout)
BATCH_HEADER = record_batch.HEADER
BATCH_HEADER_SIZE = record_batch.HEADER_SIZE  # 61
LENGTH_PREFIX_SIZE = 12  # baseOffset and batchLength: batchLength counts the bytes after them
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LENGTH_PREFIX_SIZE
CRC_FROM = record_batch.CRC_FROM  # the CRC-32C covers attributes .. end
MAGIC = record_batch.MAGIC
# baseOffset, batchLength (kept), partitionLeaderEpoch: what the broker rewrites
_REWRITTEN = struct.Struct(">qii")
_LENGTH_AT = struct.Struct(">8xi")

CODEC_MASK = record_batch.CODEC_MASK
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIMESTAMP_TYPE_BIT = record_batch.LOG_APPEND_TIME
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = record_batch.CONTROL

INDEX_ENTRY = struct.Struct("<IIQII")  # relative_offset, position, timestamp, epoch, holes
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 24
_EPOCH_AT = struct.Struct("<16xI")

MAX_EPOCH = 0x7FFF_FFFF  # partitionLeaderEpoch is an int32
_MAX_TIMESTAMP = 0xFFFF_FFFF_FFFF_FFFF
_NO_LIMIT = 0xFFFF_FFFF_FFFF_FFFF


class InvalidRecordBatch(DecodeError):
    """A produced ``records`` field this format refuses. ``corrupt``: the bytes disagree with
    their own lengths or CRC (Kafka's CORRUPT_MESSAGE, 2); ``timestamp``: a producer set the
    LogAppendTime type (INVALID_TIMESTAMP, 32); otherwise they are well formed but not
    acceptable (INVALID_RECORD, 87)."""

    def __init__(self, detail: str, corrupt: bool, timestamp: bool = False) -> None:
        super().__init__(detail)
        self.corrupt = corrupt
        self.timestamp = timestamp


def _time_us(max_timestamp_ms: int) -> int:
    """A batch's maxTimestamp (ms; -1 = none) as an index timestamp (µs, unsigned)."""
    if max_timestamp_ms <= 0:
        return 0
    return min(max_timestamp_ms * 1000, _MAX_TIMESTAMP)


def batch_time_us(raw: bytes | bytearray | memoryview) -> int:
    """The largest maxTimestamp (x 1000: µs) of the batches in a produced ``records`` field,
    0 when none can be read: what the Kafka handler passes as ``now_us`` to append (see the
    module docstring). Reads headers only; ``stamp`` does the checking."""
    view = memoryview(raw)
    latest, at, total = 0, 0, len(view)
    while total - at >= BATCH_HEADER_SIZE:
        header = BATCH_HEADER.unpack_from(view, at)
        latest = max(latest, _time_us(header[8]))
        if header[1] < MIN_BATCH_LENGTH:
            break
        at += LENGTH_PREFIX_SIZE + header[1]
    return latest


# ---------------------------------------------------------------------- the write path
def _checked_header(view: memoryview, at: int, total: int, number: int, gaps: bool
                    ) -> tuple[tuple, int]:
    """The header of the produced batch at ``view[at]`` and the batch's end, once it passes
    what ``stamp`` accepts (the module docstring); InvalidRecordBatch otherwise."""
    if total - at < BATCH_HEADER_SIZE:
        raise InvalidRecordBatch(
            f"batch {number} at byte {at}: {total - at} bytes left, less than a "
            f"{BATCH_HEADER_SIZE}-byte batch header", corrupt=True)
    header = BATCH_HEADER.unpack_from(view, at)
    (_, length, _, magic, crc, attributes, last_delta, _, _, producer_id, _, base_sequence,
     count) = header
    end = at + LENGTH_PREFIX_SIZE + length
    if length < MIN_BATCH_LENGTH or end > total:
        raise InvalidRecordBatch(
            f"batch {number} at byte {at}: batchLength {length} does not fit the "
            f"{total - at - LENGTH_PREFIX_SIZE} bytes after it", corrupt=True)
    if magic != MAGIC:
        raise InvalidRecordBatch(f"batch {number} at byte {at}: magic {magic}, only "
                                 f"RecordBatch v2 (magic 2) is stored", corrupt=False)
    if crc32c(view[at + CRC_FROM : end]) != crc:
        raise InvalidRecordBatch(f"batch {number} at byte {at}: CRC-32C mismatch",
                                 corrupt=True)
    if count < 1 or last_delta < count - 1 or (last_delta != count - 1 and not gaps):
        raise InvalidRecordBatch(
            f"batch {number} at byte {at}: recordsCount {count} with lastOffsetDelta "
            f"{last_delta} (a batch holds >= 1 record, offsets 0..count-1)", corrupt=False)
    if attributes & CODEC_MASK not in CODECS:
        raise InvalidRecordBatch(f"batch {number} at byte {at}: unknown compression codec "
                                 f"{attributes & CODEC_MASK}", corrupt=False)
    if attributes & CONTROL_BIT:
        raise InvalidRecordBatch(f"batch {number} at byte {at}: a client cannot write a "
                                 f"control batch", corrupt=False)
    if producer_id >= 0 and base_sequence < 0:
        raise InvalidRecordBatch(f"batch {number} at byte {at}: producer id {producer_id} "
                                 f"without a base sequence", corrupt=False)
    return header, end


def stamp_batches(raw: bytes | bytearray | memoryview, base_offset: int, timestamp_us: int,
                  base_position: int, segment_start: int, leader_epoch: int = 0,
                  gaps: bool = False) -> StampedBatch:
    """Check a produced ``records`` field (one or more RecordBatch v2) and give it offsets from
    ``base_offset`` and ``leader_epoch``, with one index entry per batch (at ``timestamp_us``):
    in place when ``raw`` is writable (the caller's buffer: it hands the bytes over), else in a
    copy. Raises InvalidRecordBatch (nothing returned; a writable ``raw`` may then have some
    batches' offsets rewritten, nothing else) for anything the module docstring refuses."""
    if not 0 <= leader_epoch <= MAX_EPOCH:
        raise ValueError(f"leader epoch {leader_epoch} is not an int32 >= 0")
    view = memoryview(raw)
    total = len(view)
    if total == 0:
        raise InvalidRecordBatch("no record batch in the records", corrupt=True)
    records = view if not view.readonly else bytearray(view)  # at most one copy
    entries = bytearray()
    pack_entry, rewrite = INDEX_ENTRY.pack, _REWRITTEN.pack_into
    at, offset, relative = 0, base_offset, base_offset - segment_start
    number = 0
    while at < total:
        header, end = _checked_header(view, at, total, number, gaps)
        length, last_delta = header[1], header[6]
        rewrite(records, at, offset, length, leader_epoch)
        entries += pack_entry(relative + offset - base_offset, base_position + at, timestamp_us,
                              leader_epoch, 0)
        offset += last_delta + 1
        at = end
        number += 1
    return StampedBatch(records, entries, offset - base_offset, base_offset, offset - 1,
                        timestamp_us)


def stamp_sparse(raw: bytes | bytearray | memoryview, base_offset: int, timestamp_us: int,
                 base_position: int, segment_start: int, leader_epoch: int = 0) -> StampedBatch:
    """``stamp_batches`` of batches whose offsets may skip (``gaps=True``)."""
    return stamp_batches(raw, base_offset, timestamp_us, base_position, segment_start,
                         leader_epoch, gaps=True)


def no_staged_appends(*args: object) -> None:
    raise FeatureUnavailable(reason=f"record format {NAME} stores client batches: staged "
                                    "appends (a per-record Iggy layout) are not available")


# ---------------------------------------------------------------------- produced batches
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MAX_TIMESTAMP_AT = 35  # baseOffset .. baseTimestamp come before it
_CRC_AT = 17
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class ProducedBatches(NamedTuple):
    """A produced ``records`` field as ``check_produced`` leaves it: the same buffer (repaired
    in place when writable) or a repaired copy, and the timestamp to append it at (µs: the
    largest maxTimestamp of its batches, as ``batch_time_us``)."""

    records: bytes | bytearray | memoryview
    time_us: int


def _zigzag(block: bytes | memoryview, at: int, end: int, number: int, length: int
            ) -> tuple[int, int]:
    """The zig-zag varint at ``block[at]`` before ``end`` (at most 10 bytes, 64 bits)."""
    result, shift = 0, 0
    while True:
        if at >= end:
            raise _WalkFault(number, "overruns the block" if length < 0
                             else f"overruns its length {length}")
        byte = block[at]
        at += 1
        if shift == 63 and byte & 0x7E:
            raise _WalkFault(number, "a varint longer than 64 bits")
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), at
        if shift == 63:
            raise _WalkFault(number, "a varint longer than 64 bits")
        shift += 7


class _WalkFault(Exception):
    def __init__(self, number: int, problem: str) -> None:
        super().__init__(f"record {number}: {problem}")


def walk_records_python(block: bytes | bytearray | memoryview, count: int) -> int | str:
    """The largest timestampDelta of the ``count`` records of a (never compressed: inflated)
    records block, or why the block is not exactly those records (the text): each record's
    length, fields and header fields within it, offsetDeltas 0..count-1 in order (what Kafka's
    broker needs to keep a batch's inner offsets as sent), nothing after the last. The
    reference of ``_stamp.walk_kafka_records`` (the C twin, same answers and texts)."""
    block = memoryview(block).cast("B")
    size, at, largest = len(block), 0, _INT64_MIN
    try:
        for number in range(count):
            length, at = _zigzag(block, at, size, number, -1)
            if length < 0:
                raise _WalkFault(number, f"negative length {length}")
            if length > size - at:
                raise _WalkFault(number, f"length {length} overruns the block")
            end = at + length
            if at >= end:
                raise _WalkFault(number, f"overruns its length {length}")
            at += 1  # attributes
            delta, at = _zigzag(block, at, end, number, length)
            largest = max(largest, delta)
            offset_delta, at = _zigzag(block, at, end, number, length)
            if offset_delta != number:
                raise _WalkFault(number, f"offsetDelta {offset_delta}, not {number} (offsets "
                                         "0..count-1)")
            for field, minimum in (("key", -1), ("value", -1)):
                at = _skip_blob(block, at, end, number, length, field, minimum)
            headers, at = _zigzag(block, at, end, number, length)
            if headers < 0:
                raise _WalkFault(number, f"header count {headers}")
            for _ in range(headers):
                at = _skip_blob(block, at, end, number, length, "header key", 0)
                at = _skip_blob(block, at, end, number, length, "header value", -1)
            if at != end:
                raise _WalkFault(number, f"{end - at} bytes left inside its length {length}")
    except _WalkFault as fault:
        return str(fault)
    if at != size:
        return f"{size - at} bytes after the last of {count} records"
    return largest


def _skip_blob(block: memoryview, at: int, end: int, number: int, length: int, field: str,
               minimum: int) -> int:
    size, at = _zigzag(block, at, end, number, length)
    if size < minimum:
        raise _WalkFault(number, f"{field} length {size}")
    if size > end - at:
        raise _WalkFault(number, f"overruns its length {length}")
    return at + max(size, 0)


def _load_walker():  # type: ignore[no-untyped-def]
    from rill.server.storage.formats.iggy_v1 import ACCELERATOR
    return getattr(ACCELERATOR, "walk_kafka_records", None)


_walker = _load_walker()
WALK_ACCELERATED = _walker is not None
walk_records = _walker if WALK_ACCELERATED else walk_records_python


def check_produced(raw: bytes | bytearray | memoryview) -> ProducedBatches:
    """Kafka's broker's validation of a client's produced ``records`` field (its LogValidator,
    for RecordBatch v2 and a topic of CreateTime: kafka-notes, docs/kafka.md "Storage"), before
    anything is written: what ``stamp`` accepts (the module docstring), no LogAppendTime
    timestamp type from a producer (INVALID_TIMESTAMP), and every batch's records walked
    (``walk_records``; a compressed block inflated first, at most
    ``record_batch.MAX_INFLATED``): exactly recordsCount well-formed records whose
    offsetDeltas run 0..count-1 (INVALID_RECORD otherwise). Repaired, as the broker does:
    maxTimestamp := baseTimestamp + the largest timestampDelta (Sarama before 1.27 sends -1),
    with the CRC-32C recomputed; only batches that need it are touched, in ``raw`` when it is
    writable, else in one copy."""
    view = memoryview(raw)
    total = len(view)
    if total == 0:
        raise InvalidRecordBatch("no record batch in the records", corrupt=True)
    records: bytes | bytearray | memoryview = raw
    out = None if view.readonly else view
    at, number, latest = 0, 0, 0
    while at < total:
        header, end = _checked_header(view, at, total, number, False)
        attributes, base_timestamp, max_timestamp, count = (header[5], header[7], header[8],
                                                            header[12])
        where = f"batch {number} at byte {at}"
        if attributes & TIMESTAMP_TYPE_BIT:
            raise InvalidRecordBatch(f"{where}: a producer cannot set the LogAppendTime "
                                     "timestamp type", corrupt=False, timestamp=True)
        block = view[at + BATCH_HEADER_SIZE : end]
        codec = attributes & CODEC_MASK
        if codec:
            try:
                block = record_batch.decompress(codec, block)
            except record_batch.TooLarge as error:
                raise InvalidRecordBatch(f"{where}: {error}", corrupt=False) from None
            except Exception as error:  # each codec's own error: not a compressed block
                raise InvalidRecordBatch(f"{where}: its {CODECS[codec]} records do not "
                                         f"decompress ({error})", corrupt=True) from None
        largest = walk_records(block, count)
        if type(largest) is str:
            raise InvalidRecordBatch(f"{where}: {largest}", corrupt=False)
        newest = base_timestamp + largest
        if not _INT64_MIN <= newest <= _INT64_MAX:
            raise InvalidRecordBatch(f"{where}: a record's timestamp is past 64 bits",
                                     corrupt=False)
        if newest != max_timestamp:
            if out is None:
                records = bytearray(view)
                out = memoryview(records)
                view = out
            _I64.pack_into(out, at + _MAX_TIMESTAMP_AT, newest)
            _U32.pack_into(out, at + _CRC_AT, crc32c(out[at + CRC_FROM : end]))
        latest = max(latest, _time_us(newest))
        at = end
        number += 1
    return ProducedBatches(records, latest)


# ---------------------------------------------------------------------- stored batches
def _check_stored(view: memoryview, at: int, limit: int, offset: int, checksums: bool
                  ) -> tuple[int, str | None, int, int, int, int]:
    """``(kind, reason, end, offsets held, timestamp µs, epoch)`` of the stored batch at
    ``view[at]``, expected to hold ``offset`` first and to end by ``limit``."""
    if limit - at < BATCH_HEADER_SIZE:
        return KIND_STRUCTURE, f"incomplete batch at byte {at} (offset {offset})", 0, 0, 0, 0
    (first, length, epoch, magic, crc, _, last_delta, _, max_timestamp, _, _, _,
     count) = BATCH_HEADER.unpack_from(view, at)
    end = at + LENGTH_PREFIX_SIZE + length
    if length < MIN_BATCH_LENGTH or end > limit:
        return (KIND_STRUCTURE, f"batch at byte {at} (offset {offset}): batchLength {length} "
                f"overruns its room", 0, 0, 0, 0)
    if first != offset:
        return (KIND_STRUCTURE, f"batch at byte {at} carries offset {first}, not {offset}",
                0, 0, 0, 0)
    if epoch < 0:
        return KIND_STRUCTURE, f"batch at byte {at} (offset {offset}): leader epoch {epoch}", \
            0, 0, 0, 0
    if magic != MAGIC:
        return (KIND_CONTENT, f"batch at byte {at} (offset {offset}): magic {magic}", end,
                0, 0, 0)
    if checksums and crc32c(view[at + CRC_FROM : end]) != crc:
        return (KIND_CONTENT, f"batch at byte {at} (offset {offset}): CRC-32C mismatch", end,
                0, 0, 0)
    if count < 1 or last_delta < 0:
        return (KIND_STRUCTURE, f"batch at byte {at} (offset {offset}): recordsCount {count}, "
                f"lastOffsetDelta {last_delta}", 0, 0, 0, 0)
    return KIND_GOOD, None, end, last_delta + 1, _time_us(max_timestamp), epoch


def verify_batches(data: bytes | bytearray | memoryview, entries: bytes | bytearray | memoryview,
                   first_offset: int, relative_first: int, base_position: int
                   ) -> tuple[int, int, str | None]:
    """Stored batches against their index entries: ``(offsets verified, kind, reason)``, the
    offsets being those of the good batches before the first that is not."""
    view, index = memoryview(data), memoryview(entries)
    numbers = len(index) // INDEX_ENTRY_SIZE
    verified, at = 0, 0
    unpack = INDEX_ENTRY.unpack_from
    for number in range(numbers):
        relative, position, _, epoch, _ = unpack(index, number * INDEX_ENTRY_SIZE)
        following = (unpack(index, (number + 1) * INDEX_ENTRY_SIZE)[1] - base_position
                     if number + 1 < numbers else len(view))
        if relative != relative_first + verified or position - base_position != at:
            return verified, KIND_STRUCTURE, (f"index entry {number} (offset "
                                              f"{first_offset + verified}) is not where its "
                                              f"batch is")
        kind, reason, end, held, _, stored_epoch = _check_stored(
            view, at, following, first_offset + verified, True)
        if kind != KIND_GOOD:
            return verified, kind, reason
        if end != following:
            return verified, KIND_STRUCTURE, (f"batch at byte {position} ends at "
                                              f"{end - at + position}, its index says "
                                              f"{following + base_position}")
        if stored_epoch != epoch:
            return verified, KIND_STRUCTURE, (f"batch at byte {position}: leader epoch "
                                              f"{stored_epoch}, its index says {epoch}")
        if number + 1 < numbers and unpack(index, (number + 1) * INDEX_ENTRY_SIZE)[0] != (
                relative + held):
            return verified, KIND_STRUCTURE, (f"batch at byte {position} holds {held} offsets, "
                                              f"the index's next entry disagrees")
        verified += held
        at = end
    return verified, KIND_GOOD, None


def scan_batches(data: bytes | bytearray | memoryview, start_position: int, expected_offset: int,
                 segment_start: int, previous_timestamp: int = 0, max_count: int = _NO_LIMIT,
                 verify_checksums: bool = True) -> ScanResult:
    """Stored batches walked from ``start_position`` without an index, the first expected to
    hold ``expected_offset``: one entry per good batch (timestamp: the running maximum of
    maxTimestamp x 1000 from ``previous_timestamp``; epoch: the batch's), stopping at the first
    that is not good (a timestamp going back is no reason to stop)."""
    view = memoryview(data)
    entries = bytearray()
    at, offset, previous = start_position, expected_offset, previous_timestamp
    first_timestamp = None
    kind, reason = KIND_GOOD, None
    total = len(view)
    while at < total and offset - expected_offset < max_count:
        kind, reason, end, held, timestamp, epoch = _check_stored(view, at, total, offset,
                                                                  verify_checksums)
        if kind != KIND_GOOD:
            break
        if timestamp > previous:
            previous = timestamp
        entries += INDEX_ENTRY.pack(offset - segment_start, at, previous, epoch, 0)
        if first_timestamp is None:
            first_timestamp = previous
        offset += held
        at = end
    found = offset - expected_offset
    return ScanResult(found, at, entries, first_timestamp, previous if found else None, kind,
                      reason)


def batch_end(view: bytes | bytearray | memoryview, position: int) -> int | None:
    """End of the batch at ``position`` by its batchLength; None if it overruns the data."""
    if len(view) - position < LENGTH_PREFIX_SIZE:
        return None
    length = _LENGTH_AT.unpack_from(view, position)[0]
    end = position + LENGTH_PREFIX_SIZE + length
    return end if length >= MIN_BATCH_LENGTH and end <= len(view) else None


def batch_head(view: bytes | bytearray | memoryview, position: int) -> tuple[int, int, int]:
    """``(baseOffset, offsets held, maxTimestamp x 1000)`` of the batch at ``position``."""
    header = BATCH_HEADER.unpack_from(view, position)
    return header[0], header[6] + 1, _time_us(header[8])


_PRODUCER_FIELDS = struct.Struct(">q15xi16xqhi")  # baseOffset, lastOffsetDelta, producer


def producer_batches(data: bytes | bytearray | memoryview) -> list[tuple[int, int, int, int, int]]:
    """``(baseOffset, lastOffsetDelta, producerId, producerEpoch, baseSequence)`` of each whole
    batch in ``data`` (a produced ``records`` field, or stored batches as a read returns them),
    headers only; a trailing partial batch is left out. For idempotence: Kafka's producer
    fields, which every RecordBatch v2 header carries (producerId -1: none)."""
    view = memoryview(data)
    found = []
    at, total = 0, len(view)
    unpack_length, unpack = _LENGTH_AT.unpack_from, _PRODUCER_FIELDS.unpack_from
    while total - at >= BATCH_HEADER_SIZE:
        length = unpack_length(view, at)[0]
        end = at + LENGTH_PREFIX_SIZE + length
        if length < MIN_BATCH_LENGTH or end > total:
            break
        found.append(unpack(view, at))
        at = end
    return found


def entry_epoch(index: bytes | bytearray | memoryview, position: int) -> int:
    return _EPOCH_AT.unpack_from(index, position)[0]


def no_search(*args: object) -> None:
    """Batches are not searched for again after a broken one (``RecordFormat.find``)."""
    return None
