"""Waiting for messages: a read that waits past an offset until a deadline or a minimum of
bytes, for one or many partitions at once, woken by appends (no sleeping loops).

Owns: ``AppendSignals`` (``appended(log)`` wakes the readers waiting on that partition log;
every path that appends calls it: SEND, deduplicated SEND, staged commits) and the wait for
messages of one topic's partitions (``LongPollService``; Iggy's edge is the rill extension
WAIT_FOR_MESSAGES, 1030; the Broker's is ``wait``). Any protocol's long poll (Kafka Fetch's max
wait and min bytes, TANK's consume) is a call to ``wait``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence

from rill.server.auth.permissioner import Action
from rill.server.core.model import Partition, Session
from rill.server.core.state import CoreState
from rill.server.core.types import PartitionEnd, Ref
from rill.server.core.log import Log


class AppendSignals:
    """Per partition log, the futures of the readers waiting for its next append.

    A wait is one future, registered under each log it watches, and one timer at its
    deadline: ``appended`` resolves the future itself, so the waiting task resumes at the
    event loop's next turn (no ``asyncio.wait_for``: no second future and no extra turn
    between the append and the reader), and the timer is cancelled as the wait ends."""

    def __init__(self) -> None:
        self._waiting: dict[Log, set[asyncio.Future[None]]] = {}

    def appended(self, log: Log) -> None:
        waiters = self._waiting.pop(log, None)
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _next_append_of(self, logs: Collection[Log], deadline: float) -> None:
        """Until the next append to any of ``logs`` or the loop's clock reaches
        ``deadline``, whichever comes first (a cancellation propagates)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        waiting = self._waiting
        for log in logs:
            waiters = waiting.get(log)
            if waiters is None:
                waiting[log] = {waiter}
            else:
                waiters.add(waiter)
        timer = loop.call_at(deadline, _expire, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            for log in logs:  # (a log that woke it already dropped its waiters)
                waiters = waiting.get(log)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del waiting[log]

    async def next_append(self, log: Log, timeout: float) -> None:
        """Until the next append to ``log`` (or its high watermark moves), at most
        ``timeout`` seconds (a leader's long-polled answer to a follower's fetch)."""
        await self._next_append_of((log,), asyncio.get_running_loop().time() + timeout)

    async def wait(self, wanted: Sequence[tuple[Partition, int]], min_bytes: int,
                   timeout: float) -> list[int]:
        """Until the partitions hold at least ``min_bytes`` committed bytes (at least one
        record below each one's high watermark) from their offsets on, taken together, or
        ``timeout`` seconds passed; each partition's committed bytes from its offset as the
        wait ends (looked at with no await since: the caller may answer with them, and they
        reach ``min_bytes`` together unless the time ran out). (A replication layer that
        moves a high watermark calls ``appended`` too: what was appended became readable.)"""
        need = max(min_bytes, 1)
        found = _committed(wanted)
        if sum(found) >= need:
            return found  # already there: no future, no timer
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        logs = {partition.log: None for partition, _ in wanted}  # each log once, in order
        while deadline - loop.time() > 0:
            await self._next_append_of(logs, deadline)
            found = _committed(wanted)
            if sum(found) >= need:
                break
        return found


def _expire(waiter: asyncio.Future[None]) -> None:
    """A wait's deadline: it ends (its caller then looks at what arrived)."""
    if not waiter.done():
        waiter.set_result(None)


def _committed(wanted: Sequence[tuple[Partition, int]]) -> list[int]:
    return [committed_bytes(partition, offset) for partition, offset in wanted]


def committed_bytes(partition: Partition, offset: int) -> int:
    """The bytes a consumer may read from ``offset`` on: those below the high watermark."""
    log = partition.log
    if partition.placement is None:
        return log.bytes_after(offset)
    high_watermark = partition.high_watermark
    if offset >= high_watermark:
        return 0
    return log.bytes_after(offset) - log.bytes_after(high_watermark)


class LongPollService:
    def __init__(self, state: CoreState, signals: AppendSignals) -> None:
        self.state = state
        self.signals = signals

    async def wait_for_messages(self, session: Session, stream_id: Ref, topic_id: Ref,
                                positions: Sequence[tuple[int, int]], min_bytes: int,
                                timeout: float) -> list[PartitionEnd]:
        """Wait until the partitions hold ``min_bytes`` (at least one record) from their
        offsets, ``positions`` (partition id, offset), on, or ``timeout`` seconds passed."""
        partitions = self._partitions(session, stream_id, topic_id, positions)
        found = await self.signals.wait(partitions, min_bytes, timeout)
        return [PartitionEnd(partition.id, partition.high_watermark, size)
                for (partition, _), size in zip(partitions, found)]

    async def wait_for_any(self, session: Session, stream_id: Ref,
                           positions: Mapping[Ref, Sequence[tuple[int, int]]], min_bytes: int,
                           timeout: float) -> int:
        """``wait_for_messages`` over several topics of a stream (topic -> partition ids and
        offsets): until all their partitions hold ``min_bytes`` from their offsets, taken
        together, or ``timeout`` passed; the bytes they hold past their offsets."""
        wanted = [pair for topic_id, parts in positions.items()
                  for pair in self._partitions(session, stream_id, topic_id, parts)]
        return sum(await self.signals.wait(wanted, min_bytes, timeout))

    def _partitions(self, session: Session, stream_id: Ref, topic_id: Ref,
                    positions: Sequence[tuple[int, int]]) -> list[tuple[Partition, int]]:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        return [(state.find_partition(topic, partition_id), offset)
                for partition_id, offset in positions]
