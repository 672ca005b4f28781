"""Records a client built in the stored layout, for staged appends (rill extension 1010-1011).

A writer sends STAGE_MESSAGES records already in the stored layout (``rill.protocol.stored``)
with their positions; the server checks them here when they are staged
(``check_stored_records``: layout, checksums, SEND's limits), and at commit writes their real
offsets and timestamp in place (``restamp_records``) before one segment write
(``PartitionLog.append_stamped``). Both steps avoid per-record Python work for records of one
size, the common case, with strided slices compared or assigned in C.
"""

from __future__ import annotations

import struct
import sys
from array import array

from rill.errors import InvalidMessagesCount, TooBigHeadersPayload, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.headers import header_values_size
from rill.protocol.stored import crc32
from rill.protocol.layout import STORED_FIXED, STORED_HEAD
from rill.server.storage.records import (
    MAX_HEADERS_BYTES,
    MAX_PAYLOAD_BYTES,
    RECORD_FIXED_SIZE,
    RECORD_OVERHEAD,
    STATE_AVAILABLE,
)

_LITTLE_ENDIAN_HOST = sys.byteorder == "little"
_U32 = struct.Struct("<I")
_RECORD_FIXED = STORED_FIXED  # offset, state, timestamp, checksum, headers_length
_OFFSET_STATE_TIMESTAMP = STORED_HEAD  # the first 17 bytes of a record


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
    read_fixed = _RECORD_FIXED.unpack_from
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


def uniform_positions(positions: array, total: int, base: int = 0) -> range | None:
    """``positions`` + ``base`` as a range when the records all have the same size (checked
    in C: one comparison of the bytes), else None."""
    count = len(positions)
    if not count or total % count:
        return None
    size = total // count
    expected = range(0, total, size)
    if positions.tobytes() != array("I", expected).tobytes():
        return None
    return range(base, base + total, size)


def restamp_records(records: bytearray, positions: array, first_offset: int, timestamp: int) -> None:
    """Write offsets ``first_offset``.. and ``timestamp`` into stored records in place.

    Records of one size (the common case: fixed-size payloads) are patched column-wise with
    strided slice assignments, 17 of them whatever the count; others one record at a time.
    """
    count = len(positions)
    if uniform_positions(positions, len(records)) is not None:
        size = len(records) // count
        offsets = array("Q", range(first_offset, first_offset + count))
        if not _LITTLE_ENDIAN_HOST:
            offsets.byteswap()
        offset_bytes = offsets.tobytes()
        stamp = timestamp.to_bytes(8, "little")
        for byte in range(8):
            records[byte::size] = offset_bytes[byte::8]
            records[9 + byte::size] = stamp[byte:byte + 1] * count
        return
    pack = _OFFSET_STATE_TIMESTAMP.pack_into
    for index, position in enumerate(positions):
        pack(records, position, first_offset + index, STATE_AVAILABLE, timestamp)
