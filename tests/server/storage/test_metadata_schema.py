"""The schema of the metadata store (``storage.metadata_schema``): an older store is migrated
once, through every version, keeping its rows (schema 1's consumer offsets under the names
Iggy's adapter gives, +1); a store without the trusted-logins table gains it without a new
version; a store of a newer rill is refused unchanged."""

from __future__ import annotations

import sqlite3

import pytest

from rill.server.storage.metadata import (
    SCHEMA_VERSION,
    MetadataStore,
    PositionRow,
    TopicRow,
    UserRow,
)

U64_MAX = 2**64 - 1


def topic(stream_id=1, topic_id=1, name="t", expiry=U64_MAX, size=U64_MAX) -> TopicRow:
    return TopicRow(stream_id, topic_id, name, 10, 1, expiry, size, 1)


SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE streams (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                      created_at INTEGER NOT NULL);
CREATE TABLE topics (stream_id INTEGER NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    id INTEGER NOT NULL, name TEXT NOT NULL, created_at INTEGER NOT NULL,
    compression_algorithm INTEGER NOT NULL, message_expiry INTEGER NOT NULL,
    max_topic_size INTEGER NOT NULL, replication_factor INTEGER NOT NULL,
    PRIMARY KEY (stream_id, id), UNIQUE (stream_id, name));
CREATE TABLE partitions (stream_id INTEGER NOT NULL, topic_id INTEGER NOT NULL,
    id INTEGER NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (stream_id, topic_id, id),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE);
CREATE TABLE consumer_offsets (stream_id INTEGER NOT NULL, topic_id INTEGER NOT NULL,
    partition_id INTEGER NOT NULL, consumer_kind INTEGER NOT NULL,
    consumer_id INTEGER NOT NULL, stored_offset INTEGER NOT NULL,
    PRIMARY KEY (stream_id, topic_id, partition_id, consumer_kind, consumer_id));
INSERT INTO streams VALUES (1, 's', 5);
INSERT INTO topics VALUES (1, 1, 't', 10, 1, -1, -1, 1);
INSERT INTO partitions VALUES (1, 1, 1, 6), (1, 1, 2, 6);
INSERT INTO consumer_offsets VALUES (1, 1, 1, 1, 4000000000, 41), (1, 1, 2, 2, 3, 0);
"""


def test_a_schema_1_store_is_migrated_once_to_named_next_offsets(tmp_path):
    """Schema 1 kept (kind, numeric id) -> last consumed offset; schema 2 keeps name -> next
    offset. The rows move over once, +1, under the names the core gives Iggy's consumers."""
    path = tmp_path / "metadata.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_1)
    old.close()
    for _ in range(2):  # the second open finds the current schema and changes nothing
        store = MetadataStore(path, synchronous_full=False)
        assert sorted(store.load_positions(), key=lambda row: row.partition_id) == [
            PositionRow(1, 1, 1, "iggy-consumer:4000000000", 42),
            PositionRow(1, 1, 2, "iggy-group:3", 1),
        ]
        assert store.load_topics() == [topic()]
        store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("5",)
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'consumer_offsets'"
                      ).fetchone() is None
    db.close()


SCHEMA_2_POSITIONS = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '2');
CREATE TABLE streams (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                      created_at INTEGER NOT NULL);
CREATE TABLE topics (stream_id INTEGER NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    id INTEGER NOT NULL, name TEXT NOT NULL, created_at INTEGER NOT NULL,
    compression_algorithm INTEGER NOT NULL, message_expiry INTEGER NOT NULL,
    max_topic_size INTEGER NOT NULL, replication_factor INTEGER NOT NULL,
    record_format TEXT NOT NULL DEFAULT 'iggy-v1',
    PRIMARY KEY (stream_id, id), UNIQUE (stream_id, name));
CREATE TABLE partitions (stream_id INTEGER NOT NULL, topic_id INTEGER NOT NULL,
    id INTEGER NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (stream_id, topic_id, id),
    FOREIGN KEY (stream_id, topic_id) REFERENCES topics(stream_id, id) ON DELETE CASCADE);
CREATE TABLE consumer_positions (stream_id INTEGER NOT NULL, topic_id INTEGER NOT NULL,
    partition_id INTEGER NOT NULL, consumer TEXT NOT NULL, next_offset INTEGER NOT NULL,
    PRIMARY KEY (stream_id, topic_id, partition_id, consumer));
