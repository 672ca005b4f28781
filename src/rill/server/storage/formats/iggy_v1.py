"""The ``iggy-v1`` record format: Iggy's stored layout, stamping a SEND batch into it, and the
records a client built in it for staged appends.

SEND layout, per message (wire reference §3.4)::

    id u128 | headers_length u32 | headers | payload_length u32 | payload

Stored layout = POLL layout (§4.5), per message, 45 bytes around headers and payload::

    offset u64 | state u8 (=1) | timestamp u64 | id 16 bytes | checksum u32 |
    headers_length u32 | headers | payload_length u32 | payload

Its index has one generic 16-byte entry per record (``storage.index_entry``).

Owns: the format's name (``NAME``), its limits, ``stamp_batch`` (the write hot loop),
``add_header_values`` (the header map rules, shared with the record checks of
``iggy_v1_checks``), the loading of the storage C extension (``ACCELERATOR``: ``_stamp`` and the
units beside it in this folder, used by every format module) and the staged records. Invariants: ``stamp_batch``
validates the whole batch before returning anything, so a rejected batch writes nothing;
checksum is ``crc32(payload)`` (§6.11); an all-zero id becomes a fresh UUIDv7 (16 UUID bytes in
canonical order); every message of a batch gets the same timestamp.

Two implementations of ``stamp_batch``: ``stamp_batch_python`` below is the reference (and the
fallback), ``_stamp.c`` its C twin, used when it was built and ``RILL_PURE_PYTHON`` is not ``1``
(``ACCELERATED`` tells which runs). The twin gives the same bytes, accepts exactly the same
regions and rejects the others with the same error and text
(``tests/server/storage/formats/test_iggy_v1_accelerator.py`` holds them to it); it releases the GIL
while it loops, so stamping can run in a worker thread beside the event loop. A rejection costs
no more than an acceptance: both stop at the first malformed message, and at the batch limits
as soon as a running total passes them; the twin words the DecodeError itself.

Performance of the reference: one pass; per message it makes only what CPython needs to call C
(struct results, zero-copy buffer slices): one ``struct`` call packs the fixed record prefix,
``crc32`` runs over a slice of the payload, and the variable part is left in place for one final
``bytes.join`` (a single exact allocation, one copy). Index entries are filled column-wise from
arrays. Errors raise mid-pass; the partial work is simply dropped, since nothing has been
written yet.

Staged records (rill extension 1010-1011): a writer sends STAGE_MESSAGES records already in the
stored layout (``rill.protocol.iggy.stored``) with their positions; the server checks them when they
are staged (``check_stored_records``: layout, checksums, SEND's limits), and at commit writes
their real offsets and timestamp in place (``restamp_records``) before one segment write
(``PartitionLog.append_stamped``). Both steps avoid per-record Python work: the C twins of
``_staged.c`` (``check_staged_layout``, ``restamp``, ``uniform_size``; references
``check_staged_layout_python``, ``restamp_records_python``, ``uniform_record_size_python``,
held to the same results by ``tests/server/storage/formats/test_staged_accelerator.py``) loop
over the records without the GIL; the references use strided slices (records of one size) or
one call per record.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from dataclasses import dataclass

from rill.errors import InvalidMessagesCount, TooBigHeadersPayload, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import header_values_size
from rill.protocol.iggy.layout import (
    SEND_HEAD,
    SEND_OVERHEAD,
    SEND_PREFIX_SIZE,
    STATE_AVAILABLE,
    STORED_FIXED,
    STORED_FIXED_SIZE,
    STORED_HEAD,
    STORED_OVERHEAD,
)

from rill.protocol.iggy.stored import crc32, uuid7_block  # noqa: F401 (both used here; re-exported)
from rill.server.storage.index_entry import MAX_POSITION, build_index_entries

NAME = "iggy-v1"  # this format's name (the records a read hands out are in it)

MAX_PAYLOAD_BYTES = 10_000_000  # sum of payloads in one SEND (4022)
MAX_HEADERS_BYTES = 100_000  # sum of header value bytes in one SEND (4017)

KNOWN_STATES = frozenset({1, 10, 20, 30})  # available, unavailable, poisoned, marked for deletion

# the stored layout's sizes (``rill.protocol.iggy.layout`` owns the layouts)
RECORD_FIXED_SIZE = STORED_FIXED_SIZE  # offset, state, timestamp, id, checksum, headers_length
RECORD_OVERHEAD = STORED_OVERHEAD  # the fixed part plus payload_length
RECORD_GROWTH = STORED_OVERHEAD - SEND_OVERHEAD  # 21 bytes added to each SEND message
RECORD_FIXED = STORED_FIXED  # offset, state, timestamp, (id), checksum, headers_length

_RECORD_PREFIX = struct.Struct("<QBQ16sI")  # STORED_PREFIX less headers_length (packed apart)
_U32 = struct.Struct("<I")

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
    leader_epoch: int = 0,
) -> StampedBatch:
    """Validate a SEND message region and turn it into stored records plus index entries.

    ``base_offset`` is the offset of the first message, ``base_position`` the .log position its
    record will have, ``segment_start`` the start offset of the segment it goes to.
    ``leader_epoch`` (what ``RecordFormat.stamp`` is given) is accepted and ignored: iggy-v1
    records have no room for it (an Iggy-format topic keeps its epoch boundaries in a
    checkpoint beside the log, cluster-design.md). Raises
    DecodeError for the first malformed message, InvalidMessagesCount (4009) for an empty
    region, TooBigHeadersPayload (4017) and TooBigMessagePayload (4022) as soon as the running
    total of header value bytes or payload bytes passes its limit. Nothing is returned unless
    the whole batch is valid.
    """
    view = memoryview(raw)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    end = len(view)
    read_head = SEND_HEAD.unpack_from
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
                try:
                    headers_total = add_header_values(
                        view, position + SEND_PREFIX_SIZE, payload_position - 4, headers_total,
                        MAX_HEADERS_BYTES,
                    )
                except DecodeError as error:
                    raise DecodeError(f"message {offset - base_offset}: {error.detail}") from None
            payload_length = read_u32(view, payload_position - 4)[0]
            stop = payload_position + payload_length
            if not payload_length or stop > end:
                raise DecodeError(
                    f"message {offset - base_offset}: invalid payload_length {payload_length}"
                )
            payload_total += payload_length
            if payload_total > MAX_PAYLOAD_BYTES:
                raise TooBigMessagePayload()
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
        from rill.server.storage.formats import _stamp
    except ImportError:
        return None
    if (_stamp.MAX_PAYLOAD_BYTES, _stamp.MAX_HEADERS_BYTES, _stamp.MAX_POSITION,
            _stamp.RECORD_GROWTH, _stamp.SEND_PREFIX_SIZE, _stamp.RECORD_OVERHEAD,
            _stamp.RECORD_HEADERS_AT) != (
                MAX_PAYLOAD_BYTES, MAX_HEADERS_BYTES, MAX_POSITION, RECORD_GROWTH,
                SEND_PREFIX_SIZE, STORED_OVERHEAD, STORED_FIXED_SIZE):
        return None  # built from an older source: never run a twin with other limits
    return _stamp


_accelerator = _load_accelerator()
ACCELERATED = _accelerator is not None
ACCELERATOR = _accelerator  # the C twins (of the record checks too), or None
if ACCELERATED:  # the ids of messages sent without one: the C twin of the generator
    uuid7_block = getattr(_accelerator, "uuid7_block", uuid7_block)  # noqa: F811


def stamp_batch_accelerated(
    raw: bytes | bytearray | memoryview,
    base_offset: int,
    timestamp_us: int,
    base_position: int,
    segment_start: int,
    leader_epoch: int = 0,
) -> StampedBatch:
    """``stamp_batch_python`` done by the C twin (which must be built); same result, same errors
    (``leader_epoch`` is ignored here too: the twin is not given it)."""
    found = _accelerator.stamp(raw, base_offset, timestamp_us, base_position, segment_start,
                               uuid7_block)
    if type(found) is tuple:
        records, index_entries, count = found
        return StampedBatch(records, index_entries, count, base_offset, base_offset + count - 1,
                            timestamp_us)
    if type(found) is str:
        raise DecodeError(found)
    error = _STATUS_ERRORS.get(found)
    if error is not None:
        raise error()
    # arguments outside what the twin handles (never a client's region): the reference decides
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


def add_header_values(
    view: memoryview, start: int, stop: int, total: int, limit: int | None
) -> int:
    """Validate the header map ``view[start:stop]`` and add its value bytes to ``total``.

    The checks, their order and the DecodeError details are those of
    ``rill.protocol.iggy.headers.decode_header_map`` (key 1..255 bytes of UTF-8, kind 1..15, value
    1..255 bytes, each key unlike the ones before it); TooBigHeadersPayload as soon as the
    total passes ``limit`` (None: no limit). ``_header_map.c``'s ``check_header_map`` is its twin.
    """
    read_u32 = _U32.unpack_from
    keys: set[bytes] = set()
    position = start
    while position < stop:
        if stop - position < 4:
            raise _needed(4, position - start, stop - position)
        (key_length,) = read_u32(view, position)
        position += 4
        if not 1 <= key_length <= 255:
            raise DecodeError(f"header key length {key_length}")
        if stop - position < key_length:
            raise _needed(key_length, position - start, stop - position)
        key = bytes(view[position : position + key_length])
        try:
            text = key.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DecodeError(f"invalid UTF-8: {error.reason}") from None
        position += key_length
        if stop - position < 1:
            raise _needed(1, position - start, stop - position)
        kind = view[position]
        position += 1
        if not 1 <= kind <= 15:
            raise DecodeError(f"header kind {kind}")
        if stop - position < 4:
            raise _needed(4, position - start, stop - position)
        (value_length,) = read_u32(view, position)
        position += 4
        if not 1 <= value_length <= 255:
            raise DecodeError(f"header value length {value_length}")
        if key in keys:
            raise DecodeError(f"duplicate header key {text!r}")
        keys.add(key)
        if stop - position < value_length:
            raise _needed(value_length, position - start, stop - position)
        position += value_length
        total += value_length
        if limit is not None and total > limit:
            raise TooBigHeadersPayload()
    return total


def _needed(size: int, at: int, have: int) -> DecodeError:
    return DecodeError(f"needed {size} bytes at {at}, have {have}")


# ---------------------------------------------------------------------- staged records


def check_stored_records(records: bytes, positions: bytes | memoryview) -> array:
    """Check records a client built in the stored layout (staged appends) and return their
    positions as an array: layout, checksums, and the limits of one SEND.

    Raises DecodeError (status 3) for a malformed record, a position out of order or a bad
    checksum, InvalidMessagesCount (4009) for none, TooBigHeadersPayload (4017) and
    TooBigMessagePayload (4022). Records of one size -- the common case -- are checked
    column-wise (strided slices compared in C); others one at a time. Each record's checksum
    is computed either way (one C call per record).
    """
    if len(positions) % 4:
        raise DecodeError("positions are not a whole number of u32")
    starts = array("I")
    starts.frombytes(positions)
    if not _LITTLE_ENDIAN_HOST:
        starts.byteswap()
    count = len(starts)
    if count == 0:
        raise InvalidMessagesCount()
    total = len(records)
    view = memoryview(records)
    if _without_headers_one_size(records, starts, total):
        size = total // count
        checksums = array("I", [crc32(view[start + RECORD_OVERHEAD : start + size])
                                for start in range(0, total, size)])
        if not _LITTLE_ENDIAN_HOST:
            checksums.byteswap()
        sums = checksums.tobytes()
        for byte in range(4):
            if records[RECORD_FIXED_SIZE - 8 + byte :: size] != sums[byte::4]:
                raise DecodeError("a record's checksum does not match its payload")
        payload_total, headers_total = (size - RECORD_OVERHEAD) * count, 0
    else:
        payload_total, headers_total = _check_one_by_one(view, starts, total)
    if headers_total > MAX_HEADERS_BYTES:
        raise TooBigHeadersPayload()
    if payload_total > MAX_PAYLOAD_BYTES:
        raise TooBigMessagePayload()
    return starts


def _without_headers_one_size(records: bytes, starts: array, total: int) -> bool:
    """True when every record has the same size, no headers and the payload length that
    size implies (checked column-wise); anything else goes the one-by-one way."""
    count = len(starts)
    if uniform_positions(starts, total) is None or total // count <= RECORD_OVERHEAD:
        return False
    size = total // count
    lengths = bytes(4) + _U32.pack(size - RECORD_OVERHEAD)  # headers_length, payload_length
    return all(
        records[RECORD_FIXED_SIZE - 4 + byte :: size] == lengths[byte : byte + 1] * count
        for byte in range(8)
    )


def _check_one_by_one(view: memoryview, starts: array, total: int) -> tuple[int, int]:
    read_fixed = STORED_FIXED.unpack_from
    read_u32 = _U32.unpack_from
    payload_total = headers_total = 0
    if starts[0] != 0:
        raise DecodeError("the first record does not start at position 0")
    ends = list(starts[1:])
    ends.append(total)
    try:
        for index, (start, end) in enumerate(zip(starts, ends)):
            _, _, _, checksum, headers_length = read_fixed(view, start)
            length_position = start + RECORD_FIXED_SIZE + headers_length
            payload_length = read_u32(view, length_position)[0]
            if not payload_length or length_position + 4 + payload_length != end:
                raise DecodeError(f"record {index}: its lengths disagree with the positions")
            if headers_length:
                headers_total += header_values_size(
                    view[start + RECORD_FIXED_SIZE : length_position])
            if crc32(view[length_position + 4 : end]) != checksum:
                raise DecodeError(f"record {index}: the checksum does not match its payload")
            payload_total += payload_length
    except struct.error:
        raise DecodeError("a record runs past the end of the records") from None
    return payload_total, headers_total


def uniform_record_size_python(positions: bytes | bytearray | memoryview | array,
                               total: int) -> int:
    """The size of every record when ``positions`` (native-order u32, as ``array("I")``
    holds them) are 0, size, 2 size, ... and ``total`` is their count x size (count and
    size > 0), else 0. ``_staged.c``'s ``uniform_size`` is its twin."""
    starts = positions if isinstance(positions, array) else array("I", bytes(positions))
    count = len(starts)
    if not count or total % count or not total // count:
        return 0
    size = total // count
    if starts.tobytes() != array("I", range(0, total, size)).tobytes():
        return 0
    return size


