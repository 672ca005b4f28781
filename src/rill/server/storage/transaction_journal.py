"""The journal of staged-append commits, in SQLite (WAL), beside the metadata store.

Owns: three tables. ``producers`` keeps each producer's last committed batch and its *owner*
(who drives its batch ids, recorded by the first commit that names one; NULL for producers
committed only by writers that name none, or before owners existed); ``pending_commits``
keeps the plan of every commit that was decided and not yet known to be fully applied;
``fences`` keeps the aborted runs ``(producer, batch, run)`` whose late stage calls must be
dropped, so that a restart keeps rejecting them (a fence goes when its batch is committed, or
expires with the staged data). A
commit is *decided* by one transaction that writes both (so "batch N is committed" and "here
is what N appends" become durable together, or not at all), then applied to the partition
logs, then *finished* by deleting its pending row. At start, every pending plan is applied
again idempotently (the plan records each partition's next offset before the commit, so the
part that already reached the log is skipped). Durability: ``synchronous=FULL`` unless the
fsync policy is ``never``. Under ``interval`` too, unlike the metadata store: the messages a
commit appends become durable within the interval, and a decision lost to a power cut while
they survived would make the writer's replay of that batch append them a second time. One
fsync per commit (a Spark micro-batch) is cheap.

It is its own database file rather than tables in ``metadata.sqlite3``: a commit's atomicity
needs one transaction in one database, and nothing here refers to the metadata rows.

Migrations, at open: a journal from before fences gets the table; one from before owners gets
the ``owner`` column, NULL for every producer (so each adopts the owner of its next commit).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS producers (
    producer_id TEXT PRIMARY KEY,
    last_committed_batch INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    owner TEXT
);
CREATE TABLE IF NOT EXISTS pending_commits (
    producer_id TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    plan TEXT NOT NULL,
    PRIMARY KEY (producer_id, batch_id)
);
CREATE TABLE IF NOT EXISTS fences (
    producer_id TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    fenced_at INTEGER NOT NULL,
    PRIMARY KEY (producer_id, batch_id, run_id)
);
"""


def _to_sql(value: int) -> int:
    """A u64 as SQLite's signed 64-bit INTEGER (and back with ``_from_sql``)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _from_sql(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


@dataclass(frozen=True, slots=True)
class CommittedProducer:
    last_committed_batch: int
    owner: str | None  # None: not recorded (no commit named one)


@dataclass(frozen=True, slots=True)
class Fence:
    producer_id: str
    batch_id: int
    run_id: int
    fenced_at: int  # µs


@dataclass(frozen=True, slots=True)
class PendingCommit:
    producer_id: str
    batch_id: int
    plan: dict[str, Any]


class TransactionJournal:
    """One SQLite connection, used from the event loop thread only; one transaction per method."""

    def __init__(self, path: Path, synchronous_full: bool) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if synchronous_full else 'NORMAL'}")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(producers)")}
        if "owner" not in columns:  # a journal from before owners
            self._db.execute("ALTER TABLE producers ADD COLUMN owner TEXT")

    def close(self) -> None:
        self._db.close()

    def load_producers(self) -> dict[str, CommittedProducer]:
        rows = self._db.execute("SELECT producer_id, last_committed_batch, owner FROM producers")
        return {producer: CommittedProducer(_from_sql(batch), owner)
                for producer, batch, owner in rows}

    def load_pending(self) -> list[PendingCommit]:
        rows = self._db.execute(
            "SELECT producer_id, batch_id, plan FROM pending_commits ORDER BY producer_id, batch_id"
        )
        return [PendingCommit(p, _from_sql(b), json.loads(plan)) for p, b, plan in rows]

    def decide(self, producer_id: str, batch_id: int, plan: dict[str, Any], now_us: int,
               owner: str | None = None) -> None:
        """Make the commit of ``batch_id`` durable: last committed batch and plan together, and
        ``owner`` as the producer's owner unless it already has one (the caller checked that
        they agree)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute(
                "INSERT INTO producers(producer_id, last_committed_batch, committed_at, owner)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(producer_id) DO UPDATE SET"
                " last_committed_batch = excluded.last_committed_batch,"
                " committed_at = excluded.committed_at,"
                " owner = COALESCE(producers.owner, excluded.owner)",
                (producer_id, _to_sql(batch_id), now_us, owner or None),
            )
            self._db.execute(
                "INSERT OR REPLACE INTO pending_commits(producer_id, batch_id, plan)"
                " VALUES (?, ?, ?)",
                (producer_id, _to_sql(batch_id), json.dumps(plan, separators=(",", ":"))),
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def finish(self, producer_id: str, batch_id: int) -> None:
        """The commit's plan is fully applied: forget it."""
        self._db.execute(
            "DELETE FROM pending_commits WHERE producer_id = ? AND batch_id = ?",
            (producer_id, _to_sql(batch_id)),
        )

    def fence(self, producer_id: str, batch_id: int, run_id: int, now_us: int) -> None:
        """Remember that run ``run_id`` of ``batch_id`` was aborted (durable on return)."""
        self._db.execute(
            "INSERT OR REPLACE INTO fences(producer_id, batch_id, run_id, fenced_at)"
            " VALUES (?, ?, ?, ?)",
            (producer_id, _to_sql(batch_id), _to_sql(run_id), now_us),
        )

    def load_fences(self) -> list[Fence]:
        rows = self._db.execute("SELECT producer_id, batch_id, run_id, fenced_at FROM fences")
        return [Fence(p, _from_sql(b), _from_sql(r), at) for p, b, r, at in rows]

    def drop_fences(self, producer_id: str, fences: list[tuple[int, int]]) -> None:
        """Forget the fences ``(batch_id, run_id)`` of a producer, in one transaction."""
        if not fences:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "DELETE FROM fences WHERE producer_id = ? AND batch_id = ? AND run_id = ?",
                [(producer_id, _to_sql(batch), _to_sql(run)) for batch, run in fences],
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
