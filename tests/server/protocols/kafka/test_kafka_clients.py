"""Other real Kafka clients on the Kafka listener: confluent-kafka 2.16.1 (librdkafka 2.16)
creates a topic, produces keyed messages with headers under every compression codec clients
use (none, gzip, snappy, lz4, zstd: stored as sent, never recompressed) and reads them back
exactly; kafka-python and aiokafka 0.14 read what librdkafka wrote (the codecs they can decode
here); aiokafka produces and reads back its own; Debian's kcat (librdkafka 2.0) lists, produces
(creating the topic on first use) and consumes; kafkajs 2.2.4 (npm) creates, produces (gzip)
and consumes in a consumer group."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafka_link import bootstrap

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COUNT = 200


def _messages() -> list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]:
    """(partition, key, value, headers) of every message, in produce order."""
    return [(index % 2, f"key-{index}".encode(), f"value-{index}-".encode() * 20,
             [("n", str(index).encode()), ("n", b"again")]) for index in range(COUNT)]


def _produce(server, compression: str) -> str:
    address = bootstrap(server)
    topic = f"ck-{compression}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": address})
    for future in admin.create_topics([NewTopic(topic, num_partitions=2,
                                                replication_factor=1)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": address, "compression.type": compression,
                         "linger.ms": 20, "acks": "all"})
    for partition, key, value, headers in _messages():
        producer.produce(topic, key=key, value=value, partition=partition, headers=headers)
    assert producer.flush(20) == 0
    return topic


@pytest.mark.parametrize("compression", CODECS)
def test_librdkafka_reads_back_what_it_wrote(server, compression: str) -> None:
    topic = _produce(server, compression)
    consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    received = []
    while len(received) < COUNT:
        message = consumer.poll(10)
        assert message is not None, f"only {len(received)} of {COUNT} arrived"
        assert message.error() is None, message.error()
        received.append(message)
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5) == (0, COUNT // 2)
    consumer.close()
    expected = _messages()
    for partition in (0, 1):
        got = [(m.offset(), m.key(), m.value(), m.headers()) for m in received
               if m.partition() == partition]
        want = [(offset, key, value, headers) for offset, (_, key, value, headers)
                in enumerate(m for m in expected if m[0] == partition)]
        assert got == want


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_kafka_python_reads_what_librdkafka_wrote(server, compression: str) -> None:
    topic = _produce(server, compression)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(server), enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    consumer.assign([KpTopicPartition(topic, 0)])
    consumer.seek(KpTopicPartition(topic, 0), 0)
    got = [(record.offset, record.key, record.value, record.headers)
           for _, record in zip(range(COUNT // 2), consumer)]
    consumer.close()
    want = [(offset, key, value, headers) for offset, (_, key, value, headers)
            in enumerate(m for m in _messages() if m[0] == 0)]
    assert got == want


async def _aiokafka_read(address: str, topic: str, partition: int, count: int) -> list:
    consumer = AIOKafkaConsumer(bootstrap_servers=address, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([AioTopicPartition(topic, partition)])
        consumer.seek(AioTopicPartition(topic, partition), 0)
        got: list = []
        while len(got) < count:
            batches = await consumer.getmany(timeout_ms=10_000)
            assert batches, f"only {len(got)} of {count} arrived"
            for records in batches.values():
                got += [(r.offset, r.key, r.value, [(k, v) for k, v in r.headers])
                        for r in records]
        return got
    finally:
        await consumer.stop()


def test_aiokafka_reads_what_librdkafka_wrote(server) -> None:
    topic = _produce(server, "gzip")
    got = asyncio.run(_aiokafka_read(bootstrap(server), topic, 1, COUNT // 2))
    want = [(offset, key, value, headers) for offset, (_, key, value, headers)
            in enumerate(m for m in _messages() if m[0] == 1)]
    assert got == want


def test_aiokafka_reads_back_what_it_wrote(server) -> None:
    address = bootstrap(server)
    topic = _produce(server, "none")  # (creates the topic; partition 1 gets aiokafka's)

    async def scenario() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=address, compression_type="gzip")
        await producer.start()
        try:
            for index in range(50):
                await producer.send_and_wait(topic, key=b"a%d" % index, value=b"b%d" % index,
                                             partition=1, headers=[("via", b"aiokafka")])
        finally:
            await producer.stop()
        return await _aiokafka_read(address, topic, 1, COUNT // 2 + 50)

    got = asyncio.run(scenario())
    assert got[COUNT // 2:] == [(COUNT // 2 + index, b"a%d" % index, b"b%d" % index,
                                 [("via", b"aiokafka")]) for index in range(50)]


def _kcat(server, *arguments: str, given: str = "") -> str:
    done = subprocess.run(["kcat", "-b", bootstrap(server), *arguments], input=given,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kcat_produces_lists_and_consumes(server) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    lines = "".join(f"k{index}:v{index}\n" for index in range(5))
    _kcat(server, "-P", "-t", topic, "-K:", "-H", "via=kcat", "-z", "gzip", given=lines)
    listing = _kcat(server, "-L", "-t", topic)
    assert f'topic "{topic}" with 1 partitions' in listing and "leader 0" in listing
    consumed = _kcat(server, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p %o %k=%s %h\n")
    assert consumed.splitlines() == [f"0 {index} k{index}=v{index} via=kcat" for index in range(5)]


def test_kafkajs_produces_and_consumes_in_a_group(server) -> None:
    modules = os.environ.get("RILL_KAFKAJS_MODULES", ".node-kafkajs/node_modules")
    assert os.path.isdir(os.path.join(modules, "kafkajs")), (
        f"kafkajs is not installed in {modules} (./run test installs it)")
    topic = f"kjs-{uuid.uuid4().hex[:8]}"
    script = os.path.join(os.path.dirname(__file__), "kafkajs_roundtrip.js")
    done = subprocess.run(["node", script, bootstrap(server), topic], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NODE_PATH": modules})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "0 0 k0=v0 kafkajs", "0 1 k2=v2 kafkajs", "0 2 k4=v4 kafkajs",
        "1 0 k1=v1 kafkajs", "1 1 k3=v3 kafkajs"]
