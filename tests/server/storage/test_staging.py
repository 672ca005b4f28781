"""Staged-append storage: staged files (append, load, torn tails), the commit journal, and the
SEND-region validation that staging relies on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_helpers import region

from rill.errors import InvalidMessagesCount, TooBigMessagePayload
from rill.protocol.buffer import DecodeError
from rill.protocol.headers import HeaderValue
from rill.protocol.messages import Message
from rill.server.storage.paths import DataPaths
from rill.server.storage.records import (
    MAX_PAYLOAD_BYTES,
    skip_send_messages,
    stamp_batch,
    validate_send_region,
)
from rill.server.storage.staging import StagingArea, producer_key
from rill.server.storage.transaction_journal import TransactionJournal


@pytest.fixture
def area(tmp_path: Path, durability) -> StagingArea:
    return StagingArea(DataPaths(tmp_path), durability)


def test_append_then_load_gives_the_same_entries(area: StagingArea) -> None:
    staged = area.create("query-1", 7, 2, 99)
    staged.append(1, 2, 3, 2, region(b"a", b"bb"))
    staged.append(1, 2, 1, 1, region(b"c"))
    assert staged.messages_count == 3
    assert staged.read_region(staged.entries[1]) == bytes(region(b"c"))
    staged.close()
    [loaded] = area.load_all()
    assert (loaded.producer_id, loaded.batch_id, loaded.task_id, loaded.attempt_id) == (
        "query-1", 7, 2, 99)
    assert loaded.entries == staged.entries and loaded.size == staged.size
    assert loaded.read_region(loaded.entries[0]) == bytes(region(b"a", b"bb"))
    assert loaded.path.name.startswith(producer_key("query-1"))
    loaded.delete()
    assert area.load_all() == []


def test_a_torn_tail_is_cut_at_the_last_whole_entry(area: StagingArea) -> None:
    staged = area.create("p", 1, 0, 0)
    staged.append(1, 1, 1, 1, region(b"kept"))
    staged.append(1, 1, 1, 1, region(b"torn away"))
    staged.close()
    whole = staged.entries[1].position - 24  # where the second entry's head starts
    os.truncate(staged.path, staged.size - 3)
    [loaded] = area.load_all()
    assert len(loaded.entries) == 1 and loaded.size == whole
    assert staged.path.stat().st_size == whole
    loaded.append(1, 1, 1, 1, region(b"again"))  # appends continue after the cut
    loaded.close()
    [again] = area.load_all()
    assert [again.read_region(e) for e in again.entries] == [
        bytes(region(b"kept")), bytes(region(b"again"))]


def test_a_corrupt_entry_is_cut_too(area: StagingArea) -> None:
    staged = area.create("p", 1, 0, 0)
    staged.append(1, 1, 1, 1, region(b"one"))
    staged.append(1, 1, 1, 1, region(b"two"))
    staged.close()
    data = bytearray(staged.path.read_bytes())
    data[-1] ^= 0xFF  # the crc32 of the second region no longer matches
    staged.path.write_bytes(bytes(data))
    [loaded] = area.load_all()
    assert len(loaded.entries) == 1


def test_a_file_with_a_bad_header_is_removed(area: StagingArea) -> None:
    staged = area.create("p", 1, 0, 0)
    staged.append(1, 1, 1, 1, region(b"x"))
    staged.close()
    staged.path.write_bytes(b"garbage")
    assert area.load_all() == [] and not staged.path.exists()


def test_the_journal_decides_and_finishes(tmp_path: Path) -> None:
    journal = TransactionJournal(tmp_path / "t.sqlite3", synchronous_full=True)
    plan = {"handles": [[1, 2]], "partitions": [[1, 1, 1, 40]]}
    journal.decide("p", 2**64 - 1, plan, now_us=5)
    journal.decide("q", 3, plan, now_us=6)
    journal.finish("q", 3)
    journal.close()
    reopened = TransactionJournal(tmp_path / "t.sqlite3", synchronous_full=False)
    assert reopened.load_producers() == {"p": 2**64 - 1, "q": 3}
    [pending] = reopened.load_pending()
    assert (pending.producer_id, pending.batch_id, pending.plan) == ("p", 2**64 - 1, plan)
    reopened.close()


def test_validation_agrees_with_stamping() -> None:
    good = region(b"a", Message(b"bb", headers={"k": HeaderValue.string("v")}), b"c")
    assert validate_send_region(good) == 3 == stamp_batch(good, 0, 1, 0, 0).count
    assert skip_send_messages(good, 0) == 0
    assert skip_send_messages(good, 3) == len(good)
    assert bytes(good)[skip_send_messages(good, 2):] == bytes(region(b"c"))
    for bad, error in [
        (b"", InvalidMessagesCount),
        (bytes(region(b"a"))[:-1], DecodeError),
        (bytes(16) + b"\x00" * 8, DecodeError),  # payload_length 0
        (bytes(16) + b"\x05\x00\x00\x00" + b"\x00" * 8, DecodeError),  # headers overrun
        (bytes(region(b"x" * (MAX_PAYLOAD_BYTES // 2 + 1), b"y" * (MAX_PAYLOAD_BYTES // 2))),
         TooBigMessagePayload),
    ]:
        with pytest.raises(error):
            validate_send_region(bad)
        with pytest.raises(error):
            stamp_batch(bad, 0, 1, 0, 0)
