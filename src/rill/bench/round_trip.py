"""The one-message round trip: a producer sends one message at a time, a consumer tails the
log with a long poll, and each round trip is from the produce's start to the consumer's
receipt of that message.

Owns: ``run_round_trips`` (the clock and the hand-over between the two, for any protocol: the
protocol gives ``produce`` -- send one message, return when acknowledged -- and ``receive``
-- return once the next message has been read, long-polling at the tail), the Iggy pair
(``iggy_round_trips``: SEND_MESSAGES of one message; the consumer waits with rill's long poll,
WAIT_FOR_MESSAGES 1030, then POLLs the message by offset: two requests, as an Iggy client
tailing rill does), and ``ROUND_TRIPS`` / ``WARMUP`` / ``WAIT_MS``. The Kafka pair (Produce
of one record, Fetch with ``max_wait_ms`` and ``min_bytes`` 1) and the TANK pair (Produce of a
one-message bundle, Consume with ``max_wait_ms`` and ``min_bytes`` 1) are their drivers'
(``rill.bench.peers.kafka`` / ``tank``), on top of ``run_round_trips``.

The hand-over: the consumer asks for message ``i`` (its request is written before the
producer is let go), then the producer sends message ``i``; the producer sends ``i + 1`` only
once the consumer has read ``i``, so one message is in flight and the consumer is always at
the tail. Both clients run on one event loop in this process, each on its own connection.
``WARMUP`` round trips first, untimed (connections, the first appends). The recorder (a
driver's, metering the server's CPU) records each round trip as one message of
``message_size`` bytes: the report's "producer" latency percentiles are the round trips.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

from rill.bench.results import ActorResult, Recorder

ROUND_TRIPS = 1000  # the default number of measured round trips
WARMUP = 20  # untimed round trips first
WAIT_MS = 10_000  # the consumer's long poll: a message arrives long before


async def run_round_trips(produce: Callable[[], Awaitable[Any]], receive: Callable[[], Awaitable[Any]],
                          count: int, recorder: Recorder, message_size: int,
                          warmup: int = WARMUP) -> ActorResult:
    """``warmup`` then ``count`` round trips (see the module doc); the recorder's result."""
    clock = time.perf_counter
    asking = asyncio.Event()
    arrivals: asyncio.Queue[float] = asyncio.Queue()

    async def consumer() -> None:
        for _ in range(warmup + count):
            asking.set()
            await receive()
            arrivals.put_nowait(clock())

    reader = asyncio.create_task(consumer())
    try:
        for number in range(warmup + count):
            if number == warmup:
                recorder.start()
            await _next(asking, reader)
            began = clock()
            await produce()
            received = await _arrival(arrivals, reader)
            if number >= warmup:
                recorder.record(received - began, 1, message_size)
        return recorder.finish()
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def _next(asking: asyncio.Event, reader: asyncio.Task[None]) -> None:
    """Wait until the consumer has asked for the next message (or failed)."""
    waiter = asyncio.ensure_future(asking.wait())
    await asyncio.wait((waiter, reader), return_when=asyncio.FIRST_COMPLETED)
    if not waiter.done():
        waiter.cancel()
        reader.result()  # the consumer's error
        raise RuntimeError("the round-trip consumer stopped")
    asking.clear()
    await asyncio.sleep(0)  # let the consumer write its request before the produce


async def _arrival(arrivals: asyncio.Queue[float], reader: asyncio.Task[None]) -> float:
    getter = asyncio.ensure_future(arrivals.get())
    await asyncio.wait((getter, reader), return_when=asyncio.FIRST_COMPLETED)
    if not getter.done():
        getter.cancel()
        reader.result()
        raise RuntimeError("the round-trip consumer stopped")
    return getter.result()


# --- Iggy ----------------------------------------------------------------------------------------


async def iggy_round_trips(address: str, stream_id: int, partition_id: int, count: int,
                           message_size: int, recorder: Recorder, *, username: str = "iggy",
                           password: str = "iggy", transport: str = "tcp",
                           client_options: dict[str, Any] | None = None,
                           warmup: int = WARMUP) -> ActorResult:
    """Round trips over Iggy on topic 1 of ``stream_id`` (which exists), partition
    ``partition_id``, from its current end."""
    from rill.bench.actors import send_region, send_request
    from rill.client import AsyncClient
    from rill.protocol.iggy.commands.messages import SendMessages
    from rill.protocol.iggy.primitives import Consumer, PollingStrategy

    clients = [AsyncClient(address, transport=transport, reconnect=False, timeout=WAIT_MS / 1000 + 30,
                           **(client_options or {})) for _ in range(2)]
    producer, tail = clients
    try:
        for client in clients:
            await client.connect()
            await client.login_user(username, password)
        topic = await tail.get_topic(stream_id, 1)
        if topic is None:
            raise RuntimeError(f"stream {stream_id} has no topic 1")
        ends = {partition.id: partition.messages_count for partition in topic.partitions}
        cursor = ends[partition_id]
        request = send_request(stream_id, partition_id, send_region(1, message_size))
        consumer = Consumer.regular(1)

        async def produce() -> None:
            await producer.request(SendMessages.CODE, request)

        async def receive() -> None:
            nonlocal cursor
            while True:
                await tail.wait_for_messages(stream_id, 1, {partition_id: cursor}, WAIT_MS)
                polled = await tail.poll_messages(stream_id, 1, consumer, partition_id,
                                                  PollingStrategy.offset(cursor), 1)
                if polled.count:
                    cursor += polled.count
                    return

        return await run_round_trips(produce, receive, count, recorder, message_size, warmup)
    finally:
        for client in clients:
            await client.close()
