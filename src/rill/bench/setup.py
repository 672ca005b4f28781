"""The untimed parts of a run: creating the bench streams, seeding data, groups, cleanup.

Owns: what the parent process does on the server before and after the actors run, through one
SDK client: ``prepare`` makes sure the streams ``start + 1 ...`` exist with topic 1 and enough
partitions, seeds the data ``poll`` and ``consumer-group-poll`` read when the streams do not
hold enough yet (so those scenarios work alone), and (re)creates the consumer groups ``cg-<id>``
so their stored offsets start empty; ``cleanup`` deletes the bench streams.

Seeding uses the same a..z batches the producers send, several requests in flight at once; on
an existing server, data left by an earlier ``send`` is reused when there is enough of it.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from rill import errors
from rill.bench import options as layout
from rill.bench.actors import send_region, send_request
from rill.bench.options import BenchOptions

NEVER_EXPIRE = 0xFFFF_FFFF_FFFF_FFFF
UNLIMITED_SIZE = 0xFFFF_FFFF_FFFF_FFFF
SEED_IN_FLIGHT = 8  # SEND requests in flight while seeding
DURATION_SEED_BYTES = 100_000_000  # in duration mode, seed about this much per reader (re-read after)


def seed_messages_per_reader(options: BenchOptions) -> int:
    """Messages one reader (a consumer, or a group member) needs in the streams."""
    if options.duration is None and options.batches is not None:
        return options.batches * options.messages_per_batch
    # duration mode: readers re-read from the start, so a bounded amount is enough
    batches = max(10, DURATION_SEED_BYTES // (options.messages_per_batch * options.message_size))
    if options.batches is not None:
        batches = min(batches, options.batches)
    return batches * options.messages_per_batch


async def ensure_streams(client: Any, options: BenchOptions) -> dict[int, dict[int, int]]:
    """Create missing streams/topics/partitions; return {stream: {partition: messages}}."""
    held: dict[int, dict[int, int]] = {}
    for stream_id in options.stream_ids():
        details = await client.get_stream(stream_id)
        if details is None:
            await client.create_stream(f"bench-{stream_id}", stream_id)
        topic = await client.get_topic(stream_id, 1)
        if topic is None:
            topic = await client.create_topic(
                stream_id, "topic-1", options.partitions, "none", NEVER_EXPIRE, UNLIMITED_SIZE, 0, 1
            )
        elif len(topic.partitions) < options.partitions:
            await client.create_partitions(stream_id, 1, options.partitions - len(topic.partitions))
            topic = await client.get_topic(stream_id, 1)
        held[stream_id] = {partition.id: partition.messages_count for partition in topic.partitions}
    return held


async def _send_batches(client: Any, stream_id: int, partition_id: int | None, batches: int,
                        options: BenchOptions) -> None:
    if batches <= 0:
        return
    from rill.protocol.iggy.commands.messages import SendMessages

    request = send_request(stream_id, partition_id, send_region(options.messages_per_batch, options.message_size))
    remaining = batches

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await client.request(SendMessages.CODE, request)

    await asyncio.gather(*(worker() for _ in range(min(SEED_IN_FLIGHT, batches))))


async def seed(client: Any, scenario: str, options: BenchOptions, held: dict[int, dict[int, int]]) -> int:
    """Send what the readers of ``scenario`` need and the streams lack; returns messages sent."""
    per_reader = seed_messages_per_reader(options)
    per_batch = options.messages_per_batch
    plan: list[tuple[int, int | None, int]] = []  # (stream, partition or None = balanced, batches)
    if scenario == "poll":
        needed: dict[tuple[int, int], int] = {}
        for index in range(options.consumers):
            stream_id = layout.actor_stream(options, index)
            partitions = layout.consumer_partitions(options, index, options.consumers)
            share = math.ceil(per_reader / len(partitions))
            for partition in partitions:
                key = (stream_id, partition)
                needed[key] = max(needed.get(key, 0), share)
        for (stream_id, partition), messages in sorted(needed.items()):
            lacking = messages - held[stream_id].get(partition, 0)
            plan.append((stream_id, partition, math.ceil(max(lacking, 0) / per_batch)))
    elif scenario == "consumer-group-poll":
        needed_stream: dict[int, int] = {}
        for group_id in range(1, options.consumer_groups + 1):
            stream_id = layout.group_stream(options, group_id)
            messages = per_reader * len(layout.group_members(options, group_id))
            needed_stream[stream_id] = max(needed_stream.get(stream_id, 0), messages)
        for stream_id, messages in sorted(needed_stream.items()):
            lacking = messages - sum(held[stream_id].values())
            single = 1 if options.partitions == 1 else None
            plan.append((stream_id, single, math.ceil(max(lacking, 0) / per_batch)))
    await asyncio.gather(*(
        _send_batches(client, stream_id, partition, batches, options)
        for stream_id, partition, batches in plan
    ))
    return sum(batches for _, _, batches in plan) * per_batch


async def create_groups(client: Any, options: BenchOptions) -> None:
    """Consumer groups ``cg-<id>`` with ids 1..G, re-created so no stored offset remains."""
    for group_id in range(1, options.consumer_groups + 1):
        stream_id = layout.group_stream(options, group_id)
        if await client.get_consumer_group(stream_id, 1, group_id) is not None:
            await client.delete_consumer_group(stream_id, 1, group_id)
        await client.create_consumer_group(stream_id, 1, f"cg-{group_id}", group_id)


async def prepare(client: Any, scenario: str, options: BenchOptions) -> int:
    """Everything before the actors start; returns the number of messages seeded."""
    held = await ensure_streams(client, options)
    seeded = await seed(client, scenario, options, held)
    if scenario == "consumer-group-poll":
        await create_groups(client, options)
    return seeded


async def cleanup(client: Any, options: BenchOptions) -> None:
    """Delete the bench streams (those that exist)."""
    for stream_id in options.stream_ids():
        try:
            await client.delete_stream(stream_id)
        except errors.StreamIdNotFound:
            pass
