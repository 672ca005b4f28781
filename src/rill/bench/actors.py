"""What runs inside one actor process: a producer, an offset consumer or a group member.

Owns: ``ActorSpec`` (everything an actor needs, picklable for a "spawn" process), the shared
state the parent hands every actor (``Shared``: live counters, the start barrier, the
"producers are done" and "stop" events, the result queue), the message batch builder, and
``actor_main``, the process entry point (uvloop when installed).

An actor connects, logs in, joins its group when it has one, warms up untimed, waits on the
barrier so every actor starts measuring at once, then does round trips one at a time, recording
each with ``results.Recorder`` and adding its messages to its slot of the shared counters (the
parent's progress display reads them). Its ``ActorResult.to_dict()`` (or an error) goes back
on the result queue.

The client is kept cheap so that the server is what is measured: a producer encodes its SEND
payload once and re-sends it with ``AsyncClient.request`` (ids are 0, so the server assigns
them and the same bytes are valid every time); consumers read ``PolledMessages.count`` and the
size of the raw region, never decoding messages.

Stopping rules (batches mode): a producer after ``batches`` batches; an offset consumer after
``batches × messages_per_batch`` messages, or when the producers are done and a whole round of
its partitions returned nothing; a group member when its group has read the group's target
(the members' counters are shared), or after ``EMPTY_GRACE`` seconds of empty polls once the
producers are done. Duration mode: when the time is up (an offset consumer that drained its
partitions in ``poll`` re-reads them from offset 0; a group member rewinds the drained partition).
"""

from __future__ import annotations

import asyncio
import string
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from rill import errors
from rill.bench.results import Recorder

SEND_OVERHEAD = 16 + 4 + 4  # id, headers length, payload length: the bytes a message adds to a SEND
EMPTY_POLL_PAUSE = 0.001  # seconds between polls that found nothing
EMPTY_GRACE = 1.0  # seconds of empty polls after which a group member gives up
BARRIER_TIMEOUT = 300.0
_ALPHABET = string.ascii_lowercase.encode()


@dataclass(frozen=True)
class ActorSpec:
    slot: int  # index into the shared counters
    name: str  # "producer-1", "consumer-2"
    kind: str  # "producer" | "consumer"
    role: str  # "producer" | "consumer" | "group-consumer"
    address: str
    transport: str
    username: str
    password: str
    stream_id: int
    partitions: tuple[int, ...]  # producer: (id,) or () for balanced; consumer: partitions it reads
    messages_per_batch: int
    message_size: int
    batches: int | None  # None in duration mode
    duration: float | None
    warmup: float
    consumer_id: int = 0  # regular consumer id of an offset consumer
    group_id: int = 0
    group_slots: tuple[int, ...] = ()  # counter slots of every member of the group
    group_target: int = 0  # messages the whole group reads (batches mode)
    rewind: bool = False  # re-read from the start when drained (poll in duration mode)
    client_options: dict[str, Any] = field(default_factory=dict)  # ca_file, verify_certificate
    request_timeout: float = 60.0


@dataclass
class Shared:
    """Synchronization objects of one run, made by the parent from a "spawn" context."""

    counters: Any  # multiprocessing.Array("q", actors, lock=False)
    barrier: Any  # multiprocessing.Barrier(actors)
    producers_done: Any  # multiprocessing.Event
    stop: Any  # multiprocessing.Event
    results: Any  # multiprocessing.Queue: ("result", slot, dict) | ("error", slot, code, text)


