"""Iggy's POLL_MESSAGES over the broker's neutral reads (wire §2.4, §3.4, §6.5).

Owns: the five polling strategies (where a poll starts: an offset; a timestamp, the first
record at or after it; the first record kept; the last ``count`` records; the consumer's next
offset, its first record when it has none) and auto-commit (the consumer's position stored
past the last record read). A poll reads up to the high watermark, as Kafka's Fetch and TANK's
Consume do (``Broker.reader``), at most ``[system] max_poll_size`` bytes (less
where the session's ``poll_limit`` says so: HTTP's), at least one record.

A group's member that names no partition is dealt one by the group's membership
(``protocols.iggy.groups``); one with none to read gets an empty answer of partition 0 with
current offset 0 (wire §11: not Iggy's quirk of reading partition 1).
"""

from __future__ import annotations

import asyncio

from rill import errors
from rill.protocol.iggy.primitives import PollingKind
from rill.server.core.broker import Broker, PartitionReader, PartitionRef
from rill.server.core.types import LogBounds, RecordRange, Ref, Session
from rill.server.protocols.iggy.consumers import GroupMember, Reader

# what an Iggy reader takes (storage.formats.iggy_v1); a Kafka-written topic is converted into it
RECORD_FORMAT = "iggy-v1"


def start_offset(reader: PartitionReader, consumer: str, kind: int, value: int, count: int
                 ) -> int | None:
    """Where the poll starts (``kind``: a ``PollingKind``), or None when there is nothing to
    return."""
    if kind == PollingKind.OFFSET:
        return value
    if kind == PollingKind.TIMESTAMP:
        return reader.record_offset_for_timestamp(value)
    if kind == PollingKind.FIRST:
        return reader.bounds().first_offset
    if kind == PollingKind.LAST:
        return reader.start_of_last(count)
    next_offset = reader.committed_offset(consumer)  # NEXT
    if next_offset is None:
        return reader.bounds().first_offset
    if next_offset >= reader.bounds().next_offset:
        return None
    return next_offset


async def poll_messages(broker: Broker, session: Session, stream: Ref, topic: Ref,
                        consumer: Reader, partition_id: int, kind: int, value: int, count: int,
                        auto_commit: bool, regions: bool = False,
                        max_wait: float = 0.0) -> RecordRange:
    """A consumer's read of up to ``count`` records (``regions``: large ranges may come as
    file regions, for links that send files). ``max_wait`` (seconds, POLL_MESSAGES_WAITING):
    a poll that finds nothing waits that long at most for a record it would return, woken by
    appends, and is then answered (a group's member stays on the partition it was dealt)."""
    if type(consumer) is GroupMember:
        partition_id, name = broker.groups.member_partition(
            session, stream, topic, consumer.group, partition_id, advance=True)
        if partition_id == 0:  # a member with no partition to read
            if count == 0:
                raise errors.InvalidMessagesCount(field="count")
            return RecordRange(0, 0, 0, [], RECORD_FORMAT, LogBounds(0, 0, 0))
    else:
        name = consumer
    reader = broker.reader(session, PartitionRef(stream, topic, partition_id))
    if count == 0:
        raise errors.InvalidMessagesCount(field="count")
    found, first = _poll(reader, name, kind, value, count, regions)
    if not found.count and max_wait > 0:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        waited_from = -1
        while not found.count and (left := deadline - loop.time()) > 0:
            # from where the poll looked, or from the end when it found no start
            since = reader.bounds().high_watermark if first is None else first
            if since == waited_from:
                break  # records are there from where it looked, yet the poll takes none
            waited_from = since
            await reader.wait(since, 0, left)
            found, first = _poll(reader, name, kind, value, count, regions)
    if found.count and auto_commit:
        await reader.commit_offset(name, found.next_read)
    return found


def _poll(reader: PartitionReader, consumer: str, kind: int, value: int, count: int,
          regions: bool) -> tuple[RecordRange, int | None]:
    """The poll's records, and the offset it started from (None: nothing to start from)."""
    first = None if reader.is_empty else start_offset(reader, consumer, kind, value, count)
    if first is None:
        return reader.nothing(), None
    return reader.read(first, count, RECORD_FORMAT, regions), first
