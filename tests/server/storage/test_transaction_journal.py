"""The transaction journal's fences: kept across a reopen, dropped one by one (u64 ids)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rill.server.storage.transaction_journal import Fence, TransactionJournal


def test_fences_survive_a_reopen_and_are_dropped_by_name(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    journal = TransactionJournal(path, synchronous_full=True)
    journal.fence("p", 3, 2**64 - 1, now_us=10)
    journal.fence("p", 4, 7, now_us=11)
    journal.fence("q", 1, 1, now_us=12)
    journal.fence("q", 1, 1, now_us=13)  # fencing again only refreshes the time
    journal.close()
    reopened = TransactionJournal(path, synchronous_full=False)
    assert sorted(reopened.load_fences(), key=lambda f: (f.producer_id, f.batch_id)) == [
        Fence("p", 3, 2**64 - 1, 10), Fence("p", 4, 7, 11), Fence("q", 1, 1, 13)]
    reopened.drop_fences("p", [(3, 2**64 - 1), (9, 9)])  # an unknown fence is no error
    reopened.drop_fences("q", [])
    assert sorted((f.producer_id, f.batch_id) for f in reopened.load_fences()) == [
        ("p", 4), ("q", 1)]
    reopened.close()


def test_a_journal_from_before_fences_gets_the_table(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE producers (producer_id TEXT PRIMARY KEY, last_committed_batch INTEGER"
            " NOT NULL, committed_at INTEGER NOT NULL);"
            "INSERT INTO producers VALUES ('p', 5, 1);")
    db.close()
    journal = TransactionJournal(path, synchronous_full=False)
    assert journal.load_producers() == {"p": 5} and journal.load_fences() == []
    journal.close()
