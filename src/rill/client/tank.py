"""A TANK client of rill's own (asyncio), speaking tank-wire-reference.md through
``rill.protocol.tank``: rill's TANK listener's load generator and its test client.

Owns: one TCP connection to a TANK broker (rill's listener or TANK itself) and the requests a
producer or consumer sends: ``produce`` (keys, timestamps in ms, codec none/snappy, explicit
sequence numbers as a SPARSE bundle, or ``first_seq`` as ProduceWithSeqnum 0x05), ``consume``
(several partitions, ``max_wait_ms`` / ``min_bytes``), ``discover_partitions``,
``discover_topics``, ``discover_topology``, ``create_topic``, ``status``, ``ping``.

The request building and response reading are pure functions (``produce_request``,
``produce_results``, ``consume_request``, ``consume_results``), unit-tested against the codec;
the ``TankClient`` methods only add request ids, the socket and waiting. ``pipeline`` writes
requests built with them one behind the other in one write (a load generator's burst).

The connection is an ``asyncio.BufferedProtocol`` (``_TankLink``): the socket's bytes land in
one reused buffer, frames are split there (``TankFrameDecoder``; an answer above the buffer is
read into one of its own) and each answer is decoded and handed to its caller in the same
callback -- no reader task and no stream buffer on the way, which is most of what a
one-message round trip costs a Python client.

Rules kept here: requests are matched to responses by ``request_id`` (a long-polling consume
is answered after later requests); the broker's ping on accept and any later ping are read and
dropped; a client ping gets no answer, so ``ping()`` only writes it. Consume reading follows
§6.7: messages below the requested seq are dropped, reading stops at the first message above
``hwm``, and a partition's ``next_seq`` is the seq to ask for next. When the link drops (or an
answer cannot be read), every waiting call and every later one fails with ``ConnectionError``.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Sequence

from rill.protocol.tank.bundles import CODEC_NONE, CODEC_SNAPPY, decode_chunk, encode_bundle
from rill.protocol.tank.errors import ConsumeFlag, ProduceError
from rill.client.flow import WriteFlow
from rill.protocol.framing import NEED_DATA, Frame, LargeFrame
from rill.protocol.tank.framing import MAX_PAYLOAD_SIZE, TankFrameDecoder
from rill.protocol.tank.messages import (
    ConsumePartition,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    CreateTopicRequest,
    DiscoverPartitionsRequest,
    DiscoverTopicsRequest,
    DiscoverTopologyRequest,
    SEQ_ONLY_NEW,
    MsgId,
    Ping,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
    StatusRequest,
    decode_response,
    encode_request,
)

CODECS = {"none": CODEC_NONE, "snappy": CODEC_SNAPPY}
DEFAULT_PORT = 11011
DEFAULT_FETCH_SIZE = 1024 * 1024
SCRATCH_SIZE = 64 * 1024  # the reused read buffer; a larger answer is read into its own


class TankProduceError(Exception):
    """A Produce answer other than OK for one partition."""

    def __init__(self, topic: str, partition: int, code: int) -> None:
        try:
            name = ProduceError(code).name
        except ValueError:
            name = f"0x{code:02x}"
        super().__init__(f"produce to {topic}/{partition} failed: {name}")
        self.topic, self.partition, self.code = topic, partition, code


@dataclass(slots=True)
class Batch:
    """The messages to append to one partition (one bundle)."""

    topic: str
    partition: int
    values: Sequence[bytes]
    keys: Sequence[bytes | None] | None = None
    timestamps: Sequence[int] | int | None = None  # ms; None: now
    seqs: Sequence[int] | None = None  # explicit numbers: a SPARSE bundle
    codec: str = "none"


@dataclass(slots=True)
class Fetched:
    """What one partition answered to a consume, as columns."""

    topic: str
    partition: int
    flag: int  # ConsumeFlag; UNKNOWN_TOPIC_FLAG for an unknown topic
    hwm: int = 0
    next_seq: int = 0  # what to ask for next
    first_available: int = 0  # boundary-check answers
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    timestamps: list = field(default_factory=list)
    seqs: list = field(default_factory=list)
    partial_bundle_size: int = 0  # the chunk ended inside a bundle of this size


UNKNOWN_TOPIC_FLAG = -1


# --- pure request building / response reading --------------------------------------------------


def produce_request(request_id: int, batches: Sequence[Batch], *, first_seq: int | None = None,
                    now_ms: int = 0, client_id: str = "") -> ProduceRequest:
    """One Produce request for ``batches`` (consecutive batches of one topic share its entry).
    ``first_seq``: a ProduceWithSeqnum (0x05) whose single batch starts at that number (the
    bundle is made SPARSE, as TANK's own client does)."""
    if first_seq is not None and len(batches) != 1:
        raise ValueError("ProduceWithSeqnum takes one batch")
    topics: list[tuple[str, list[ProducePartition]]] = []
    for batch in batches:
        timestamps = now_ms if batch.timestamps is None else batch.timestamps
        seqs = batch.seqs
        if first_seq is not None:
            seqs = range(first_seq, first_seq + len(batch.values))
        bundle = encode_bundle(batch.values, batch.keys, timestamps, seqs,
                               codec=CODECS[batch.codec])
        entry = ProducePartition(batch.partition, bundle, first_seq)
        if topics and topics[-1][0] == batch.topic:
            topics[-1][1].append(entry)
        else:
            topics.append((batch.topic, [entry]))
    return ProduceRequest(request_id, tuple(ProduceTopic(name, tuple(parts))
                                            for name, parts in topics),
                          with_seqnum=first_seq is not None, client_id=client_id)


def produce_results(request: ProduceRequest,
                    response: ProduceResponse) -> list[tuple[str, int, int]]:
    """(topic, partition, code) per partition entry of ``request``."""
    return response.entries(request)


def consume_request(request_id: int, wanted: Sequence[tuple[str, int, int]], *,
                    fetch_size: int = DEFAULT_FETCH_SIZE, max_wait_ms: int = 0,
                    min_bytes: int = 0, client_id: str = "",
                    client_version: int = 2) -> ConsumeRequest:
    """A Consume request for ``(topic, partition, seq)`` entries (consecutive entries of one
    topic share its entry)."""
    topics: list[tuple[str, list[ConsumePartition]]] = []
    for topic, partition, seq in wanted:
        entry = ConsumePartition(partition, seq, fetch_size)
        if topics and topics[-1][0] == topic:
            topics[-1][1].append(entry)
        else:
            topics.append((topic, [entry]))
    return ConsumeRequest(request_id, tuple(ConsumeTopic(name, tuple(parts))
                                            for name, parts in topics),
                          max_wait_ms, min_bytes, client_version, client_id)


def consume_results(request: ConsumeRequest, response: ConsumeResponse) -> list[Fetched]:
    """One ``Fetched`` per partition of the answer (request order), read as §6.7 says."""
    asked = {(t.name, p.partition): p.seq for t in request.topics for p in t.partitions}
    out = []
    for topic in response.topics:
        if topic.unknown_count is not None:
            out.append(Fetched(topic.name, -1, UNKNOWN_TOPIC_FLAG))
            continue
        for part in topic.partitions:
            seq = asked.get((topic.name, part.partition), 0)
            fetched = Fetched(topic.name, part.partition, part.flag, part.hwm, seq,
                              part.first_available)
            if seq == SEQ_ONLY_NEW and part.flag == ConsumeFlag.OK:
                fetched.next_seq = part.hwm + 1  # asked for new messages only, got none yet
            out.append(fetched)
            if part.flag not in (ConsumeFlag.OK, ConsumeFlag.SPARSE_FIRST) or not part.chunk:
                continue
            chunk = decode_chunk(part.chunk, part.base)
            fetched.partial_bundle_size = chunk.partial_bundle_size
            seqs = chunk.seqs  # increasing: the window is found by bisection, not per message
            start = bisect_left(seqs, seq)
            end = max(start, bisect_right(seqs, part.hwm))
            fetched.keys = chunk.keys[start:end]
            fetched.values = chunk.values[start:end]
            fetched.timestamps = chunk.timestamps[start:end]
            fetched.seqs = seqs[start:end]
            if fetched.seqs:
                fetched.next_seq = fetched.seqs[-1] + 1
    return out


# --- the connection -----------------------------------------------------------------------------


class _TankLink(WriteFlow, asyncio.BufferedProtocol):
    """One connection's reading and writing: frames split as they arrive
    (``TankFrameDecoder``), each answer decoded and handed to the call that waits for its
    request id in the same callback -- no reader task, no stream buffer between the socket
    and the caller."""

    def __init__(self, max_response_size: int) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None
        self.waiting: dict[int, asyncio.Future] = {}
        self.broken: Exception | None = None  # why the link can no longer be read
        self.pings_received = 0
        self.closed = asyncio.get_running_loop().create_future()
        # (a large answer's own buffer starts at 1 MiB and grows with what arrives: a broker
        # announcing 256 MiB does not get them allocated before it sends them)
        self._decoder = TankFrameDecoder(
            max_response_size, initial_buffer_size=SCRATCH_SIZE, max_buffer_size=SCRATCH_SIZE)

    # -- connection events --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  (uvloop's is not a subclass)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(ConnectionError(f"the TANK connection dropped: {exc or 'closed by the peer'}"))
        self._decoder = TankFrameDecoder(0)  # let go of a big answer being read
        self.paused = False
        self.wake_writers()
        if not self.closed.done():
            self.closed.set_result(None)

    def eof_received(self) -> bool:
        return False  # the broker closed its side: close ours too

    def gone(self) -> bool:
        return self.broken is not None

    def fail(self, error: Exception) -> None:
        """Every waiting call, and every later one, fails with ``error`` (the first kept)."""
        if self.broken is None:
            self.broken = error
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(error)

    # -- reading ------------------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self._decoder
        if not decoder.buffer_updated(nbytes):
            return  # more of a large answer: nothing to split yet
        while self.broken is None:
            event = decoder.next_frame()
            kind = type(event)
            if kind is Frame:
                self._deliver(event.code, event.payload)
            elif kind is LargeFrame:  # read the rest straight into its own buffer
                decoder.start_large_frame()
            elif event is NEED_DATA:
                return
            else:
                self._abort(ConnectionError(f"a {event.payload_size}-byte response is above "
                                            f"the limit"))

    def _deliver(self, msg_id: int, payload: memoryview) -> None:
        if msg_id == MsgId.PING:
            self.pings_received += 1
            return
        try:  # (a frame's payload is its own bytes: the answer may keep views of it)
            response = decode_response(msg_id, payload)
        except Exception as error:  # a malformed answer: the link cannot be read further
            self._abort(ConnectionError(f"unreadable TANK response: {error!r}"))
            return
        future = self.waiting.pop(response.request_id, None)
        if future is not None and not future.done():
            future.set_result(response)

    def _abort(self, error: Exception) -> None:
        self.fail(error)
        if self.transport is not None:
            self.transport.abort()


class TankClient:
    """One connection; use ``async with TankClient(host, port) as client``."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                 client_id: str = "", max_response_size: int = MAX_PAYLOAD_SIZE) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.max_response_size = max_response_size
        self._link: _TankLink | None = None
        self._ids = itertools.count(1)

    @property
    def pings_received(self) -> int:
        return self._link.pings_received if self._link is not None else 0

    async def __aenter__(self) -> TankClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def connect(self) -> None:
        max_size = self.max_response_size
        _, self._link = await asyncio.get_running_loop().create_connection(
            lambda: _TankLink(max_size), self.host, self.port)

    async def close(self) -> None:
        link = self._link
        if link is None:
            return
        link.fail(ConnectionError("the TANK client was closed"))
        if link.transport is not None:
            link.transport.close()
            await link.closed

    # -- requests ------------------------------------------------------------------------

    async def produce(self, topic: str, partition: int, values: Sequence[bytes], *,
                      keys: Sequence[bytes | None] | None = None,
                      timestamps: Sequence[int] | int | None = None,
                      seqs: Sequence[int] | None = None, first_seq: int | None = None,
                      codec: str = "none") -> None:
        """Append one bundle; raises ``TankProduceError`` unless the broker answers OK."""
        batch = Batch(topic, partition, values, keys, timestamps, seqs, codec)
        for entry in await self.produce_batches([batch], first_seq=first_seq):
            if entry[2] != ProduceError.OK:
                raise TankProduceError(*entry)

    async def produce_batches(self, batches: Sequence[Batch], *,
                              first_seq: int | None = None) -> list[tuple[str, int, int]]:
        """One Produce request for several partitions: (topic, partition, code) per batch."""
        request = produce_request(next(self._ids), batches, first_seq=first_seq,
                                  now_ms=time.time_ns() // 1_000_000, client_id=self.client_id)
        return produce_results(request, await self._call(request))

    async def consume(self, wanted: Sequence[tuple[str, int, int]], *,
                      fetch_size: int = DEFAULT_FETCH_SIZE, max_wait_ms: int = 0,
                      min_bytes: int = 0) -> list[Fetched]:
        """Read from ``(topic, partition, seq)`` entries (seq 0: from the first available)."""
        request = consume_request(next(self._ids), wanted, fetch_size=fetch_size,
                                  max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                  client_id=self.client_id)
        return consume_results(request, await self._call(request))

    async def consume_raw(self, wanted: Sequence[tuple[str, int, int]], *,
                          fetch_size: int = DEFAULT_FETCH_SIZE, max_wait_ms: int = 0,
                          min_bytes: int = 0) -> ConsumeResponse:
        """``consume``'s answer as the codec reads it: flags, bases and high-water marks, the
        chunks undecoded (``protocol.tank.bundles.split_chunk`` / ``decode_header`` count
        them; for a caller that forwards or counts bundles, not messages)."""
        request = consume_request(next(self._ids), wanted, fetch_size=fetch_size,
                                  max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                  client_id=self.client_id)
        return await self._call(request)

    async def discover_partitions(self, topic: str, partitions: Sequence[int] | None = None):
        return await self._call(DiscoverPartitionsRequest(
            next(self._ids), topic, tuple(partitions) if partitions else None))

    async def create_topic(self, topic: str, partitions: int, config: bytes = b"") -> int:
        """The CreateTopicError code."""
        return (await self._call(CreateTopicRequest(next(self._ids), topic, partitions,
                                                    config))).error

    async def discover_topics(self):
        return await self._call(DiscoverTopicsRequest(next(self._ids)))

    async def discover_topology(self):
        return await self._call(DiscoverTopologyRequest(next(self._ids)))

    async def status(self):
        return await self._call(StatusRequest(next(self._ids)))

    async def ping(self) -> None:
        """Write a ping (the broker does not answer it)."""
        link = self._connected()
        link.transport.write(encode_request(Ping()))
        await link.drain()

    def pipeline(self, requests: Sequence) -> list[asyncio.Future]:
        """Write ``requests`` (built with this module's functions, each with its own request
        id) in one write, one behind the other; a future per request, its decoded answer."""
        link = self._connected()
        loop = asyncio.get_running_loop()
        futures = []
        for request in requests:
            futures.append(loop.create_future())
            link.waiting[request.request_id] = futures[-1]
        link.transport.write(b"".join(encode_request(request) for request in requests))
        return futures

    # -- plumbing ------------------------------------------------------------------------

    def _connected(self) -> _TankLink:
        link = self._link
        if link is None:
            raise ConnectionError("the TANK client is not connected")
        if link.broken is not None:
            raise link.broken
        return link

    async def _call(self, request):
        link = self._connected()
        future = asyncio.get_running_loop().create_future()
        request_id = request.request_id
        link.waiting[request_id] = future
        try:
            link.transport.write(encode_request(request))
            if link.paused:
                await link.drain()
            return await future
        finally:
            link.waiting.pop(request_id, None)
