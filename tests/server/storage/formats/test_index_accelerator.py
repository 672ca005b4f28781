"""The C twin of the index search (``_index.c``'s ``search_entries``) against its Python
reference (``index_entry.search_entries_python``), and the segment lookups built on it.

Every case runs both twins on the same bytes -- indexes as a log writes them, and bytes at
random (an index that is damaged, out of order, short) -- and requires the same answer or the
same exception type, for each field, each direction, every bound and values below, inside and
past every field's range. The dispatcher is checked to pick the twin when it is built, so that
the twin is what the server runs.
"""

from __future__ import annotations

import bisect
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rill.server.storage import index_entry
from rill.server.storage.index_entry import (
    POSITION_FIELD,
    RELATIVE_FIELD,
    TIMESTAMP_FIELD,
    batch_span_python,
    search_entries_python,
)

try:
    from rill.server.storage.formats import _stamp
except ImportError:  # pragma: no cover - depends on the build
    _stamp = None

pytestmark = pytest.mark.skipif(
    _stamp is None or index_entry.search_entries is search_entries_python,
    reason="the C extension is not built, or RILL_PURE_PYTHON=1 switched it off",
)

FIELDS = (RELATIVE_FIELD, POSITION_FIELD, TIMESTAMP_FIELD)
VALUES = st.one_of(st.integers(-2**70, 2**70), st.integers(-3, 300),
                   st.integers(2**32 - 3, 2**32 + 3), st.integers(2**64 - 3, 2**64 + 3))


def outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as error:  # the type is what must agree
        return ("error", type(error))


def written_index(keys: list[int], entry_size: int) -> bytearray:
    """An index as a log writes it: relative offsets, positions and timestamps increasing."""
    index = bytearray(len(keys) * entry_size)
    for number, key in enumerate(keys):
        struct.pack_into("<IIQ", index, number * entry_size, key, key * 3, key * 1000)
    return index


def test_the_server_runs_the_twin() -> None:
    assert index_entry.search_entries is _stamp.search_entries
    assert index_entry.batch_span is _stamp.batch_span


@settings(max_examples=400, deadline=None)
@given(keys=st.lists(st.integers(0, 200), max_size=40), entry_size=st.sampled_from((16, 32)),
       field=st.sampled_from(FIELDS), value=VALUES, right=st.booleans(), data=st.data())
def test_agrees_on_written_indexes(keys, entry_size, field, value, right, data) -> None:
    index = written_index(sorted(keys), entry_size)
    lo = data.draw(st.integers(0, len(keys)))
    hi = data.draw(st.integers(lo, len(keys)))
    for buffer in (index, bytes(index)):
        assert (outcome(_stamp.search_entries, buffer, lo, hi, entry_size, field, value, right)
                == outcome(search_entries_python, buffer, lo, hi, entry_size, field, value,
                           right))


@settings(max_examples=400, deadline=None)
@given(raw=st.binary(max_size=400), entry_size=st.sampled_from((16, 24, 32)),
       field=st.sampled_from(FIELDS + (1, 12, -4)), value=VALUES, right=st.booleans(),
       lo=st.integers(-2, 30), hi=st.integers(-2, 30))
def test_agrees_on_any_bytes_and_bounds(raw, entry_size, field, value, right, lo, hi) -> None:
    assert (outcome(_stamp.search_entries, raw, lo, hi, entry_size, field, value, right)
            == outcome(search_entries_python, raw, lo, hi, entry_size, field, value, right))


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40),
       value=st.integers(-1, 2**32), right=st.booleans())
def test_is_bisect_over_the_field(keys, value, right) -> None:
    """What a reader relies on: the answer is bisect's over the entries' offsets."""
    keys.sort()
    index = bytearray(len(keys) * 16)
    for number, key in enumerate(keys):
        struct.pack_into("<IIQ", index, number * 16, key, 0, 0)
    expected = (bisect.bisect_right if right else bisect.bisect_left)(keys, value)
    assert _stamp.search_entries(index, 0, len(keys), 16, RELATIVE_FIELD, value, right) == expected


