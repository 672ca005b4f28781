"""Segment: one write per batch, reads of one byte range, index lookups, seal, delete."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import region

from rill.errors import CannotReadMessage
from rill.protocol.messages import iter_polled_messages
from rill.server.storage.durability import Durability
from rill.server.storage.records import stamp_batch
from rill.server.storage.segment import Segment


def append(segment: Segment, timestamp: int, *payloads: bytes) -> None:
    batch = stamp_batch(
        region(*payloads), segment.next_offset, timestamp, segment.size_bytes, segment.start_offset
    )
    segment.append(batch.records, batch.index_entries, timestamp, timestamp)


def offsets_of(data: bytes, count: int) -> list[int]:
    return [message.offset for message in iter_polled_messages(data, count)]


def test_new_segment_files_are_named_by_start_offset(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 42, durability)
    assert segment.log_path.name == "00000000000000000042.log"
    assert segment.index_path.name == "00000000000000000042.index"
    assert segment.log_path.exists() and segment.index_path.exists()
    assert (
        segment.messages_count,
        segment.size_bytes,
        segment.next_offset,
        segment.end_offset,
    ) == (0, 0, 42, 41)
    segment.close()


def test_append_writes_records_and_one_index_entry_per_message(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 10, durability)
    append(segment, 100, b"a", b"bb")
    append(segment, 200, b"ccc")
    assert segment.messages_count == 3
    assert segment.size_bytes == segment.log_path.stat().st_size == 3 * 45 + 6
    assert segment.index_path.stat().st_size == 3 * 16
    assert [segment.index_entry(offset) for offset in (10, 11, 12)] == [
        (0, 0, 100),
        (1, 46, 100),
        (2, 93, 200),
    ]
    assert (segment.first_timestamp, segment.last_timestamp) == (100, 200)
    assert offsets_of(segment.read(11, 13), 2) == [11, 12]
    assert segment.read(10, 13) == segment.log_path.read_bytes()
    segment.close()


def test_the_index_mirror_grows_past_its_initial_capacity(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    for number in range(300):
        append(segment, number, b"m%d" % number)
    assert segment.messages_count == 300
    assert offsets_of(segment.read(250, 300), 50) == list(range(250, 300))
    assert segment.find_timestamp(123) == 123
    segment.close()


def test_find_timestamp_is_the_first_message_at_or_after(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 5, durability)
    append(segment, 100, b"a", b"b")
    append(segment, 300, b"c")
    assert segment.find_timestamp(0) == 5
    assert segment.find_timestamp(100) == 5
    assert segment.find_timestamp(101) == 7
    assert segment.find_timestamp(300) == 7
    assert segment.find_timestamp(301) is None
    segment.close()


def test_sealed_segment_reads_through_a_mapped_index_and_on_demand_descriptor(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    append(segment, 100, b"a", b"b", b"c")
    segment.seal()
    assert segment.sealed and not segment.has_open_reader
    with pytest.raises(RuntimeError):
        append(segment, 200, b"d")
    assert offsets_of(segment.read(1, 3), 2) == [1, 2]
    assert segment.has_open_reader
    assert segment.find_timestamp(100) == 0
    segment.close_reader()
    assert not segment.has_open_reader
    assert offsets_of(segment.read(0, 1), 1) == [0]
    segment.close()


def test_read_refuses_data_that_is_not_the_indexed_record(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    append(segment, 100, b"aaaa", b"bbbb")
    segment.seal()
    data = bytearray(segment.log_path.read_bytes())
    data[49] ^= 0x01  # the offset field of the second record
    segment.log_path.write_bytes(bytes(data))
    assert offsets_of(segment.read(0, 1), 1) == [0]
    with pytest.raises(CannotReadMessage) as raised:
        segment.read(0, 2)
    assert raised.value.code == 4011 and segment.log_path.name in raised.value.reason
    with pytest.raises(CannotReadMessage):  # now known corrupt: nothing more is served
        segment.read(0, 1)
    segment.close()


def test_delete_removes_both_files(tmp_path: Path, durability: Durability) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    append(segment, 1, b"a")
    segment.delete()
    assert list(tmp_path.iterdir()) == []
