"""The C twins of the staged-append loops (``_staged.c``) against their Python references.

``restamp`` / ``restamp_records_python``, ``uniform_size`` / ``uniform_record_size_python``,
``check_staged_layout`` / ``check_staged_layout_python`` (``iggy_v1``) and ``index_entries`` /
``build_index_entries_python`` (``index_entry``): every case runs both on copies of the same
input -- valid records, and records mutated at random -- and requires the same result, the same
bytes left in the buffer, or the same exception type. The dispatchers are checked to pick the
twin when it is built, so that the twin is what the server runs.
"""

from __future__ import annotations

import struct
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rill.protocol.iggy.headers import HeaderValue
from rill.protocol.iggy.messages import Message, iter_polled_messages
from rill.protocol.iggy.stored import encode_stored_records
from rill.server.storage import index_entry
from rill.server.storage.formats import iggy_v1
from rill.server.storage.formats.iggy_v1 import (
    RECORD_OVERHEAD,
    check_staged_layout_python,
    restamp_records_python,
    uniform_record_size_python,
)
from rill.server.storage.index_entry import build_index_entries_python

try:
    from rill.server.storage.formats import _stamp
except ImportError:  # pragma: no cover - depends on the build
    _stamp = None

needs_twin = pytest.mark.skipif(
    _stamp is None or not iggy_v1.STAGED_ACCELERATED,
    reason="the C extension is not built, or RILL_PURE_PYTHON=1 switched it off",
)

pytestmark = needs_twin


def staged(payloads: list[bytes | Message]) -> tuple[bytes, bytearray]:
    """(positions as sent: little-endian u32 bytes, records) of a writer's stage call."""
    positions, records = encode_stored_records(payloads, unix_ms=5)
    return bytes(positions), bytearray(records)


def outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as error:  # the type is what must agree
        return ("error", type(error))


def mutate(data: bytes | bytearray, edits: list[tuple[int, int]]) -> bytearray:
    mutated = bytearray(data)
    for at, value in edits:
        if mutated:
            mutated[at % len(mutated)] = value
    return mutated


SAMPLES = [
    [b"a" * 20] * 5,  # one size, no headers: the fast layout
    [b"x" * 100] * 300,
    [b"a", b"bb", b"ccc"],  # sizes differ
    [Message(b"h", headers={"k": HeaderValue.string("v")})] * 3,  # one size, with headers
    [Message(b"h", headers={"k": HeaderValue.string("v")}), Message(b"h" * 12)],
    [b"z"],
]


# ------------------------------------------------------------------ the dispatchers


def test_the_server_runs_the_twins() -> None:
    assert iggy_v1.restamp_records is not restamp_records_python
    assert iggy_v1.check_staged_layout is _stamp.check_staged_layout
    assert iggy_v1._uniform_record_size is _stamp.uniform_size
    assert index_entry._index_entries is _stamp.index_entries


# ------------------------------------------------------------------ uniform_size


