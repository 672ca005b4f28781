"""Stored records: stamping a SEND batch into the poll layout, and scanning stored records.

SEND layout, per message (wire reference §3.4)::

    id u128 | headers_length u32 | headers | payload_length u32 | payload

Stored layout = POLL layout (§4.5), per message, 45 bytes around headers and payload::

    offset u64 | state u8 (=1) | timestamp u64 | id 16 bytes | checksum u32 |
    headers_length u32 | headers | payload_length u32 | payload

Index entry, one per message, 16 bytes::

    relative_offset u32 (offset - segment start) | position u32 (of the record in the .log) |
    timestamp u64

Owns: ``stamp_batch`` (the write hot loop), ``scan_records`` (recovery) and
``check_read_boundaries`` (a cheap guard on every read). Invariants: ``stamp_batch`` validates
the whole batch before returning anything, so a rejected batch writes nothing; checksum is
``crc32(payload)`` (§6.11); an all-zero id becomes a fresh UUIDv7 (16 UUID bytes in canonical
order); every message of a batch gets the same timestamp.

Two implementations of ``stamp_batch``: ``stamp_batch_python`` below is the reference (and the
fallback), ``_stamp.c`` its C twin, used when it was built and ``RILL_PURE_PYTHON`` is not ``1``
(``ACCELERATED`` tells which runs). The twin gives the same bytes and accepts exactly the same
regions (``tests/server/storage/test_stamp_accelerator.py`` holds them to it); it releases the
GIL while it loops, so stamping can run in a worker thread beside the event loop. On a rejected
region it reports a status: the limit errors are raised here, and for a malformed region the
reference runs again to raise its DecodeError with the exact message (rejections are rare).

Performance of the reference: one pass; per message it makes only what CPython needs to call C
(struct results, zero-copy buffer slices): one ``struct`` call packs the fixed record prefix,
``crc32`` runs over a slice of the payload, and the variable part is left in place for one final
``bytes.join`` (a single exact allocation, one copy). Index entries are filled column-wise from
arrays. Errors raise mid-pass; the partial work is simply dropped, since nothing has been
written yet.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from dataclasses import dataclass

from rill.errors import InvalidMessagesCount, TooBigHeadersPayload, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.headers import decode_header_map, header_values_size

from rill.protocol.stored import crc32, uuid7_block  # noqa: F401 (both used here; re-exported)

MAX_PAYLOAD_BYTES = 10_000_000  # sum of payloads in one SEND (4022)
MAX_HEADERS_BYTES = 100_000  # sum of header value bytes in one SEND (4017)
MAX_POSITION = 0xFFFF_FFFF  # index positions and relative offsets are u32

STATE_AVAILABLE = 1
KNOWN_STATES = frozenset({1, 10, 20, 30})  # available, unavailable, poisoned, marked for deletion

SEND_PREFIX_SIZE = 20  # id + headers_length
RECORD_FIXED_SIZE = 41  # offset, state, timestamp, id, checksum, headers_length
RECORD_OVERHEAD = 45  # the fixed part plus payload_length
RECORD_GROWTH = RECORD_OVERHEAD - SEND_PREFIX_SIZE - 4  # 21 bytes added to each SEND message
INDEX_ENTRY_SIZE = 16

_SEND_HEAD = struct.Struct("<16sI")  # id, headers_length
_RECORD_PREFIX = struct.Struct("<QBQ16sI")  # offset, state, timestamp, id, checksum
_RECORD_FIXED = struct.Struct(
    "<QBQ16xII"
)  # offset, state, timestamp, (id), checksum, headers_length
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
INDEX_ENTRY = struct.Struct("<IIQ")  # relative_offset, position, timestamp

_ZERO_ID = bytes(16)
_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


@dataclass(frozen=True, slots=True)
class StampedBatch:
    """A batch ready for one write: ``records`` to the .log, ``index_entries`` to the .index."""

    records: bytes
    index_entries: bytearray
    count: int
    first_offset: int
    last_offset: int
    timestamp_us: int


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What ``scan_records`` found: ``count`` valid records ending at byte ``end_position``."""

    count: int
    end_position: int
    index_entries: bytearray
    first_timestamp: int | None
    last_timestamp: int | None
    stop_reason: str | None  # None when the scan reached the end of the data cleanly


