"""Iggy's consumers as the core's readers (wire §2.2, §3.5, §6.5).

Owns: the name a regular Iggy consumer's positions are stored under (``iggy-consumer:<u32>``; a
consumer named by a string is hashed with xxHash32, seed 0, as Iggy does), ``reader`` (an Iggy
``Consumer`` and partition id as the core's reader and partition: a regular consumer that names
no partition reads partition 1; a group's member that names none is dealt one by the group's
membership, ``groups``) and ``iggy_lag`` (GET_CONSUMER_LAG lists Iggy's groups first, each by
id, then Iggy's own consumers by id, then the positions other protocols store -- Kafka's
consumer groups -- by the name they are stored under, so that one command shows every consumer
of a topic, as the HTTP ``/consumers`` route does from the same core rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import xxhash

from rill.protocol.iggy.primitives import Consumer, ConsumerKind
from rill.server.core.broker import Broker, PartitionRef
from rill.server.core.types import ConsumerLag, Ref, Session

CONSUMER_PREFIX = "iggy-consumer:"


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A consumer reading as a member of the topic's consumer group ``group`` (id or name)."""

    group: Ref


Reader = str | GroupMember  # who reads: a consumer by its position name, or a group's member


def consumer_name(consumer_id: Ref) -> str:
    """The name regular consumer ``consumer_id`` stores its positions under."""
    value = consumer_id if isinstance(consumer_id, int) else xxhash.xxh32_intdigest(
        consumer_id.encode("utf-8"))
    return f"{CONSUMER_PREFIX}{value}"


def reader(consumer: Consumer, partition_id: int) -> tuple[Reader, int]:
    """Who reads for ``consumer`` and the partition it addresses (0: the group's membership
    picks one)."""
    if consumer.kind == ConsumerKind.CONSUMER_GROUP:
        return GroupMember(consumer.id.value), partition_id
    return consumer_name(consumer.id.value), partition_id or 1


def iggy_lag(rows: list[ConsumerLag]) -> list[ConsumerLag]:
    """The groups' rows as they come (by group id), then Iggy's consumers' by consumer id, then
    other protocols' positions (``kafka-group:<group id>``) by name, as they come; a name longer
    than the record's str8 (255 bytes) cannot be listed here."""
    groups = [row for row in rows if row.group_name]
    consumers = [row for row in rows if not row.group_name
                 and row.consumer.startswith(CONSUMER_PREFIX)]
    consumers.sort(key=lambda row: int(row.consumer[len(CONSUMER_PREFIX):]))
    others = [row for row in rows if not row.group_name
              and not row.consumer.startswith(CONSUMER_PREFIX)
              and len(row.consumer.encode("utf-8")) <= 255]
    return groups + consumers + others


def position(broker: Broker, session: Session, stream: Ref, topic: Ref, consumer: Consumer,
             partition_id: int) -> tuple[str, PartitionRef]:
    """The name ``consumer``'s positions are stored under and the partition it addresses for
    GET/STORE_CONSUMER_OFFSET: a group's member without a partition id addresses its current
    one (the one its last group poll read since the last rebalance; none: 3007)."""
    who, partition_id = reader(consumer, partition_id)
    if type(who) is GroupMember:
        partition_id, who = broker.groups.member_partition(session, stream, topic, who.group,
                                                           partition_id, advance=False)
    return who, PartitionRef(stream, topic, partition_id)