@pytest.mark.parametrize("payloads", SAMPLES)
def test_uniform_size_agrees_on_valid_records(payloads) -> None:
    positions, records = staged(payloads)
    starts = array("I", positions)
    expected = uniform_record_size_python(starts, len(records))
    assert _stamp.uniform_size(starts, len(records)) == expected
    assert bool(expected) == (len({len(records) // len(starts)}) == 1 and starts.tolist() == [
        i * (len(records) // len(starts)) for i in range(len(starts))]
        and len(records) % len(starts) == 0)


@given(st.lists(st.integers(0, 400), max_size=12), st.integers(0, 5000))
def test_uniform_size_agrees_on_any_positions(positions, total) -> None:
    starts = array("I", positions)
    assert _stamp.uniform_size(starts, total) == uniform_record_size_python(starts, total)


@given(st.integers(1, 40), st.integers(1, 200), st.integers(0, 39), st.integers(0, 3))
def test_uniform_size_agrees_near_uniform(count, size, at, change) -> None:
    starts = array("I", range(0, count * size, size))
    starts[at % count] += change
    for total in (count * size, count * size + change, count * size - 1):
        assert _stamp.uniform_size(starts, total) == uniform_record_size_python(starts, total)


def test_uniform_positions_gives_the_range() -> None:
    assert iggy_v1.uniform_positions(array("I", [0, 50, 100]), 150, base=7) == range(7, 157, 50)
    assert iggy_v1.uniform_positions(array("I", [0, 50, 90]), 150) is None
    assert iggy_v1.uniform_positions(array("I"), 0) is None
    assert iggy_v1.uniform_positions(array("I", [0, 0]), 0) is None  # records of no size


# ------------------------------------------------------------------ restamp


@pytest.mark.parametrize("payloads", SAMPLES)
def test_restamp_agrees_on_valid_records(payloads) -> None:
    positions, records = staged(payloads)
    starts = array("I", positions)
    by_twin, by_reference = bytearray(records), bytearray(records)
    _stamp.restamp(by_twin, starts, 1_000_000_007, 1_700_000_000_000_001)
    restamp_records_python(by_reference, starts, 1_000_000_007, 1_700_000_000_000_001)
    assert by_twin == by_reference
    read = list(iter_polled_messages(bytes(by_twin), len(starts)))
    assert [(m.offset, m.timestamp) for m in read] == [
        (1_000_000_007 + i, 1_700_000_000_000_001) for i in range(len(starts))]


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.sampled_from(SAMPLES), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                                          max_size=6),
       st.lists(st.integers(0, 3000), max_size=8), st.booleans(),
       st.integers(0, 2**63), st.integers(0, 2**63))
def test_restamp_agrees_on_mutated_input(payloads, edits, other_positions, keep_positions,
                                         first, timestamp) -> None:
    positions, records = staged(payloads)
    records = mutate(records, edits)
    starts = array("I", positions) if keep_positions else array("I", other_positions)
    by_twin, by_reference = bytearray(records), bytearray(records)
    assert outcome(_stamp.restamp, by_twin, starts, first, timestamp) == outcome(
        restamp_records_python, by_reference, starts, first, timestamp)
    assert by_twin == by_reference  # a refused call wrote nothing, either way


def test_restamp_refuses_a_position_past_the_records() -> None:
    positions, records = staged([b"a" * 20] * 2)
    starts = array("I", [0, len(records) - 16])
    for restamp in (_stamp.restamp, restamp_records_python):
        copy = bytearray(records)
        with pytest.raises(ValueError):
            restamp(copy, starts, 0, 0)
        assert copy == records


# ------------------------------------------------------------------ check_staged_layout


@pytest.mark.parametrize("payloads", SAMPLES)
def test_check_staged_layout_agrees_on_valid_records(payloads) -> None:
    positions, records = staged(payloads)
    by_twin, by_reference = bytearray(records), bytearray(records)
    found = _stamp.check_staged_layout(by_twin, positions)
    assert found == check_staged_layout_python(by_reference, positions)
    assert by_twin == by_reference
    headerless_one_size = all(isinstance(p, bytes) for p in payloads) and len(
        {len(p) for p in payloads}) == 1
    assert bool(found) == headerless_one_size
    if found:
        assert found == RECORD_OVERHEAD + len(payloads[0])
        offsets = [struct.unpack_from("<Q", by_twin, i * found)[0] for i in range(len(payloads))]
        assert offsets == list(range(len(payloads)))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.sampled_from(SAMPLES), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)),
                                          max_size=6),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
       st.integers(-3, 3))
def test_check_staged_layout_agrees_on_mutated_input(payloads, edits, position_edits,
                                                     cut) -> None:
    positions, records = staged(payloads)
    records = mutate(records, edits)
    positions = bytes(mutate(positions, position_edits))
    if cut > 0:
        positions = positions[:-cut]
    elif cut < 0:
        records = records[:cut]
    by_twin, by_reference = bytearray(records), bytearray(records)
    assert _stamp.check_staged_layout(by_twin, positions) == check_staged_layout_python(
        by_reference, positions)
    assert by_twin == by_reference


def test_check_staged_layout_refuses_what_the_fast_check_cannot_take() -> None:
    positions, records = staged([b"a" * 20] * 4)
    for case in (bytearray(), records[:-1]):
        for check in (_stamp.check_staged_layout, check_staged_layout_python):
            assert check(bytearray(case), positions) == 0
    headers_length_set = bytearray(records)
    headers_length_set[RECORD_OVERHEAD + 20 + 37] = 1  # the second record's headers_length
    for check in (_stamp.check_staged_layout, check_staged_layout_python):
        copy = bytearray(headers_length_set)
        assert check(copy, positions) == 0
        assert copy == headers_length_set  # nothing written


# ------------------------------------------------------------------ index_entries


@given(st.integers(0, 2**32 + 5), st.integers(0, 2**32 + 5), st.integers(1, 2**20),
       st.integers(0, 50), st.integers(0, 2**64 - 1))
def test_index_entries_agree(relative, position, step, count, timestamp) -> None:
    relative_offsets = range(relative, relative + count)
    positions = range(position, position + count * step, step)
    twin = outcome(_stamp.index_entries, relative, position, step, count, timestamp)
    reference = outcome(build_index_entries_python, relative_offsets, positions, timestamp)
    assert twin == reference
    assert outcome(index_entry.build_index_entries, relative_offsets, positions,
                   timestamp) == reference


def test_index_entries_layout() -> None:
    entries = _stamp.index_entries(3, 100, 145, 3, 77)
    assert [index_entry.INDEX_ENTRY.unpack_from(entries, 16 * i) for i in range(3)] == [
        (3, 100, 77), (4, 245, 77), (5, 390, 77)]
    assert type(entries) is bytearray
    assert index_entry.build_index_entries(range(0, 2), [5, 9], 1) == (
        build_index_entries_python(range(0, 2), [5, 9], 1))  # a list: the reference
