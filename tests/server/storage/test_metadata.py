"""The SQLite metadata store: each change is one transaction, u64 values survive, cascades."""

from __future__ import annotations

import sqlite3

import pytest

from rill.server.storage.metadata import (
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