def test_refuses_entries_past_the_end() -> None:
    index = written_index([0, 5, 9], 16)
    for twin in (_stamp.search_entries, search_entries_python):
        with pytest.raises(ValueError):
            twin(index, 0, 4, 16, RELATIVE_FIELD, 5, True)
        with pytest.raises(ValueError):
            twin(index[:-1], 0, 3, 16, TIMESTAMP_FIELD, 5, True)
        assert twin(index[:-8], 0, 3, 16, POSITION_FIELD, 15, True) == 2


def batch_index(sizes: list[tuple[int, int]], entry_size: int) -> tuple[bytearray, int, int]:
    """The index of batches of (records, bytes) back to back: (index, next relative, size)."""
    index = bytearray(len(sizes) * entry_size)
    relative = position = 0
    for number, (records, size) in enumerate(sizes):
        struct.pack_into("<IIQ", index, number * entry_size, relative, position, number)
        relative += records
        position += size
    return index, relative, position


SPAN_VALUES = st.integers(-3, 2**40)


@settings(max_examples=400, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 900)), max_size=30),
       entry_size=st.sampled_from((16, 24, 32)), data=st.data())
def test_batch_span_agrees_on_written_indexes(sizes, entry_size, data) -> None:
    index, next_relative, size = batch_index(sizes, entry_size)
    first = data.draw(st.integers(-1, next_relative + 1))
    end = data.draw(st.integers(first, next_relative + 2))
    max_bytes = data.draw(st.one_of(st.integers(-1, 3000), st.just(2**40)))
    extra = data.draw(st.sampled_from((0, 0, -5, 7)))
    for buffer in (index, bytes(index)):
        assert (outcome(_stamp.batch_span, buffer, len(sizes), entry_size, first, end,
                        max_bytes, size + extra, next_relative)
                == outcome(batch_span_python, buffer, len(sizes), entry_size, first, end,
                           max_bytes, size + extra, next_relative))


@settings(max_examples=400, deadline=None)
@given(raw=st.binary(max_size=400), entry_size=st.sampled_from((8, 16, 24, 32)),
       count=st.integers(-1, 30), first=SPAN_VALUES, end=SPAN_VALUES, max_bytes=SPAN_VALUES,
       size=SPAN_VALUES, next_relative=SPAN_VALUES)
def test_batch_span_agrees_on_any_bytes_and_bounds(raw, entry_size, count, first, end,
                                                   max_bytes, size, next_relative) -> None:
    assert (outcome(_stamp.batch_span, raw, count, entry_size, first, end, max_bytes, size,
                    next_relative)
            == outcome(batch_span_python, raw, count, entry_size, first, end, max_bytes, size,
                       next_relative))


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 900)), min_size=1,
                      max_size=30), data=st.data())
def test_batch_span_is_the_batches_that_fit(sizes, data) -> None:
    """What a reader relies on: from the batch holding ``first`` to the one holding
    ``end - 1``, as many as fit in the budget, at least one."""
    index, next_relative, size = batch_index(sizes, 16)
    first = data.draw(st.integers(0, next_relative - 1))
    end = data.draw(st.integers(first + 1, next_relative))
    max_bytes = data.draw(st.integers(1, 5000))
    starts = [sum(records for records, _ in sizes[:number]) for number in range(len(sizes))]
    positions = [sum(length for _, length in sizes[:number]) for number in range(len(sizes))]
    first_batch = bisect.bisect_right(starts, first) - 1
    last_batch = bisect.bisect_right(starts, end - 1) - 1
    taken = first_batch + 1
    while (taken <= last_batch
           and positions[taken] + sizes[taken][1] - positions[first_batch] <= max_bytes):
        taken += 1
    end_batch = taken  # batches first_batch .. end_batch - 1
    expected = (starts[first_batch], starts[end_batch] if end_batch < len(sizes)
                else next_relative, positions[first_batch],
                positions[end_batch] if end_batch < len(sizes) else size)
    assert _stamp.batch_span(index, len(sizes), 16, first, end, max_bytes, size,
                             next_relative) == expected
