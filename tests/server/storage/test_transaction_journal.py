"""The transaction journal: decided plans and producers (u64 batch ids, owners), fences kept
across a reopen and dropped one by one, and the migrations of older journals."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rill.server.storage.transaction_journal import (
    CommittedProducer,
    Fence,
    TransactionJournal,
)

PLAN = {"handles": [[1, 2]], "partitions": [[1, 1, 1, 40]]}


def test_the_journal_decides_and_finishes(tmp_path: Path) -> None:
    journal = TransactionJournal(tmp_path / "t.sqlite3", synchronous_full=True)
    journal.decide("p", 2**64 - 1, PLAN, now_us=5)
    journal.decide("q", 3, PLAN, now_us=6, owner="query A")
    journal.finish("q", 3)
    journal.close()
    reopened = TransactionJournal(tmp_path / "t.sqlite3", synchronous_full=False)
    assert reopened.load_producers() == {"p": CommittedProducer(2**64 - 1, None),
                                         "q": CommittedProducer(3, "query A")}
    [pending] = reopened.load_pending()
    assert (pending.producer_id, pending.batch_id, pending.plan) == ("p", 2**64 - 1, PLAN)
    reopened.close()


def test_the_first_owner_named_stays(tmp_path: Path) -> None:
    """The owner is recorded once (the core refuses other owners before deciding; the journal
    never overwrites one), and an ownerless commit keeps it."""
    journal = TransactionJournal(tmp_path / "t.sqlite3", synchronous_full=False)
    journal.decide("p", 1, PLAN, now_us=1)
    journal.decide("p", 2, PLAN, now_us=2, owner="query A")
    journal.decide("p", 3, PLAN, now_us=3)
    journal.decide("p", 4, PLAN, now_us=4, owner="query B")
    assert journal.load_producers() == {"p": CommittedProducer(4, "query A")}
    journal.close()


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


def test_a_journal_from_before_fences_and_owners_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE producers (producer_id TEXT PRIMARY KEY, last_committed_batch INTEGER"
            " NOT NULL, committed_at INTEGER NOT NULL);"
            "INSERT INTO producers VALUES ('p', 5, 1);")
    db.close()
    journal = TransactionJournal(path, synchronous_full=False)
    assert journal.load_producers() == {"p": CommittedProducer(5, None)}  # no owner yet
    assert journal.load_fences() == []
    journal.decide("p", 6, PLAN, now_us=2, owner="query A")  # the next commit names it
    journal.close()
    reopened = TransactionJournal(path, synchronous_full=False)  # migrating twice: no-op
    assert reopened.load_producers() == {"p": CommittedProducer(6, "query A")}
    reopened.close()