def stamp_batch_python(
    raw: bytes | bytearray | memoryview,
    base_offset: int,
    timestamp_us: int,
    base_position: int,
    segment_start: int,
) -> StampedBatch:
    """Validate a SEND message region and turn it into stored records plus index entries.

    ``base_offset`` is the offset of the first message, ``base_position`` the .log position its
    record will have, ``segment_start`` the start offset of the segment it goes to. Raises
    DecodeError for any malformed message, InvalidMessagesCount (4009) for an empty region,
    TooBigHeadersPayload (4017) and TooBigMessagePayload (4022) for the batch limits. Nothing
    is returned unless the whole batch is valid.
    """
    view = memoryview(raw)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    end = len(view)
    read_head = _SEND_HEAD.unpack_from
    read_u32 = _U32.unpack_from
    pack_prefix = _RECORD_PREFIX.pack
    pieces: list[bytes | memoryview] = []  # alternating: fixed record prefix, rest of the message
    add_piece = pieces.append
    record_positions: list[int] = []
    add_record_position = record_positions.append
    uuids = b""
    uuid_position = 0
    payload_total = headers_total = 0
    offset = base_offset
    record_position = base_position
    position = 0
    try:
        while position < end:
            message_id, headers_length = read_head(view, position)
            payload_position = position + 24 + headers_length
            if headers_length:
                if payload_position - 4 > end:
                    raise DecodeError(f"message {offset - base_offset}: headers overrun the region")
                headers_total += header_values_size(
                    view[position + SEND_PREFIX_SIZE : payload_position - 4]
                )
            payload_length = read_u32(view, payload_position - 4)[0]
            stop = payload_position + payload_length
            if not payload_length or stop > end:
                raise DecodeError(
                    f"message {offset - base_offset}: invalid payload_length {payload_length}"
                )
            payload_total += payload_length
            if message_id == _ZERO_ID:
                if uuid_position == len(uuids):  # one block for the rest, sized from this message
                    uuids = uuid7_block(
                        (end - position) // (stop - position) + 1, timestamp_us // 1000
                    )
                    uuid_position = 0
                message_id = uuids[uuid_position : uuid_position + 16]
                uuid_position += 16
            add_piece(
                pack_prefix(
                    offset,
                    STATE_AVAILABLE,
                    timestamp_us,
                    message_id,
                    crc32(view[payload_position:stop]),
                )
            )
            add_piece(view[position + 16 : stop])
            add_record_position(record_position)
            record_position += stop - position + RECORD_GROWTH
            offset += 1
            position = stop
    except struct.error:
        raise DecodeError(
            f"message {offset - base_offset}: truncated at byte {position} of {end}"
        ) from None
    count = offset - base_offset
    if count == 0:
        raise InvalidMessagesCount()
    if headers_total > MAX_HEADERS_BYTES:
        raise TooBigHeadersPayload()
    if payload_total > MAX_PAYLOAD_BYTES:
        raise TooBigMessagePayload()
    if record_position > MAX_POSITION + 1:
        raise _position_overflow()
    relative_start = base_offset - segment_start
    index_entries = build_index_entries(
        range(relative_start, relative_start + count), record_positions, timestamp_us
    )
    return StampedBatch(
        b"".join(pieces), index_entries, count, base_offset, offset - 1, timestamp_us
    )


def _load_accelerator():  # type: ignore[no-untyped-def]
    """The C twin, or None when it is not built, disabled, or disagrees on a limit."""
    if os.environ.get("RILL_PURE_PYTHON") == "1":
        return None
    try:
        from rill.server.storage import _stamp
    except ImportError:
        return None
    if (_stamp.MAX_PAYLOAD_BYTES, _stamp.MAX_HEADERS_BYTES, _stamp.MAX_POSITION,
            _stamp.RECORD_GROWTH) != (MAX_PAYLOAD_BYTES, MAX_HEADERS_BYTES, MAX_POSITION,
                                      RECORD_GROWTH):
        return None  # built from an older source: never run a twin with other limits
    return _stamp


_accelerator = _load_accelerator()
ACCELERATED = _accelerator is not None


def stamp_batch_accelerated(
    raw: bytes | bytearray | memoryview,
    base_offset: int,
    timestamp_us: int,
    base_position: int,
    segment_start: int,
) -> StampedBatch:
    """``stamp_batch_python`` done by the C twin (which must be built); same result, same errors."""
    found = _accelerator.stamp(raw, base_offset, timestamp_us, base_position, segment_start,
                               uuid7_block)
    if type(found) is tuple:
        records, index_entries, count = found
        return StampedBatch(records, index_entries, count, base_offset, base_offset + count - 1,
                            timestamp_us)
    error = _STATUS_ERRORS.get(found)
    if error is not None:
        raise error()
    # malformed, or outside what the twin handles: the reference raises the exact error
    return stamp_batch_python(raw, base_offset, timestamp_us, base_position, segment_start)


def _position_overflow() -> ValueError:
    return ValueError("batch does not fit the u32 positions of this segment")


_STATUS_ERRORS = (
    {
        _accelerator.STATUS_NO_MESSAGES: InvalidMessagesCount,
        _accelerator.STATUS_HEADERS_TOO_BIG: TooBigHeadersPayload,
        _accelerator.STATUS_PAYLOAD_TOO_BIG: TooBigMessagePayload,
        _accelerator.STATUS_POSITION_OVERFLOW: _position_overflow,
    }
    if ACCELERATED
    else {}
)

stamp_batch = stamp_batch_accelerated if ACCELERATED else stamp_batch_python


