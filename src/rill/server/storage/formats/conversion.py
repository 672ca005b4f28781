"""Conversion between record formats: one log, every protocol (issue 13 item 5).

Owns: ``convert`` (stored records of one format -> records of another, for a reader of the
other protocol), the two directions it knows, ``convert_batch`` (a client batch of one format
-> a client batch of another, for a writer of the other protocol: an Iggy SEND into a Kafka
topic), and ``kafka_batches_as_records`` / ``stamp_converted`` (Kafka batches -> stored Iggy
records, for a Kafka or TANK writer into an Iggy topic). RecordBatch v2's record layout and
codecs are ``protocol.kafka.record_batch``'s. A log keeps its own format
(``storage.formats``); a reader that takes another one asks ``PartitionLog.read_as``, which
reads the stored bytes and converts them here, per record; a writer of another one
``PartitionLog.append_as``. A reader of the log's own format never comes here (Kafka -> Kafka
and Iggy -> Iggy hand the stored bytes through as before).

Two implementations of each direction, as ``records.stamp_batch`` has: ``kafka_to_iggy_python``
and ``iggy_to_kafka_python`` are the reference (and the fallback); ``_convert.c``'s
``kafka_to_iggy`` and ``_iggy_to_kafka.c``'s ``iggy_to_kafka`` are the C twins of their per-record loops, used (through
``kafka_to_iggy_accelerated`` / ``iggy_to_kafka_accelerated``) when ``iggy_v1.ACCELERATOR`` has
them (``ACCELERATED`` tells; an older build, a compiler without 128-bit integers or
``RILL_PURE_PYTHON=1`` runs the reference). Kafka -> Iggy: Python keeps the per-batch work
(walking the batch headers, skipping batches outside the range, inflating a compressed one) and
hands each records block to the twin; Iggy -> Kafka: the twin walks the stored records and
builds the records block, Python puts the batch header (CRC-32C) on it. The twins give the same
bytes, accept exactly the same input and reject the rest with the same CannotReadMessage text
(``tests/server/storage/formats/test_conversion.py`` holds them to it, with random and damaged
input); they release the GIL on large inputs. Measured cost, both side by side:
``benchmarks/record_conversion.py`` (about 25-55x less per record with the twins).

``kafka-v2`` -> ``iggy-v1`` (an Iggy POLL, the HTTP API, the CLI, the columnar read the Spark
connector uses, on a topic Kafka clients write): every record of the whole stored batches read
becomes one stored Iggy record (``records`` layout), only those of offsets
``[first_offset, first_offset + max_count)`` kept:
  * offset = the Kafka offset; timestamp = the record's timestamp (CreateTime: baseTimestamp
    + delta; a LogAppendTime batch: its maxTimestamp) in µs (ms x 1000; a negative one, "no
    timestamp", is 0); state 1 (available);
  * id = 0 (Kafka records have none; sixteen zero bytes, never a fresh UUID: a read converts
    the same bytes the same way every time);
  * payload = the value; a null value (a tombstone) and an empty one both become an empty
    payload (an Iggy payload cannot be null);
  * checksum = ``crc32(payload)``, Iggy's checksum of the converted record;
  * headers (a typed map, raw kind): the Kafka key as ``rill.key`` (``KEY_HEADER``, the
    neutral key, raw bytes), first; then each Kafka header (key -> raw value) in the order the
    record lists them. What an Iggy header map cannot hold is dropped: a header key or value
    must be 1..255 bytes and a key UTF-8, so null and empty header values, null or empty
    record keys, and keys or values longer than 255 bytes do not appear; duplicate header
    keys: the **last** value wins (Kafka's ``Headers.lastHeader``) among those an Iggy header
    can hold (a dropped value never replaces a kept one), at the place the key first appeared;
    a Kafka header named ``rill.key`` is dropped (the neutral key is the record's key only);
  * compressed batches (gzip, snappy raw or xerial-framed, lz4 frame, zstd) are decompressed
    (``record_batch.decompress``, at most 64 MiB a batch); a batch that does not decompress
    or parse is CannotReadMessage: a varint past the block or longer than 10 bytes, a record
    overrunning its length or the block, a record before the range of negative length, a
    header with a null key, a timestamp whose µs do not fit 64 bits.

``iggy-v1`` -> ``kafka-v2`` (a Kafka Fetch or ListOffsets of an Iggy-format topic): the stored
records read become **one** uncompressed RecordBatch v2 (magic 2, CreateTime, no producer:
producerId -1, producerEpoch -1, baseSequence -1; partitionLeaderEpoch 0), offsets preserved:
  * value = the payload (never null: an empty payload is an empty value);
  * key = the ``rill.key`` header's value, which is removed from the headers; none -> null key;
  * other headers -> Kafka headers in map order, key = the header key, value = the header's
    stored bytes whatever its kind (a typed Iggy header -- an int, a float, a bool, a string --
    arrives as its raw wire bytes, little-endian for numbers: the kind is lost);
  * timestamp = µs // 1000 (ms; sub-millisecond precision is lost); baseTimestamp = the first
    record's, maxTimestamp = the largest; the Iggy message id is not carried;
  * a record that overruns the read (anywhere in it, even past the range) or whose header map
    overruns the record is CannotReadMessage.

An Iggy SEND region -> ``kafka-v2`` (``convert_batch``: an Iggy client writing into a Kafka
topic; ``PartitionLog.append_as``): the region is validated and stamped as an Iggy-format log
would (``formats.IGGY_V1.stamp``: Iggy's own errors, nothing returned unless the whole region is
good), every message at the append time given (µs, whole milliseconds), then its stored records
become **one** batch by the rule above (``iggy_to_kafka``: value = payload, key = ``rill.key``
removed from the headers, other headers raw, CreateTime = the append time in ms, producerId
-1), which the log then appends natively (``kafka_v2.stamp_batches``), so a Kafka reader
gets it as any other batch. The message ids are **dropped** (a Kafka record has none; reading
the record back through Iggy gives id 0 like every Kafka record), so deduplication by id does
not apply to such a topic.

Kafka RecordBatch v2 batches -> ``iggy-v1`` (``kafka_batches_as_records`` then
``stamp_converted``: a Kafka Produce or a TANK produce into an Iggy-format topic;
``PartitionLog.append_as``): the batches are checked as a ``kafka-v2`` log checks a produce
(``formats.KAFKA_V2.stamp``: lengths, magic, CRC-32C, counts, codec; its InvalidRecordBatch,
nothing converted), then every record becomes one stored Iggy record by the Kafka -> Iggy
rule above (``kafka_to_iggy``, compressed batches inflated); ``stamp_converted`` (C twin in
``_convert.c``, ``stamp_converted_python`` the reference) then gives each its offset and its
timestamp in the log -- its own, the append time where it has none, never below the one
before -- and builds the per-record index entries, refusing (InvalidRecordBatch, invalid) a
record whose value is null or empty: an Iggy payload has at least one byte.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Callable

import cramjam

from rill.errors import CannotReadMessage, FeatureUnavailable
from rill.protocol.iggy.headers import KEY_HEADER, MAX_HEADER_PART
from rill.protocol.kafka import record_batch
from rill.protocol.kafka.record_batch import put_record, read_varint
from rill.protocol.iggy.layout import STATE_AVAILABLE, STORED_HEAD, STORED_PREFIX
from rill.protocol.iggy.stored import crc32
from rill.server.storage.formats import iggy_v1, kafka_v2
from rill.server.storage.formats import IGGY_V1, KAFKA_V2
from rill.server.storage.formats.iggy_v1 import ACCELERATOR


_BATCH_HEADER = record_batch.HEADER
_BATCH_HEADER_SIZE = record_batch.HEADER_SIZE
_U32 = struct.Struct("<I")
_KEY_HEADER = KEY_HEADER.encode()
_ZERO_ID = bytes(16)
_RAW_KIND = b"\x01"
_LITTLE_ENDIAN_HOST = sys.byteorder == "little"
_MIN_I64, _MAX_I64, _MAX_U64 = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
_MAX_U32 = (1 << 32) - 1
_U64 = struct.Struct("<Q")  # a stored record's offset (at 0) and timestamp (at 9)
_ENTRY = struct.Struct("<IIQ")  # an iggy-v1 index entry: relative offset, position, timestamp
_HEADERS_AT = STORED_PREFIX.size  # 41: a stored record's header map starts here
_RECORD_OVERHEAD = _HEADERS_AT + 4  # the fixed part and payload_length


@dataclass(frozen=True, slots=True)
class Converted:
    """Records in the format asked for: ``count`` of them from ``first_offset``, with the
    ``positions`` (count + 1: where each starts, then the end) and ``timestamps`` (µs) of
    each, as an Iggy columnar read needs them (for ``iggy-v1``; empty for ``kafka-v2``)."""

    first_offset: int
    count: int
    records: bytes
    positions: array
    timestamps: array

    @property
    def end_offset(self) -> int:
        """The offset after the last record (``first_offset`` when there is none): where a
        reader goes on. Records may skip offsets (a sparse log), so this is not always
        ``first_offset + count``."""
        if not self.count:
            return self.first_offset
        if self.positions:  # iggy-v1 records
            return self.offset_of(self.count - 1) + 1
        head = _BATCH_HEADER.unpack_from(self.records, 0)  # kafka-v2: one batch
        return head[0] + head[6] + 1

    def offset_of(self, index: int) -> int:
        """The offset of record ``index`` (``iggy-v1`` records: each starts with it)."""
        return STORED_HEAD.unpack_from(self.records, self.positions[index])[0]

    def first(self, count: int) -> Converted:
        """The first ``count`` records (all when there are fewer; ``iggy-v1`` records)."""
        if count >= self.count:
            return self
        return Converted(self.first_offset, count, self.records[: self.positions[count]],
                         self.positions[: count + 1], self.timestamps[:count])

    @staticmethod
    def joined(parts: list[Converted]) -> Converted:
        """``iggy-v1`` records of several conversions, in order, as one."""
        if len(parts) == 1:
            return parts[0]
        positions, base = array("I"), 0
        for part in parts:
            positions.extend(position + base for position in part.positions[:-1])
            base += len(part.records)
        positions.append(base)
        timestamps = array("Q")
        for part in parts:
            timestamps.extend(part.timestamps)
        return Converted(parts[0].first_offset, len(timestamps),
                         b"".join(part.records for part in parts), positions, timestamps)

    def columns(self) -> tuple[bytes, bytes]:
        """(boundaries, timestamps) as little-endian u32 and u64 columns."""
        positions, timestamps = self.positions, self.timestamps
        if not _LITTLE_ENDIAN_HOST:
            positions, timestamps = array("I", positions), array("Q", timestamps)
            positions.byteswap()
            timestamps.byteswap()
        return positions.tobytes(), timestamps.tobytes()


def convert(data: bytes | bytearray | memoryview, source: str, target: str, first_offset: int,
            max_count: int) -> Converted:
    """Stored records of format ``source`` (whole records or batches, as a log read gives
    them) as records of format ``target``, keeping offsets ``[first_offset, first_offset +
    max_count)`` only. FeatureUnavailable for a pair this module does not convert."""
    if source == kafka_v2.NAME and target == iggy_v1.NAME:
        return kafka_to_iggy(data, first_offset, max_count)
    if source == iggy_v1.NAME and target == kafka_v2.NAME:
        return iggy_to_kafka(data, first_offset, max_count)
    raise FeatureUnavailable(reason=f"records of format {source!r} cannot be read as {target!r}")


def convert_batch(raw: bytes | bytearray | memoryview, source: str, target: str,
                  timestamp_us: int) -> bytes:
    """A client batch of format ``source`` (``iggy-v1``: a SEND message region) as a client
    batch of format ``target`` (``kafka-v2``: one RecordBatch v2 at base offset 0), its
    records stamped at ``timestamp_us`` (taken to whole milliseconds). Raises what the source
    format's own validation raises for bad input (nothing is converted then), and
    FeatureUnavailable for a pair this module does not convert."""
    if source == iggy_v1.NAME and target == kafka_v2.NAME:
        stamped = IGGY_V1.stamp(raw, 0, timestamp_us // 1000 * 1000, 0, 0, 0)
        return iggy_to_kafka(stamped.records, 0, stamped.count).records
    raise FeatureUnavailable(reason=f"a batch of format {source!r} cannot be written to a topic "
                                    f"of format {target!r}")


def kafka_batches_as_records(raw: bytes | bytearray | memoryview) -> Converted:
    """A produced ``records`` field (one or more RecordBatch v2, as a Kafka Produce or the TANK
    listener gives it) as stored Iggy records at offsets 0.., for an ``iggy-v1`` log
    (``PartitionLog.append_as``, which sets their real offsets and timestamps). Checked first
    exactly as a ``kafka-v2`` log checks a produce (``formats.KAFKA_V2.stamp``: lengths, magic,
    CRC-32C, counts, codec, control and producer fields), then converted by the read rule
    (``kafka_to_iggy``, per record in C; compressed batches inflated). Each record's timestamp
    (µs) is its own, 0 where it has none. Raises ``InvalidRecordBatch`` (nothing converted)
    for what the check refuses and a batch that does not decompress or parse (corrupt);
    ``stamp_converted`` then refuses a null or empty value (an Iggy payload has 1+ bytes)."""
    stamped = KAFKA_V2.stamp(raw if isinstance(raw, bytes) else bytes(raw), 0, 0, 0, 0, 0)
    try:
        converted = kafka_to_iggy(stamped.records, 0, stamped.count)
    except CannotReadMessage as error:
        raise kafka_v2.InvalidRecordBatch(str(error.reason), corrupt=True) from None
    if converted.count != stamped.count:
        raise kafka_v2.InvalidRecordBatch(
            f"the batches announce {stamped.count} records, {converted.count} were found",
            corrupt=True)
    return converted


def stamp_converted_python(records: bytearray, positions: array, timestamps: array,
                           first_offset: int, now_us: int, last_us: int, relative: int,
                           base: int) -> tuple[bytearray, int, int]:
    """Give converted records (``kafka_batches_as_records``: ``positions`` count + 1,
    ``timestamps`` µs, 0 = none) their place in an ``iggy-v1`` log, in place: offset
    ``first_offset`` + i, timestamp its own (``now_us`` when it has none) never below the one
    before (from ``last_us``); returns (index entries ``relative`` + i | ``base`` + position |
    timestamp, first timestamp, last timestamp). Raises InvalidRecordBatch for a record with
    an empty payload (a null or empty Kafka value: no Iggy payload holds it; the records are
    then the caller's to discard) and ValueError when the positions do not describe the
    records or do not fit u32 index entries: the reference of ``_convert.c``'s
    ``stamp_converted``."""
    count, length = len(timestamps), len(records)
    if len(positions) != count + 1 or not count:
        raise ValueError("the positions and timestamps do not match the records")
    if relative + count - 1 > _MAX_U32 or base + length > _MAX_U32 + 1:
        raise ValueError("the records do not fit u32 index entries")
    entries = bytearray(16 * count)
    pack_u64, pack_entry, read_u32 = _U64.pack_into, _ENTRY.pack_into, _U32.unpack_from
    previous = last_us
    first = 0
    for number in range(count):
        at, end = positions[number], positions[number + 1]
        if (not at <= end <= length or end - at < _RECORD_OVERHEAD or (number == 0 and at)
                or (number == count - 1 and end != length)):
            raise ValueError(f"record {number}: its positions are out of range")
        (headers_length,) = read_u32(records, at + _HEADERS_AT - 4)
        if headers_length > end - at - _RECORD_OVERHEAD:
            raise ValueError(f"record {number}: its positions are out of range")
        if not read_u32(records, at + _HEADERS_AT + headers_length)[0]:
            raise _empty_value(number)
        timestamp = timestamps[number] or now_us
        if timestamp < previous:
            timestamp = previous
        previous = timestamp
        if not number:
            first = timestamp
        pack_u64(records, at, first_offset + number)
        pack_u64(records, at + 9, timestamp)
        pack_entry(entries, 16 * number, relative + number, base + at, timestamp)
    return entries, first, previous


def stamp_converted_accelerated(records: bytearray, positions: array, timestamps: array,
                                first_offset: int, now_us: int, last_us: int, relative: int,
                                base: int) -> tuple[bytes, int, int]:
    """``stamp_converted_python`` by ``_convert.c``'s twin: the same bytes, the same errors;
    numbers past 64 bits, which no log has, go to the reference."""
    if not (0 <= first_offset and first_offset + len(timestamps) <= _MAX_U64
            and 0 <= now_us <= _MAX_U64 and 0 <= last_us <= _MAX_U64
            and 0 <= relative <= _MAX_U64 and 0 <= base <= _MAX_U64):
        return stamp_converted_python(records, positions, timestamps, first_offset, now_us,
                                      last_us, relative, base)
    result = _STAMP_TWIN(records, positions, timestamps, first_offset, now_us, last_us,
                         relative, base)
    if type(result) is tuple:
        return result
    if type(result) is int:
        raise _empty_value(result)
    raise ValueError(result)


def _empty_value(number: int) -> kafka_v2.InvalidRecordBatch:
    return kafka_v2.InvalidRecordBatch(
        f"record {number} has a null or empty value: a topic of format {iggy_v1.NAME} holds "
        "payloads of 1 byte or more", corrupt=False)


# ---------------------------------------------------------------------- Kafka -> Iggy
def kafka_to_iggy_python(data: bytes | bytearray | memoryview, first_offset: int,
                         max_count: int) -> Converted:
    """Whole stored RecordBatch v2 batches -> stored Iggy records (the module docstring's
    rules), those of offsets ``[first_offset, first_offset + max_count)``: the reference."""
    return _kafka_to_iggy(data, first_offset, max_count, _kafka_records_python)


def kafka_to_iggy_accelerated(data: bytes | bytearray | memoryview, first_offset: int,
                              max_count: int) -> Converted:
    """``kafka_to_iggy_python`` with each batch's records converted by the C twin (the same
    bytes, the same errors); offsets past 64 bits, which no log has, go to the reference."""
    if not _MIN_I64 <= first_offset <= first_offset + max_count <= _MAX_I64:
        return kafka_to_iggy_python(data, first_offset, max_count)
    return _kafka_to_iggy(data, first_offset, max_count, _kafka_records_accelerated)


def _kafka_to_iggy(data: bytes | bytearray | memoryview, first_offset: int, max_count: int,
                   convert_records: Callable[..., int | None]) -> Converted:
    """The batch walk both implementations share: batches outside the range skipped, a
    compressed one inflated; ``convert_records`` converts the records of one records block."""
    view = memoryview(data)
    end_offset = first_offset + max_count
    out = bytearray()
    positions = array("I")
    timestamps = array("Q")
    at, total = 0, len(view)
    first = None
    while at + _BATCH_HEADER_SIZE <= total:
        (base_offset, length, _, _, _, attributes, last_delta, base_timestamp, max_timestamp,
         _, _, _, count) = _BATCH_HEADER.unpack_from(view, at)
        batch_end = at + 12 + length
        if batch_end > total:
            break
        if base_offset + last_delta < first_offset:
            at = batch_end
            continue
        if base_offset >= end_offset:
            break
        codec = attributes & kafka_v2.CODEC_MASK
        block = view[at + _BATCH_HEADER_SIZE : batch_end]
        try:
            if codec:
                block = record_batch.decompress(codec, block)
        except (ValueError, zlib.error, cramjam.DecompressionError) as error:
            raise CannotReadMessage(reason=f"Cannot read message: the batch at offset "
                                           f"{base_offset} does not decompress: {error}")
        log_append_time = bool(attributes & kafka_v2.TIMESTAMP_TYPE_BIT)
        try:
            batch_first = convert_records(block, base_offset, count, base_timestamp,
                                          max_timestamp, log_append_time, first_offset,
                                          end_offset, out, positions, timestamps)
        except (ValueError, IndexError) as error:
            raise CannotReadMessage(reason=f"Cannot read message: the batch at offset "
                                           f"{base_offset} does not parse: {error}")
        if first is None:
            first = batch_first
        at = batch_end
    positions.append(len(out))
    count = len(timestamps)
    return Converted(first_offset if first is None else first, count, bytes(out), positions,
                     timestamps)


def _kafka_records_python(block: bytes | memoryview, base_offset: int, count: int,
                          base_timestamp: int, max_timestamp: int, log_append_time: bool,
                          first_offset: int, end_offset: int, out: bytearray, positions: array,
                          timestamps: array) -> int | None:
    """The ``count`` records of one records block, those of offsets ``[first_offset,
    end_offset)`` appended to ``out`` as stored Iggy records (and their ``positions`` and
    ``timestamps``): the offset of the first one, None when none was. ValueError or IndexError
    where the block does not parse. ``_convert.c``'s ``kafka_to_iggy`` is its twin."""
    block = bytes(block)
    pack_prefix, pack_u32 = STORED_PREFIX.pack, _U32.pack
    first = None
    position = 0
    for _ in range(count):
        record_length, position = read_varint(block, position)
        ends_at = position + record_length
        timestamp_delta, position = read_varint(block, position + 1)  # after attributes
        offset_delta, position = read_varint(block, position)
        offset = base_offset + offset_delta
        if offset < first_offset:
            if record_length < 0:
                raise ValueError("a record of negative length")
            position = ends_at
            continue
        if offset >= end_offset:
            break
        key_length, position = read_varint(block, position)
        key = None
        if key_length >= 0:
            key = block[position : position + key_length]
            position += key_length
        value_length, position = read_varint(block, position)
        if value_length > 0:
            payload = block[position : position + value_length]
            position += value_length
        else:
            payload = b""
        header_count, position = read_varint(block, position)
        headers: dict[bytes, bytes] = {}
        for _ in range(header_count):
            name_length, position = read_varint(block, position)
            if name_length < 0:
                raise ValueError("a header with a null key")
            name = block[position : position + name_length]
            position += name_length
            value_length, position = read_varint(block, position)
            if value_length <= 0:
                continue  # a null or empty header value: no Iggy header holds one
            value = block[position : position + value_length]
            position += value_length
            if (value_length <= MAX_HEADER_PART and 0 < name_length <= MAX_HEADER_PART
                    and name != _KEY_HEADER and _is_utf8(name)):
                headers[name] = value  # a later duplicate replaces it, in its place
        if position > ends_at or ends_at > len(block):
            raise ValueError(f"record at offset {offset} overruns its length")
        position = ends_at
        entries = b""
        if key and len(key) <= MAX_HEADER_PART:
            entries = b"".join((pack_u32(len(_KEY_HEADER)), _KEY_HEADER, _RAW_KIND,
                                pack_u32(len(key)), key))
        if headers:
            entries = b"".join([entries] + [
                b"".join((pack_u32(len(name)), name, _RAW_KIND, pack_u32(len(value)), value))
                for name, value in headers.items()])
        timestamp_ms = max_timestamp if log_append_time else base_timestamp + timestamp_delta
        timestamp = timestamp_ms * 1000 if timestamp_ms > 0 else 0
        if timestamp > _MAX_U64:
            raise ValueError(f"record at offset {offset} has a timestamp past 64 bits")
        if first is None:
            first = offset
        positions.append(len(out))
        timestamps.append(timestamp)
        out += pack_prefix(offset, STATE_AVAILABLE, timestamp, _ZERO_ID, crc32(payload),
                           len(entries))
        out += entries
        out += pack_u32(len(payload))
        out += payload
    return first


