"""``first_record_offset``: the offset of a stored batch's first record from as few of its bytes
as tell it (TANK's first available seq of a partition that begins with a hole)."""

from __future__ import annotations

import gzip

import pytest

from rill.protocol.kafka import record_batch
from rill.protocol.tank.record_batches import (
    FIRST_RECORD_PEEK,
    batch_from_bundle,
    encode_records_python,
    first_record_offset,
)

TS = 1_700_000_000_000


def at(batch: bytes, base_offset: int) -> bytes:
    """``batch`` as the log stores it, at ``base_offset``."""
    return base_offset.to_bytes(8, "big", signed=True) + batch[8:]


def test_a_batch_without_holes_is_answered_from_its_header():
    batch = at(batch_from_bundle([None, None], [b"a", b"b"], [TS, TS]), 40)
    assert first_record_offset(batch[:record_batch.HEADER_SIZE]) == 40


def test_a_batch_that_begins_with_a_hole_is_answered_from_its_first_record():
    batch = at(batch_from_bundle(None, [b"x" * 500] * 3, [TS] * 3, [99, 100, 104]), 0)
    assert first_record_offset(batch[:FIRST_RECORD_PEEK]) == 99
    assert first_record_offset(batch) == 99
    assert first_record_offset(batch[:record_batch.HEADER_SIZE - 1]) is None


def test_a_compressed_batch_with_holes_needs_its_whole_records():
    records = encode_records_python(None, [b"p", b"q"], [TS, TS], TS, [7, 9])
    batch = at(record_batch.build(gzip.compress(records), 2, 9, TS, TS,
                                  attributes=record_batch.GZIP), 10)
    assert first_record_offset(batch[:FIRST_RECORD_PEEK]) is None
    assert first_record_offset(batch) == 17


def test_a_batch_that_does_not_parse_is_an_error():
    batch = bytearray(batch_from_bundle(None, [b"a", b"b"], [TS, TS], [3, 5]))
    batch[record_batch.HEADER_SIZE:] = b"\xff" * (len(batch) - record_batch.HEADER_SIZE)
    with pytest.raises(ValueError):
        first_record_offset(bytes(batch))
