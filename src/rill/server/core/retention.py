"""Background retention: expired segments and over-full topics (wire §6.8).

Deletion is whole sealed segments only; the active segment of a partition is never deleted.
"""

from __future__ import annotations

import asyncio
import logging

from rill.protocol.primitives import EXPIRY_NEVER, MAX_TOPIC_SIZE_UNLIMITED
from rill.server.core.model import Partition, Stream, Topic
from rill.server.core.state import CoreState

log = logging.getLogger(__name__)

FULL_RATIO = 0.9  # a topic at or above 90 % of its maximum size drops its oldest segments
LOOKS_PER_TURN = 256  # partitions looked at between two turns of the event loop


async def enforce_retention(state: CoreState) -> int:
    """One pass over every partition; returns how many segments were deleted. The event loop
    gets a turn after each partition that deleted segments (closing, unlinking and a directory
    sync each: a topic of 1,000 partitions whose segments expire together would otherwise
    hold every other client for seconds) and every ``LOOKS_PER_TURN`` partitions; each
    partition's append in flight ends first (a deletion would block the loop on it). What was
    deleted meanwhile (a stream, topic or partition) is passed over."""
    now = state.clock()
    delete_oldest = state.config.system.topic.delete_oldest_segments
    deleted = looked = 0

    async def each(stream: Stream, topic: Topic, delete) -> None:
        nonlocal deleted, looked
        for partition in list(topic.partitions.values()):
            await partition.log.wait_idle()  # (a deleted one's closed log has nothing in flight)
            if not _kept(state, stream, topic, partition):
                continue
            gone = delete(partition.log)
            deleted += gone
            looked += 1
            if gone or looked % LOOKS_PER_TURN == 0:
                await asyncio.sleep(0)

    for stream in list(state.streams.values()):
        for topic in list(stream.topics.values()):
            if topic.message_expiry != EXPIRY_NEVER:
                expiry = topic.message_expiry
                await each(stream, topic,
                           lambda log_: log_.delete_expired_segments(now, expiry))
            if (
                delete_oldest
                and topic.max_topic_size != MAX_TOPIC_SIZE_UNLIMITED
                and _kept(state, stream, topic)
                and topic.size_bytes >= FULL_RATIO * topic.max_topic_size
            ):
                await each(stream, topic, lambda log_: int(log_.delete_oldest_segment()))
    return deleted


def _kept(state: CoreState, stream: Stream, topic: Topic,
          partition: Partition | None = None) -> bool:
    """Whether ``stream``, ``topic`` (and ``partition``) are still the model's."""
    return (state.streams.get(stream.id) is stream and stream.topics.get(topic.id) is topic
            and (partition is None or topic.partitions.get(partition.id) is partition))


async def run_retention(state: CoreState, interval_seconds: float) -> None:
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            deleted = await enforce_retention(state)
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)
        except Exception:  # keep the cleaner alive; the next pass retries
            log.exception("retention pass failed")