def _kafka_records_accelerated(block: bytes | memoryview, base_offset: int, count: int,
                               base_timestamp: int, max_timestamp: int, log_append_time: bool,
                               first_offset: int, end_offset: int, out: bytearray,
                               positions: array, timestamps: array) -> int | None:
    """``_kafka_records_python`` by the C twin: the same records, the same errors."""
    result = _KAFKA_TWIN(block, base_offset, count, base_timestamp, max_timestamp,
                         log_append_time, first_offset, end_offset, len(out))
    if type(result) is tuple:
        records, starts, times, first = result
        out += records
        positions.frombytes(starts)  # native byte order, as the arrays hold them
        timestamps.frombytes(times)
        return first
    if type(result) is str:
        raise ValueError(result)
    # past u32 positions or lengths: the reference raises what it raises there
    return _kafka_records_python(block, base_offset, count, base_timestamp, max_timestamp,
                                 log_append_time, first_offset, end_offset, out, positions,
                                 timestamps)


def _is_utf8(name: bytes) -> bool:
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ---------------------------------------------------------------------- Iggy -> Kafka
def iggy_to_kafka_python(data: bytes | bytearray | memoryview, first_offset: int,
                         max_count: int) -> Converted:
    """Stored Iggy records -> one RecordBatch v2 (the module docstring's rules), those of
    offsets ``[first_offset, first_offset + max_count)``; no bytes when there are none: the
    reference. CannotReadMessage for a record that overruns the read (the whole read is
    walked) or a header map that overruns its record."""
    view = memoryview(data)
    end_offset = first_offset + max_count
    unpack_prefix, unpack_u32 = STORED_PREFIX.unpack_from, _U32.unpack_from
    fixed = STORED_PREFIX.size
    rows = []
    at, total = 0, len(view)
    while at + fixed + 4 <= total:
        offset, _, timestamp, _, _, headers_length = unpack_prefix(view, at)
        headers_at = at + fixed
        if headers_at + headers_length + 4 > total:
            raise CannotReadMessage(reason=f"Cannot read message: the record at offset {offset} "
                                           "overruns the read")
        (payload_length,) = unpack_u32(view, headers_at + headers_length)
        payload_at = headers_at + headers_length + 4
        ends_at = payload_at + payload_length
        if ends_at > total:
            raise CannotReadMessage(reason=f"Cannot read message: the record at offset {offset} "
                                           "overruns the read")
        if offset >= end_offset:
            break
        if offset >= first_offset:
            rows.append((offset, timestamp // 1000, view[headers_at : headers_at + headers_length],
                         view[payload_at:ends_at]))
        at = ends_at
    if not rows:
        return Converted(first_offset, 0, b"", array("I"), array("Q"))
    base_offset, base_timestamp = rows[0][0], rows[0][1]
    max_timestamp = base_timestamp
    records = bytearray()
    for offset, timestamp, headers, payload in rows:
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        key = None
        kafka_headers = []
        position, end = 0, len(headers)
        while position < end:
            if end - position < 4:
                raise _malformed_header_map(offset)
            (name_length,) = unpack_u32(headers, position)
            name_at = position + 4
            if end - name_at < name_length + 5:
                raise _malformed_header_map(offset)
            value_length_at = name_at + name_length + 1  # the kind byte: the type is not carried
            (value_length,) = unpack_u32(headers, value_length_at)
            value_at = value_length_at + 4
            if end - value_at < value_length:
                raise _malformed_header_map(offset)
            name = headers[name_at : name_at + name_length]
            value = headers[value_at : value_at + value_length]
            position = value_at + value_length
            if name == _KEY_HEADER and key is None:
                key = value
            else:
                kafka_headers.append((name, value))
        put_record(records, offset - base_offset, timestamp - base_timestamp, key, payload,
                   kafka_headers)
    return _one_batch(records, len(rows), base_offset, rows[-1][0], base_timestamp,
                      max_timestamp)


