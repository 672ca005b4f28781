"""The metadata store: streams, topics, partitions, users, consumer positions, reserved id
blocks (``reserve_ids``) and the login throttle's trusted logins in SQLite (WAL).

Owns: the schema and every SQL statement of the server. Each public method is one transaction,
so a crash (even kill -9) leaves either the whole change or none of it. Durability follows the
server's fsync policy: ``synchronous=FULL`` under ``always`` (every commit is on disk before it
returns), ``NORMAL`` otherwise (in WAL mode a commit survives a process crash; a power loss
may roll back what was committed since the last checkpoint, so under ``interval`` the Core calls
``checkpoint`` every interval). Invariant: callers write here *before* they change the
in-memory model, so memory never holds what the store does not.

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
from rill.server.storage.reserve import SpaceReserve

SCHEMA_VERSION = 5  # 1 -> 2: consumer positions keyed by name, holding the next offset;
# each topic records its record format. 2 -> 3: a position may carry the consumer's note.
# 3 -> 4: users keep SCRAM credentials (derived from the password; a store an older rill
# could open would let it change a password and leave the old SCRAM credentials valid,
# hence the new version). 4 -> 5: a position may carry the leader epoch the consumer stored
# with it (Kafka's committed leader epoch; an older rill would keep a stale one beside a
# position it stores). The trusted_logins table (the login throttle's "logged in from here
# within a day", ``auth.throttling``) is created in any store that lacks it, without a new
# version: an older rill ignores it, which costs only the trust it would have kept.

# (the schema version that added it, table, column, declaration): what an older store gains, as
# its rows would have it (every schema-1 topic holds Iggy's records; schema 2's positions carry
# no note, schema 4's no leader epoch; SCRAM credentials are derived at each user's next login)
_ADDED_COLUMNS = (
    (2, "topics", "record_format", "TEXT NOT NULL DEFAULT 'iggy-v1'"),
    (3, "consumer_positions", "note", "TEXT"),
    (4, "users", "scram_credentials", "TEXT"),
    (5, "consumer_positions", "leader_epoch", "INTEGER"),
)

# the names schema 1's numeric consumer keys get (what the core names Iggy's consumers)
_V1_CONSUMER_NAMES = {1: "iggy-consumer:", 2: "iggy-group:"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS streams (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS topics (
    stream_id INTEGER NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    id INTEGER NOT NULL,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    compression_algorithm INTEGER NOT NULL,
    message_expiry INTEGER NOT NULL,
    max_topic_size INTEGER NOT NULL,
    replication_factor INTEGER NOT NULL,
    record_format TEXT NOT NULL DEFAULT 'iggy-v1',
    PRIMARY KEY (stream_id, id),
    UNIQUE (stream_id, name)
);
CREATE TABLE IF NOT EXISTS partitions (
    stream_id INTEGER NOT NULL,
    topic_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (stream_id, topic_id, id),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS consumer_positions (
    stream_id INTEGER NOT NULL,
    topic_id INTEGER NOT NULL,
    partition_id INTEGER NOT NULL,
    consumer TEXT NOT NULL,
    next_offset INTEGER NOT NULL,
    note TEXT,
    leader_epoch INTEGER,
    PRIMARY KEY (stream_id, topic_id, partition_id, consumer),
    FOREIGN KEY (stream_id, topic_id, partition_id)
        REFERENCES partitions(stream_id, topic_id, id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS consumer_groups (
    stream_id INTEGER NOT NULL,
    topic_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (stream_id, topic_id, id),
    UNIQUE (stream_id, topic_id, name),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS personal_access_tokens (
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    expiry_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, name)
);
CREATE TABLE IF NOT EXISTS revoked_access_tokens (
    token_id TEXT PRIMARY KEY,
    expiry_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS trusted_logins (
    username TEXT NOT NULL,
    address TEXT NOT NULL,
    until INTEGER NOT NULL,
    PRIMARY KEY (username, address)
);
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    status INTEGER NOT NULL,
    permissions BLOB,
    created_at INTEGER NOT NULL,
    scram_credentials TEXT
);
"""

# SQLite stores signed 64-bit integers; u64 values above 2**63-1 (e.g. u64::MAX = "never")
# are kept as their two's-complement image and turned back on read.
_I64_LIMIT = 1 << 63


def _to_sql(value: int) -> int:
    return value - (1 << 64) if value >= _I64_LIMIT else value


def _from_sql(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


class MetadataStoreTooNew(Exception):
    """The store was written by a later rill, with a schema this one cannot read."""

    def __init__(self, path: Path, version: int) -> None:
        super().__init__(f"metadata store {path} has schema version {version}, newer than this "
                         f"rill reads ({SCHEMA_VERSION}): it was written by a later rill")
        self.path = path
        self.version = version


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
        """A new store gets the current schema; an older one is migrated once, in the same
        transaction; a newer one (written by a later rill) is refused, unchanged."""
        db = self._db
        has_meta = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        found = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            if has_meta else None
        version = int(found[0]) if found else SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise MetadataStoreTooNew(self.path, version)
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        if version < 2:
            self._migrate_consumer_offsets()
        for since, table, column, declaration in _ADDED_COLUMNS:
            if version < since and column not in [
                    row[1] for row in db.execute(f"PRAGMA table_info({table})")]:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
        db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?) ON CONFLICT(key)"
                   " DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))

    def _migrate_consumer_offsets(self) -> None:
        """Schema 1 -> 2: (kind, numeric id) keys become names; the stored "last consumed"
        offset becomes the next offset to read (+1)."""
        db = self._db
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                          " AND name = 'consumer_offsets'").fetchone():
            return
        rows = db.execute(  # of partitions that exist (schema 1 cascaded deletes too)
            "SELECT o.stream_id, o.topic_id, o.partition_id, o.consumer_kind, o.consumer_id,"
            " o.stored_offset FROM consumer_offsets o JOIN partitions p ON p.stream_id ="
            " o.stream_id AND p.topic_id = o.topic_id AND p.id = o.partition_id").fetchall()
        db.executemany(
            "INSERT OR REPLACE INTO consumer_positions(stream_id, topic_id, partition_id,"
            " consumer, next_offset) VALUES (?, ?, ?, ?, ?)",
            [(stream_id, topic_id, partition_id,
              _V1_CONSUMER_NAMES.get(kind, f"kind-{kind}:") + str(consumer_id),
              _from_sql(stored) + 1)
             for stream_id, topic_id, partition_id, kind, consumer_id, stored in rows])
        db.execute("DROP TABLE consumer_offsets")

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
            TopicRow(s, i, n, c, comp, _from_sql(exp), _from_sql(size), rf, fmt)
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
            yield PositionRow(*row[:4], _from_sql(row[4]), row[5], row[6])

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
        return [PersonalAccessTokenRow(u, n, h, _from_sql(e)) for u, n, h, e in rows]

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
                _to_sql(row.message_expiry), _to_sql(row.max_topic_size),
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
                row.name, row.compression_algorithm, _to_sql(row.message_expiry),
                _to_sql(row.max_topic_size), row.replication_factor, row.stream_id, row.id,
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
             _to_sql(row.next_offset), row.note, row.leader_epoch),
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
            (row.user_id, row.name, row.token_hash, _to_sql(row.expiry_at)),
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
