"""Start-up reconciliation: the metadata store and the data directory made to agree, without
deleting anything the server does not understand.

The metadata store is the truth for names, settings, users, tokens, groups and offsets; the
directories are the truth for which data exists. When they disagree at start:

  * a tombstone (``<directory>.deleting``, see ``storage.directories``) is finished when the
    store no longer knows the directory, and renamed back when it still does (the deletion was
    never committed);
  * a stream, topic or partition directory the store does not know is recovered from its
    manifest (``stream.json``, ``topic.json``; for partitions, the numbers right after a known
    topic's last one) and written back into the store, with a warning naming it. What cannot be
    explained (no manifest, a name another stream or topic already has, a gap in the partition
    numbers) is moved to ``quarantine/`` with an error naming it. Nothing is deleted;
  * a store without users, in a data directory that was initialised before, makes the start
    refuse (``StartupRefused``): credentials are never reset because rows went missing (a lost
    ``metadata.sqlite3-wal``, a replaced file). ``rill serve --recover-metadata`` is the way out:
    a damaged store is moved aside, directories are recovered as above, and the root user is
    created from the [root] settings;
  * a known stream or topic whose manifest is missing or empty gets one (directories made by
    earlier versions; manifests not synced before a power cut under ``interval``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import defaultdict
from pathlib import Path

from rill.errors import CannotWriteToFile
from rill.server.storage.directories import (
    FILE_MODE,
    Inventory,
    quarantine,
    read_stream_manifest,
    read_topic_manifest,
    remove_tree,
    take_inventory,
    write_manifest,
)
from rill.server.core.catalog import Catalog, PartitionRow, StreamRow, TopicRow
from rill.server.storage.durability import Durability
from rill.server.storage.paths import TOMBSTONE_SUFFIX, DataPaths
from rill.server.storage.reserve import SpaceReserve
from rill.server.storage.sqlite_catalog import CatalogDamaged, CatalogTooNew, SqliteCatalog

log = logging.getLogger(__name__)

IDENTITY_FORMAT = 1
RECOVER_HINT = (
    "start once with `rill serve --recover-metadata` to rebuild streams, topics and partitions "
    "from the data directory (users, personal access tokens, consumer groups and consumer "
    "offsets cannot be rebuilt; the root user is created from the [root] settings, "
    "RILL_ROOT_USERNAME / RILL_ROOT_PASSWORD), or restore the metadata store from a backup"
)


class StartupRefused(Exception):
    """The server will not start on this data directory as it is; the message says why and
    what the operator can do."""


# ---------------------------------------------------------------------- the store
def open_store(
    paths: DataPaths, synchronous_full: bool, reserve: SpaceReserve | None, recover: bool
) -> SqliteCatalog:
    """The catalog in the metadata store; a damaged one refuses the start, or with ``recover`` is moved aside
    (kept, renamed ``metadata.sqlite3.damaged-<time>``) and a new one is made."""
    path = paths.metadata_db
    if not path.exists():  # created private; SQLite gives its -wal and -shm the same mode
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    try:
        try:
            return SqliteCatalog.open(path, synchronous_full, reserve)
        except CannotWriteToFile:  # a full disk: opening needs room for the -wal and -shm
            if reserve is None or not reserve.release():
                raise
            return SqliteCatalog.open(path, synchronous_full, reserve)
    except CatalogTooNew as too_new:
        raise StartupRefused(f"{too_new}. Nothing was changed; start it with that rill.")
    except CatalogDamaged as damaged:
        if not recover:
            raise StartupRefused(f"{damaged}. Nothing was changed. To start, {RECOVER_HINT}.")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        for suffix in ("", "-wal", "-shm"):
            damaged_file = path.with_name(path.name + suffix)
            if damaged_file.exists():
                damaged_file.rename(path.with_name(f"{path.name}{suffix}.damaged-{stamp}"))
        log.error("%s: moved aside as %s.damaged-%s; rebuilding from the data directory",
                  damaged, path.name, stamp)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
        return SqliteCatalog.open(path, synchronous_full, reserve)


def root_user_needed(paths: DataPaths, store: Catalog, recover: bool) -> bool:
    """Whether the root user must be created now: at the first start, or with ``recover``
    when the store lost its users. Refuses the start when users are missing otherwise."""
    if store.load_users():
        return False
    inventory = take_inventory(paths)
    if not paths.identity.exists() and not inventory.holds_data():
        return True  # a new data directory
    if not recover:
        what = (f"{len(inventory.streams)} stream directories" if inventory.streams
                else f"{paths.identity.name}")
        raise StartupRefused(
            f"metadata store {paths.metadata_db} holds no users, but this data directory was "
            f"initialised before ({what}): the store lost its recent changes (a deleted "
            f"metadata.sqlite3-wal?) or was replaced. rill does not create the root user again "
            f"with configured credentials on its own. Nothing was changed. To start, "
            f"{RECOVER_HINT}."
        )
    log.warning("metadata store %s holds no users: creating the root user from the [root] "
                "settings (--recover-metadata)", paths.metadata_db)
    return True


def write_identity(paths: DataPaths, now_us: int) -> None:
    """Mark the data directory as initialised (once)."""
    if paths.identity.exists():
        return
    descriptor = os.open(paths.identity, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.write(descriptor, json.dumps({"format": IDENTITY_FORMAT, "created_at": now_us}).encode())
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------------- directories
class _Known:
    """What the store knows, kept up to date while recovering."""

    def __init__(self, store: Catalog) -> None:
        self.streams: dict[int, StreamRow] = {}
        self.topics: dict[tuple[int, int], TopicRow] = {}
        self.names: set[tuple[int, str]] = set()  # (0, stream name), (stream id, topic name)
        self.partitions: dict[tuple[int, int], set[int]] = defaultdict(set)
        for row in store.load_streams():
            self.add_stream(row)
        for topic in store.load_topics():
            self.add_topic(topic)
        for partition in store.load_partitions():
            self.partitions[partition.stream_id, partition.topic_id].add(partition.id)

    def add_stream(self, row: StreamRow) -> None:
        self.streams[row.id] = row
        self.names.add((0, row.name))

    def add_topic(self, row: TopicRow) -> None:
        self.topics[row.stream_id, row.id] = row
        self.names.add((row.stream_id, row.name))


async def reconcile(paths: DataPaths, store: Catalog, durability: Durability, now_us: int) -> None:
    """Make the store and the directories agree (see the module docstring)."""
    known = _Known(store)
    inventory = take_inventory(paths)
    for _ in range(3):  # a restored stream or topic may hold tombstones of its own
        if not inventory.tombstones:
            break
        _settle_tombstones(paths, known, inventory, durability)
        inventory = take_inventory(paths)
    for stream_id, found in inventory.streams.items():
        if stream_id not in known.streams and not await _recover_stream(
                paths, store, known, found.directory):
            continue
        for topic_id, found_topic in found.topics.items():
            key = (stream_id, topic_id)
            if key not in known.topics:
                await _recover_topic(paths, store, known, stream_id, topic_id,
                                     found_topic.partitions, now_us)
            else:
                await _recover_partitions(paths, store, known, stream_id, topic_id,
                                          found_topic.partitions, now_us)
    _write_missing_manifests(paths, known, durability)
    _report_missing_partitions(paths, known, inventory)


def _settle_tombstones(paths: DataPaths, known: _Known, inventory: Inventory,
                       durability: Durability) -> None:
    for tombstone in inventory.tombstones:
        directory = tombstone.with_name(tombstone.name[: -len(TOMBSTONE_SUFFIX)])
        numbers = [int(part) for part in directory.relative_to(paths.streams_dir).parts
                   if part.isdigit()]
        if len(numbers) == 1:
            still_known = numbers[0] in known.streams
        elif len(numbers) == 2:
            still_known = tuple(numbers) in known.topics
        else:
            still_known = numbers[2] in known.partitions.get((numbers[0], numbers[1]), set())
        if not still_known:
            log.info("finishing the deletion of %s", directory)
            remove_tree(tombstone)
        elif directory.exists():
            quarantine(paths, tombstone, "a tombstone beside the live directory it was made from")
        else:
            log.warning("the deletion of %s was not committed: the directory is restored",
                        directory)
            os.rename(tombstone, directory)
            durability.sync_directory(directory.parent)


async def _recover_stream(paths: DataPaths, store: Catalog, known: _Known, directory: Path) -> bool:
    stream_id = int(directory.name)
    row = read_stream_manifest(paths.stream_manifest(stream_id))
    if row is None or row.id != stream_id:
        quarantine(paths, directory, "a stream directory unknown to the metadata store, "
                   "without a readable stream.json")
        return False
    if (0, row.name) in known.names:
        quarantine(paths, directory, f"a stream directory unknown to the metadata store whose "
                   f"name {row.name!r} another stream has")
        return False
    row = await store.create_stream(row)  # what ``known`` holds: what the catalog confirmed
    known.add_stream(row)
    log.warning("recovered stream %d (%r) from its directory: the metadata store did not know it",
                stream_id, row.name)
    return True


async def _recover_topic(paths: DataPaths, store: Catalog, known: _Known, stream_id: int,
                   topic_id: int, found_partitions: set[int], now_us: int) -> None:
    directory = paths.topic_dir(stream_id, topic_id)
    row = read_topic_manifest(paths.topic_manifest(stream_id, topic_id))
    if row is None or (row.stream_id, row.id) != (stream_id, topic_id):
        quarantine(paths, directory, "a topic directory unknown to the metadata store, without "
                   "a readable topic.json")
        return
    if (stream_id, row.name) in known.names:
        quarantine(paths, directory, f"a topic directory unknown to the metadata store whose "
                   f"name {row.name!r} another topic of stream {stream_id} has")
        return
    numbers = _continuing(set(), found_partitions, paths, stream_id, topic_id)
    row, created = await store.create_topic(
        row, [PartitionRow(stream_id, topic_id, pid, now_us) for pid in numbers])
    known.add_topic(row)
    known.partitions[stream_id, topic_id] = {partition.id for partition in created}
    log.warning("recovered topic %d (%r) of stream %d with %d partitions from its directory: "
                "the metadata store did not know it", topic_id, row.name, stream_id, len(numbers))


async def _recover_partitions(paths: DataPaths, store: Catalog, known: _Known, stream_id: int,
                        topic_id: int, found_partitions: set[int], now_us: int) -> None:
    have = known.partitions[stream_id, topic_id]
    numbers = _continuing(have, found_partitions, paths, stream_id, topic_id)
    if numbers:
        created = await store.create_partitions(
            [PartitionRow(stream_id, topic_id, pid, now_us) for pid in numbers])
        have.update(partition.id for partition in created)
        log.warning("recovered partitions %s of topic %d of stream %d from their directories: "
                    "the metadata store did not know them", numbers, topic_id, stream_id)


def _continuing(have: set[int], found: set[int], paths: DataPaths, stream_id: int,
                topic_id: int) -> list[int]:
    """The unknown partition numbers that continue 1..N without a gap; the others are
    quarantined (a topic's partitions are always 1..N)."""
    following = len(have) + 1
    continuing = []
    for number in sorted(found - have):
        if number == following:
            continuing.append(number)
            following += 1
        else:
            quarantine(paths, paths.partition_dir(stream_id, topic_id, number),
                       "a partition directory unknown to the metadata store that does not "
                       "continue the topic's partition numbers")
    return continuing


def _write_missing_manifests(paths: DataPaths, known: _Known, durability: Durability) -> None:
    for row in known.streams.values():
        if not _has_content(paths.stream_manifest(row.id)):
            write_manifest(paths.stream_manifest(row.id), row, durability)
    for row in known.topics.values():
        if not _has_content(paths.topic_manifest(row.stream_id, row.id)):
            write_manifest(paths.topic_manifest(row.stream_id, row.id), row, durability)


def _has_content(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def _report_missing_partitions(paths: DataPaths, known: _Known, inventory: Inventory) -> None:
    for (stream_id, topic_id), numbers in known.partitions.items():
        found_stream = inventory.streams.get(stream_id)
        found_topic = found_stream.topics.get(topic_id) if found_stream else None
        missing = sorted(numbers - (found_topic.partitions if found_topic else set()))
        if missing:
            log.error("partitions %s of topic %d of stream %d have no directory under %s: they "
                      "start empty", missing, topic_id, stream_id, paths.streams_dir)
