"""TANK bundles <-> Kafka RecordBatch v2 (magic 2), sans-I/O: how rill stores what TANK clients
produce and serves what any protocol stored to TANK clients (issue 14, one log).

Owns: ``batch_from_bundle`` (a decoded bundle's columns -> one RecordBatch v2: key ->
record key, TANK timestamp ms -> record timestamp, values as they are, no headers, CreateTime,
no producer: producerId -1, epoch -1, baseSequence -1; baseOffset 0 and partitionLeaderEpoch 0
for the log to stamp; CRC-32C over attributes..end via ``crc32c``; with ``compress``, the
records section as one raw Snappy block, Kafka's snappy codec, when that is smaller: how a
Snappy bundle is stored; ``batch_from_set``: the same from a non-sparse bundle's message set),
``BatchHead`` / ``batch_head`` (the 61-byte header, once per batch), ``batch_columns`` (a
stored batch's inflated records section -> keys, values, timestamps, offset deltas) and
``first_record_offset`` (the offset of a stored batch's first record, from as few of its
bytes as tell it: a partition whose first produce used explicit TANK numbers begins with a
hole, and its first stored number is that record's).

The per-record loops are ``_bundles.c`` (``encode_records`` / ``decode_records`` /
``records_to_set`` / ``set_to_records`` / ``stored_chunk``: the third a stored batch's records
straight into a TANK message set, ``contiguous_bundle``; the fourth a non-sparse bundle's
message set straight into a batch's records, the Produce hot path, ``batch_from_set``; the
fifth the Consume hot path, a read's uncompressed batches straight into a chunk) with the
pure-Python twins ``encode_records_python`` / ``decode_records_python`` /
``records_to_set_python`` / ``set_to_records_python`` / ``stored_chunk_python`` here as the
reference (same results, same error kinds and texts:
``tests/protocol/tank/test_record_batch_twins.py``).
Reading: a record key longer than 255 bytes (TANK keys are ``str8``) is dropped (None), a null
value is empty, a negative timestamp ("none") is 0; a LogAppendTime batch gives every record
its maxTimestamp; headers are skipped.
"""

from __future__ import annotations

from typing import NamedTuple

from rill.protocol.kafka import record_batch
from rill.protocol.kafka.record_batch import CODEC_MASK, CONTROL, HEADER, HEADER_SIZE
from rill.protocol.tank.bundles import (
    ACCELERATOR,
    CODEC_SNAPPY,
    ERR_LENGTH,
    ERR_TRUNCATED,
    ERROR_TYPES,
    decode_set_python,
    encode_set_python,
    flags_and_count,
    frame_bundle,
    snappy_if_smaller,
)

TIMESTAMP_TYPE_LOG_APPEND = record_batch.LOG_APPEND_TIME
MAX_TIMESTAMP = (1 << 63) - 1
MAX_KEY = 255


class InvalidColumns(ValueError):
    """The columns cannot become a RecordBatch v2 (e.g. a timestamp above 2^63-1)."""


# --- the per-record loops: the Python reference ---------------------------------------------


_put = record_batch.put_varint


def encode_records_python(keys, values, timestamps, base_timestamp: int, offset_deltas=None):
    """Columns -> a records section (offset deltas 0..n-1, or ``offset_deltas``: increasing,
    from 0 up), or a ``str`` naming the fault."""
    count = len(values)
    if not count:
        return "a batch needs at least one record"
    if len(timestamps) != count or (keys is not None and len(keys) != count):
        return "the columns differ in length"
    out = bytearray()
    for index in range(count):
        timestamp = timestamps[index]
        if not 0 <= timestamp <= MAX_TIMESTAMP:
            return f"record {index}: timestamp outside 0..2^63-1"
        value = values[index]
        if len(value) > 0x7FFF_FFFF:
            return f"record {index}: value longer than 2^31-1 bytes"
        body = bytearray(b"\x00")
        _put(body, timestamp - base_timestamp)
        _put(body, index if offset_deltas is None else offset_deltas[index])
        key = None if keys is None else keys[index]
        if key is None:
            _put(body, -1)
        else:
            _put(body, len(key))
            body += key
        _put(body, len(value))
        body += value
        body.append(0)
        _put(out, len(body))
        out += body
    return bytes(out)


class _Fault(Exception):
    def __init__(self, kind: int, text: str) -> None:
        super().__init__(kind, text)
        self.kind, self.text = kind, text


