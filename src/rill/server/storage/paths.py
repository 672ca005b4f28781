"""Every path under the data directory is built here, and nowhere else.

Layout (wire reference §7.1, with SQLite in place of Iggy's state log)::

    <root>/                            mode 0700; every file rill creates is 0600
      rill.json                        identity: written once when the directory is initialised
      metadata.sqlite3                 streams, topics, partitions, groups, users, offsets
      metadata.reserve                 space kept free for metadata writes on a full disk
      clean_shutdown                   present only after an orderly stop
      quarantine/<UTC time>/...        directories found at start that nothing explains (kept)
      logs/                            server logs
      runtime/                         recreated at every start
      transactions.sqlite3             staged-append journal: producers' last committed batch
      staging/<producer>-<batch>-<task>-<attempt>.staged   staged appends not yet committed
      streams/<stream_id>/stream.json  the stream's manifest (id, name, created_at)
      streams/<stream_id>/topics/<topic_id>/topic.json   the topic's manifest (its settings)
      streams/<stream_id>/topics/<topic_id>/partitions/<partition_id>/
        00000000000000000000.log       segment records, named by first offset (20 digits)
        00000000000000000000.index     16 bytes per message
        00000000000000000000.index.rebuild   a rebuilt index before its rename (removed at start)
        leader-epoch-checkpoint        per-record formats: leader epoch -> its first offset
                                       (only once an epoch above 0 was appended)
        high-watermark-checkpoint      the last high watermark a replication layer stored
        truncation                     a truncation under way (``storage.truncation``)
      <any of those directories>.deleting   a directory being deleted (see storage.directories)

Invariant: a segment file name is its start offset as exactly 20 decimal digits followed by
``.log`` or ``.index``; ``parse_segment_file_name`` is the inverse of the two builders.
"""

from __future__ import annotations

import os
from pathlib import Path

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
REBUILD_SUFFIX = ".rebuild"  # a rebuilt index before it is renamed over the index
STAGED_SUFFIX = ".staged"
STREAM_MANIFEST = "stream.json"
TOPIC_MANIFEST = "topic.json"
TOMBSTONE_SUFFIX = ".deleting"
TEMPORARY_SUFFIX = ".tmp"  # a checkpoint or marker before its rename (removed at open)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "high-watermark-checkpoint"
INCARNATION_CHECKPOINT = "incarnation-checkpoint"
TRUNCATION_MARKER = "truncation"
OFFSET_DIGITS = 20


