"""Kafka -> Spark: the connector reads a topic Kafka clients wrote (record format ``kafka-v2``,
compressed batches) through its columnar reads, which the server answers by converting the
stored batches into Iggy records (storage.formats.conversion): offsets, keys, values,
timestamps (ms x 1000) and headers, whole and from inside a batch."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import functions

from server_process import RillProcess

COUNT = 300
BASE_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def kafka_rill(tmp_path_factory):
    """A rill server with the Kafka listener (the session's shared one has none)."""
    server = RillProcess(tmp_path_factory.mktemp("rill-kafka-spark") / "data", env={
        "RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
        "RILL_KAFKA_ANONYMOUS_USER": "iggy", "RILL_QUIC_ENABLED": "false",
        "RILL_HTTP_ENABLED": "false"}).start()
    yield server
    server.kill()


def kafka_topic(server, compression: str) -> str:
    address = "{}:{}".format(*server.kafka_address)
    topic = f"spark-{compression}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": address})
    for future in admin.create_topics([NewTopic(topic, num_partitions=2,
                                                replication_factor=1)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": address, "compression.type": compression,
                         "linger.ms": 50, "acks": "all"})
    for index in range(COUNT):
        producer.produce(topic, key=None if index % 5 == 0 else f"k{index}".encode(),
                         value=f"v{index}".encode(), partition=index % 2,
                         timestamp=BASE_MS + index, headers=[("i", str(index).encode())])
    assert producer.flush(20) == 0
    return topic


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_spark_reads_a_kafka_written_topic(spark, kafka_rill, compression):
    topic = kafka_topic(kafka_rill, compression)
    options = {"servers": kafka_rill.address, "username": "iggy", "password": "iggy",
               "stream": "kafka", "topic": topic}
    frame = spark.read.format("rill").options(**options).load()
    rows = frame.select("partition", "offset", "key", "value", "headers",
                        functions.unix_micros("timestamp").alias("us")).collect()
    assert len(rows) == COUNT
    by_value = {row.value: row for row in rows}
    for index in range(COUNT):
        row = by_value[f"v{index}".encode()]
        assert (row.partition, row.offset) == (index % 2 + 1, index // 2)
        assert row.key == (None if index % 5 == 0 else f"k{index}".encode())
        assert row.us == (BASE_MS + index) * 1000
        assert dict(row.headers) == {"i": str(index).encode()}
    # a range that starts inside a stored batch
    some = spark.read.format("rill").options(
        **options, startingOffsets='{"kafka/%s": {"1": 7}}' % topic,
        endingOffsets='{"kafka/%s": {"1": 12}}' % topic).load()
    picked = some.where("partition = 1").select("offset", "value").collect()
    assert sorted((row.offset, row.value) for row in picked) == [
        (offset, f"v{offset * 2}".encode()) for offset in range(7, 12)]
