"""Helpers shared by the storage tests (a module of its own, so no conftest import is needed)."""

from __future__ import annotations

from pathlib import Path

from rill.protocol.iggy.messages import Message, PolledMessage, encode_messages, iter_polled_messages
from rill.server.storage.partition_log import PartitionLog


def region(*payloads: bytes | Message) -> memoryview:
    """A SEND message region; plain bytes are payloads with id 0 and no headers."""
    return memoryview(encode_messages(payloads))


def read_messages(log: PartitionLog, offset: int, count: int) -> list[PolledMessage]:
    returned, chunks = log.read(offset, count)
    return list(iter_polled_messages(b"".join(chunks), returned))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}