class DataPaths:
    """The data directory of one server, rooted at ``root``."""

    __slots__ = ("root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def metadata_db(self) -> Path:
        return self.root / "metadata.sqlite3"

    @property
    def identity(self) -> Path:
        """Written once, when the data directory is initialised (first start)."""
        return self.root / "rill.json"

    @property
    def metadata_reserve(self) -> Path:
        return self.root / "metadata.reserve"

    @property
    def quarantine_dir(self) -> Path:
        return self.root / "quarantine"

    @property
    def lock(self) -> Path:
        """Held (flock) by the one server running on this directory."""
        return self.root / "rill.lock"

    @property
    def clean_shutdown_marker(self) -> Path:
        return self.root / "clean_shutdown"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def runtime_dir(self) -> Path:
        return self.root / "runtime"

    @property
    def secrets_dir(self) -> Path:
        """Generated secrets (JWT signing key, self-signed certificates): mode 0700."""
        return self.root / "secrets"

    @property
    def jwt_secret(self) -> Path:
        return self.secrets_dir / "jwt_secret"

    @property
    def self_signed_certificate(self) -> Path:
        return self.secrets_dir / "self_signed_cert.pem"

    @property
    def self_signed_key(self) -> Path:
        return self.secrets_dir / "self_signed_key.pem"

    @property
    def transactions_db(self) -> Path:
        """Journal of staged-append commits (rill extension): producers, decided commits."""
        return self.root / "transactions.sqlite3"

    @property
    def staging_dir(self) -> Path:
        """Staged (not yet committed) appends: one file per producer/batch/task/attempt."""
        return self.root / "staging"

    def staged_file(self, producer_key: str, batch_id: int, task_id: int, attempt_id: int) -> Path:
        return self.staging_dir / (
            f"{producer_key}-{batch_id:020d}-{task_id:010d}-{attempt_id:020d}{STAGED_SUFFIX}"
        )

    @property
    def streams_dir(self) -> Path:
        return self.root / "streams"

    def stream_dir(self, stream_id: int) -> Path:
        return self.streams_dir / str(int(stream_id))

    def stream_manifest(self, stream_id: int) -> Path:
        return self.stream_dir(stream_id) / STREAM_MANIFEST

    def topics_dir(self, stream_id: int) -> Path:
        return self.stream_dir(stream_id) / "topics"

    def topic_dir(self, stream_id: int, topic_id: int) -> Path:
        return self.topics_dir(stream_id) / str(int(topic_id))

    def topic_manifest(self, stream_id: int, topic_id: int) -> Path:
        return self.topic_dir(stream_id, topic_id) / TOPIC_MANIFEST

    def partitions_dir(self, stream_id: int, topic_id: int) -> Path:
        return self.topic_dir(stream_id, topic_id) / "partitions"

    def partition_dir(self, stream_id: int, topic_id: int, partition_id: int) -> Path:
        return self.partitions_dir(stream_id, topic_id) / str(int(partition_id))

    @staticmethod
    def tombstone(directory: Path) -> Path:
        """The name a directory takes while it is being deleted."""
        return directory.with_name(directory.name + TOMBSTONE_SUFFIX)

    @staticmethod
    def segment_log(partition_dir: str | os.PathLike[str], start_offset: int) -> Path:
        return Path(partition_dir) / f"{_segment_stem(start_offset)}{LOG_SUFFIX}"

    @staticmethod
    def segment_index(partition_dir: str | os.PathLike[str], start_offset: int) -> Path:
        return Path(partition_dir) / f"{_segment_stem(start_offset)}{INDEX_SUFFIX}"

    @staticmethod
    def segment_index_rebuild(index_path: str | os.PathLike[str]) -> Path:
        """Where a rebuilt index is written before it is renamed over ``index_path``."""
        index_path = Path(index_path)
        return index_path.with_name(index_path.name + REBUILD_SUFFIX)

    @staticmethod
    def leader_epoch_checkpoint(partition_dir: str | os.PathLike[str]) -> Path:
        return Path(partition_dir) / LEADER_EPOCH_CHECKPOINT

    @staticmethod
    def high_watermark_checkpoint(partition_dir: str | os.PathLike[str]) -> Path:
        return Path(partition_dir) / HIGH_WATERMARK_CHECKPOINT

    @staticmethod
    def incarnation_checkpoint(partition_dir: str | os.PathLike[str]) -> Path:
        return Path(partition_dir) / INCARNATION_CHECKPOINT

    @staticmethod
    def truncation_marker(partition_dir: str | os.PathLike[str]) -> Path:
        return Path(partition_dir) / TRUNCATION_MARKER

    @staticmethod
    def temporary(path: str | os.PathLike[str]) -> Path:
        """Where a small file is written before it is renamed over ``path``."""
        path = Path(path)
        return path.with_name(path.name + TEMPORARY_SUFFIX)

    def __repr__(self) -> str:
        return f"DataPaths({str(self.root)!r})"


def _segment_stem(start_offset: int) -> str:
    if not 0 <= start_offset < 10**OFFSET_DIGITS:
        raise ValueError(f"segment start offset out of range: {start_offset}")
    return f"{start_offset:0{OFFSET_DIGITS}d}"


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """``(start_offset, suffix)`` for a segment file name, or None for any other file."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            if len(stem) == OFFSET_DIGITS and stem.isascii() and stem.isdigit():
                return int(stem), suffix
    return None
