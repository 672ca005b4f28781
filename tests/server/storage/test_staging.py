"""Staged-append storage: staged files (append, load, torn tails) and
appending pre-stamped records (``PartitionLog.append_stamped``)."""

from __future__ import annotations

import os
from array import array
from pathlib import Path

import pytest
from storage_helpers import read_messages, region, snapshot

from rill.protocol.iggy.messages import Message
from rill.server.storage.paths import DataPaths
from rill.errors import InvalidMessagesCount, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import HeaderValue
from rill.protocol.iggy.stored import encode_stored_records
from rill.server.storage.formats.iggy_v1 import MAX_PAYLOAD_BYTES, stamp_batch
from rill.server.storage.formats.iggy_v1 import (
    check_stored_records,
    restamp_records,
    uniform_positions,
)
from rill.server.storage.staging import StagingArea, producer_key


def index_positions(index_entries: bytes | bytearray) -> bytes:
    """The position column (u32) of index entries: where each stamped record starts."""
    with memoryview(index_entries) as raw, raw.cast("I") as words, words[1::4] as positions:
        return positions.tobytes()


@pytest.fixture
def area(tmp_path: Path, durability) -> StagingArea:
    return StagingArea(DataPaths(tmp_path), durability)


def stamped(*payloads: bytes | Message) -> tuple[bytes, bytes]:
    """(positions, records) of a region stamped for offset 0 at position 0, as STAGE does
    (with ids, so that the same payloads give the same bytes)."""
    with_ids = [p if isinstance(p, Message) else Message(p, id=i + 1) for i, p in enumerate(payloads)]
    batch = stamp_batch(region(*with_ids), 0, 1_000, 0, 0)
    return index_positions(batch.index_entries), batch.records


def test_append_then_load_gives_the_same_entries(area: StagingArea) -> None:
    staged = area.create("query-1", 7, 2, 99)
    staged.append(1, 2, 3, *stamped(b"a", b"bb"))
    staged.append(1, 2, 1, *stamped(b"c"))
    assert staged.messages_count == 3
    records, positions = staged.read_entry(staged.entries[1])
    assert (bytes(records), positions.tobytes()) == (stamped(b"c")[1], stamped(b"c")[0])
    staged.close()
    [loaded] = area.load_all()
    assert (loaded.producer_id, loaded.batch_id, loaded.task_id, loaded.attempt_id) == (
        "query-1", 7, 2, 99)
    assert loaded.entries == staged.entries and loaded.size == staged.size
    records, positions = loaded.read_entry(loaded.entries[0])
    assert list(positions) == [0, 46] and len(records) == 46 + 47
    assert loaded.path.name.startswith(producer_key("query-1"))
    loaded.delete()
    assert area.load_all() == []


def test_a_torn_tail_is_cut_at_the_last_whole_entry(area: StagingArea) -> None:
    staged = area.create("p", 1, 0, 0)
    staged.append(1, 1, 1, *stamped(b"kept"))
    staged.append(1, 1, 1, *stamped(b"torn away"))
    staged.close()
    whole = staged.entries[1].position - 24  # where the second entry's head starts
    os.truncate(staged.path, staged.size - 3)
    [loaded] = area.load_all()
    assert len(loaded.entries) == 1 and loaded.size == whole
    assert staged.path.stat().st_size == whole
    loaded.append(1, 1, 1, *stamped(b"again"))  # appends continue after the cut
    loaded.close()
    [again] = area.load_all()
    assert [bytes(again.read_entry(e)[0]) for e in again.entries] == [
        stamped(b"kept")[1], stamped(b"again")[1]]


def test_a_corrupt_entry_is_cut_too(area: StagingArea) -> None:
    staged = area.create("p", 1, 0, 0)
    staged.append(1, 1, 1, *stamped(b"one"))
    staged.append(1, 1, 1, *stamped(b"two"))
    staged.close()
    data = bytearray(staged.path.read_bytes())
    data[-1] ^= 0xFF  # the checksum of the second entry no longer matches
    staged.path.write_bytes(bytes(data))
    [loaded] = area.load_all()
    assert len(loaded.entries) == 1


