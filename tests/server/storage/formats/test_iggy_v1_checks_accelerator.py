"""The C twins of the record checks (``_record_checks.c``: verify, scan, find_record) against the Python
references of ``formats.iggy_v1_checks``, on the same inputs: the same counts, kinds, reasons word for
word, index entries and positions, for valid segments, every single-byte flip of a log and of
its index, and every truncation."""

from __future__ import annotations

import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rill.protocol.iggy.headers import HeaderKind, HeaderValue
from rill.protocol.iggy.messages import Message, encode_messages
from rill.server.storage.formats import iggy_v1_checks
from rill.server.storage.formats import iggy_v1
from rill.server.storage.formats.iggy_v1_checks import (
    KIND_CONTENT,
    KIND_GOOD,
    KIND_STRUCTURE,
    KIND_TIMESTAMP,
    find_record_python,
    scan_records_python,
    verify_records_python,
)
from rill.server.storage.formats.iggy_v1 import stamp_batch_python
from rill.server.storage.index_entry import MAX_POSITION

_stamp = iggy_v1.ACCELERATOR
needs_twin = pytest.mark.skipif(_stamp is None, reason="the C extension is not built or disabled")

TIMESTAMP = 1_700_000_000_000_000
START = 1000  # the segment's first offset


def fixed_uuid7_block(count: int, unix_ms: int) -> bytes:
    return bytes(range(16)) * count


@pytest.fixture(autouse=True)
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iggy_v1, "uuid7_block", fixed_uuid7_block)


def build_segment(batches: list[list[Message]], start: int = START) -> tuple[bytes, bytes]:
    """A segment's log and index, as the server writes them (one stamped batch each)."""
    log, index = bytearray(), bytearray()
    offset = start
    for number, messages in enumerate(batches):
        batch = stamp_batch_python(encode_messages(messages), offset, TIMESTAMP + 1000 * number,
                                   len(log), start)
        log += batch.records
        index += batch.index_entries
        offset += batch.count
    return bytes(log), bytes(index)


def outcome(function, *args):  # type: ignore[no-untyped-def]
    try:
        result = function(*args)
    except Exception as error:  # noqa: BLE001 - compared, not handled
        return ("error", type(error))
    if isinstance(result, iggy_v1_checks.ScanResult):
        return ("scan", result.count, result.end_position, bytes(result.index_entries),
                result.first_timestamp, result.last_timestamp, result.stop_kind,
                result.stop_reason)
    return ("ok", result)


def same_verify(log, index, first=START, relative=0, base=0):  # type: ignore[no-untyped-def]
    expected = outcome(verify_records_python, log, index, first, relative, base)
    assert outcome(_stamp.verify, log, index, first, relative, base) == expected
    return expected[1] if expected[0] == "ok" else expected


def same_scan(data, start=0, offset=START, segment_start=START,  # type: ignore[no-untyped-def]
              previous=0, max_count=2**64 - 1, checksums=True, base=0):
    args = (data, start, offset, segment_start, previous, max_count, checksums, base)
    expected = outcome(scan_records_python, *args)
    assert outcome(iggy_v1_checks._scan_records_accelerated, *args) == expected
    return expected


def same_find(data, start, first, last):  # type: ignore[no-untyped-def]
    expected = outcome(find_record_python, data, start, first, last)
    assert outcome(_stamp.find_record, data, start, first, last) == expected
    return expected


def headers_strategy():  # type: ignore[no-untyped-def]
    return st.one_of(st.none(), st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.builds(HeaderValue, st.sampled_from(list(HeaderKind)),
                  st.binary(min_size=1, max_size=8)),
        max_size=3))


batches_strategy = st.lists(
    st.lists(st.builds(lambda payload, headers, number: Message(payload, id=number + 1,
                                                               headers=headers),
                       st.binary(min_size=1, max_size=40), headers_strategy(),
                       st.integers(0, 1000)),
             min_size=1, max_size=4),
    min_size=1, max_size=4)

FLIPS = (0x01, 0x80, 0xFF)


@needs_twin
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches_strategy)
def test_valid_segments_verify_and_scan_alike(fixed_ids: None, batches: list) -> None:
    log, index = build_segment(batches)
    count = len(index) // 16
    assert same_verify(log, index) == (count, KIND_GOOD, None)
    scanned = same_scan(log)
    assert scanned[1:4] == (count, len(log), index) and scanned[6:] == (KIND_GOOD, None)
    for number in range(count):  # every sub-range the index can give
        position = struct.unpack_from("<I", index, number * 16 + 4)[0]
        assert same_verify(log[position:], index[number * 16:], START + number, number,
                           position)[0] == count - number
        assert same_scan(log, position, START + number, max_count=1)[1] == 1
    shifted = same_scan(log, base=1_000)  # a follower's records placed 1,000 bytes in
    assert shifted[1:3] == (count, len(log)) and shifted[6:] == (KIND_GOOD, None)
    assert [struct.unpack_from("<III", shifted[3], at)[:2] for at in range(0, len(index), 16)] == [
        (relative, position + 1_000)
        for relative, position in (struct.unpack_from("<II", index, at)
                                   for at in range(0, len(index), 16))]
    overflowing = same_scan(log, base=MAX_POSITION + 1)  # past what an entry's u32 can hold
    assert overflowing[1] == 0 and overflowing[6] == KIND_STRUCTURE


