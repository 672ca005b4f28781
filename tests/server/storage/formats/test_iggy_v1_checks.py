"""Record checks: verify_records against an index, scan_records without one, find_record."""

from __future__ import annotations

import struct

from storage_helpers import region

from rill.protocol.iggy.headers import HeaderValue
from rill.protocol.iggy.messages import Message
from rill.server.storage.formats.iggy_v1_checks import (
    KIND_CONTENT,
    KIND_GOOD,
    KIND_STRUCTURE,
    find_record,
    scan_records,
    verify_records,
)
from rill.server.storage.formats.iggy_v1 import add_header_values, stamp_batch

TIMESTAMP = 1_700_000_000_123_456


def stamped(*payloads, base_offset: int = 0):  # type: ignore[no-untyped-def]
    return stamp_batch(region(*payloads), base_offset, TIMESTAMP, 0, base_offset)


def test_verify_accepts_what_was_stamped_and_names_what_is_not() -> None:
    batch = stamped(b"first", Message(b"second", headers={"k": HeaderValue.raw(b"v")}), b"third")
    records, index = bytes(batch.records), bytes(batch.index_entries)
    assert verify_records(records, index, 0, 0, 0) == (3, KIND_GOOD, None)
    second = 45 + len(b"first")
    payload = bytearray(records)
    payload[-1] ^= 0x20
    count, kind, reason = verify_records(bytes(payload), index, 0, 0, 0)
    assert (count, kind) == (2, KIND_CONTENT) and "checksum" in reason and "offset 2" in reason
    header = bytearray(records)
    header[second + 41] = 0  # the header key length of offset 1
    count, kind, reason = verify_records(bytes(header), index, 0, 0, 0)
    assert (count, kind) == (1, KIND_CONTENT) and "header map: header key length" in reason
    offset_field = bytearray(records)
    offset_field[second] ^= 0x04
    assert verify_records(bytes(offset_field), index, 0, 0, 0)[:2] == (1, KIND_STRUCTURE)
    length = bytearray(records)
    length[second + 41 + 11] ^= 0x01  # the payload length of offset 1 (after its header map)
    assert verify_records(bytes(length), index, 0, 0, 0)[:2] == (1, KIND_STRUCTURE)
    timestamp = bytearray(index)
    timestamp[16 + 8] ^= 0x01
    count, kind, reason = verify_records(records, bytes(timestamp), 0, 0, 0)
    assert (count, kind) == (1, KIND_STRUCTURE) and "the index says" in reason


def test_verify_a_range_from_the_middle_of_a_segment() -> None:
    batch = stamp_batch(region(b"a", b"bb", b"ccc"), 10, TIMESTAMP, 0, 8)
    position = 46
    entries = bytes(batch.index_entries[16:])
    assert verify_records(bytes(batch.records[position:]), entries, 11, 3, position) == (
        2, KIND_GOOD, None)
    assert verify_records(bytes(batch.records[position:]), entries, 11, 2, position)[1] == (
        KIND_STRUCTURE)  # relative offsets must match the segment


def test_scan_finds_every_stamped_record_and_rebuilds_the_same_index() -> None:
    batch = stamp_batch(region(b"a", b"bb", Message(b"ccc", headers={"k": HeaderValue.raw(b"v")})),
                        10, TIMESTAMP, 0, 10)
    result = scan_records(batch.records, 0, 10, 10)
    assert (result.count, result.end_position, result.stop_reason) == (3, len(batch.records), None)
    assert result.index_entries == batch.index_entries
    assert result.first_timestamp == result.last_timestamp == TIMESTAMP


def test_scan_stops_at_a_torn_or_garbage_tail() -> None:
    records = stamped(b"first", b"second").records
    first_end = 45 + len(b"first")
    for damaged in (records[:-1], records[: first_end + 10], records + b"\x07" * 60,
                    records + b"\x00" * 3):
        result = scan_records(damaged, 0, 0, 0, verify_checksums=False)
        expected_count = 2 if len(damaged) > len(records) else 1
        assert result.count == expected_count
        assert result.end_position == (len(records) if expected_count == 2 else first_end)
        assert result.stop_kind == KIND_STRUCTURE and result.stop_reason


def test_scan_detects_checksum_mismatch_only_when_verifying() -> None:
    records = bytearray(stamped(b"first", b"second").records)
    records[-1] ^= 0xFF
    assert scan_records(records, 0, 0, 0, verify_checksums=False).count == 2
    verified = scan_records(records, 0, 0, 0)
    assert verified.count == 1 and verified.stop_kind == KIND_CONTENT
    assert "checksum" in verified.stop_reason


def test_scan_stops_at_an_unexpected_offset_and_at_max_count() -> None:
    records = stamped(b"a", b"b", base_offset=5).records
    assert scan_records(records, 0, 4, 4).count == 0
    assert scan_records(records, 0, 5, 5).count == 2
    limited = scan_records(records, 0, 5, 5, max_count=1)
    assert (limited.count, limited.end_position, limited.stop_kind) == (1, 46, KIND_GOOD)


def test_find_record_skips_bytes_that_are_not_records() -> None:
    records = stamped(b"a", b"bb", b"ccc").records
    garbage = struct.pack("<Q", 1) * 4  # looks like offset 1, but no record checks there
    data = records[:46] + garbage + records[46:]
    assert find_record(data, 46, 1, 2) == (46 + len(garbage), 1)
    assert find_record(data, 46, 2, 2) == (46 + len(garbage) + 47, 2)
    assert find_record(data, 46, 3, 9) is None


def test_header_map_rules_are_the_protocol_decoders() -> None:
    """The stamp and check walker gives decode_header_map's own details."""
    from rill.protocol.buffer import DecodeError
    from rill.protocol.iggy.headers import decode_header_map

    for raw in (b"\x01\x00\x00\x00k\x01\x01\x00\x00\x00v" * 2, b"\x01\x00\x00\x00\xff",
                b"\x02\x00", b"\x01\x00\x00\x00k\x00", b"\x00\x00\x00\x00"):
        try:
            decode_header_map(raw)
        except DecodeError as error:
            expected = error.detail
        try:
            add_header_values(memoryview(raw), 0, len(raw), 0, None)
        except DecodeError as error:
            assert error.detail == expected
        else:
            raise AssertionError(f"{raw!r} was accepted")
