"""Kafka -> Spark: the connector reads topics Kafka clients wrote (record format ``kafka-v2``,
batches compressed with every codec; confluent-kafka and kafka-python). The Python
implementation's columnar reads are answered by the server converting the stored batches
into Iggy records (storage.formats.conversion); the JVM implementation reads the stored
RecordBatch v2 bytes as they are (POLL_STORED_BATCHES) and decodes them itself. Both give the
same rows, by the rules of docs/kafka.md: offsets, keys (none, empty or too long: null),
values (a tombstone: empty), timestamps (ms x 1000) and headers (repeated names: the last
value; empty, too long and ``rill.key`` ones dropped), whole and from inside a batch."""

from __future__ import annotations

import re
import socket
import struct
import urllib.request
import uuid

import cramjam
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from pyspark.sql import functions

from conftest import scan_of
from rill.protocol.kafka import apis, decode_response, encode_request, record_batch, request_class
from server_process import RillProcess

COUNT = 300
BASE_MS = 1_700_000_000_000
# (client, codec): every codec by librdkafka, gzip by kafka-python, and snappy in snappy-java's
# xerial framing (the Java client's) by hand
WRITERS = [("confluent", "none"), ("confluent", "gzip"), ("confluent", "snappy"),
           ("confluent", "lz4"), ("confluent", "zstd"), ("kafka-python", "gzip"),
           ("by-hand", "xerial")]
Produce = request_class(apis.PRODUCE)


@pytest.fixture(scope="module")
def kafka_rill(tmp_path_factory):
    """A rill server with the Kafka listener (the session's shared one has none)."""
    server = RillProcess(tmp_path_factory.mktemp("rill-kafka-spark") / "data", env={
        "RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
        "RILL_KAFKA_ANONYMOUS_USER": "iggy", "RILL_QUIC_ENABLED": "false"}).start()
    yield server
    server.kill()


def record(index: int) -> dict:
    """Record ``index``: keys, values and headers that exercise every rule."""
    key = (None if index % 5 == 0 else b"" if index % 7 == 0 else b"x" * 300 if index % 11 == 0
           else f"k{index}".encode())
    headers = [] if index % 3 == 0 else [
        ("i", str(index).encode()), ("dup", b"first"), ("empty", b""), ("rill.key", b"no"),
        ("long", b"y" * 300), ("dup", b"last")]
    tombstone = index % 13 == 1 and index % 5  # (a record needs a key or a value)
    return {"key": key, "value": None if tombstone else f"v{index}".encode(),
            "partition": index % 2, "timestamp": BASE_MS + index, "headers": headers}


def kafka_topic(server, client: str, codec: str) -> str:
    address = "{}:{}".format(*server.kafka_address)
    topic = f"spark-{client}-{codec}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": address})
    for future in admin.create_topics([NewTopic(topic, num_partitions=2,
                                                replication_factor=1)]).values():
        future.result(10)
    records = [record(index) for index in range(COUNT)]
    if client == "confluent":
        producer = Producer({"bootstrap.servers": address, "compression.type": codec,
                             "linger.ms": 50, "acks": "all"})
        for one in records:
            producer.produce(topic, **one)
        assert producer.flush(20) == 0
    elif client == "by-hand":
        for partition in (0, 1):
            produce_xerial(server, topic, partition, records[partition::2])
    else:
        producer = KafkaProducer(bootstrap_servers=address, compression_type=codec,
                                 linger_ms=50, acks="all")
        for one in records:
            producer.send(topic, key=one["key"], value=one["value"], partition=one["partition"],
                          timestamp_ms=one["timestamp"], headers=one["headers"])
        producer.flush(20)
        producer.close()
    return topic


