"""The SQLite metadata store: each change is one transaction, u64 values survive, cascades."""

from __future__ import annotations

import sqlite3

import pytest

from rill.server.storage.metadata import (
    MetadataStore,
    OffsetRow,
    PartitionRow,
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
    store.store_offset(OffsetRow(1, 1, 2, 1, 4_000_000_000, 77))
    store.store_offset(OffsetRow(1, 1, 2, 1, 4_000_000_000, 78))
    store.create_user(UserRow(1, "iggy", "$2b$hash", 1, b"\x01" * 11, 9))
    store.close()
    again = MetadataStore(path, synchronous_full=False)
    assert again.load_streams() == [StreamRow(1, "s", 5)]
    assert again.load_topics() == [topic()]  # u64::MAX survives SQLite's signed integers
    assert [p.id for p in again.load_partitions()] == [1, 2]
    assert list(again.load_offsets()) == [OffsetRow(1, 1, 2, 1, 4_000_000_000, 78)]
    assert again.load_users()[0].permissions == b"\x01" * 11
    again.close()


def test_deleting_a_stream_cascades(store):
    store.create_stream(StreamRow(1, "s", 5))
    store.create_topic(topic(), [PartitionRow(1, 1, 1, 6)])
    store.store_offset(OffsetRow(1, 1, 1, 1, 3, 0))
    store.delete_stream(1)
    assert store.load_topics() == [] and store.load_partitions() == []
    assert list(store.load_offsets()) == []


def test_failed_transaction_changes_nothing(store):
    store.create_stream(StreamRow(1, "s", 5))
    with pytest.raises(sqlite3.IntegrityError):
        # the second partition row collides: the topic row must not stay behind either
        store.create_topic(topic(), [PartitionRow(1, 1, 1, 6), PartitionRow(1, 1, 1, 6)])
    assert store.load_topics() == [] and store.load_partitions() == []


def test_purge_drops_offsets_only(store):
    store.create_stream(StreamRow(1, "s", 5))
    store.create_topic(topic(), [PartitionRow(1, 1, 1, 6)])
    store.store_offset(OffsetRow(1, 1, 1, 1, 3, 9))
    store.purge_topic(1, 1)
    assert list(store.load_offsets()) == [] and len(store.load_partitions()) == 1