def _get(data, at: int, end: int, index: int) -> tuple[int, int]:
    result = 0
    for shift in range(10):
        if at + shift >= end:
            break
        byte = data[at + shift]
        result |= (byte & 0x7F) << (7 * shift)
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), at + shift + 1
    raise _Fault(ERR_TRUNCATED, f"record {index}: the records end inside it")


def decode_records_python(data, count: int, base_timestamp: int, append_time: int):
    """A records section of ``count`` records -> (keys, values, timestamps, offset_deltas), or
    ``(kind, text)`` when malformed (the C twin's convention)."""
    view = memoryview(data).cast("B")
    end = len(view)
    if count < 0 or count > end // 7:
        return ERR_TRUNCATED, f"{count} records cannot fit in {end} bytes"
    keys, values, timestamps, deltas = [], [], [], []
    at = 0
    try:
        for index in range(count):
            truncated = _Fault(ERR_TRUNCATED, f"record {index}: the records end inside it")
            length, at = _get(view, at, end, index)
            if length < 1 or length > end - at:
                raise truncated
            record_end = at + length
            at += 1
            ts_delta, at = _get(view, at, record_end, index)
            offset_delta, at = _get(view, at, record_end, index)
            key_size, at = _get(view, at, record_end, index)
            key = None
            if key_size >= 0:
                if key_size > record_end - at:
                    raise truncated
                if key_size <= MAX_KEY:
                    key = bytes(view[at : at + key_size])
                at += key_size
            value_size, at = _get(view, at, record_end, index)
            value = b""
            if value_size >= 0:
                if value_size > record_end - at:
                    raise truncated
                value = bytes(view[at : at + value_size])
                at += value_size
            headers, at = _get(view, at, record_end, index)
            if headers < 0:
                raise truncated
            for _ in range(headers):
                for _part in range(2):
                    size, at = _get(view, at, record_end, index)
                    if size > 0:
                        if size > record_end - at:
                            raise truncated
                        at += size
            if at != record_end:
                raise _Fault(ERR_LENGTH, f"record {index}: its length disagrees with its fields")
            timestamp = append_time if append_time >= 0 else base_timestamp + ts_delta
            keys.append(key)
            values.append(value)
            timestamps.append(max(timestamp, 0))
            deltas.append(offset_delta)
    except _Fault as fault:
        return fault.kind, fault.text
    if at != end:
        return ERR_LENGTH, f"{end - at} bytes left after the last record"
    return keys, values, timestamps, deltas


def records_to_set_python(data, count: int, base_timestamp: int, append_time: int,
                          framed: bool = False):
    """A records section -> (non-sparse TANK message set, first offset delta, last offset
    delta), or ``(kind, text)``: ``encode_set`` of ``decode_records``' columns. ``framed``:
    the set as one whole uncompressed bundle in its chunk frame (``frame_bundle``)."""
    if count < 1:
        return ERR_TRUNCATED, f"{count} records cannot fit in {len(data)} bytes"
    found = decode_records_python(data, count, base_timestamp, append_time)
    if len(found) == 2:
        return found
    keys, values, timestamps, deltas = found
    message_set = encode_set_python(keys, values, timestamps, None)
    if framed:
        message_set = frame_bundle(flags_and_count(0, count) + message_set)
    return message_set, deltas[0], deltas[-1]


def set_to_records_python(data, count: int, head_room: int = 0):
    """A non-sparse message set of ``count`` messages -> (records section, base timestamp,
    max timestamp): ``encode_records`` of ``decode_set``'s columns, based at the first
    message's time; ``(kind, text)`` when the set is malformed, a ``str`` when it is valid but
    no batch can hold it. ``head_room`` > 0: the section as a bytearray after that many zero
    bytes, room for the batch header (``record_batch.build_in_place``)."""
    if not 0 <= head_room <= 4096:
        raise ValueError("set_to_records: head_room must be 0..4096")
    found = decode_set_python(data, count, False, 1, 0)
    if len(found) == 2:
        return found
    keys, values, timestamps, _seqs = found
    if not values:
        return "a batch needs at least one record"
    highest = max(timestamps)
    if highest > MAX_TIMESTAMP:
        return f"timestamp {highest} above 2^63-1"
    records = encode_records_python(keys, values, timestamps, timestamps[0])
    if type(records) is str:
        return records
    if head_room:
        records = bytearray(head_room) + records
    return records, timestamps[0], highest