def produce_xerial(server, topic: str, partition: int, records: list[dict]) -> None:
    """One RecordBatch v2 of ``records``, snappy-compressed in two xerial blocks, sent with a
    Produce request of our own."""
    block = bytearray()
    first = records[0]["timestamp"]
    for delta, one in enumerate(records):
        record_batch.put_record(block, delta, one["timestamp"] - first, one["key"], one["value"],
                                [(name.encode(), value) for name, value in one["headers"]])
    half = len(block) // 2
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(part)) + part for part in (
            bytes(cramjam.snappy.compress_raw(bytes(piece))) for piece in (block[:half],
                                                                          block[half:])))
    batch = record_batch.build(framed, len(records), len(records) - 1, first,
                               records[-1]["timestamp"], attributes=2)
    data = Produce.TopicProduceData(name=topic, partition_data=(
        Produce.TopicProduceData.PartitionProduceData(index=partition, records=batch),))
    body = Produce(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=(data,))
    with socket.create_connection(server.kafka_address, timeout=10) as link:
        link.sendall(encode_request(apis.PRODUCE, 9, 1, body))
        size = struct.unpack(">i", link.recv(4, socket.MSG_WAITALL))[0]
        answer = decode_response(apis.PRODUCE, 9, link.recv(size, socket.MSG_WAITALL))
    assert answer.body.responses[0].partition_responses[0].error_code == 0


@pytest.fixture(scope="module")
def kafka_topics(kafka_rill) -> list[str]:
    return [kafka_topic(kafka_rill, client, codec) for client, codec in WRITERS]


def stored_batch_reads(server) -> int:
    """POLL_STORED_BATCHES requests the server has answered (its metrics)."""
    with urllib.request.urlopen(server.http_url + "/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return sum(int(value) for value in re.findall(
        r'^rill_requests_total\{[^}]*command="poll_stored_batches"[^}]*outcome="ok"\} (\d+)$',
        text, re.M))


def rows_of(spark, options, implementation, **more):
    frame = spark.read.format("rill").options(**options, **more,
                                              implementation=implementation).load()
    assert scan_of(frame) == implementation
    return sorted(frame.select("topic", "partition", "offset", "id", "key", "value", "headers",
                               functions.unix_micros("timestamp").alias("us")).collect())


def test_both_implementations_read_kafka_topics_alike(spark, kafka_rill, kafka_topics):
    options = {"servers": kafka_rill.address, "username": "iggy", "password": "iggy",
               "stream": "kafka", "topics": ",".join(kafka_topics)}
    before = stored_batch_reads(kafka_rill)
    python = rows_of(spark, options, "python")
    assert stored_batch_reads(kafka_rill) == before  # the server converted every record
    jvm = rows_of(spark, options, "jvm")
    # each of the 2 x 7 partition reads: one request that tells the format, then the reads
    # of the stored bytes
    assert stored_batch_reads(kafka_rill) >= before + 2 * 2 * len(kafka_topics)
    assert jvm == python and len(jvm) == COUNT * len(kafka_topics)
    for row in jvm:
        index = int(row.offset) * 2 + row.partition - 1
        expected = record(index)
        assert row.value == (expected["value"] or b"")
        assert row.key == (f"k{index}".encode() if expected["key"] not in (None, b"")
                           and len(expected["key"]) <= 255 else None)
        assert row.us == (BASE_MS + index) * 1000 and row.id == bytes(16)
        assert (dict(row.headers) if row.headers else None) == (
            None if index % 3 == 0 else {"i": str(index).encode(), "dup": b"last"})
        if row.headers:
            assert list(row.headers) == ["i", "dup"]  # a repeated name keeps its first place


def test_a_range_from_inside_a_batch_and_typed_headers(spark, kafka_rill, kafka_topics):
    topic = kafka_topics[4]  # zstd
    options = {"servers": kafka_rill.address, "username": "iggy", "password": "iggy",
               "stream": "kafka", "topic": topic, "headersFormat": "typed",
               "startingOffsets": '{"kafka/%s": {"1": 7, "2": 40}}' % topic,
               "endingOffsets": '{"kafka/%s": {"1": 12, "2": 41}}' % topic}
    jvm = rows_of(spark, options, "jvm")
    assert jvm == rows_of(spark, options, "python")
    assert [(row.partition, row.offset) for row in jvm] == [(1, o) for o in range(7, 12)] + [
        (2, 40)]
    assert dict(jvm[0].headers)["i"].kind == "raw"
