"""Index rebuilds: every record located and checked; only what is truly bad is refused."""

from __future__ import annotations

import struct
from pathlib import Path

from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.index_rebuild import locate_records, replace_index_file
from rill.server.storage.formats.iggy_v1 import stamp_batch

TIMESTAMP = 1_700_000_000_000_000
START = 100
RECORD = 45 + 10  # every record here has a 10-byte payload


def segment(count: int = 8) -> tuple[bytearray, bytes]:
    """A log of ``count`` records (one batch per record, timestamps one apart) and its index."""
    log, index = bytearray(), bytearray()
    for number in range(count):
        batch = stamp_batch(encode_messages([Message(b"payload-%02d" % number, id=number + 1)]),
                            START + number, TIMESTAMP + number, len(log), START)
        log += batch.records
        index += batch.index_entries
    return log, bytes(index)


def test_a_whole_log_gives_its_index_back() -> None:
    log, index = segment()
    located = locate_records(log, START, 8)
    assert (located.index_entries, located.count, located.end_position, located.bad) == (
        index, 8, len(log), {})
    assert located.first_timestamp == TIMESTAMP and located.last_timestamp == TIMESTAMP + 7


def test_a_bad_checksum_is_refused_alone() -> None:
    log, index = segment()
    log[3 * RECORD + 50] ^= 0x01  # a payload byte of offset 103
    located = locate_records(log, START, 8, index)
    assert list(located.bad) == [103] and "checksum" in located.bad[103]
    assert located.count == 8 and located.end_position == len(log)
    entries = [struct.unpack_from("<IIQ", located.index_entries, 16 * n) for n in range(8)]
    assert [position for _, position, _ in entries] == [RECORD * n for n in range(8)]


def test_a_broken_offset_field_or_length_is_found_again_after() -> None:
    for at in (0, 37, 41):  # the offset field, the headers length, the payload length
        log, index = segment()
        log[4 * RECORD + at] ^= 0x10
        for hints in (index, None):  # with the old index, and without any
            located = locate_records(log, START, 8, hints)
            assert list(located.bad) == [104], (at, hints is None, located.bad)
            assert located.end_position == len(log)
            positions = [struct.unpack_from("<I", located.index_entries, 16 * n + 4)[0]
                         for n in range(8)]
            assert positions == [RECORD * n for n in range(8)]


def test_what_cannot_be_located_is_refused_and_the_rest_served() -> None:
    log, index = segment()
    log[2 * RECORD : 5 * RECORD - 7] = b"\x00" * (3 * RECORD - 7)  # a zeroed span
    located = locate_records(log, START, 8, None)
    assert sorted(located.bad) == [102, 103, 104]
    assert located.count == 8
    assert struct.unpack_from("<I", located.index_entries, 16 * 5 + 4)[0] == 5 * RECORD
    assert "cannot be located" in located.bad[103]


def test_a_sealed_segment_missing_its_last_records() -> None:
    log, _ = segment()
    located = locate_records(log[: 6 * RECORD], START, 8)
    assert sorted(located.bad) == [106, 107] and located.count == 8
    assert located.end_position == 6 * RECORD


def test_a_tail_ends_where_no_record_can_be_found() -> None:
    log, _ = segment()
    log[6 * RECORD + 20 :] = b"\xee" * (len(log) - 6 * RECORD - 20)
    located = locate_records(log, START, None)
    assert located.count == 6 and located.end_position == 6 * RECORD and not located.bad
    assert located.end_reason
    log, _ = segment()
    log[-1] ^= 0x01  # the last record is whole but bad: kept (and refused) unless torn
    located = locate_records(log, START, None)
    assert list(located.bad) == [107] and located.count == 8
    torn = located.without_trailing_bad(START)
    assert torn.count == 7 and torn.end_position == 7 * RECORD and not torn.bad


def test_one_timestamp_out_of_order_is_refused_alone() -> None:
    for stamp in (TIMESTAMP + 10**9, TIMESTAMP - 1):
        log, _ = segment()
        struct.pack_into("<Q", log, 3 * RECORD + 9, stamp)
        located = locate_records(log, START, 8)
        assert list(located.bad) == [103], (stamp, located.bad)
        timestamps = [struct.unpack_from("<Q", located.index_entries, 16 * n + 8)[0]
                      for n in range(8)]
        assert timestamps == sorted(timestamps)  # the index stays searchable


def test_replace_index_file_leaves_no_temporary_behind(tmp_path: Path) -> None:
    index = tmp_path / "00000000000000000000.index"
    index.write_bytes(b"old")
    replace_index_file(index, bytearray(b"new entries"), Durability(FsyncPolicy.ALWAYS))
    assert index.read_bytes() == b"new entries"
    assert [path.name for path in tmp_path.iterdir()] == [index.name]
