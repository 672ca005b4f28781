"""Kafka's legacy MessageSets (magic 0 and 1) and their conversion to and from RecordBatch v2,
sans-I/O: bytes in, bytes out (the seed's "Message sets"; kafka-notes §3.1).

Owns:

* ``is_message_set(records)``: whether a Produce ``records`` field holds a legacy MessageSet
  (the magic byte at 16 is 0 or 1; RecordBatch v2 has 2 there);
* ``message_set_to_batch(records, now_ms)``: a produced MessageSet (Produce v0-2) as **one
  uncompressed RecordBatch v2** (baseOffset 0, partitionLeaderEpoch -1, no producer id), ready
  for the ``kafka-v2`` append path, and whether it was stamped with LogAppendTime;
* ``batches_to_message_set(batches, magic, from_offset, max_bytes, at_least_one)``: stored
  RecordBatch v2 bytes as a MessageSet of ``magic`` 0 (Fetch v0-1) or 1 (Fetch v2-3).

Layout of one message (all integers big-endian)::

    offset i64 | messageSize i32 | crc u32 | magic i8 | attributes i8 |
    [timestamp i64: magic 1 only] | key bytes (i32 length, -1 null) | value bytes (likewise)

The crc is CRC-32 (IEEE, ``zlib.crc32``) of magic .. end. attributes bits 0-2 are the codec
(0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 (magic 1) the timestamp type (1 = LogAppendTime).
A compressed message is a *wrapper*: its value is a whole inner MessageSet compressed.

Produce rules (the decisions):

* every message's CRC is checked, the wrapper's and each inner message's; a message whose
  size runs past the bytes, a size too small for its own fields, a CRC that does not match,
  a codec that is not 0-3, a wrapper that does not decompress, or an empty set raise
  ``InvalidMessageSet`` (Kafka's CORRUPT_MESSAGE): nothing is converted, nothing is written;
* compressed wrappers are decompressed (gzip: the standard library; snappy: both the xerial
  framing old Java clients write, ``\\x82SNAPPY\\x00`` then length-prefixed blocks, and a raw
  snappy block; lz4: the LZ4 frame format, and for magic 0 Kafka's old framing whose header
  checksum byte was computed over the magic number too: that byte is recomputed before the
  frame is read) and their inner messages take their place, in order. Nested wrappers are
  refused (Kafka never writes them); wrappers inflating past ``MAX_INFLATED`` (64 MiB, all of
  a set's together) raise ``MessageSetTooLarge`` (MESSAGE_TOO_LARGE, 10) before more than that
  is allocated;
* the v2 batch is stored **uncompressed** (one codec path fewer; modern consumers read it like
  any uncompressed batch; the legacy path is not a throughput path);
* offsets the client wrote (absolute in magic 0, relative in magic 1 wrappers) are ignored: the
  batch's records are numbered 0..n-1 and the log gives the base offset;
* timestamps: magic 1 messages keep theirs (CreateTime). Magic 0 messages have none: a set
  holding any magic 0 message (or a magic 1 message marked LogAppendTime) becomes a
  **LogAppendTime** batch stamped with ``now_ms``, the broker's append time, for every record
  (attributes bit 3, baseTimestamp = maxTimestamp = ``now_ms``), as Kafka does for a topic with
  ``message.timestamp.type=LogAppendTime``;
* keys and values keep their null-ness; records carry no headers.

Fetch rules: the records of the stored batches from ``from_offset`` on (records below it, in
the first batch, are dropped), every codec the ``kafka-v2`` format stores (gzip, snappy raw or
xerial, lz4 frame, zstd) decompressed, written as **uncompressed** messages with their absolute
offsets; magic 1 gives each record its timestamp (a LogAppendTime batch: its maxTimestamp and
attributes bit 3); magic 0 has no timestamp. Record headers have no place in a MessageSet and
are dropped; control batches are skipped; a stored batch that does not decompress within
``MAX_INFLATED`` raises (the Kafka handler answers that partition CORRUPT_MESSAGE). Only whole messages are written, at most
``max_bytes`` of them, except that ``at_least_one`` writes the first message even when it
alone is larger (Kafka's rule for the first partition of a Fetch). This is per-record Python
work: only the legacy Fetch versions come here.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple

from rill.protocol.kafka import record_batch
from rill.protocol.kafka.record_batch import (
    CODEC_MASK,
    CONTROL,
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LZ4,
    MAX_INFLATED,
    decompress,
    put_record,
    read_record,
)

__all__ = [
    "MAX_INFLATED", "InvalidMessageSet", "Message", "MessageSetTooLarge",
    "batches_to_message_set", "is_message_set", "message_set_to_batch", "read_message_set",
    "stored_records", "write_message",
]

_MESSAGE_HEAD = struct.Struct(">qiIbb")  # offset, messageSize, crc, magic, attributes
_HEAD_SIZE = 12  # offset and messageSize: messageSize counts the bytes after them
_CRC_FROM = 16  # magic .. end
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_MAGIC_AT = 16


class InvalidMessageSet(ValueError):
    """A produced MessageSet that cannot be stored (Kafka's CORRUPT_MESSAGE, 2)."""


class MessageSetTooLarge(InvalidMessageSet):
    """A compressed block that inflates past the limit (Kafka's MESSAGE_TOO_LARGE, 10)."""


class Message(NamedTuple):
    """One message of a MessageSet after decompression."""

    magic: int
    timestamp: int | None  # ms; None for magic 0 and for LogAppendTime messages
    key: bytes | None
    value: bytes | None


def is_message_set(records: bytes | memoryview) -> bool:
    """Whether a ``records`` field is a legacy MessageSet (magic 0/1 at byte 16)."""
    return len(records) > _MAGIC_AT and records[_MAGIC_AT] in (0, 1)


# -- reading a produced MessageSet -----------------------------------------------------------


def _blob(view: memoryview, at: int, end: int) -> tuple[bytes | None, int]:
    if end - at < 4:
        raise InvalidMessageSet("a key or value length runs past its message")
    (length,) = _INT32.unpack_from(view, at)
    at += 4
    if length < 0:
        if length != -1:
            raise InvalidMessageSet(f"a key or value length of {length}")
        return None, at
    if at + length > end:
        raise InvalidMessageSet("a key or value runs past its message")
    return bytes(view[at:at + length]), at + length


def _messages(data: bytes | memoryview, inner: bool, left: list[int]) -> Iterator[Message]:
    """The messages of a set; ``left[0]``: what its wrappers may still inflate to, together."""
    view = memoryview(data)
    total = len(view)
    at = 0
    if total == 0 and not inner:
        raise InvalidMessageSet("an empty MessageSet")
    while at < total:
        if total - at < _MESSAGE_HEAD.size:
            raise InvalidMessageSet(f"{total - at} bytes at byte {at}: a truncated message")
        _, size, crc, magic, attributes = _MESSAGE_HEAD.unpack_from(view, at)
        end = at + _HEAD_SIZE + size
        if size < 14 or end > total:
            raise InvalidMessageSet(f"message at byte {at}: messageSize {size} does not fit")
        if zlib.crc32(view[at + _CRC_FROM:end]) != crc:
            raise InvalidMessageSet(f"message at byte {at}: CRC-32 mismatch")
        if magic not in (0, 1):
            raise InvalidMessageSet(f"message at byte {at}: magic {magic} in a MessageSet")
        pos = at + _MESSAGE_HEAD.size
        timestamp = None
        if magic == 1:
            if end - pos < 8:
                raise InvalidMessageSet(f"message at byte {at}: no room for its timestamp")
            (timestamp,) = _INT64.unpack_from(view, pos)
            pos += 8
            if attributes & LOG_APPEND_TIME:
                timestamp = None
        key, pos = _blob(view, pos, end)
        value, pos = _blob(view, pos, end)
        if pos != end:
            raise InvalidMessageSet(f"message at byte {at}: {end - pos} bytes after its value")
        codec = attributes & CODEC_MASK
        if codec == 0:
            yield Message(magic, timestamp, key, value)
        elif inner:
            raise InvalidMessageSet(f"message at byte {at}: a compressed message inside one")
        elif codec > LZ4:
            raise InvalidMessageSet(f"message at byte {at}: unknown compression codec {codec}")
        else:
            try:
                inflated = decompress(codec, value or b"", legacy_lz4=magic == 0,
                                      limit=left[0])
                left[0] -= len(inflated)
            except record_batch.TooLarge as error:
                raise MessageSetTooLarge(str(error)) from None
            except Exception as error:  # every codec has its own error class
                raise InvalidMessageSet(
                    f"message at byte {at}: its {codec=} value does not decompress ({error})"
                ) from error
            for message in _messages(inflated, True, left):
                if timestamp is None and message.timestamp is not None and magic == 1:
                    message = message._replace(timestamp=None)  # the wrapper's LogAppendTime
                yield message
        at = end


def read_message_set(records: bytes | memoryview) -> list[Message]:
    """Every message of a produced MessageSet, wrappers replaced by their inner messages;
    ``InvalidMessageSet`` for anything the module docstring refuses."""
    messages = list(_messages(records, False, [MAX_INFLATED]))
    if not messages:
        raise InvalidMessageSet("a MessageSet without messages")
    return messages


# -- RecordBatch v2 --------------------------------------------------------------------------


def message_set_to_batch(records: bytes | memoryview, now_ms: int) -> tuple[bytes, bool]:
    """A produced MessageSet as one uncompressed RecordBatch v2 and whether it is stamped
    LogAppendTime (at ``now_ms``); ``InvalidMessageSet`` when it cannot be stored."""
    messages = read_message_set(records)
    log_append = any(message.timestamp is None for message in messages)
    if log_append:
        base = newest = now_ms
        stamps = [now_ms] * len(messages)
    else:
        stamps = [message.timestamp for message in messages]  # type: ignore[misc]
        base, newest = stamps[0], max(stamps)
    block = bytearray()
    for delta, (message, stamp) in enumerate(zip(messages, stamps)):
        put_record(block, delta, stamp - base, message.key, message.value)
    attributes = LOG_APPEND_TIME if log_append else 0
    return record_batch.build(block, len(messages), len(messages) - 1, base, newest,
                              attributes), log_append


class StoredRecord(NamedTuple):
    offset: int
    timestamp: int  # ms
    log_append: bool
    key: bytes | None
    value: bytes | None


def stored_records(batches: bytes | memoryview, from_offset: int = 0) -> Iterator[StoredRecord]:
    """The records of whole RecordBatch v2 back to back (a partial last batch is ignored), from
    ``from_offset`` on; control batches skipped."""
    view = memoryview(batches)
    at = 0
    while len(view) - at >= HEADER_SIZE:
        (base_offset, length, _, _, _, attributes, last_delta, base_timestamp, max_timestamp,
         _, _, _, count) = HEADER.unpack_from(view, at)
        end = at + 12 + length
        if end > len(view):
            return
        if attributes & CONTROL or base_offset + last_delta < from_offset:
            at = end
            continue
        block: bytes | memoryview = view[at + HEADER_SIZE:end]
        codec = attributes & CODEC_MASK
        if codec:
            block = decompress(codec, bytes(block))
        log_append = bool(attributes & LOG_APPEND_TIME)
        pos = 0
        for _ in range(count):
            pos, timestamp_delta, offset_delta, key, value, _ = read_record(
                block, pos, with_headers=False)  # headers: no place in a MessageSet
            offset = base_offset + offset_delta
            if offset >= from_offset:
                timestamp = max_timestamp if log_append else base_timestamp + timestamp_delta
                yield StoredRecord(offset, timestamp, log_append, _bytes(key), _bytes(value))
        at = end


def _bytes(blob: bytes | bytearray | memoryview | None) -> bytes | None:
    return None if blob is None else bytes(blob)


# -- writing a MessageSet --------------------------------------------------------------------


def write_message(magic: int, offset: int, key: bytes | None, value: bytes | None,
                  timestamp: int = -1, attributes: int = 0) -> bytes:
    """One uncompressed (unless ``attributes`` says otherwise) message of ``magic`` 0 or 1."""
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _INT64.pack(timestamp)
    for blob in (key, value):
        if blob is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(blob))
            body += blob
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + bytes(body)


def batches_to_message_set(batches: bytes | memoryview, magic: int, from_offset: int,
                           max_bytes: int, at_least_one: bool = False) -> bytes:
    """Stored RecordBatch v2 bytes as a MessageSet of ``magic`` (0 or 1): whole messages from
    ``from_offset``, at most ``max_bytes`` of them (the first one regardless when
    ``at_least_one``)."""
    if magic not in (0, 1):
        raise ValueError(f"a MessageSet has magic 0 or 1, not {magic}")
    out = bytearray()
    for record in stored_records(batches, from_offset):
        attributes = LOG_APPEND_TIME if magic == 1 and record.log_append else 0
        message = write_message(magic, record.offset, record.key, record.value,
                                record.timestamp, attributes)
        if len(out) + len(message) > max_bytes and (out or not at_least_one):
            break
        out += message
    return bytes(out)
