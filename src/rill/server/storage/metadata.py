"""The metadata store: streams, topics, partitions, users, consumer positions, reserved id
blocks (``reserve_ids``) and the login throttle's trusted logins in SQLite (WAL).

Owns: the connection and every SQL statement of the server that reads or changes rows (the
tables, their version and migrations are ``storage.metadata_schema``'s, created in the open's
first transaction). Each public method is one transaction, so a crash (even kill -9) leaves either the whole change or none of it. Durability follows the
server's fsync policy: ``synchronous=FULL`` under ``always`` (every commit is on disk before it
returns), ``NORMAL`` otherwise (in WAL mode a commit survives a process crash; a power loss
may roll back what was committed since the last checkpoint, so under ``interval`` the Core calls
``checkpoint`` every interval). Invariant: callers write here *before* they change the
in-memory model, so memory never holds what the store does not (``storage.sqlite_catalog``,
the Catalog port over this store, confirms a change once its transaction committed).

A full disk: a write that finds no room releases the space reserve (``storage.reserve``) and is
tried once more, so deletions, which free space, work at 0 bytes free; if it still fails it
raises ``CannotWriteToFile`` (10006). A store that SQLite cannot read, or whose integrity check
fails, raises ``MetadataStoreDamaged`` at open; nothing is changed in it.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from rill.errors import CannotWriteToFile
# the rows this store keeps (also what the Catalog port speaks: ``storage.catalog_rows``)
from rill.server.storage.catalog_rows import (  # noqa: F401 - re-exported
    ConsumerGroupRow,
    PartitionRow,
    PersonalAccessTokenRow,
    PositionRow,
    StreamRow,
    TopicRow,
    UserRow,
)
from rill.server.storage.metadata_schema import (  # noqa: F401 - SCHEMA_VERSION re-exported
    SCHEMA_VERSION,
    MetadataStoreTooNew,
    create_schema,
    from_sql,
    to_sql,
)
from rill.server.storage.reserve import SpaceReserve


class MetadataStoreDamaged(Exception):
    """The metadata store cannot be read, or its integrity check fails."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"metadata store {path} is damaged: {detail}")
        self.path = path
        self.detail = detail


Method = TypeVar("Method", bound=Callable[..., Any])


def _writes(method: Method) -> Method:
    """Run a store method as one transaction (see ``MetadataStore._write``)."""

    @functools.wraps(method)
    def write(self: MetadataStore, *args: Any, **kwargs: Any) -> Any:
        return self._write(method, args, kwargs)

    return write  # type: ignore[return-value]