def iggy_to_kafka_accelerated(data: bytes | bytearray | memoryview, first_offset: int,
                              max_count: int) -> Converted:
    """``iggy_to_kafka_python`` with the records walked and built by the C twin (the same
    bytes, the same errors); offsets past 64 bits, which no log has, go to the reference."""
    end_offset = first_offset + max_count
    if first_offset > _MAX_U64 or end_offset > _MAX_U64:
        return iggy_to_kafka_python(data, first_offset, max_count)
    # a stored offset is never negative: a negative bound keeps what 0 keeps
    result = _IGGY_TWIN(data, max(first_offset, 0), max(end_offset, 0))
    if result is None:
        return Converted(first_offset, 0, b"", array("I"), array("Q"))
    if type(result) is str:
        raise CannotReadMessage(reason=f"Cannot read message: {result}")
    return _one_batch(*result)


def _one_batch(records: bytes | bytearray, count: int, base_offset: int, last_offset: int,
               base_timestamp: int, max_timestamp: int) -> Converted:
    last_delta = last_offset - base_offset
    batch = record_batch.build(records, count, last_delta, base_timestamp, max_timestamp,
                               base_offset=base_offset, leader_epoch=0)
    return Converted(base_offset, last_delta + 1, batch, array("I"), array("Q"))


def _malformed_header_map(offset: int) -> CannotReadMessage:
    return CannotReadMessage(reason=f"Cannot read message: the record at offset {offset} has a "
                                    "malformed header map")


_KAFKA_TWIN = getattr(ACCELERATOR, "kafka_to_iggy", None)
_IGGY_TWIN = getattr(ACCELERATOR, "iggy_to_kafka", None)
_STAMP_TWIN = getattr(ACCELERATOR, "stamp_converted", None)
# an older build of _stamp has none of them: the reference runs
ACCELERATED = _KAFKA_TWIN is not None and _IGGY_TWIN is not None
kafka_to_iggy = kafka_to_iggy_accelerated if ACCELERATED else kafka_to_iggy_python
iggy_to_kafka = iggy_to_kafka_accelerated if ACCELERATED else iggy_to_kafka_python
stamp_converted = (stamp_converted_accelerated if _STAMP_TWIN is not None
                   else stamp_converted_python)
