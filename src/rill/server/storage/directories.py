"""Whole directory trees of streams and topics: removal, and clean-up of strays at start.

Owns: deleting data directories. Partition logs remove their own files; this module removes
what is left above them (a deleted stream's or topic's tree) and trees the metadata store does
not know (left behind by a crash between the metadata commit and the file removal).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from rill.server.storage.paths import DataPaths

log = logging.getLogger(__name__)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_stream_files(paths: DataPaths, stream_id: int) -> None:
    remove_tree(paths.stream_dir(stream_id))


def remove_topic_files(paths: DataPaths, stream_id: int, topic_id: int) -> None:
    remove_tree(paths.topic_dir(stream_id, topic_id))


def remove_stray_directories(paths: DataPaths, known: dict[int, dict[int, set[int]]]) -> None:
    """Delete stream/topic/partition directories absent from ``known`` {stream: {topic: {pid}}}."""
    streams_dir = paths.streams_dir
    if not streams_dir.is_dir():
        return
    for stream_dir in streams_dir.iterdir():
        stream_id = _numeric(stream_dir.name)
        if stream_id not in known:
            log.warning("removing stream directory unknown to the metadata store: %s", stream_dir)
            remove_tree(stream_dir)
            continue
        topics = known[stream_id]
        topics_dir = paths.stream_dir(stream_id) / "topics"
        if not topics_dir.is_dir():
            continue
        for topic_dir in topics_dir.iterdir():
            topic_id = _numeric(topic_dir.name)
            if topic_id not in topics:
                log.warning("removing topic directory unknown to the metadata store: %s", topic_dir)
                remove_tree(topic_dir)
                continue
            partitions_dir = paths.topic_dir(stream_id, topic_id) / "partitions"
            if not partitions_dir.is_dir():
                continue
            for partition_dir in partitions_dir.iterdir():
                if _numeric(partition_dir.name) not in topics[topic_id]:
                    log.warning("removing partition directory unknown to the metadata store: %s",
                                partition_dir)
                    remove_tree(partition_dir)


def _numeric(name: str) -> int | None:
    return int(name) if name.isdigit() else None
