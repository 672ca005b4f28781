"""Stream and topic directories: their manifests, their deletion, and what a start finds on disk.

Owns every directory above a partition log. A stream's and a topic's directory carries a
manifest (``stream.json``, ``topic.json``: the row the metadata store holds for it), so the data
directory alone says what its files are: a start that finds a directory the metadata store does
not know can recover it rather than guess (``core.reconciliation`` decides what to do).

Deletion has two phases, so that a crash neither resurrects nor loses anything: the directory
is first renamed to ``<name>.deleting`` (a tombstone: one atomic rename, which needs no free
space), then the metadata store commits the deletion, then the tombstone is removed. A
tombstone found at start is finished when the store no longer knows the directory, and renamed
back when it still does (the deletion was never committed).

Invariants:
  * a manifest is replaced atomically (temporary file, then rename). Under ``fsync = always`` it
    is synced (file and directory) before the change is acknowledged; under the other policies
    the metadata store (checkpointed every interval) is the durable copy, and a start writes
    again any manifest that is missing or unreadable;
  * nothing here removes a directory it was not asked to remove: what nobody can explain is moved
    to ``quarantine/`` and kept;
  * every directory is created 0700 and every file 0600.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from rill.server.storage.durability import Durability, FsyncPolicy
from rill.server.storage.metadata import StreamRow, TopicRow
from rill.server.storage.paths import TOMBSTONE_SUFFIX, DataPaths

log = logging.getLogger(__name__)

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


def make_directory(directory: Path) -> None:
    """Create ``directory`` (and missing parents) private to the server's user."""
    directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------- manifests
def write_manifest(path: Path, row: StreamRow | TopicRow, durability: Durability) -> None:
    """Create ``path``'s directory if needed and replace ``path`` with ``row`` as JSON."""
    make_directory(path.parent)
    temporary = path.with_name(path.name + ".tmp")
    data = json.dumps(dataclasses.asdict(row), separators=(",", ":")).encode()
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(descriptor, data)
        if durability.policy is FsyncPolicy.ALWAYS:
            durability.sync_now(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)
    if durability.policy is FsyncPolicy.ALWAYS:
        durability.sync_directory(path.parent)


def read_stream_manifest(path: Path) -> StreamRow | None:
    """The stream a manifest describes; None when it is missing or unreadable."""
    return _read_manifest(path, StreamRow)


def read_topic_manifest(path: Path) -> TopicRow | None:
    """The topic a manifest describes; None when it is missing or unreadable."""
    return _read_manifest(path, TopicRow)


def _read_manifest(path: Path, row_type: type) -> StreamRow | TopicRow | None:
    try:
        values = json.loads(path.read_bytes())
        fields = dataclasses.fields(row_type)
        required = {f.name for f in fields if f.default is dataclasses.MISSING}
        if not isinstance(values, dict) or not required <= set(values) <= {f.name for f in fields}:
            raise ValueError("unexpected fields")  # (a field added later may be missing)
        for spec in fields:
            if spec.name not in values:
                continue
            kind = str if spec.type in (str, "str") else int
            if type(values[spec.name]) is not kind:
                raise ValueError(f"{spec.name} is not {kind.__name__}")
        return row_type(**values)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        log.warning("manifest %s cannot be read: %s", path, error)
        return None


# ---------------------------------------------------------------------- deletion
def retire_all(directories: list[Path], durability: Durability) -> list[Path | None]:
    """Phase one of a deletion: rename each directory to its tombstone (``<name>.deleting``;
    None for one that does not exist: nothing to delete on disk) and return them. All of them,
    or none: on a failure the renamed ones are renamed back and the error raised. Each parent
    is synced once, after its last rename (2,000 partitions cost one sync, not 2,000).
    Blocking: a worker thread may run it."""
    tombstones: list[Path | None] = []
    try:
        for directory in directories:
            tombstone = DataPaths.tombstone(directory)
            try:
                os.rename(directory, tombstone)
            except FileNotFoundError:
                tombstone = None
            tombstones.append(tombstone)
        for parent in dict.fromkeys(directory.parent for directory in directories):
            durability.sync_directory(parent)
    except OSError:
        restore_all(tombstones, durability)
        raise
    return tombstones


def restore_all(tombstones: list[Path | None], durability: Durability) -> None:
    """Undo ``retire_all`` (the deletion was not committed), the last renamed first."""
    parents: dict[Path, None] = {}
    for tombstone in reversed(tombstones):
        if tombstone is not None:
            os.rename(tombstone, tombstone.with_name(tombstone.name[: -len(TOMBSTONE_SUFFIX)]))
            parents[tombstone.parent] = None
    for parent in parents:
        durability.sync_directory(parent)


def remove_trees(paths: list[Path | None]) -> None:
    """Remove each tree (a committed deletion's tombstones). Blocking: a worker thread may run
    it."""
    for path in paths:
        if path is not None:
            remove_tree(path)


def quarantine(paths: DataPaths, directory: Path, reason: str) -> Path:
    """Move a directory nobody can explain out of the way, keeping every byte of it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = paths.quarantine_dir / stamp / directory.relative_to(paths.root)
    make_directory(target.parent)
    os.rename(directory, target)
    log.error("%s: %s; moved to %s (nothing was deleted)", directory, reason, target)
    return target


# ---------------------------------------------------------------------- inventory
@dataclass
class FoundTopic:
    id: int
    directory: Path
    partitions: set[int] = field(default_factory=set)


@dataclass
class FoundStream:
    id: int
    directory: Path
    topics: dict[int, FoundTopic] = field(default_factory=dict)


@dataclass
class Inventory:
    """What the data directory holds: numbered stream/topic/partition directories and
    tombstones (any level), as found at start."""

    streams: dict[int, FoundStream] = field(default_factory=dict)
    tombstones: list[Path] = field(default_factory=list)

    def holds_data(self) -> bool:
        return bool(self.streams or self.tombstones)


def take_inventory(paths: DataPaths) -> Inventory:
    inventory = Inventory()
    for stream_id, stream_dir in _numbered(paths.streams_dir, inventory):
        stream = inventory.streams[stream_id] = FoundStream(stream_id, stream_dir)
        for topic_id, topic_dir in _numbered(paths.topics_dir(stream_id), inventory):
            topic = stream.topics[topic_id] = FoundTopic(topic_id, topic_dir)
            partitions_dir = paths.partitions_dir(stream_id, topic_id)
            topic.partitions = {pid for pid, _ in _numbered(partitions_dir, inventory)}
    return inventory


def _numbered(directory: Path, inventory: Inventory) -> list[tuple[int, Path]]:
    """Subdirectories of ``directory`` named by a number; tombstones go to the inventory;
    anything else is left alone."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        name = entry.name
        if name.endswith(TOMBSTONE_SUFFIX) and name[: -len(TOMBSTONE_SUFFIX)].isdigit():
            inventory.tombstones.append(Path(entry.path))
        elif name.isascii() and name.isdigit():
            found.append((int(name), Path(entry.path)))
    found.sort()
    return found