def batches_with_records(data):  # type: ignore[no-untyped-def]
    """The whole stored batches of ``data`` that hold records, in order, as ``(BatchHead, the
    batch's bytes)``: control and empty batches are passed over, a partial batch at the end
    is left."""
    view = memoryview(data)
    at, end = 0, len(view)
    while at < end:
        head = batch_head(view, at)
        if head is None:
            return
        batch = view[at : at + head.length]
        at += head.length
        if not head.control and head.count >= 1:
            yield head, batch


def stored_chunk_python(data) -> tuple[bytes, int] | None:
    """Stored RecordBatch v2 bytes (whole batches; a partial one at the end is left) as a
    Consume chunk in one go: each uncompressed batch one non-sparse bundle in its chunk frame
    (``records_to_set``, framed), back to back, control and empty batches left out, with the
    first bundle's seq (its first offset + 1); ``(b"", 0)`` when there is none. None when a
    batch is compressed or malformed, has holes or does not continue the one before: the
    caller takes such data its own way (TANK's ``data.build_chunk``). The reference of
    ``_bundles.c``'s ``stored_chunk``."""
    bundles: list[bytes] = []
    base = next_seq = 0
    for head, batch in batches_with_records(data):
        if head.codec:
            return None
        found = records_to_set_python(batch[HEADER_SIZE:], head.count, head.base_timestamp,
                                      head.append_time, True)
        if len(found) == 2:
            return None
        framed, first_delta, last_delta = found
        first = head.base_offset + first_delta + 1
        if last_delta - first_delta != head.count - 1 or (bundles and first != next_seq):
            return None
        if not bundles:
            base = first
        bundles.append(framed)
        next_seq = head.base_offset + last_delta + 2
    return b"".join(bundles), base


if ACCELERATOR is not None and hasattr(ACCELERATOR, "set_to_records"):
    encode_records = ACCELERATOR.encode_records
    decode_records = ACCELERATOR.decode_records
    records_to_set = ACCELERATOR.records_to_set
    set_to_records = ACCELERATOR.set_to_records
    stored_chunk = getattr(ACCELERATOR, "stored_chunk", stored_chunk_python)
else:  # not built, RILL_PURE_PYTHON=1, or built from an older source
    encode_records = encode_records_python
    decode_records = decode_records_python
    records_to_set = records_to_set_python
    set_to_records = set_to_records_python
    stored_chunk = stored_chunk_python


# --- batches (once per batch, in Python) -----------------------------------------------------


def batch_from_bundle(keys, values, timestamps, offset_deltas=None, *,
                      compress: bool = False) -> bytes:
    """One RecordBatch v2 holding a bundle's messages: offsets 0..n-1, or ``offset_deltas``
    (increasing, from 0 up: explicit sequence numbers with holes; a rare path, encoded in
    Python), lastOffsetDelta being the last of them. ``compress``: its records section as one
    raw Snappy block (Kafka's snappy codec) when that is smaller, else uncompressed."""
    count = len(values)
    if not count:
        raise InvalidColumns("a batch needs at least one record")
    if offset_deltas is not None:
        if (len(offset_deltas) != count or offset_deltas[0] < 0
                or any(b <= a for a, b in zip(offset_deltas, offset_deltas[1:]))
                or offset_deltas[-1] > 0x7FFF_FFFF):
            raise InvalidColumns("offset deltas must increase from 0 up, within an int32")
    highest = max(timestamps)
    if highest > MAX_TIMESTAMP:  # TANK's u64 milliseconds; Kafka's are signed
        raise InvalidColumns(f"timestamp {highest} above 2^63-1")
    base = timestamps[0]
    if offset_deltas is None:
        records, last_delta = encode_records(keys, values, timestamps, base), count - 1
    else:
        records = encode_records_python(keys, values, timestamps, base, offset_deltas)
        last_delta = offset_deltas[-1]
    if type(records) is str:
        raise InvalidColumns(records)
    return _batch(records, count, last_delta, base, highest, compress)


def batch_from_set(message_set, count: int, *, compress: bool = False) -> bytes | bytearray:
    """``batch_from_bundle`` of a non-sparse bundle's message set, in one C pass with no Python
    object per message (``set_to_records``): the Produce hot path. A ``TankDecodeError`` when
    the set is malformed, ``InvalidColumns`` when no batch can hold it."""
    found = set_to_records(message_set, count, HEADER_SIZE)
    if type(found) is str:
        raise InvalidColumns(found)
    if len(found) == 2:
        kind, text = found
        raise ERROR_TYPES[kind](text)
    batch, base, highest = found
    if compress:
        with memoryview(batch) as view, view[HEADER_SIZE:] as records:
            packed = snappy_if_smaller(records)
        if packed is not None:
            return record_batch.build(packed, count, count - 1, base, highest,
                                      record_batch.SNAPPY, leader_epoch=0)
    # the header written before the records: the batch the log stamps in place, no copy
    return record_batch.build_in_place(batch, count, count - 1, base, highest, leader_epoch=0)