INSERT INTO streams VALUES (1, 's', 5);
INSERT INTO topics VALUES (1, 1, 't', 10, 1, -1, -1, 1, 'iggy-v1');
INSERT INTO partitions VALUES (1, 1, 1, 6);
INSERT INTO consumer_positions VALUES (1, 1, 1, 'kafka-group:g', 12);
"""


def test_a_schema_4_store_gains_position_epochs_once(tmp_path):
    """Schema 5 adds the leader epoch a position may carry; schema 4's positions keep their
    offsets and notes and have none."""
    path = tmp_path / "metadata.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_2_POSITIONS.replace("'schema_version', '2'", "'schema_version', '4'")
                      .replace("next_offset INTEGER NOT NULL,", "next_offset INTEGER NOT NULL,"
                               " note TEXT,")
                      .replace("'kafka-group:g', 12)", "'kafka-group:g', 12, 'kept')"))
    old.close()
    for _ in range(2):
        store = MetadataStore(path, synchronous_full=False)
        assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 12, "kept")]
        store.close()
    store = MetadataStore(path, synchronous_full=False)
    store.store_position(PositionRow(1, 1, 1, "kafka-group:g", 13, "n", 2))
    assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 13, "n", 2)]
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("5",)
    db.close()


def test_a_store_without_trusted_logins_gains_the_table_and_keeps_its_version(tmp_path):
    """The login throttle's trust table is added to a store that lacks it (one an older rill
    wrote), without a new schema version; trusts are bounded per user and expire."""
    path = tmp_path / "metadata.sqlite3"
    MetadataStore(path, synchronous_full=False).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE trusted_logins")
    db.commit()
    db.close()
    store = MetadataStore(path, synchronous_full=False)
    assert store.load_trusted_logins(0) == []
    store.trust_login("alice", "10.0.0.1", 2_000, keep=2, now=1_000)
    store.trust_login("alice", "10.0.0.2", 2_001, keep=2, now=1_000)
    store.trust_login("alice", "10.0.0.3", 2_002, keep=2, now=1_000)  # alice's 2 latest kept
    store.trust_login("bob", "10.0.0.1", 1_500, keep=2, now=1_000)
    store.close()
    store = MetadataStore(path, synchronous_full=False)
    assert store.load_trusted_logins(1_000) == [
        ("bob", "10.0.0.1", 1_500), ("alice", "10.0.0.2", 2_001), ("alice", "10.0.0.3", 2_002)]
    assert store.load_trusted_logins(1_500) == [("alice", "10.0.0.2", 2_001),
                                                ("alice", "10.0.0.3", 2_002)]
    store.trust_login("alice", "10.0.0.2", 3_000, keep=2, now=1_600)  # bob's trust expired: gone
    assert store.load_trusted_logins(0) == [("alice", "10.0.0.3", 2_002), ("alice", "10.0.0.2", 3_000)]
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),)
    db.close()


def test_a_schema_2_store_gains_position_notes_once(tmp_path):
    """Schema 3 adds the note a position may carry; schema 2's positions keep their offsets
    and have none."""
    path = tmp_path / "metadata.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_2_POSITIONS)
    old.close()
    for _ in range(2):
        store = MetadataStore(path, synchronous_full=False)
        assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 12)]
        store.close()
    store = MetadataStore(path, synchronous_full=False)
    store.store_position(PositionRow(1, 1, 1, "kafka-group:g", 13, "n"))
    assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 13, "n")]
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("5",)
    db.close()


def test_a_schema_3_store_gets_the_scram_column_with_no_credentials(tmp_path):
    """Schema 4 keeps SCRAM credentials with each user; users of a schema-3 store have none
    (the core derives them at the next password login)."""
    path = tmp_path / "metadata.sqlite3"
    old = sqlite3.connect(path)
    old.executescript("""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '3');
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL, status INTEGER NOT NULL, permissions BLOB,
    created_at INTEGER NOT NULL);
INSERT INTO users VALUES (1, 'iggy', '$2b$hash', 1, NULL, 9);
""")
    old.close()
    store = MetadataStore(path, synchronous_full=False)
    assert store.load_users() == [UserRow(1, "iggy", "$2b$hash", 1, None, 9, None)]
    store.set_scram_credentials(1, '{"SCRAM-SHA-256": {}}')
    store.change_password(1, "$2b$other", '{"SCRAM-SHA-512": {}}')
    store.close()
    again = MetadataStore(path, synchronous_full=False)
    assert again.load_users() == [UserRow(1, "iggy", "$2b$other", 1, None, 9,
                                          '{"SCRAM-SHA-512": {}}')]
    again.close()


def test_a_store_of_a_newer_rill_is_refused_unchanged(tmp_path):
    from rill.server.storage.metadata import MetadataStoreTooNew

    path = tmp_path / "metadata.sqlite3"
    MetadataStore(path, synchronous_full=False).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(MetadataStoreTooNew, match="schema version 99, newer than this rill"):
        MetadataStore(path, synchronous_full=False)
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("99",)
    db.close()
