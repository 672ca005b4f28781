"""The schema of the metadata store (``storage.metadata``): its tables, its version, and the
migrations that bring an older store up to it.

Owns: ``SCHEMA_VERSION`` and what each version added, the ``CREATE TABLE`` statements,
``create_schema`` (a new store gets the current schema; an older one is migrated once; a newer
one, written by a later rill, is refused unchanged with ``MetadataStoreTooNew``), schema 1's
consumer names (``iggy-consumer:<id>``, ``iggy-group:<id>``: the names Iggy's adapter gives its
consumers and groups, ``protocols.iggy``; kept here as data, since an old store must load
whatever the adapters do), and the image of u64 values in SQLite's signed integers
(``to_sql``/``from_sql``). The caller runs ``create_schema`` inside one transaction, so a
migration is all or nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
ADDED_COLUMNS = (
    (2, "topics", "record_format", "TEXT NOT NULL DEFAULT 'iggy-v1'"),
    (3, "consumer_positions", "note", "TEXT"),
    (4, "users", "scram_credentials", "TEXT"),
    (5, "consumer_positions", "leader_epoch", "INTEGER"),
)

# the names schema 1's numeric consumer keys get (Iggy's consumer kinds 1 and 2, as Iggy's
# adapter names them: protocols.iggy.consumers, protocols.iggy.groups)
_V1_CONSUMER_NAMES = {1: "iggy-consumer:", 2: "iggy-group:"}

SCHEMA = """
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


def to_sql(value: int) -> int:
    return value - (1 << 64) if value >= _I64_LIMIT else value


def from_sql(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


class MetadataStoreTooNew(Exception):
    """The store was written by a later rill, with a schema this one cannot read."""

    def __init__(self, path: Path, version: int) -> None:
        super().__init__(f"metadata store {path} has schema version {version}, newer than this "
                         f"rill reads ({SCHEMA_VERSION}): it was written by a later rill")
        self.path = path
        self.version = version


def create_schema(db: sqlite3.Connection, path: Path) -> None:
    """A new store gets the current schema; an older one is migrated once (in the caller's
    transaction); a newer one (written by a later rill) is refused, unchanged."""
    has_meta = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    found = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        if has_meta else None
    version = int(found[0]) if found else SCHEMA_VERSION
    if version > SCHEMA_VERSION:
        raise MetadataStoreTooNew(path, version)
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    if version < 2:
        _migrate_consumer_offsets(db)
    for since, table, column, declaration in ADDED_COLUMNS:
        if version < since and column not in [
                row[1] for row in db.execute(f"PRAGMA table_info({table})")]:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    db.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?) ON CONFLICT(key)"
               " DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))


def _migrate_consumer_offsets(db: sqlite3.Connection) -> None:
    """Schema 1 -> 2: (kind, numeric id) keys become names; the stored "last consumed"
    offset becomes the next offset to read (+1)."""
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
          from_sql(stored) + 1)
         for stream_id, topic_id, partition_id, kind, consumer_id, stored in rows])
    db.execute("DROP TABLE consumer_offsets")
