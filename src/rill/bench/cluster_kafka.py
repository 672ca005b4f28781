"""The Kafka side of ``rill bench cluster``: confluent-kafka producers and consumers, one
process per partition, against a cluster's Kafka listeners.

Owns: ``KafkaActor`` (what one process does: produce ``batches`` batches to its partition with
the given ``acks``, or read them all back from offset 0), ``run_kafka_actors`` (the processes,
started together through a barrier, their ``ActorResult``), ``create_topic`` (AdminClient,
partitions and replication factor) and ``wait_in_sync`` (Metadata until every partition has a
leader and its full ISR).

The clients follow Metadata to each partition's leader (librdkafka does), as any Kafka user's
would. A producer's batch is ``messages_per_batch`` × ``produce``: one ProduceRequest of one
RecordBatch (full, so librdkafka sends it at once). It keeps ``in_flight`` batches unanswered
at most, producing the next one while earlier ones wait for their acks, as a Kafka client's
``max.in.flight.requests.per.connection`` allows (5 by default in Kafka's Java client); 1
waits for each answer. A batch's round trip is from its first produce to the delivery report of its
last message. A consumer is assigned its partition at offset 0 (no group) and ``consume``s
until it read every message.
"""

from __future__ import annotations

import collections
import multiprocessing
import queue
import time
import traceback
from dataclasses import dataclass
from typing import Any

from rill.bench.actors import payload
from rill.bench.results import ActorResult, Recorder

TIMEOUT = 30.0  # seconds a flush, a consume or a metadata answer may take
JOIN_TIMEOUT = 10.0
QUIET = 3  # librdkafka logs errors only (not its notices about its own shutdown)


class KafkaBenchError(RuntimeError):
    """A Kafka actor or the topic's set-up failed; the message says which and why."""


