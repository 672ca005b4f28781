"""The SQLite metadata store: each change is one transaction, u64 values survive, cascades."""

from __future__ import annotations

import sqlite3

import pytest

from rill.server.storage.metadata import (
    SCHEMA_VERSION,
    MetadataStore,
    PartitionRow,
    PositionRow,
    StreamRow,
    TopicRow,
    UserRow,
)

U64_MAX = 2**64 - 1


@pytest.fixture
def store(tmp_path):
    store = MetadataStore(tmp_path / "metadata.sqlite3", synchronous_full=True)
    yield store
    store.close()


def topic(stream_id=1, topic_id=1, name="t", expiry=U64_MAX, size=U64_MAX) -> TopicRow:
    return TopicRow(stream_id, topic_id, name, 10, 1, expiry, size, 1)


def test_round_trip_across_reopen(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    store = MetadataStore(path, synchronous_full=False)
    store.create_stream(StreamRow(1, "s", 5))
    store.create_topic(topic(), [PartitionRow(1, 1, 1, 6), PartitionRow(1, 1, 2, 6)])
    store.store_position(PositionRow(1, 1, 2, "iggy-consumer:4000000000", 77))
    store.store_position(PositionRow(1, 1, 2, "iggy-consumer:4000000000", U64_MAX))
    store.create_user(UserRow(1, "iggy", "$2b$hash", 1, b"\x01" * 11, 9))
    store.close()
    again = MetadataStore(path, synchronous_full=False)
    assert again.load_streams() == [StreamRow(1, "s", 5)]
    assert again.load_topics() == [topic()]  # u64::MAX survives SQLite's signed integers
    assert [p.id for p in again.load_partitions()] == [1, 2]
    assert list(again.load_positions()) == [PositionRow(1, 1, 2, "iggy-consumer:4000000000",
                                                        U64_MAX)]
    assert again.load_users()[0].permissions == b"\x01" * 11
    again.close()


def test_deleting_a_stream_cascades(store):
    store.create_stream(StreamRow(1, "s", 5))
    store.create_topic(topic(), [PartitionRow(1, 1, 1, 6)])
    store.store_position(PositionRow(1, 1, 1, "billing", 0))
    store.delete_stream(1)
    assert store.load_topics() == [] and store.load_partitions() == []
    assert list(store.load_positions()) == []


def test_failed_transaction_changes_nothing(store):
    store.create_stream(StreamRow(1, "s", 5))
    with pytest.raises(sqlite3.IntegrityError):
        # the second partition row collides: the topic row must not stay behind either
        store.create_topic(topic(), [PartitionRow(1, 1, 1, 6), PartitionRow(1, 1, 1, 6)])
    assert store.load_topics() == [] and store.load_partitions() == []


def test_purge_drops_offsets_only(store):
    store.create_stream(StreamRow(1, "s", 5))
    store.create_topic(topic(), [PartitionRow(1, 1, 1, 6)])
    store.store_position(PositionRow(1, 1, 1, "billing", 9))
    store.purge_topic(1, 1)
    assert list(store.load_positions()) == [] and len(store.load_partitions()) == 1


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


def test_a_position_keeps_its_note_until_stored_without_one(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    store = MetadataStore(path, synchronous_full=False)
    store.create_stream(StreamRow(1, "s", 5))
    store.create_topic(topic(), [PartitionRow(1, 1, 1, 6)])
    store.store_position(PositionRow(1, 1, 1, "kafka-group:g", 7, "checkpoint-7"))
    store.close()
    store = MetadataStore(path, synchronous_full=False)
    assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 7,
                                                        "checkpoint-7")]
    store.store_position(PositionRow(1, 1, 1, "kafka-group:g", 8))
    assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 8, None)]
    store.close()


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


def test_a_position_keeps_its_leader_epoch_until_stored_without_one(tmp_path):
    path = tmp_path / "metadata.sqlite3"
    store = MetadataStore(path, synchronous_full=False)
    store.create_stream(StreamRow(1, "s", 5))
    store.create_topic(topic(), [PartitionRow(1, 1, 1, 6)])
    store.store_position(PositionRow(1, 1, 1, "kafka-group:g", 7, "n", 3))
    store.close()
    store = MetadataStore(path, synchronous_full=False)
    assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 7, "n", 3)]
    store.store_position(PositionRow(1, 1, 1, "kafka-group:g", 8, "n"))
    assert list(store.load_positions()) == [PositionRow(1, 1, 1, "kafka-group:g", 8, "n", None)]
    store.close()


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


def test_close_waits_for_a_checkpoint_running_in_a_worker_thread(tmp_path):
    """The Core checkpoints in a worker thread and cannot stop it at shutdown: closing the
    store under a running checkpoint would close its connection under a statement (a crash of
    the whole server). close waits; a checkpoint after close does nothing."""
    import threading

    store = MetadataStore(tmp_path / "metadata.sqlite3", synchronous_full=False)
    store.create_stream(StreamRow(1, "s", 5))
    store.checkpoint()  # opens the checkpoint connection
    inside, release = threading.Event(), threading.Event()

    def hold(statement: str) -> None:  # runs in the checkpoint's thread, inside its statement
        inside.set()
        release.wait(10)

    store._checkpointer.set_trace_callback(hold)
    store.create_stream(StreamRow(2, "t", 6))  # something to checkpoint
    failures: list[BaseException] = []

    def run(call) -> threading.Thread:  # type: ignore[no-untyped-def]
        def body() -> None:
            try:
                call()
            except BaseException as error:  # noqa: BLE001 - reported by the assertion below
                failures.append(error)
        thread = threading.Thread(target=body)
        thread.start()
        return thread

    checkpointing = run(store.checkpoint)
    assert inside.wait(10)
    closing = run(store.close)
    closing.join(0.3)
    assert closing.is_alive()  # still waiting for the checkpoint
    release.set()
    checkpointing.join(10)
    closing.join(10)
    assert not checkpointing.is_alive() and not closing.is_alive()
    assert failures == []
    store.checkpoint()  # after close: nothing, no error
    reopened = MetadataStore(tmp_path / "metadata.sqlite3", synchronous_full=False)
    assert [row.name for row in reopened.load_streams()] == ["s", "t"]
    reopened.close()
