"""The one-message round trip: a producer sends one message at a time, a consumer tails the
log with a long poll, and each round trip is from the produce's start to the consumer's
receipt of that message.

Owns: ``run_round_trips`` (the clock and the hand-over between the two, for any protocol: the
protocol gives ``produce`` -- send one message, return when acknowledged -- and ``receive``
-- return once the next message has been read, long-polling at the tail), the Iggy pair
(``iggy_round_trips``: SEND_MESSAGES of one message; the consumer polls by offset with rill's
poll that waits, POLL_MESSAGES_WAITING 1031: one request, as an Iggy client of rill's tails),
and ``ROUND_TRIPS`` / ``WARMUP`` / ``WAIT_MS``. The Kafka pair (Produce
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
    """``warmup`` then ``count`` round trips (see the module doc); the recorder's result.

    The two hand over through bare futures, one of each kind per round trip (the consumer
    asked; the time it received): the harness adds no task, queue or ``asyncio.wait`` to a
    round trip, so the client's event loop -- shared by both, and on the round trip's path
    between the produce's acknowledgement and the consumer's answer -- does little but the
    clients' own work. A consumer that stops cancels both futures: the round trips stop
    with its error."""
    loop = asyncio.get_running_loop()
    clock = time.perf_counter
    hand_over = _HandOver(loop)

    async def consumer() -> None:
        for _ in range(warmup + count):
            hand_over.asked.set_result(None)
            await receive()
            hand_over.arrived.set_result(clock())

    reader = loop.create_task(consumer())
    reader.add_done_callback(hand_over.consumer_ended)
    try:
        for number in range(warmup + count):
            if number == warmup:
                recorder.start()
            await hand_over.next(hand_over.asked, reader)
            # a new one for the next ask: the consumer asks again only once it has read
            # the message produced below, so it never sees the old one
            hand_over.asked = loop.create_future()
            await asyncio.sleep(0)  # let the consumer write its request before the produce
            began = clock()
            await produce()
            received = await hand_over.next(hand_over.arrived, reader)
            hand_over.arrived = loop.create_future()  # (likewise)
            if number >= warmup:
                recorder.record(received - began, 1, message_size)
        return recorder.finish()
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


class _HandOver:
    """The futures the producer awaits next: ``asked`` (the consumer's request for the next
    message is on its way) and ``arrived`` (the consumer's clock when it had that message)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.asked: asyncio.Future[None] = loop.create_future()
        self.arrived: asyncio.Future[float] = loop.create_future()

    def consumer_ended(self, reader: asyncio.Task[None]) -> None:
        """The consumer stopped (failed, or was cancelled at the end): what the producer
        awaits is cancelled (``next`` tells why)."""
        for future in (self.asked, self.arrived):
            future.cancel()

    @staticmethod
    async def next(future: asyncio.Future[Any], reader: asyncio.Task[None]) -> Any:
        """``future``'s result; the consumer's error if it stopped instead."""
        try:
            return await future
        except asyncio.CancelledError:
            if not reader.done() or reader.cancelled():
                raise  # the producer itself is cancelled
        error = reader.exception()
        if error is not None:
            raise error
        raise RuntimeError("the round-trip consumer stopped")


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
                polled = await tail.poll_messages_waiting(
                    stream_id, 1, consumer, partition_id, PollingStrategy.offset(cursor), 1,
                    max_wait_ms=WAIT_MS)
                if polled.count:
                    cursor += polled.count
                    return

        return await run_round_trips(produce, receive, count, recorder, message_size, warmup)
    finally:
        for client in clients:
            await client.close()