def uniform_positions(positions: array, total: int, base: int = 0) -> range | None:
    """``positions`` + ``base`` as a range when the records all have the same size (one C
    loop, or one comparison of the bytes), else None."""
    size = _uniform_record_size(positions, total)
    return range(base, base + total, size) if size else None


def restamp_records_python(records: bytearray, positions: array, first_offset: int,
                           timestamp: int) -> None:
    """Write offsets ``first_offset``.., state 1 (available) and ``timestamp`` into the heads
    of stored records in place (record i at ``positions[i]``); ValueError, and nothing
    written, when a position leaves no room for the 17-byte head. ``_staged.c``'s
    ``restamp`` is its twin.

    Records of one size (the common case: fixed-size payloads) are patched column-wise with
    strided slice assignments, 17 of them whatever the count; others one record at a time.
    """
    count = len(positions)
    if count and max(positions) + STORED_HEAD.size > len(records):
        raise ValueError("a record position leaves no room for its head")
    if uniform_record_size_python(positions, len(records)):
        size = len(records) // count
        offsets = array("Q", range(first_offset, first_offset + count))
        if not _LITTLE_ENDIAN_HOST:
            offsets.byteswap()
        offset_bytes = offsets.tobytes()
        stamp = timestamp.to_bytes(8, "little")
        records[8::size] = bytes((STATE_AVAILABLE,)) * count
        for byte in range(8):
            records[byte::size] = offset_bytes[byte::8]
            records[9 + byte::size] = stamp[byte:byte + 1] * count
        return
    pack = STORED_HEAD.pack_into
    for index, position in enumerate(positions):
        pack(records, position, first_offset + index, STATE_AVAILABLE, timestamp)