def test_a_file_with_a_bad_header_is_removed(area: StagingArea) -> None:
    staged = area.create("p", 1, 0, 0)
    staged.append(1, 1, 1, *stamped(b"x"))
    staged.close()
    staged.path.write_bytes(b"garbage")
    assert area.load_all() == [] and not staged.path.exists()


@pytest.mark.parametrize("payloads", [
    [b"a" * 10, b"b" * 10, b"c" * 10],  # one size: the column-wise path
    [b"a", b"bb", Message(b"ccc", id=9), b"d" * 300],  # mixed sizes: one record at a time
])
def test_append_stamped_writes_what_append_writes(tmp_path, durability, payloads) -> None:
    from rill.server.storage.partition_log import LogSettings, PartitionLog

    with_ids = [p if isinstance(p, Message) else Message(p, id=100 + i)
                for i, p in enumerate(payloads)]
    logs = []
    for name in ("direct", "staged"):
        log = PartitionLog.open(tmp_path / name, LogSettings(), durability, True)
        log.append(region(Message(b"first", id=1)), 500)  # a non-zero base offset, position
        logs.append(log)
    direct, staged = logs
    assert direct.append(region(*with_ids), 7_000) == (1, len(payloads))
    batch = stamp_batch(region(*with_ids), 0, 1_000, 0, 0)  # staged earlier, other time
    positions = array("I")
    positions.frombytes(index_positions(batch.index_entries))
    assert staged.append_stamped(bytearray(batch.records), positions, 7_000) == (
        1, len(payloads))
    direct_files = snapshot(tmp_path / "direct")
    staged_files = snapshot(tmp_path / "staged")
    assert staged_files == direct_files
    assert [m.payload for m in read_messages(staged, 0, 10)][1:] == [
        m.payload for m in with_ids]
    for log in logs:
        log.close()


def test_restamp_and_uniform_positions() -> None:
    assert uniform_positions(array("I", [0, 50, 100]), 150, base=7) == range(7, 157, 50)
    assert uniform_positions(array("I", [0, 50, 90]), 150) is None
    assert uniform_positions(array("I"), 0) is None
    batch = stamp_batch(region(b"x", b"yy"), 0, 1, 0, 0)
    records = bytearray(batch.records)
    positions = array("I")
    positions.frombytes(index_positions(batch.index_entries))
    restamp_records(records, positions, 40, 99)
    assert [(m.offset, m.timestamp) for m in read_all(records, 2)] == [(40, 99), (41, 99)]


def read_all(records: bytes | bytearray, count: int):
    from rill.protocol.iggy.messages import iter_polled_messages

    return list(iter_polled_messages(records, count))


@pytest.mark.parametrize("payloads", [
    [b"a" * 20] * 5,  # one size: checked column-wise
    [b"a", b"bb", Message(b"h", headers={"k": HeaderValue.string("v")}), b"d" * 300],
    [Message(b"h", headers={"k": HeaderValue.string("v")})],  # one size, but headers
    [Message(b"h", headers={"k": HeaderValue.string("v")}), Message(b"h" * 12)],  # same size
])
def test_stored_records_from_a_client_are_checked(payloads) -> None:
    positions, records = encode_stored_records(payloads, unix_ms=5)
    assert list(check_stored_records(records, positions)) == list(
        array("I", positions))
    broken = bytearray(records)
    broken[-1] ^= 1  # the last payload no longer matches its checksum
    with pytest.raises(DecodeError, match="checksum"):
        check_stored_records(bytes(broken), positions)
    with pytest.raises(DecodeError):
        check_stored_records(records[:-1], positions)
    with pytest.raises(DecodeError):
        check_stored_records(records, positions[:-4] + (len(records) - 1).to_bytes(4, "little"))


def test_stored_records_limits() -> None:
    with pytest.raises(InvalidMessagesCount):
        check_stored_records(b"", b"")
    positions, records = encode_stored_records(
        [b"x" * (MAX_PAYLOAD_BYTES // 2 + 1)] * 2, unix_ms=5)
    with pytest.raises(TooBigMessagePayload):
        check_stored_records(records, positions)
    with pytest.raises(DecodeError):
        check_stored_records(records, positions[:3])