def _batch(records: bytes, count: int, last_delta: int, base: int, highest: int,
           compress: bool) -> bytes:
    """The batch around a records section, Snappy-compressed when asked and smaller."""
    attributes = 0
    if compress and (packed := snappy_if_smaller(records)) is not None:
        records, attributes = packed, record_batch.SNAPPY
    return record_batch.build(records, count, last_delta, base, highest, attributes,
                              leader_epoch=0)


class BatchHead(NamedTuple):
    base_offset: int
    length: int  # the whole batch, header included
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    count: int

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def append_time(self) -> int:
        """maxTimestamp for a LogAppendTime batch (every record's time), else -1."""
        return self.max_timestamp if self.attributes & TIMESTAMP_TYPE_LOG_APPEND else -1


def batch_head(data, at: int = 0) -> BatchHead | None:
    """The batch at ``at`` of stored bytes, or None when no whole batch starts there."""
    if len(data) - at < HEADER_SIZE:
        return None
    (base_offset, length, _epoch, _magic, _crc, attributes, last_delta, base_ts, max_ts,
     _pid, _pepoch, _seq, count) = HEADER.unpack_from(data, at)
    if length < HEADER_SIZE - 12 or at + 12 + length > len(data):
        return None
    return BatchHead(base_offset, length + 12, attributes, last_delta, base_ts, max_ts, count)


FIRST_RECORD_PEEK = HEADER_SIZE + 32  # header + length, attributes, timestamp/offset deltas


def first_record_offset(data) -> int | None:
    """The offset of the first record of the batch that starts ``data``; None when
    ``data`` is too short to tell (give it the whole batch, or ``FIRST_RECORD_PEEK`` bytes
    of an uncompressed one). A batch whose lastOffsetDelta is its count - 1 has no hole
    (offsets strictly increase), so its header alone answers 0; a compressed one with holes
    needs its whole records section. A batch that does not parse: ``TankDecodeError`` /
    ``ValueError``."""
    if len(data) < HEADER_SIZE:
        return None
    (base, length, _epoch, _magic, _crc, attributes, last_delta, _base_ts, _max_ts,
     _pid, _pepoch, _seq, count) = HEADER.unpack_from(data, 0)
    if count < 1 or last_delta == count - 1:
        return base
    records = memoryview(data)[HEADER_SIZE : 12 + length]
    if attributes & CODEC_MASK:
        if len(data) < 12 + length:
            return None
        records = record_batch.decompress(attributes & CODEC_MASK, records)
    try:
        _length, at = record_batch.read_varint(records, 0)
        _ts_delta, at = record_batch.read_varint(records, at + 1)  # after attributes
        delta, _at = record_batch.read_varint(records, at)
    except (IndexError, ValueError):
        if len(data) < 12 + length:
            return None
        raise
    return base + delta


def contiguous_bundle(head: BatchHead, records, compress: bool = False
                      ) -> tuple[bytes, int, int] | None:
    """The (inflated) records of the batch ``head`` as one non-sparse bundle in its chunk
    frame (``frame_bundle``'s bytes, built in place when uncompressed), with the first and
    last offset deltas; None when its offsets have holes (a compacted batch: the caller
    numbers it explicitly). ``compress``: its message set as one Snappy block (codec 1) when
    that is smaller. A ``TankDecodeError`` when it does not parse."""
    found = records_to_set(records, head.count, head.base_timestamp, head.append_time,
                           not compress)
    if len(found) == 2:
        kind, text = found
        raise ERROR_TYPES[kind](text)
    framed, first, last = found
    if last - first != head.count - 1:
        return None
    if not compress:
        return framed, first, last
    codec = 0
    if (packed := snappy_if_smaller(framed)) is not None:
        framed, codec = packed, CODEC_SNAPPY
    return frame_bundle(flags_and_count(codec, head.count) + framed), first, last


def batch_columns(head: BatchHead, records) -> tuple[list, list, list, list]:
    """The inflated records section of the batch ``head`` -> (keys, values, timestamps ms,
    offset deltas); a ``TankDecodeError`` when it does not parse."""
    found = decode_records(records, head.count, head.base_timestamp, head.append_time)
    if len(found) == 2:
        kind, text = found
        raise ERROR_TYPES[kind](text)
    return found
