"""Background retention: expired segments and over-full topics (wire §6.8).

Deletion is whole sealed segments only; the active segment of a partition is never deleted.
"""

from __future__ import annotations

import asyncio
import logging

from rill.protocol.primitives import EXPIRY_NEVER, MAX_TOPIC_SIZE_UNLIMITED
from rill.server.core.state import CoreState

log = logging.getLogger(__name__)

FULL_RATIO = 0.9  # a topic at or above 90 % of its maximum size drops its oldest segments


def enforce_retention(state: CoreState) -> int:
    """One pass over every partition; returns how many segments were deleted."""
    now = state.clock()
    delete_oldest = state.config.system.topic.delete_oldest_segments
    deleted = 0
    for stream in list(state.streams.values()):
        for topic in list(stream.topics.values()):
            if topic.message_expiry != EXPIRY_NEVER:
                for partition in topic.partitions.values():
                    deleted += partition.log.delete_expired_segments(now, topic.message_expiry)
            if (
                delete_oldest
                and topic.max_topic_size != MAX_TOPIC_SIZE_UNLIMITED
                and topic.size_bytes >= FULL_RATIO * topic.max_topic_size
            ):
                for partition in topic.partitions.values():
                    deleted += int(partition.log.delete_oldest_segment())
    return deleted


async def run_retention(state: CoreState, interval_seconds: float) -> None:
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            deleted = enforce_retention(state)
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)
        except Exception:  # keep the cleaner alive; the next pass retries
            log.exception("retention pass failed")