def check_staged_layout_python(records: bytearray, positions: bytes | memoryview) -> int:
    """The record size when staged ``records`` are all of one size with no headers and the
    payload length that size implies (``positions``: their starts, little-endian u32 as sent),
    after writing offsets 0, 1, ... into their offset fields (placeholders: the commit
    writes the real ones), so that the storage's record scan can check them all in one C
    pass; else 0, and nothing written. At most 2**24 - 1 records and MAX_PAYLOAD_BYTES bytes
    (else 0). ``_staged.c``'s ``check_staged_layout`` is its twin."""
    count, total = len(positions) // 4, len(records)
    if len(positions) % 4 or count >= 1 << 24 or total > MAX_PAYLOAD_BYTES:
        return 0
    starts = array("I", bytes(positions))
    if not _LITTLE_ENDIAN_HOST:
        starts.byteswap()
    size = uniform_record_size_python(starts, total)
    if size <= RECORD_OVERHEAD:
        return 0
    lengths = bytes(4) + _U32.pack(size - RECORD_OVERHEAD)  # headers_length, payload_length
    if not all(records[RECORD_FIXED_SIZE - 4 + byte :: size] == lengths[byte : byte + 1] * count
               for byte in range(8)):
        return 0
    offsets = array("Q", range(count))
    if not _LITTLE_ENDIAN_HOST:
        offsets.byteswap()
    offset_bytes = offsets.tobytes()
    for byte in range(8):
        records[byte::size] = offset_bytes[byte::8]
    return size


