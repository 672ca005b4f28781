"""Partition commands 402-403 (wire reference §3.8)."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import IDENT, U32, Command
from rill.protocol.iggy.primitives import Identifier


@dataclass(frozen=True, slots=True)
class CreatePartitions(Command):
    """402 CREATE_PARTITIONS: ident stream_id; ident topic_id; u32 partitions_count (1..1000).
    OK: empty. Appends partitions N+1..N+count."""

    CODE = 402
    NAME = "create_partitions"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, U32)
    stream_id: Identifier
    topic_id: Identifier
    partitions_count: int


@dataclass(frozen=True, slots=True)
class DeletePartitions(Command):
    """403 DELETE_PARTITIONS: ident stream_id; ident topic_id; u32 partitions_count (1..1000).
    OK: empty. Removes the highest-numbered partitions."""

    CODE = 403
    NAME = "delete_partitions"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, IDENT, U32)
    stream_id: Identifier
    topic_id: Identifier
    partitions_count: int
