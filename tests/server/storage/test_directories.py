"""Stream and topic directories: manifests, tombstoned deletion and the start-up inventory."""

from __future__ import annotations

import stat

from rill.server.storage.directories import (
    quarantine,
    read_stream_manifest,
    read_topic_manifest,
    restore_all,
    retire_all,
    take_inventory,
    write_manifest,
)
from rill.server.storage.durability import Durability
from rill.server.storage.metadata import StreamRow, TopicRow
from rill.server.storage.paths import DataPaths

TOPIC = TopicRow(3, 4, "eu", 123, 1, 2**64 - 1, 10**9, 1)


def test_manifests_round_trip_and_are_private(tmp_path):
    paths = DataPaths(tmp_path)
    durability = Durability("always")
    write_manifest(paths.stream_manifest(3), StreamRow(3, "orders", 42), durability)
    write_manifest(paths.topic_manifest(3, 4), TOPIC, durability)
    assert read_stream_manifest(paths.stream_manifest(3)) == StreamRow(3, "orders", 42)
    assert read_topic_manifest(paths.topic_manifest(3, 4)) == TOPIC
    assert stat.S_IMODE(paths.stream_manifest(3).stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.stream_dir(3).stat().st_mode) == 0o700
    write_manifest(paths.stream_manifest(3), StreamRow(3, "renamed", 42), durability)
    assert read_stream_manifest(paths.stream_manifest(3)).name == "renamed"
    assert sorted(p.name for p in paths.stream_dir(3).iterdir()) == ["stream.json", "topics"]


def test_unreadable_manifests_read_as_missing(tmp_path):
    paths = DataPaths(tmp_path)
    assert read_stream_manifest(paths.stream_manifest(1)) is None
    paths.stream_dir(1).mkdir(parents=True)
    for content in (b"", b"{", b'{"id": 1, "name": "x"}', b'{"id": "1", "name": "x", "created_at": 1}',
                    b'[1, 2]'):
        paths.stream_manifest(1).write_bytes(content)
        assert read_stream_manifest(paths.stream_manifest(1)) is None


def test_retire_and_restore_rename_atomically(tmp_path):
    paths = DataPaths(tmp_path)
    durability = Durability("never")
    directory = paths.partition_dir(1, 2, 3)
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(b"data")
    [tombstone] = retire_all([directory], durability)
    assert tombstone == directory.with_name("3.deleting") and not directory.exists()
    restore_all([tombstone], durability)
    assert (directory / "00000000000000000000.log").read_bytes() == b"data"
    assert retire_all([paths.partition_dir(1, 2, 9)], durability) == [None]  # nothing on disk


def test_retiring_many_syncs_each_parent_once_and_a_failure_renames_all_back(tmp_path):
    paths = DataPaths(tmp_path)
    durability = Durability("interval")
    directories = [paths.partition_dir(1, 2, pid) for pid in range(1, 201)]
    for directory in directories:
        directory.mkdir(parents=True)
    tombstones = retire_all(directories, durability)
    assert durability.fsync_calls == 1  # the one parent, once
    assert sorted(p.name for p in paths.partitions_dir(1, 2).iterdir()) == sorted(
        f"{pid}.deleting" for pid in range(1, 201))
    restore_all(tombstones, durability)
    (paths.partitions_dir(1, 2) / "150.deleting").mkdir()  # the 150th rename fails:
    (paths.partitions_dir(1, 2) / "150.deleting" / "left").write_bytes(b"")  # not empty
    try:
        retire_all(directories, durability)
    except OSError:
        pass
    else:
        raise AssertionError("the rename onto a non-empty tombstone should fail")
    assert sorted(p.name for p in paths.partitions_dir(1, 2).iterdir()) == sorted(
        [str(pid) for pid in range(1, 201)] + ["150.deleting"])


def test_the_inventory_lists_numbered_directories_and_tombstones_only(tmp_path):
    paths = DataPaths(tmp_path)
    for directory in (paths.partition_dir(1, 1, 1), paths.partition_dir(1, 1, 2),
                      paths.partition_dir(1, 2, 1), paths.topics_dir(5),
                      paths.streams_dir / "7.deleting", paths.partitions_dir(1, 1) / "3.deleting",
                      paths.streams_dir / "notes", paths.streams_dir / "8x"):
        directory.mkdir(parents=True)
    (paths.streams_dir / "9").write_bytes(b"a file, not a stream")
    inventory = take_inventory(paths)
    assert sorted(inventory.streams) == [1, 5]
    assert {tid: topic.partitions for tid, topic in inventory.streams[1].topics.items()} == {
        1: {1, 2}, 2: {1}}
    assert sorted(p.name for p in inventory.tombstones) == ["3.deleting", "7.deleting"]
    assert take_inventory(DataPaths(tmp_path / "empty")).holds_data() is False


def test_quarantine_moves_everything_and_deletes_nothing(tmp_path):
    paths = DataPaths(tmp_path)
    stranger = paths.partition_dir(9, 1, 1)
    stranger.mkdir(parents=True)
    (stranger / "00000000000000000000.log").write_bytes(b"precious")
    target = quarantine(paths, paths.stream_dir(9), "test")
    assert target.relative_to(paths.quarantine_dir).parts[1:] == ("streams", "9")
    assert (target / "topics/1/partitions/1/00000000000000000000.log").read_bytes() == b"precious"
    assert not paths.stream_dir(9).exists()


def test_a_topic_manifest_written_before_record_formats_reads_as_iggy_v1(tmp_path):
    """Manifests of schema-1 servers have no ``record_format``: their topics hold Iggy's
    records. A field no version wrote is still refused."""
    paths = DataPaths(tmp_path)
    paths.topic_dir(3, 4).mkdir(parents=True)
    old = (b'{"stream_id":3,"id":4,"name":"eu","created_at":123,"compression_algorithm":1,'
           b'"message_expiry":18446744073709551615,"max_topic_size":1000000000,'
           b'"replication_factor":1}')
    paths.topic_manifest(3, 4).write_bytes(old)
    assert read_topic_manifest(paths.topic_manifest(3, 4)) == TOPIC
    assert TOPIC.record_format == "iggy-v1"
    paths.topic_manifest(3, 4).write_bytes(old[:-1] + b',"colour":"red"}')
    assert read_topic_manifest(paths.topic_manifest(3, 4)) is None