class MetadataStore:
    """One SQLite connection used from the event loop thread (plus one for checkpoints)."""

    def __init__(
        self, path: Path, synchronous_full: bool, reserve: SpaceReserve | None = None
    ) -> None:
        self.path = path
        self.reserve = reserve
        self._synchronous_full = synchronous_full
        self._changed = False  # committed since the last checkpoint
        self._checkpointer: sqlite3.Connection | None = None
        # held by a checkpoint (a worker thread) and by close: a connection is never closed
        # under a statement another thread runs on it (that crashes the process)
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as error:
            raise MetadataStoreDamaged(path, str(error)) from error
        try:
            self._open()
        except MetadataStoreTooNew:
            self._db.close()
            raise
        except sqlite3.DatabaseError as error:
            self._db.close()
            if isinstance(error, sqlite3.OperationalError) and _is_full(error):
                raise CannotWriteToFile(
                    reason=f"Cannot write to file: metadata store {path}: the disk is full"
                ) from error
            raise MetadataStoreDamaged(path, str(error)) from error

    def _open(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if self._synchronous_full else 'NORMAL'}")
        self._db.execute("PRAGMA foreign_keys=ON")
        problems = [row[0] for row in self._db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(problems[:5]))
        self._create_schema()

    @_writes
    def _create_schema(self) -> None:
        create_schema(self._db, self.path)  # (storage.metadata_schema), in one transaction

    def close(self) -> None:
        """Close both connections; waits for a checkpoint running in a worker thread (the Core
        cancels its checkpoint task, but a thread cannot be stopped)."""
        with self._checkpoint_lock:
            self._closed = True
            self._db.close()
            if self._checkpointer is not None:
                self._checkpointer.close()

    def checkpoint(self) -> None:
        """Make every committed change durable now: sync the write-ahead log, copy it into the
        database, sync that. Under synchronous=NORMAL a commit is durable only after this.
        Blocking; may run in a worker thread (it has its own connection)."""
        with self._checkpoint_lock:
            if not self._changed or self._closed:
                return
            self._changed = False
            if self._checkpointer is None:
                self._checkpointer = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False
                )
            self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _write(self, method: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """One transaction; on a full disk, release the reserve and try once more."""
        for attempt in (1, 2):
            try:
                with self._transaction():
                    result = method(self, *args, **kwargs)
            except sqlite3.OperationalError as error:
                if not _is_full(error):
                    raise
                if attempt == 1 and self.reserve is not None and self.reserve.release():
                    continue
                raise CannotWriteToFile(
                    reason=f"Cannot write to file: metadata store {self.path}: the disk is full"
                ) from error
            self._changed = True
            return result

    def _transaction(self) -> "_Transaction":
        return _Transaction(self._db)

    # -- loading ---------------------------------------------------------------------------

    def load_streams(self) -> list[StreamRow]:
        rows = self._db.execute("SELECT id, name, created_at FROM streams ORDER BY id")
        return [StreamRow(*row) for row in rows]

    def load_topics(self) -> list[TopicRow]:
        rows = self._db.execute(
            "SELECT stream_id, id, name, created_at, compression_algorithm, message_expiry,"
            " max_topic_size, replication_factor, record_format FROM topics"
            " ORDER BY stream_id, id"
        )
        return [
            TopicRow(s, i, n, c, comp, from_sql(exp), from_sql(size), rf, fmt)
            for s, i, n, c, comp, exp, size, rf, fmt in rows
        ]

    def load_partitions(self) -> list[PartitionRow]:
        rows = self._db.execute(
            "SELECT stream_id, topic_id, id, created_at FROM partitions"
            " ORDER BY stream_id, topic_id, id"
        )
        return [PartitionRow(*row) for row in rows]

    def load_positions(self) -> Iterator[PositionRow]:
        rows = self._db.execute(
            "SELECT stream_id, topic_id, partition_id, consumer, next_offset, note, leader_epoch"
            " FROM consumer_positions"
        )
        for row in rows:
            yield PositionRow(*row[:4], from_sql(row[4]), row[5], row[6])

    def load_consumer_groups(self) -> list[ConsumerGroupRow]:
        rows = self._db.execute(
            "SELECT stream_id, topic_id, id, name FROM consumer_groups"
            " ORDER BY stream_id, topic_id, id"
        )
        return [ConsumerGroupRow(*row) for row in rows]

    def load_personal_access_tokens(self) -> list[PersonalAccessTokenRow]:
        rows = self._db.execute(
            "SELECT user_id, name, token_hash, expiry_at FROM personal_access_tokens"
            " ORDER BY user_id, name"
        )
        return [PersonalAccessTokenRow(u, n, h, from_sql(e)) for u, n, h, e in rows]

    def load_users(self) -> list[UserRow]:
        rows = self._db.execute(
            "SELECT id, username, password_hash, status, permissions, created_at,"
            " scram_credentials FROM users ORDER BY id"
        )
        return [UserRow(*row) for row in rows]

    # -- streams ---------------------------------------------------------------------------

    @_writes
    def create_stream(self, row: StreamRow) -> None:
        self._db.execute(
            "INSERT INTO streams(id, name, created_at) VALUES (?, ?, ?)",
            (row.id, row.name, row.created_at),
        )

    @_writes
    def update_stream(self, stream_id: int, name: str) -> None:
        self._db.execute("UPDATE streams SET name = ? WHERE id = ?", (name, stream_id))

    @_writes
    def delete_stream(self, stream_id: int) -> None:
        self._db.execute("DELETE FROM streams WHERE id = ?", (stream_id,))

    @_writes
    def purge_stream(self, stream_id: int) -> None:
        self._db.execute("DELETE FROM consumer_positions WHERE stream_id = ?", (stream_id,))

    # -- topics ----------------------------------------------------------------------------

    @_writes
    def create_topic(self, row: TopicRow, partitions: list[PartitionRow]) -> None:
        self._db.execute(
            "INSERT INTO topics(stream_id, id, name, created_at, compression_algorithm,"
            " message_expiry, max_topic_size, replication_factor, record_format)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.stream_id, row.id, row.name, row.created_at, row.compression_algorithm,
                to_sql(row.message_expiry), to_sql(row.max_topic_size),
                row.replication_factor, row.record_format,
            ),
        )
        self._insert_partitions(partitions)

    @_writes
    def update_topic(self, row: TopicRow) -> None:
        self._db.execute(
            "UPDATE topics SET name = ?, compression_algorithm = ?, message_expiry = ?,"
            " max_topic_size = ?, replication_factor = ? WHERE stream_id = ? AND id = ?",
            (
                row.name, row.compression_algorithm, to_sql(row.message_expiry),
                to_sql(row.max_topic_size), row.replication_factor, row.stream_id, row.id,
            ),
        )

    @_writes
    def delete_topic(self, stream_id: int, topic_id: int) -> None:
        self._db.execute(
            "DELETE FROM topics WHERE stream_id = ? AND id = ?", (stream_id, topic_id)
        )

    @_writes
    def purge_topic(self, stream_id: int, topic_id: int) -> None:
        self._db.execute(
            "DELETE FROM consumer_positions WHERE stream_id = ? AND topic_id = ?",
            (stream_id, topic_id),
        )

    # -- partitions ------------------------------------------------------------------------

    def _insert_partitions(self, partitions: list[PartitionRow]) -> None:
        self._db.executemany(
            "INSERT INTO partitions(stream_id, topic_id, id, created_at) VALUES (?, ?, ?, ?)",
            [(p.stream_id, p.topic_id, p.id, p.created_at) for p in partitions],
        )

    @_writes
    def create_partitions(self, partitions: list[PartitionRow]) -> None:
        self._insert_partitions(partitions)

    @_writes
    def delete_partitions(self, stream_id: int, topic_id: int, partition_ids: list[int]) -> None:
        self._db.executemany(
            "DELETE FROM partitions WHERE stream_id = ? AND topic_id = ? AND id = ?",
            [(stream_id, topic_id, pid) for pid in partition_ids],
        )

    # -- unique ids ------------------------------------------------------------------------

    def reserve_ids(self, name: str, count: int) -> int:
        """The first of ``count`` numbers (from 0) never reserved before under ``name``: the
        reservation is on disk (the write-ahead log synced, ``synchronous=FULL`` for this one
        commit whatever the fsync policy) before this returns, so no crash or power loss hands
        them out again."""
        if count < 1:
            raise ValueError(f"cannot reserve {count} ids")
        if not self._synchronous_full:
            self._db.execute("PRAGMA synchronous=FULL")
        try:
            return self._reserve_ids(name, count)
        finally:
            if not self._synchronous_full:
                self._db.execute("PRAGMA synchronous=NORMAL")

    def reserved_ids(self, name: str) -> int:
        """How many numbers were reserved under ``name`` so far (every one is below this)."""
        found = self._db.execute("SELECT value FROM meta WHERE key = ?",
                                 (f"next-id:{name}",)).fetchone()
        return int(found[0]) if found else 0

    @_writes
    def _reserve_ids(self, name: str, count: int) -> int:
        key = f"next-id:{name}"
        found = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        first = int(found[0]) if found else 0
        self._db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key)"
                         " DO UPDATE SET value = excluded.value", (key, str(first + count)))
        return first

    # -- consumer offsets ------------------------------------------------------------------

    @_writes
    def store_position(self, row: PositionRow) -> None:
        self._db.execute(
            "INSERT INTO consumer_positions(stream_id, topic_id, partition_id, consumer,"
            " next_offset, note, leader_epoch) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(stream_id, topic_id, partition_id, consumer)"
            " DO UPDATE SET next_offset = excluded.next_offset, note = excluded.note,"
            " leader_epoch = excluded.leader_epoch",
            (row.stream_id, row.topic_id, row.partition_id, row.consumer,
             to_sql(row.next_offset), row.note, row.leader_epoch),
        )

    # -- consumer groups -------------------------------------------------------------------

    @_writes
    def create_consumer_group(self, row: ConsumerGroupRow) -> None:
        self._db.execute(
            "INSERT INTO consumer_groups(stream_id, topic_id, id, name) VALUES (?, ?, ?, ?)",
            (row.stream_id, row.topic_id, row.id, row.name),
        )

    @_writes
    def delete_consumer_group(self, stream_id: int, topic_id: int, group_id: int,
                              consumer: str) -> None:
        """The group and its positions (stored under the name ``consumer``), in one
        transaction."""
        self._db.execute(
            "DELETE FROM consumer_groups WHERE stream_id = ? AND topic_id = ? AND id = ?",
            (stream_id, topic_id, group_id),
        )
        self._db.execute(
            "DELETE FROM consumer_positions WHERE stream_id = ? AND topic_id = ? AND consumer = ?",
            (stream_id, topic_id, consumer),
        )

    # -- users -----------------------------------------------------------------------------

    @_writes
    def create_user(self, row: UserRow) -> None:
        self._db.execute(
            "INSERT INTO users(id, username, password_hash, status, permissions, created_at,"
            " scram_credentials) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row.id, row.username, row.password_hash, row.status, row.permissions,
             row.created_at, row.scram_credentials),
        )

    @_writes
    def update_user(self, user_id: int, username: str, status: int) -> None:
        self._db.execute(
            "UPDATE users SET username = ?, status = ? WHERE id = ?",
            (username, status, user_id),
        )

    @_writes
    def update_permissions(self, user_id: int, permissions: bytes | None) -> None:
        self._db.execute(
            "UPDATE users SET permissions = ? WHERE id = ?", (permissions, user_id)
        )

    @_writes
    def change_password(self, user_id: int, password_hash: str,
                        scram_credentials: str | None = None) -> None:
        """A new password: its hash and its SCRAM credentials together (the old ones go)."""
        self._db.execute(
            "UPDATE users SET password_hash = ?, scram_credentials = ? WHERE id = ?",
            (password_hash, scram_credentials, user_id)
        )

    @_writes
    def set_scram_credentials(self, user_id: int, scram_credentials: str) -> None:
        self._db.execute(
            "UPDATE users SET scram_credentials = ? WHERE id = ?", (scram_credentials, user_id)
        )

    @_writes
    def delete_user(self, user_id: int) -> None:
        """The user and (by cascade) its personal access tokens."""
        self._db.execute("DELETE FROM users WHERE id = ?", (user_id,))

    # -- revoked HTTP access tokens (JWT ids) ------------------------------------------------

    @_writes
    def revoke_access_token(self, token_id: str, expiry_at: int) -> None:
        """Remember a revoked JWT id until it would have expired anyway (unix seconds)."""
        self._db.execute(
            "INSERT OR REPLACE INTO revoked_access_tokens(token_id, expiry_at) VALUES (?, ?)",
            (token_id, expiry_at),
        )

    def load_revoked_access_tokens(self) -> dict[str, int]:
        rows = self._db.execute("SELECT token_id, expiry_at FROM revoked_access_tokens")
        return dict(rows.fetchall())

    @_writes
    def delete_expired_revocations(self, now_seconds: int) -> None:
        self._db.execute(
            "DELETE FROM revoked_access_tokens WHERE expiry_at <= ?", (now_seconds,)
        )

    # -- personal access tokens ------------------------------------------------------------

    @_writes
    def create_personal_access_token(self, row: PersonalAccessTokenRow) -> None:
        self._db.execute(
            "INSERT INTO personal_access_tokens(user_id, name, token_hash, expiry_at)"
            " VALUES (?, ?, ?, ?)",
            (row.user_id, row.name, row.token_hash, to_sql(row.expiry_at)),
        )

    @_writes
    def delete_personal_access_token(self, user_id: int, name: str) -> None:
        self._db.execute(
            "DELETE FROM personal_access_tokens WHERE user_id = ? AND name = ?",
            (user_id, name),
        )

    @_writes
    def delete_personal_access_tokens(self, hashes: list[str]) -> None:
        """Several tokens at once (the expired-token cleaner)."""
        self._db.executemany(
            "DELETE FROM personal_access_tokens WHERE token_hash = ?",
            [(token_hash,) for token_hash in hashes],
        )

    # -- the login throttle's trusted (username, address) pairs ------------------------------

    def load_trusted_logins(self, now: int) -> list[tuple[str, str, int]]:
        """(username, address, until) of every trust that has not expired at ``now`` (unix
        seconds), oldest first."""
        return [tuple(row) for row in self._db.execute(  # type: ignore[misc]
            "SELECT username, address, until FROM trusted_logins WHERE until > ?"
            " ORDER BY until", (now,))]

    @_writes
    def trust_login(self, username: str, address: str, until: int, keep: int, now: int) -> None:
        """Trust ``username`` from ``address`` until ``until``; keep only the user's ``keep``
        latest addresses, and forget every trust expired at ``now`` (unix seconds)."""
        db = self._db
        db.execute("INSERT INTO trusted_logins(username, address, until) VALUES (?, ?, ?)"
                   " ON CONFLICT(username, address) DO UPDATE SET until = excluded.until",
                   (username, address, until))
        db.execute("DELETE FROM trusted_logins WHERE username = ? AND address NOT IN (SELECT"
                   " address FROM trusted_logins WHERE username = ? ORDER BY until DESC"
                   " LIMIT ?)", (username, username, keep))
        db.execute("DELETE FROM trusted_logins WHERE until <= ?", (now,))

    @_writes
    def forget_trusted_logins(self, username: str) -> None:
        self._db.execute("DELETE FROM trusted_logins WHERE username = ?", (username,))


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK when the block raises."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
                return
            except BaseException:
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        if self._db.in_transaction:  # SQLite may have rolled back already (a full disk)
            self._db.execute("ROLLBACK")


def _is_full(error: sqlite3.OperationalError) -> bool:
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
