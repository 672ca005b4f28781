"""Columnar range reads (PartitionLog.read_columnar): index columns + records, one segment."""

from __future__ import annotations

import struct

from storage_helpers import read_messages, region

from rill.protocol.iggy.messages import iter_polled_messages


def _columns(found):
    count = found.count
    boundaries = struct.unpack(f"<{count + 1}I", found.boundaries)
    timestamps = struct.unpack(f"<{count}Q", found.timestamps)
    return boundaries, timestamps


def test_columns_match_the_records(open_log) -> None:
    log = open_log()
    log.append(region(b"a", b"bb"), 1_000)
    log.append(region(b"ccc"), 2_000)
    found = log.read_columnar(0, 10, 1 << 20)
    assert (found.base_offset, found.count) == (0, 3)
    boundaries, timestamps = _columns(found)
    assert timestamps == (1_000, 1_000, 2_000)
    assert boundaries[0] == found.base_position == 0 and boundaries[-1] == len(found.records)
    messages = list(iter_polled_messages(found.records, 3))
    assert [m.payload for m in messages] == [b"a", b"bb", b"ccc"]
    for index, message in enumerate(messages):  # each boundary starts its record
        start = boundaries[index] - found.base_position
        assert struct.unpack_from("<Q", found.records, start)[0] == message.offset
    assert found.records == b"".join(log.read(0, 3)[1])


def test_a_range_starts_mid_segment_and_keeps_segment_positions(open_log) -> None:
    log = open_log()
    log.append(region(*[bytes([65 + i]) * 10 for i in range(6)]), 1)
    found = log.read_columnar(2, 3, 1 << 20)
    boundaries, _ = _columns(found)
    assert (found.base_offset, found.count) == (2, 3)
    assert found.base_position == boundaries[0] == 2 * 55  # two 55-byte records before
    assert boundaries[-1] - boundaries[0] == len(found.records) == 3 * 55
    assert [m.offset for m in iter_polled_messages(found.records, 3)] == [2, 3, 4]


def test_max_bytes_cuts_but_returns_at_least_one(open_log) -> None:
    log = open_log()
    log.append(region(*[b"x" * 55] * 5), 1)  # 100-byte records
    assert log.read_columnar(0, 5, 250).count == 2
    assert log.read_columnar(0, 5, 300).count == 3
    assert log.read_columnar(0, 5, 10).count == 1
    cut = log.read_columnar(1, 5, 250)
    assert cut.count == 2 and len(cut.boundaries) == 12 and len(cut.timestamps) == 16
    assert len(cut.records) == 200


def test_a_range_stops_at_the_segment_end(open_log) -> None:
    log = open_log(segment_size=200)
    for index in range(6):
        log.append(region(bytes([48 + index]) * 55), index)  # 100 bytes: 2 per segment
    assert log.segments_count >= 3
    offset, seen = 0, []
    while offset < log.next_offset:
        found = log.read_columnar(offset, 100, 1 << 20)
        assert 1 <= found.count <= 2
        seen += [m.offset for m in iter_polled_messages(found.records, found.count)]
        offset = found.base_offset + found.count
    assert seen == list(range(6))
    assert [m.payload[:1] for m in read_messages(log, 0, 6)] == [b"0", b"1", b"2", b"3", b"4", b"5"]


def test_empty_reads(open_log) -> None:
    log = open_log()
    assert log.read_columnar(0, 10, 100).count == 0
    log.append(region(b"a"), 1)
    past = log.read_columnar(5, 10, 100)
    assert (past.count, past.records, past.base_position) == (0, b"", 0)
    assert log.read_columnar(0, 0, 100).count == 0


def test_retention_moves_the_start(open_log) -> None:
    log = open_log(segment_size=100)
    for index in range(4):
        log.append(region(b"y" * 55), index)
    log.delete_oldest_segment()
    found = log.read_columnar(0, 10, 1 << 20)
    assert found.base_offset == log.first_offset == 1