@needs_twin
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches_strategy.filter(lambda b: sum(len(m) for m in b) <= 5))
def test_every_byte_flip_of_the_log_is_judged_alike(fixed_ids: None, batches: list) -> None:
    log, index = build_segment(batches)
    count = len(index) // 16
    kinds = set()
    for position in range(len(log)):
        for flip in FLIPS:
            damaged = bytearray(log)
            damaged[position] ^= flip
            verified = same_verify(bytes(damaged), index)
            kinds.add(verified[1])
            assert verified[0] < count or verified[1] == KIND_GOOD  # only ids and states pass
            same_scan(bytes(damaged))
            same_find(bytes(damaged), 0, START, START + count - 1)
    assert {KIND_CONTENT, KIND_STRUCTURE} <= kinds


@needs_twin
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches_strategy.filter(lambda b: sum(len(m) for m in b) <= 6))
def test_every_byte_flip_of_the_index_is_judged_alike(fixed_ids: None, batches: list) -> None:
    log, index = build_segment(batches)
    for position in range(len(index)):
        for flip in FLIPS:
            damaged = bytearray(index)
            damaged[position] ^= flip
            count, kind, _ = same_verify(log, bytes(damaged))
            # a moved position also ends the record before it in the wrong place
            assert kind == KIND_STRUCTURE and position // 16 - 1 <= count <= position // 16


@needs_twin
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches_strategy.filter(lambda b: sum(len(m) for m in b) <= 6))
def test_every_truncation_is_judged_alike(fixed_ids: None, batches: list) -> None:
    log, index = build_segment(batches)
    for length in range(len(log)):
        assert same_verify(log[:length], index)[1] == KIND_STRUCTURE
        scanned = same_scan(log[:length])
        assert scanned[2] <= length
        same_find(log[:length], 0, START, START + 10)
    for length in range(0, len(index), 5):
        same_verify(log, index[:length])


@needs_twin
def test_timestamps_out_of_order_are_judged_alike() -> None:
    log, index = build_segment([[Message(b"a", id=1)], [Message(b"b", id=2)],
                                [Message(b"c", id=3)]])
    ahead = bytearray(log)
    struct.pack_into("<Q", ahead, 46 + 9, TIMESTAMP + 10**9)  # the second record, far ahead
    found = same_scan(bytes(ahead))
    assert found[1] == 1 and found[6] == KIND_TIMESTAMP and "after the next" in found[7]
    behind = bytearray(log)
    struct.pack_into("<Q", behind, 46 + 9, TIMESTAMP - 5)
    found = same_scan(bytes(behind))
    assert found[1] == 1 and found[6] == KIND_TIMESTAMP and "before" in found[7]
    assert same_scan(log, previous=TIMESTAMP + 1)[6] == KIND_TIMESTAMP
    assert same_verify(bytes(ahead), index)[:2] == (1, KIND_STRUCTURE)  # the index disagrees


@needs_twin
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches_strategy, st.data())
def test_find_record_finds_the_same_record(fixed_ids: None, batches: list,
                                           data: st.DataObject) -> None:
    log, index = build_segment(batches)
    count = len(index) // 16
    garbage = data.draw(st.binary(max_size=60))
    blob = garbage + log
    first = data.draw(st.integers(START, START + count))
    last = data.draw(st.integers(first, START + count + 100))
    found = same_find(blob, data.draw(st.integers(0, len(blob))), first, last)
    if found[1] is not None:
        position, offset = found[1]
        assert bytes(blob[position:position + 8]) == struct.pack("<Q", offset)


@needs_twin
def test_find_record_over_a_wide_range_of_offsets() -> None:
    """More than 64 offsets: the reference tries every byte instead of searching each one."""
    log, index = build_segment([[Message(b"x" * 10, id=n + 1) for n in range(5)]])
    assert same_find(b"\x07" * 33 + log, 0, START + 2, START + 500)[1] == (33 + 2 * 55, START + 2)


@needs_twin
def test_checks_of_large_data_release_the_gil_and_agree_across_threads() -> None:
    log, index = build_segment([[Message(bytes([n % 251]) * 3000, id=n + 1) for n in range(40)]
                                for _ in range(3)])
    expected = verify_records_python(log, index, START, 0, 0)
    results: list[object] = []

    def work() -> None:
        for _ in range(20):
            results.append(_stamp.verify(bytearray(log), index, START, 0, 0))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 80


@needs_twin
def test_the_twins_are_the_ones_in_use() -> None:
    assert iggy_v1_checks.verify_records is iggy_v1_checks._verify_records_accelerated
    assert iggy_v1_checks.scan_records is iggy_v1_checks._scan_records_accelerated
    assert iggy_v1_checks.find_record is iggy_v1_checks._find_record_accelerated
