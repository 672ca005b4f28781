"""Segment: one write per batch, reads of one byte range, index lookups, seal, delete; every
record verified before it is served, bad ones refused, a wrong index rebuilt from the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from storage_helpers import region

from rill.errors import CannotReadMessage
from rill.protocol.iggy.messages import iter_polled_messages
from rill.server.storage.descriptors import shared
from rill.server.storage.durability import Durability
from rill.server.storage.paths import DataPaths
from rill.server.storage.formats.iggy_v1 import stamp_batch
from rill.server.storage.segment import Segment


def append(segment: Segment, timestamp: int, *payloads: bytes) -> None:
    batch = stamp_batch(
        region(*payloads), segment.next_offset, timestamp, segment.size_bytes, segment.start_offset
    )
    segment.append(batch.records, batch.index_entries, timestamp, timestamp)


def offsets_of(found: tuple[int, bytes]) -> list[int]:
    count, data = found
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
    assert offsets_of(segment.read(11, 13)) == [11, 12]
    assert segment.read(10, 13) == (3, segment.log_path.read_bytes())
    segment.close()


def test_the_index_mirror_grows_past_its_initial_capacity(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    for number in range(300):
        append(segment, number, b"m%d" % number)
    assert segment.messages_count == 300
    assert offsets_of(segment.read(250, 300)) == list(range(250, 300))
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
    assert offsets_of(segment.read(1, 3)) == [1, 2]
    assert segment.has_open_reader
    assert segment.find_timestamp(100) == 0
    shared().close_all()  # the cache may close it at any time: the next read reopens it
    assert not segment.has_open_reader
    assert offsets_of(segment.read(0, 1)) == [0]
    segment.close()


def written_and_reopened(directory: Path, durability: Durability, count: int = 4) -> Segment:
    """A sealed segment of ``count`` records written by an earlier run: nothing verified."""
    segment = Segment.create(directory, 0, durability)
    for number in range(count):
        append(segment, 100 + number, b"payload-%d" % number)
    segment.close()
    return reopen(directory, durability, count)


def reopen(directory: Path, durability: Durability, count: int = 4) -> Segment:
    return Segment.open_sealed(
        directory, 0, durability, messages_count=count,
        size_bytes=DataPaths.segment_log(directory, 0).stat().st_size,
        first_timestamp=100, last_timestamp=100 + count - 1,
    )


RECORD = 45 + len(b"payload-0")


def flip(path: Path, position: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def test_records_written_here_are_verified_and_others_on_first_read(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    append(segment, 100, b"a", b"b")
    assert segment.verification.intervals == [(0, 2)]  # stamped here
    segment.close()
    segment = written_and_reopened(tmp_path, durability)
    assert segment.verification.intervals == []
    assert offsets_of(segment.read(1, 2)) == [1]
    assert segment.verification.intervals == [(1, 2)]
    assert offsets_of(segment.read(0, 4)) == [0, 1, 2, 3]
    assert segment.verification.intervals == [(0, 4)]
    segment.close()


def test_a_bad_record_is_refused_logged_once_and_the_others_served(
    tmp_path: Path, durability: Durability, caplog: pytest.LogCaptureFixture
) -> None:
    segment = written_and_reopened(tmp_path, durability)
    segment.close()
    flip(segment.log_path, 2 * RECORD + 50)  # a payload byte of offset 2
    segment = reopen(tmp_path, durability)
    with caplog.at_level(logging.ERROR, logger="rill.server.storage"):
        assert offsets_of(segment.read(0, 4)) == [0, 1]  # stops before the bad record
        for _ in range(3):
            with pytest.raises(CannotReadMessage) as raised:
                segment.read(2, 4)
    assert raised.value.code == 4011 and "offset 2" in raised.value.reason
    assert "checksum" in raised.value.reason and segment.log_path.name in raised.value.reason
    assert offsets_of(segment.read(3, 4)) == [3]  # a consumer can poll past it
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lines) == 1 and "offset 2" in lines[0] and segment.log_path.name in lines[0]
    segment.close()


@pytest.mark.parametrize("field", [0, 41], ids=["offset field", "payload length"])
def test_a_broken_record_layout_refuses_that_record_only(
    tmp_path: Path, durability: Durability, field: int
) -> None:
    segment = written_and_reopened(tmp_path, durability)
    segment.close()
    index_before = segment.index_path.read_bytes()
    flip(segment.log_path, RECORD + field, 0x10)
    segment = reopen(tmp_path, durability)
    assert offsets_of(segment.read(0, 4)) == [0]
    with pytest.raises(CannotReadMessage) as raised:
        segment.read(1, 2)
    assert "offset 1" in raised.value.reason
    assert offsets_of(segment.read(2, 4)) == [2, 3]
    assert segment.index_path.read_bytes() == index_before  # the index was right
    segment.close()


@pytest.mark.parametrize("at", [4, 8, 2 * 16 + 1], ids=["position", "timestamp", "relative"])
def test_a_wrong_index_entry_is_rebuilt_from_the_log(
    tmp_path: Path, durability: Durability, at: int, caplog: pytest.LogCaptureFixture
) -> None:
    segment = written_and_reopened(tmp_path, durability)
    segment.close()
    index_before = segment.index_path.read_bytes()
    flip(segment.index_path, 16 + at if at < 16 else at, 0x04)
    segment = reopen(tmp_path, durability)
    with caplog.at_level(logging.WARNING, logger="rill.server.storage"):
        assert offsets_of(segment.read(0, 4)) == [0, 1, 2, 3]
    assert segment.index_path.read_bytes() == index_before  # written back
    assert not segment.verification.bad and segment.index_generation == 1
    assert any("rebuilt" in r.getMessage() for r in caplog.records)
    assert not list(tmp_path.glob("*.rebuild"))
    segment.close()


def test_a_wrong_timestamp_in_the_index_does_not_mislead_a_search(
    tmp_path: Path, durability: Durability
) -> None:
    segment = written_and_reopened(tmp_path, durability)
    segment.close()
    data = bytearray(segment.index_path.read_bytes())
    data[2 * 16 + 8 : 2 * 16 + 16] = (90).to_bytes(8, "little")  # offset 2 "at" 90
    segment.index_path.write_bytes(bytes(data))
    segment = reopen(tmp_path, durability)
    assert segment.find_timestamp(101) == 1
    assert segment.find_timestamp(102) == 2
    segment.close()


def test_an_index_that_shrank_after_start_is_rebuilt(
    tmp_path: Path, durability: Durability
) -> None:
    segment = written_and_reopened(tmp_path, durability)
    segment.close()
    original = segment.index_path.read_bytes()
    segment.index_path.write_bytes(original[:20])
    segment = reopen(tmp_path, durability)
    assert offsets_of(segment.read(0, 4)) == [0, 1, 2, 3]
    assert segment.index_path.read_bytes() == original
    segment.close()


def test_the_active_segment_index_is_rebuilt_in_place_and_appends_go_on(
    tmp_path: Path, durability: Durability
) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    append(segment, 100, b"a", b"b", b"c")
    segment.close()
    index = bytearray(segment.index_path.read_bytes())
    original = bytes(index)
    index[16 + 4] ^= 0x02
    segment = Segment.open_active(tmp_path, 0, durability, bytes(index),
                                  segment.log_path.stat().st_size)
    assert offsets_of(segment.read(0, 3)) == [0, 1, 2]
    append(segment, 200, b"d")
    assert offsets_of(segment.read(0, 4)) == [0, 1, 2, 3]
    segment.close()
    assert segment.index_path.read_bytes()[: len(original)] == original


def test_delete_removes_both_files(tmp_path: Path, durability: Durability) -> None:
    segment = Segment.create(tmp_path, 0, durability)
    append(segment, 1, b"a")
    segment.delete()
    assert list(tmp_path.iterdir()) == []