def build_index_entries(
    relative_offsets: range, positions: list[int], timestamp_us: int
) -> bytearray:
    """Index entries for one batch, filled column by column (C speed, no per-entry calls)."""
    count = len(positions)
    entries = bytearray(INDEX_ENTRY_SIZE * count)
    relative_column = array("I", relative_offsets)
    position_column = array("I", positions)
    timestamp_column = array("Q", [timestamp_us]) * count
    if not _LITTLE_ENDIAN_HOST:
        for column in (relative_column, position_column, timestamp_column):
            column.byteswap()
    with memoryview(entries) as raw, raw.cast("I") as words, raw.cast("Q") as double_words:
        words[0::4] = relative_column
        words[1::4] = position_column
        double_words[1::2] = timestamp_column
    return entries


def scan_records(
    view: bytes | bytearray | memoryview,
    start_position: int,
    expected_offset: int,
    verify_checksums: bool,
    segment_start: int | None = None,
) -> ScanResult:
    """Walk stored records from ``start_position``, offsets densely from ``expected_offset``.

    Stops at the first incomplete or garbled record, an unexpected offset, a timestamp that goes
    backwards, or (when ``verify_checksums``) a checksum mismatch or malformed header map.
    ``segment_start`` (default ``expected_offset``) makes the relative offsets of the rebuilt
    index entries.
    """
    view = memoryview(view)
    if segment_start is None:
        segment_start = expected_offset
    end = len(view)
    read_fixed = _RECORD_FIXED.unpack_from
    read_u32 = _U32.unpack_from
    pack_index = INDEX_ENTRY.pack
    entries: list[bytes] = []
    position = start_position
    offset = expected_offset
    first_timestamp: int | None = None
    previous_timestamp = 0
    reason: str | None = None
    while position < end:
        if position + RECORD_OVERHEAD > end:
            reason = f"incomplete record at byte {position}: {end - position} bytes left"
            break
        record_offset, state, timestamp, checksum, headers_length = read_fixed(view, position)
        if record_offset != offset:
            reason = f"record at byte {position} has offset {record_offset}, expected {offset}"
            break
        if state not in KNOWN_STATES:
            reason = f"record at byte {position} (offset {offset}) has unknown state {state}"
            break
        if timestamp < previous_timestamp:
            reason = f"record at byte {position} (offset {offset}) has a timestamp going backwards"
            break
        payload_length_position = position + RECORD_FIXED_SIZE + headers_length
        if payload_length_position + 4 > end:
            reason = f"record at byte {position} (offset {offset}): headers overrun the data"
            break
        (payload_length,) = read_u32(view, payload_length_position)
        stop = payload_length_position + 4 + payload_length
        if payload_length == 0 or stop > end:
            reason = f"record at byte {position} (offset {offset}): payload length {payload_length}"
            break
        if verify_checksums:
            actual = crc32(view[payload_length_position + 4 : stop])
            if actual != checksum:
                reason = f"record at byte {position} (offset {offset}): bad checksum {actual}"
                break
            if headers_length:
                try:
                    decode_header_map(view[position + RECORD_FIXED_SIZE : payload_length_position])
                except DecodeError as error:
                    reason = f"record at byte {position} (offset {offset}): {error.detail}"
                    break
        if first_timestamp is None:
            first_timestamp = timestamp
        entries.append(pack_index(offset - segment_start, position, timestamp))
        previous_timestamp = timestamp
        offset += 1
        position = stop
    count = offset - expected_offset
    last_timestamp = previous_timestamp if count else None
    return ScanResult(
        count, position, bytearray(b"".join(entries)), first_timestamp, last_timestamp, reason
    )


def record_end(view: bytes | bytearray | memoryview, position: int) -> int | None:
    """End position of the record starting at ``position``, or None if it does not fit."""
    end = len(view)
    if position + RECORD_OVERHEAD > end:
        return None
    (headers_length,) = _U32.unpack_from(view, position + RECORD_FIXED_SIZE - 4)
    payload_length_position = position + RECORD_FIXED_SIZE + headers_length
    if payload_length_position + 4 > end:
        return None
    stop = payload_length_position + 4 + _U32.unpack_from(view, payload_length_position)[0]
    return stop if stop <= end else None


def record_offset(view: bytes | bytearray | memoryview, position: int) -> int:
    return _U64.unpack_from(view, position)[0]


def record_header(
    view: bytes | bytearray | memoryview, position: int
) -> tuple[int, int, int, int, int]:
    """``(offset, state, timestamp, checksum, headers_length)`` of the record at ``position``."""
    return _RECORD_FIXED.unpack_from(view, position)


def check_read_boundaries(
    chunk: bytes, first_offset: int, last_offset: int, last_position: int
) -> str | None:
    """Cheap guard for a read: ``chunk`` must start with ``first_offset``'s record and end right
    after ``last_offset``'s record, which starts at ``last_position`` in the chunk. Returns None
    when it holds, or the reason it does not."""
    if len(chunk) < RECORD_OVERHEAD or record_offset(chunk, 0) != first_offset:
        return f"data at the index position of offset {first_offset} is not that record"
    if (
        last_position + RECORD_OVERHEAD > len(chunk)
        or record_offset(chunk, last_position) != last_offset
    ):
        return f"data at the index position of offset {last_offset} is not that record"
    if record_end(chunk, last_position) != len(chunk):
        return f"record of offset {last_offset} does not end where the index says"
    return None
