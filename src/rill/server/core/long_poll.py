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
from collections.abc import Mapping, Sequence

from rill.server.auth.permissioner import Action
from rill.server.core.model import Partition, Session
from rill.server.core.state import CoreState
from rill.server.core.types import PartitionEnd, Ref
from rill.server.core.log import Log


class AppendSignals:
    """Per partition log, the futures of the readers waiting for its next append."""

    def __init__(self) -> None:
        self._waiting: dict[Log, set[asyncio.Future[None]]] = {}

    def appended(self, log: Log) -> None:
        for waiter in self._waiting.pop(log, ()):
            if not waiter.done():
                waiter.set_result(None)

    async def next_append(self, log: Log, timeout: float) -> None:
        """Until the next append to ``log`` (or its high watermark moves), at most
        ``timeout`` seconds (a leader's long-polled answer to a follower's fetch)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(log, set()).add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            waiters = self._waiting.get(log)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiting[log]

    async def wait(self, wanted: Sequence[tuple[Partition, int]], min_bytes: int,
                   timeout: float) -> bool:
        """Until the partitions hold at least ``min_bytes`` committed bytes (at least one
        record below each one's high watermark) from their offsets on, taken together, or
        ``timeout`` seconds passed; whether they do. (A replication layer that moves a high
        watermark calls ``appended`` too: what was appended became readable.)"""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        need = max(min_bytes, 1)
        while sum(committed_bytes(partition, offset) for partition, offset in wanted) < need:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            for partition, _ in wanted:
                self._waiting.setdefault(partition.log, set()).add(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                pass
            finally:
                for partition, _ in wanted:
                    waiters = self._waiting.get(partition.log)
                    if waiters is not None:
                        waiters.discard(waiter)
                        if not waiters:
                            del self._waiting[partition.log]
        return True


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
        await self.signals.wait(partitions, min_bytes, timeout)
        return [PartitionEnd(partition.id, partition.high_watermark,
                             committed_bytes(partition, offset))
                for partition, offset in partitions]

    async def wait_for_any(self, session: Session, stream_id: Ref,
                           positions: Mapping[Ref, Sequence[tuple[int, int]]], min_bytes: int,
                           timeout: float) -> int:
        """``wait_for_messages`` over several topics of a stream (topic -> partition ids and
        offsets): until all their partitions hold ``min_bytes`` from their offsets, taken
        together, or ``timeout`` passed; the bytes they hold past their offsets."""
        wanted = [pair for topic_id, parts in positions.items()
                  for pair in self._partitions(session, stream_id, topic_id, parts)]
        await self.signals.wait(wanted, min_bytes, timeout)
        return sum(committed_bytes(partition, offset) for partition, offset in wanted)

    def _partitions(self, session: Session, stream_id: Ref, topic_id: Ref,
                    positions: Sequence[tuple[int, int]]) -> list[tuple[Partition, int]]:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        return [(state.find_partition(topic, partition_id), offset)
                for partition_id, offset in positions]