def payload(size: int) -> bytes:
    """``size`` bytes of repeating a..z (iggy-bench's payload)."""
    return (_ALPHABET * (size // len(_ALPHABET) + 1))[:size]


def send_region(messages: int, size: int) -> bytes:
    """The SEND region of one batch: ``messages`` messages with id 0, no headers, a..z payload."""
    one = bytes(16) + bytes(4) + size.to_bytes(4, "little") + payload(size)
    return one * messages


def send_request(stream_id: int, partition_id: int | None, region: bytes) -> Any:
    """The SEND_MESSAGES request payload, encoded once and re-sent as is."""
    from rill.client.async_client import command_payload
    from rill.protocol.iggy.commands.messages import SendMessages
    from rill.protocol.iggy.primitives import Identifier, Partitioning

    partitioning = Partitioning.balanced() if partition_id is None else Partitioning.partition_id(partition_id)
    return command_payload(SendMessages(Identifier.of(stream_id), Identifier.of(1), partitioning, region))


# --- the process entry point -------------------------------------------------------------------


def actor_main(spec: ActorSpec, shared: Shared) -> None:
    """Run one actor to its end; put its result (or its error) on ``shared.results``."""
    try:
        try:
            import uvloop

            runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
        except ImportError:  # pragma: no cover (uvloop is a dependency except on Windows)
            runner = asyncio.Runner()
        with runner:
            result = runner.run(_run(spec, shared))
        shared.results.put(("result", spec.slot, result.to_dict()))
    except threading.BrokenBarrierError:  # another actor failed first and reported why
        shared.results.put(("aborted", spec.slot, 0, f"{spec.name}: stopped because another actor failed"))
    except errors.RillError as error:
        shared.barrier.abort()
        shared.results.put(("error", spec.slot, error.code, f"{spec.name}: {error.reason or error.name}"))
    except BaseException as error:  # noqa: BLE001 -- everything must reach the parent
        shared.barrier.abort()
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        shared.results.put(("error", spec.slot, 0, f"{spec.name}: {detail}"))


async def _run(spec: ActorSpec, shared: Shared) -> Any:
    from rill.client import AsyncClient

    client = AsyncClient(spec.address, transport=spec.transport, reconnect=False,
                         timeout=spec.request_timeout, **spec.client_options)
    await client.connect()
    try:
        await client.login_user(spec.username, spec.password)
        if spec.role == "producer":
            return await _produce(client, spec, shared)
        if spec.role == "consumer":
            return await _consume(client, spec, shared)
        await client.join_consumer_group(spec.stream_id, 1, spec.group_id)
        return await _consume_group(client, spec, shared)
    finally:
        await client.close()


async def _start_together(shared: Shared) -> None:
    """Wait until every actor is ready (without blocking this actor's event loop)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, shared.barrier.wait, BARRIER_TIMEOUT)


def _finished(spec: ActorSpec, recorder: Recorder, batches_done: int) -> bool:
    if spec.duration is not None:
        return recorder.elapsed() >= spec.duration
    return batches_done >= (spec.batches or 0)


# --- producer ------------------------------------------------------------------------------------


async def _produce(client: Any, spec: ActorSpec, shared: Shared) -> Any:
    from rill.protocol.iggy.commands.messages import SendMessages

    region = send_region(spec.messages_per_batch, spec.message_size)
    request = send_request(spec.stream_id, spec.partitions[0] if spec.partitions else None, region)
    send, code = client.request, SendMessages.CODE
    messages, size = spec.messages_per_batch, len(region)
    warm_until = time.perf_counter() + spec.warmup
    while spec.warmup and time.perf_counter() < warm_until:
        await send(code, request)
    await _start_together(shared)
    counters, slot, clock, stop = shared.counters, spec.slot, time.perf_counter, shared.stop
    recorder = Recorder(spec.name, "producer")
    recorder.start()
    batches = 0
    while not _finished(spec, recorder, batches) and not stop.is_set():
        began = clock()
        await send(code, request)
        recorder.record(clock() - began, messages, size)
        counters[slot] += messages
        batches += 1
    return recorder.finish()


# --- offset consumer -----------------------------------------------------------------------------


async def _consume(client: Any, spec: ActorSpec, shared: Shared) -> Any:
    from rill.protocol.iggy.primitives import Consumer, PollingStrategy

    consumer = Consumer.regular(spec.consumer_id)
    poll, offset = client.poll_messages, PollingStrategy.offset
    partitions = spec.partitions
    per_batch = spec.messages_per_batch
    target = None if spec.duration is not None else (spec.batches or 0) * per_batch

    warm_until = time.perf_counter() + spec.warmup
    cursors = dict.fromkeys(partitions, 0)
    turn = 0
    while spec.warmup and time.perf_counter() < warm_until:
        partition = partitions[turn % len(partitions)]
        turn += 1
        polled = await poll(spec.stream_id, 1, consumer, partition, offset(cursors[partition]), per_batch)
        cursors[partition] = cursors[partition] + polled.count if polled.count else 0
        if not polled.count:
            await asyncio.sleep(EMPTY_POLL_PAUSE)
    await _start_together(shared)

    counters, slot, clock, stop = shared.counters, spec.slot, time.perf_counter, shared.stop
    recorder = Recorder(spec.name, "consumer")
    recorder.start()
    cursors = dict.fromkeys(partitions, 0)
    turn = empty_in_a_row = 0
    while not stop.is_set():
        if target is None:
            if recorder.elapsed() >= (spec.duration or 0):
                break
            count = per_batch
        else:
            count = min(per_batch, target - recorder.messages)
            if count <= 0:
                break
        partition = partitions[turn % len(partitions)]
        turn += 1
        began = clock()
        polled = await poll(spec.stream_id, 1, consumer, partition, offset(cursors[partition]), count)
        latency = clock() - began
        got = polled.count
        if got:
            recorder.record(latency, got, len(polled.raw))
            counters[slot] += got
            cursors[partition] += got
            empty_in_a_row = 0
            continue
        empty_in_a_row += 1
        if empty_in_a_row < len(partitions):
            continue
        empty_in_a_row = 0  # a whole round found nothing new
        if spec.rewind:
            cursors = dict.fromkeys(partitions, 0)
        elif shared.producers_done.is_set():
            break
        else:
            await asyncio.sleep(EMPTY_POLL_PAUSE)
    return recorder.finish()


# --- consumer group member -----------------------------------------------------------------------


async def _consume_group(client: Any, spec: ActorSpec, shared: Shared) -> Any:
    """Poll ``next`` with auto-commit and no partition id: the server picks the member's next
    partition and the group's stored offset, so the members read every message exactly once."""
    from rill.protocol.iggy.primitives import Consumer, PollingStrategy

    consumer = Consumer.group(spec.group_id)
    poll, strategy = client.poll_messages, PollingStrategy.next()
    per_batch = spec.messages_per_batch
    counters = shared.counters

    warm_until = time.perf_counter() + spec.warmup
    while spec.warmup and time.perf_counter() < warm_until:  # no commit: offsets stay put
        polled = await poll(spec.stream_id, 1, consumer, None, strategy, per_batch, False)
        if not polled.count:
            await asyncio.sleep(EMPTY_POLL_PAUSE)
    await _start_together(shared)

    slot, clock, stop = spec.slot, time.perf_counter, shared.stop
    by_duration = spec.duration is not None
    recorder = Recorder(spec.name, "consumer")
    recorder.start()
    empty_since: float | None = None
    while not stop.is_set():
        if by_duration:
            if recorder.elapsed() >= (spec.duration or 0):
                break
            count = per_batch
        else:
            remaining = spec.group_target - sum(counters[member] for member in spec.group_slots)
            if remaining <= 0:
                break
            count = min(per_batch, remaining)
        began = clock()
        polled = await poll(spec.stream_id, 1, consumer, None, strategy, count, True)
        latency = clock() - began
        if polled.count:
            recorder.record(latency, polled.count, len(polled.raw))
            counters[slot] += polled.count
            empty_since = None
            continue
        if by_duration and polled.partition_id:  # drained: read this partition again
            await client.store_consumer_offset(spec.stream_id, 1, 0, consumer, polled.partition_id)
            continue
        now = clock()
        empty_since = empty_since or now
        if not by_duration and shared.producers_done.is_set() and now - empty_since >= EMPTY_GRACE:
            break
        await asyncio.sleep(EMPTY_POLL_PAUSE)
    return recorder.finish()
