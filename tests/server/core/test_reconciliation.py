"""Start-up reconciliation of the metadata store with the data directory: tombstones settled,
unknown directories recovered from their manifests or quarantined, never deleted."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rill.server.core.reconciliation import StartupRefused, open_store, reconcile, root_user_needed
from rill.server.storage.directories import write_manifest
from rill.server.storage.durability import Durability
from rill.server.storage.catalog_rows import PartitionRow, StreamRow, TopicRow, UserRow
from rill.server.storage.paths import DataPaths

NEVER = Durability("never")


def topic_row(stream_id: int, topic_id: int, name: str) -> TopicRow:
    return TopicRow(stream_id, topic_id, name, 5, 1, 0, 0, 1)


@pytest.fixture
def paths(tmp_path):
    return DataPaths(tmp_path)


@pytest.fixture
def store(paths):
    store = open_store(paths, False, None, recover=False)
    yield store
    store.close()


def known_layout(store):
    topics = {(t.stream_id, t.id): t.name for t in store.load_topics()}
    partitions = sorted((p.stream_id, p.topic_id, p.id) for p in store.load_partitions())
    return {s.id: s.name for s in store.load_streams()}, topics, partitions


def test_tombstones_are_finished_or_restored_by_what_the_store_knows(paths, store):
    asyncio.run(store.create_stream(StreamRow(1, "kept", 1)))
    asyncio.run(store.create_topic(topic_row(1, 1, "t"),
                               [PartitionRow(1, 1, 1, 1), PartitionRow(1, 1, 2, 1)]))
    (paths.streams_dir / "1.deleting").mkdir(parents=True)  # deletion never committed
    (paths.streams_dir / "1.deleting" / "marker").write_bytes(b"kept data")
    (paths.streams_dir / "2.deleting" / "topics").mkdir(parents=True)  # committed
    partitions = paths.stream_dir(1).with_name("1.deleting") / "topics" / "1" / "partitions"
    (partitions / "2.deleting").mkdir(parents=True)  # a partition deletion not committed
    (partitions / "3.deleting").mkdir(parents=True)  # committed
    asyncio.run(reconcile(paths, store, NEVER, 10))
    assert (paths.stream_dir(1) / "marker").read_bytes() == b"kept data"
    assert not (paths.streams_dir / "2.deleting").exists()
    assert (paths.partitions_dir(1, 1) / "2").is_dir()
    assert not (paths.partitions_dir(1, 1) / "3.deleting").exists()


def test_unknown_directories_with_manifests_are_recovered(paths, store, caplog):
    asyncio.run(store.create_stream(StreamRow(1, "known", 1)))
    asyncio.run(store.create_topic(topic_row(1, 1, "t"), [PartitionRow(1, 1, 1, 1)]))
    write_manifest(paths.stream_manifest(2), StreamRow(2, "lost", 2), NEVER)
    write_manifest(paths.topic_manifest(2, 1), topic_row(2, 1, "events"), NEVER)
    write_manifest(paths.topic_manifest(1, 2), topic_row(1, 2, "lost topic"), NEVER)
    for partition in ((2, 1, 1), (2, 1, 2), (1, 1, 1), (1, 1, 2), (1, 1, 3), (1, 1, 5), (1, 2, 1)):
        paths.partition_dir(*partition).mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        asyncio.run(reconcile(paths, store, NEVER, 10))
    streams, topics, partitions = known_layout(store)
    assert streams == {1: "known", 2: "lost"}
    assert topics == {(1, 1): "t", (1, 2): "lost topic", (2, 1): "events"}
    assert partitions == [(1, 1, 1), (1, 1, 2), (1, 1, 3), (1, 2, 1), (2, 1, 1), (2, 1, 2)]
    # partition 5 does not continue 1..3: kept in quarantine
    assert [p.name for p in paths.quarantine_dir.rglob("5")] == ["5"]
    assert "recovered stream 2 ('lost')" in caplog.text


def test_what_nothing_explains_is_quarantined(paths, store):
    asyncio.run(store.create_stream(StreamRow(1, "taken", 1)))
    write_manifest(paths.stream_manifest(2), StreamRow(2, "taken", 2), NEVER)  # name clash
    paths.stream_dir(3).mkdir(parents=True)  # no manifest
    paths.stream_manifest(3).write_bytes(b"{broken")
    write_manifest(paths.stream_manifest(4), StreamRow(5, "wrong id", 2), NEVER)
    asyncio.run(reconcile(paths, store, NEVER, 10))
    assert known_layout(store)[0] == {1: "taken"}
    assert sorted(p.name for p in paths.quarantine_dir.glob("*/streams/*")) == ["2", "3", "4"]
    assert sorted(p.name for p in paths.streams_dir.iterdir()) == ["1"]


def test_known_streams_and_topics_get_their_missing_manifests(paths, store):
    asyncio.run(store.create_stream(StreamRow(1, "old", 1)))
    asyncio.run(store.create_topic(topic_row(1, 1, "t"), [PartitionRow(1, 1, 1, 1)]))
    paths.partition_dir(1, 1, 1).mkdir(parents=True)
    asyncio.run(reconcile(paths, store, NEVER, 10))
    assert paths.stream_manifest(1).read_bytes().startswith(b'{"id":1,"name":"old"')
    assert paths.topic_manifest(1, 1).exists()


def test_users_are_created_only_at_the_first_start_or_on_request(paths, store):
    assert root_user_needed(paths, store, recover=False)  # a new directory
    paths.identity.write_text("{}")
    with pytest.raises(StartupRefused, match="holds no users"):
        root_user_needed(paths, store, recover=False)
    assert root_user_needed(paths, store, recover=True)
    asyncio.run(store.create_user(UserRow(1, "admin", "hash", 1, None, 1)))
    assert not root_user_needed(paths, store, recover=True)