def _restamp_accelerated(records: bytearray, positions: array, first_offset: int,
                         timestamp: int) -> None:
    """``restamp_records_python`` done by the C twin (one pass, without the GIL)."""
    _accelerator.restamp(records, positions, first_offset, timestamp)


# the staged-record twins (a build of the C module older than them lacks them: the references)
STAGED_ACCELERATED = ACCELERATED and hasattr(_accelerator, "restamp")
restamp_records = _restamp_accelerated if STAGED_ACCELERATED else restamp_records_python
_uniform_record_size = (_accelerator.uniform_size if STAGED_ACCELERATED
                        else uniform_record_size_python)
check_staged_layout = (_accelerator.check_staged_layout if STAGED_ACCELERATED
                       else check_staged_layout_python)


def stored_positions(records: bytes | bytearray | memoryview) -> bytes:
    """Where each stored record of ``records`` starts (u32 array bytes, as
    ``check_stored_records`` takes them): a walk over the records' lengths, what a follower
    needs to append a leader's stored bytes (``Log.append_replicated``). DecodeError when the
    lengths do not end exactly at the end of ``records``."""
    starts = array("I")
    total = len(records)
    position = 0
    head = STORED_FIXED_SIZE
    while position < total:
        if total - position < STORED_OVERHEAD:
            raise DecodeError(f"a stored record at byte {position} is cut short")
        headers_length = _U32.unpack_from(records, position + head - 4)[0]
        at = position + head + headers_length
        if at + 4 > total:
            raise DecodeError(f"a stored record at byte {position} is cut short")
        payload_length = _U32.unpack_from(records, at)[0]
        starts.append(position)
        position = at + 4 + payload_length
    if position != total:
        raise DecodeError(f"stored records end at byte {position}, not {total}")
    if not _LITTLE_ENDIAN_HOST:
        starts.byteswap()
    return starts.tobytes()
