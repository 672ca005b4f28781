"""Iggy's partitioning (wire §2.3, §6.3): which partition a SEND or a STAGE_MESSAGES goes to.

Owns: ``Partitioners``, one per server, whose ``chooser`` turns an Iggy ``Partitioning`` into
the core's ``PartitionChooser`` (called by the core once the append is authorized, with the
topic):
  * balanced: round robin over the topic's partitions, one batch each, per topic (the counter
    lives as long as the topic object: a deleted and recreated topic starts again at 1);
  * partition id: the u32 the client gave (4 bytes, else 82, InvalidNumberEncoding);
  * messages key: xxHash32(key, seed 0) mod N, with 0 meaning N.
A key or id of 0 or more than 255 bytes is 4028 (InvalidKeyValueLength), checked before the
topic's partitions; a topic without partitions is NoPartitions.
"""

from __future__ import annotations

import itertools
import struct
import weakref

import xxhash

from rill import errors
from rill.protocol.iggy.primitives import Partitioning, PartitioningKind
from rill.server.core.types import PartitionChooser, Topic

_U32 = struct.Struct("<I")


def partition_for_key(key: bytes, partitions_count: int) -> int:
    """Messages-key partitioning: xxHash32(key, seed 0) mod N, with 0 meaning N (wire §6.3)."""
    partition = xxhash.xxh32_intdigest(key) % partitions_count
    return partition or partitions_count


class Partitioners:
    """Iggy's partitioning rules of one server, with the balanced kind's counters."""

    def __init__(self) -> None:
        # per topic object: a deleted topic takes its counter with it
        self._round_robin: weakref.WeakKeyDictionary[Topic, itertools.count] = (
            weakref.WeakKeyDictionary())

    def next_balanced(self, topic: Topic) -> int:
        counter = self._round_robin.get(topic)
        if counter is None:
            counter = self._round_robin[topic] = itertools.count()
        return next(counter) % len(topic.partitions) + 1

    def chooser(self, partitioning: Partitioning) -> PartitionChooser:
        """The core's chooser for ``partitioning``."""
        kind, value = partitioning.kind, partitioning.value

        def choose(topic: Topic) -> int:
            if kind != PartitioningKind.BALANCED and not 1 <= len(value) <= 255:
                raise errors.InvalidKeyValueLength()
            if not topic.partitions:
                raise errors.NoPartitions(topic.id, topic.stream_id)
            if kind == PartitioningKind.BALANCED:
                return self.next_balanced(topic)
            if kind == PartitioningKind.PARTITION_ID:
                if len(value) != 4:
                    raise errors.InvalidNumberEncoding()
                return _U32.unpack(value)[0]
            return partition_for_key(value, len(topic.partitions))

        return choose
