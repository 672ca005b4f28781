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