@dataclass(frozen=True)
class KafkaActor:
    name: str
    kind: str  # "producer" | "consumer"
    bootstrap: str
    topic: str
    partition: int  # 0-based (Kafka's)
    acks: str  # "all" | "1" | "0" (producers)
    messages_per_batch: int
    message_size: int
    batches: int
    in_flight: int = 1  # batches a producer keeps unanswered at most

    def batch_bytes(self) -> int:
        return self.messages_per_batch * (self.message_size + 64) + 4096

    def producer_config(self) -> dict[str, Any]:
        size = self.batch_bytes()
        return {"bootstrap.servers": self.bootstrap, "acks": self.acks,
                "linger.ms": 5000, "batch.num.messages": self.messages_per_batch,
                "batch.size": size, "message.max.bytes": max(1_000_000, 2 * size),
                "queue.buffering.max.messages": max(100_000, 2 * self.messages_per_batch),
                "queue.buffering.max.kbytes": max(1_048_576, 2 * size // 1024),
                "compression.type": "none", "enable.idempotence": False, "log_level": QUIET}

    def consumer_config(self) -> dict[str, Any]:
        size = self.batch_bytes()
        return {"bootstrap.servers": self.bootstrap, "group.id": "rill-bench-cluster",
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "max.partition.fetch.bytes": max(1_048_576, 2 * size),
                "fetch.max.bytes": max(52_428_800, 4 * size), "log_level": QUIET}


def _produce(actor: KafkaActor, barrier: Any) -> ActorResult:
    from confluent_kafka import KafkaException, Producer

    failures: list[Any] = []
    acknowledged = 0  # messages whose delivery report came

    def delivered(error: Any, message: Any) -> None:
        nonlocal acknowledged
        acknowledged += 1
        if error is not None:
            failures.append(error)

    producer = Producer({**actor.producer_config(), "on_delivery": delivered})
    producer.list_topics(actor.topic, timeout=TIMEOUT)  # learn the leader before the clock
    body = payload(actor.message_size)
    size = actor.messages_per_batch
    produce, poll, clock = producer.produce, producer.poll, time.perf_counter
    barrier.wait(TIMEOUT * 10)
    recorder = Recorder(actor.name, "producer")
    recorder.start()
    began: collections.deque[float] = collections.deque()  # each unanswered batch's start
    answered = 0  # batches

    def settle(most: int) -> None:
        """Poll until at most ``most`` batches are unanswered, recording each answered one."""
        nonlocal answered
        waited_since = clock()
        while True:
            while began and acknowledged >= (answered + 1) * size:
                answered += 1
                recorder.record(clock() - began.popleft(), size, size * actor.message_size)
            if failures:
                raise KafkaException(failures[0])
            if len(began) <= most:
                return
            if clock() - waited_since > TIMEOUT:
                raise KafkaException(f"{len(began) * size} messages not acknowledged within "
                                     f"{TIMEOUT:g} s")
            poll(0.05)

    for _ in range(actor.batches):
        began.append(clock())
        for _ in range(size):
            produce(actor.topic, body, partition=actor.partition)
        settle(actor.in_flight - 1)
    producer.flush(TIMEOUT)
    settle(0)
    return recorder.finish()


def _consume(actor: KafkaActor, barrier: Any) -> ActorResult:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(actor.consumer_config())
    try:
        consumer.list_topics(actor.topic, timeout=TIMEOUT)
        consumer.assign([TopicPartition(actor.topic, actor.partition, 0)])
        remaining = total = actor.batches * actor.messages_per_batch
        consume, clock = consumer.consume, time.perf_counter
        barrier.wait(TIMEOUT * 10)
        recorder = Recorder(actor.name, "consumer")
        recorder.start()
        while remaining > 0:
            began = clock()
            messages = consume(num_messages=min(actor.messages_per_batch, remaining), timeout=TIMEOUT)
            latency = clock() - began
            if not messages:
                raise KafkaException(f"no message within {TIMEOUT:g} s ({total - remaining} of {total} read)")
            failed = [message.error() for message in messages if message.error() is not None]
            if failed:
                raise KafkaException(failed[0])
            recorder.record(latency, len(messages), sum(map(len, messages)))
            remaining -= len(messages)
        return recorder.finish()
    finally:
        consumer.close()


def kafka_actor_main(actor: KafkaActor, barrier: Any, results: Any) -> None:
    """A process's entry point: its result dict, or one line saying why it failed."""
    try:
        result = _produce(actor, barrier) if actor.kind == "producer" else _consume(actor, barrier)
        results.put(("result", actor.name, result.to_dict()))
    except BaseException as error:  # noqa: BLE001 -- everything must reach the parent
        barrier.abort()
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        results.put(("error", actor.name, f"{actor.name}: {detail}"))


def run_kafka_actors(actors: list[KafkaActor]) -> list[ActorResult]:
    """Run the actors (one "spawn" process each) to their end; results in ``actors`` order."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(actors))
    results = context.Queue()
    processes = [context.Process(target=kafka_actor_main, args=(actor, barrier, results),
                                 name=f"rill-bench-{actor.name}", daemon=True) for actor in actors]
    done: dict[str, ActorResult] = {}
    try:
        for process in processes:
            process.start()
        while len(done) < len(actors):
            try:
                kind, name, value = results.get(timeout=1.0)
            except queue.Empty:
                if any(process.exitcode not in (None, 0) for process in processes):
                    raise KafkaBenchError("a Kafka actor's process died without a word") from None
                continue
            if kind == "error":
                raise KafkaBenchError(value)
            done[name] = ActorResult.from_dict(value)
    finally:
        barrier.abort()
        for process in processes:
            process.join(JOIN_TIMEOUT)
            if process.exitcode is None:
                process.kill()
                process.join(5)
    return [done[actor.name] for actor in actors]


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": QUIET})
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                           replication_factor=replication_factor)],
                                 operation_timeout=TIMEOUT, request_timeout=TIMEOUT)[topic]
    try:
        future.result(timeout=TIMEOUT)
    except KafkaException as error:
        raise KafkaBenchError(f"cannot create Kafka topic {topic}: {error.args[0].str()}") from None


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": QUIET})
    admin.delete_topics([topic], operation_timeout=TIMEOUT, request_timeout=TIMEOUT)[topic].result(TIMEOUT)


def wait_in_sync(bootstrap: str, topic: str, partitions: int, replication_factor: int,
                 timeout: float = TIMEOUT) -> None:
    """Until Metadata shows every partition with a leader and all its replicas in sync."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": QUIET})
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
        rows = [] if found is None or found.error is not None else list(found.partitions.values())
        if len(rows) == partitions and all(row.leader >= 0 and len(row.isrs) == replication_factor
                                           for row in rows):
            return
        if time.monotonic() > deadline:
            raise KafkaBenchError(f"Kafka topic {topic}: no leader with a full ISR on every partition "
                                  f"within {timeout:g} s")
        time.sleep(0.1)  # another process's state: polled
