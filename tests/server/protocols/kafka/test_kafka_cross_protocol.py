"""One log, every protocol (issue 13 item 5) on a real server: what librdkafka (confluent-kafka)
writes under every codec is read by the Iggy SDK over TCP, the HTTP JSON API and the ``rill``
CLI as Iggy messages (offsets, payloads, keys as ``rill.key``, headers, µs timestamps, Iggy
checksums, exact counts inside batches, auto-commit); what the Iggy SDK writes into the Kafka
stream is read by confluent-kafka and kafka-python (keys, values, headers, ms timestamps,
offsets, ListOffsets), and what confluent-kafka and kafka-python produce into an Iggy-format
topic (made by the SDK or HTTP) is converted on the way in, read back by both sides, the
idempotence rule kept (issue 27 item 1); what the Iggy SDK (over TCP and QUIC), the HTTP
JSON API and the CLI send into a Kafka topic becomes native RecordBatch v2 batches that
librdkafka reads (ids dropped, deduplication not applied, bad input answered with Iggy's
errors, writing nothing). The Spark connector's reads are in tests/spark/test_kafka_topics.py."""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import time
import uuid
import zlib

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from rill import errors
from rill.client import Client, HeaderKind, HeaderValue, Message, PollingStrategy
from rill.protocol.kafka.errors import ErrorCode
from test_kafka_data import list_offset, produce
from kafka_link import Raw, bootstrap
from test_kafka_idempotence import idempotent_batch, new_producer

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COUNT = 120
BASE_MS = 1_700_000_000_000
ENV = {"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
       "RILL_KAFKA_ANONYMOUS_USER": "iggy", "RILL_HTTP_ENABLED": "true",
       "RILL_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "true"}


SERVER_ENV = ENV


@pytest.fixture
def iggy(server):
    with Client(server.address, reconnect=False) as client:
        client.login_user("iggy", "iggy")
        yield client


def expected(index: int) -> tuple[bytes | None, bytes | None, int, list]:
    """(key, value, timestamp ms, headers) of Kafka record ``index``: every 10th has no key,
    every 7th is a tombstone (null value), each has a duplicated header key."""
    key = None if index % 10 == 0 else f"key-{index}".encode()
    value = None if index % 7 == 3 else f"value-{index}-".encode() * 5
    return key, value, BASE_MS + 3 * index, [("n", b"first"), ("i", str(index).encode()),
                                             ("n", str(index).encode())]


def produce_kafka(server, compression: str) -> str:
    address = bootstrap(server)
    topic = f"x-{compression}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": address})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1,
                                                replication_factor=1)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": address, "compression.type": compression,
                         "linger.ms": 50, "batch.num.messages": 40, "acks": "all"})
    for index in range(COUNT):
        key, value, timestamp, headers = expected(index)
        producer.produce(topic, key=key, value=value, partition=0, timestamp=timestamp,
                         headers=headers)
    assert producer.flush(20) == 0
    return topic


def check_iggy_message(message, index: int) -> None:
    key, value, timestamp, _ = expected(index)
    assert message.offset == index
    assert message.payload == (value or b"")  # a tombstone is an empty payload
    assert message.timestamp == timestamp * 1000
    assert message.checksum == zlib.crc32(message.payload)
    assert message.id == 0
    wanted = {} if key is None else {"rill.key": HeaderValue.raw(key)}
    wanted |= {"n": HeaderValue.raw(str(index).encode()),  # the last duplicate wins
               "i": HeaderValue.raw(str(index).encode())}
    assert message.headers == wanted


@pytest.mark.parametrize("compression", CODECS)
def test_iggy_sdk_reads_a_kafka_topic_under_every_codec(server, iggy, compression):
    topic = produce_kafka(server, compression)
    polled = iggy.poll_messages("kafka", topic, partition_id=1,
                                strategy=PollingStrategy.offset(0), count=1000)
    assert polled.count == COUNT and polled.current_offset == COUNT - 1
    for index, message in enumerate(polled.messages):
        check_iggy_message(message, index)
    # inside a batch: exactly the offsets asked for, and auto-commit goes on from there
    middle = iggy.poll_messages("kafka", topic, partition_id=1,
                                strategy=PollingStrategy.offset(45), count=7)
    assert [m.offset for m in middle.messages] == list(range(45, 52))
    # by timestamp: exact to the record, though the Kafka format indexes whole batches
    timed = iggy.poll_messages("kafka", topic, partition_id=1, count=2,
                               strategy=PollingStrategy.timestamp(expected(50)[2] * 1000 - 1))
    assert [m.offset for m in timed.messages] == [50, 51]
    last = iggy.poll_messages("kafka", topic, partition_id=1, strategy=PollingStrategy.last(),
                              count=3)
    assert [m.offset for m in last.messages] == [COUNT - 3, COUNT - 2, COUNT - 1]
    for start in (0, 5, 10):
        step = iggy.poll_messages("kafka", topic, consumer=9, partition_id=1,
                                  strategy=PollingStrategy.next(), count=5, auto_commit=True)
        assert [m.offset for m in step.messages] == list(range(start, start + 5))


def test_http_api_reads_a_kafka_topic(server):
    topic = produce_kafka(server, "zstd")
    login = httpx.post(f"{server.http_url}/users/login",
                       json={"username": "iggy", "password": "iggy"})
    token = login.json()["access_token"]["token"]
    answer = httpx.get(f"{server.http_url}/streams/kafka/topics/{topic}/messages",
                       params={"partition_id": 1, "kind": "offset", "value": 10, "count": 3},
                       headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["messages"]) == 3 and body["current_offset"] == COUNT - 1
    for index, message in zip(range(10, 13), body["messages"]):
        key, value, timestamp, _ = expected(index)
        assert message["offset"] == index and message["timestamp"] == timestamp * 1000
        assert base64.b64decode(message["payload"]) == (value or b"")
        assert message["id"] == 0 and message["checksum"] == zlib.crc32(value or b"")
        keys = {} if key is None else {
            "rill.key": {"kind": "raw", "value": base64.b64encode(key).decode()}}
        assert message["headers"] == keys | {
            "n": {"kind": "raw", "value": base64.b64encode(str(index).encode()).decode()},
            "i": {"kind": "raw", "value": base64.b64encode(str(index).encode()).decode()}}


def test_the_cli_reads_a_kafka_topic(server, tmp_path):
    topic = produce_kafka(server, "lz4")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RILL_")}
    env.update(RILL_HOME=str(tmp_path), RILL_ADDRESS=server.address, RILL_USERNAME="iggy",
               RILL_PASSWORD="iggy", NO_COLOR="1", TERM="dumb")
    rill = os.path.join(os.path.dirname(os.sys.executable), "rill")
    done = subprocess.run([rill, "--json", "message", "poll", "kafka", topic, "--partition", "1",
                           "--offset", "21", "--count", "2", "--encoding", "base64"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    polled = json.loads(done.stdout)
    assert polled["count"] == 2
    messages = polled["messages"]
    assert [m["offset"] for m in messages] == [21, 22]
    assert [base64.b64decode(m["payload"]) for m in messages] == [expected(21)[1], expected(22)[1]]
    assert messages[0]["headers"]["rill.key"]["kind"] == "raw"
    assert messages[0]["timestamp"] == expected(21)[2] * 1000


# -- Iggy -> Kafka ---------------------------------------------------------------------------

def iggy_topic(server, iggy) -> tuple[str, list]:
    """An Iggy-format topic in the Kafka stream, written by the Iggy SDK: what its poll shows."""
    name = "iggy-" + uuid.uuid4().hex[:8]
    try:
        iggy.create_stream("kafka")
    except Exception:  # noqa: BLE001 - it exists
        pass
    iggy.create_topic("kafka", name, partitions_count=1)
    iggy.send_messages("kafka", name, [
        Message(b"first", headers={"rill.key": HeaderValue.raw(b"k1"),
                                   "trace": HeaderValue.string("abc"),
                                   "n": HeaderValue.int(HeaderKind.UINT32, 7)}),
        Message(b"second", id=99),
    ], partitioning=1)
    iggy.send_messages("kafka", name, [Message(b"third", headers={
        "flag": HeaderValue.bool(True)})], partitioning=1)
    polled = iggy.poll_messages("kafka", name, partition_id=1, strategy=PollingStrategy.first(),
                                count=10).messages
    assert len(polled) == 3
    return name, polled


WANTED = [
    (b"k1", b"first", [("trace", b"abc"), ("n", (7).to_bytes(4, "little"))]),
    (None, b"second", []),
    (None, b"third", [("flag", b"\x01")]),
]


def test_librdkafka_reads_an_iggy_topic(server, iggy):
    name, polled = iggy_topic(server, iggy)
    consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": "g-" + name,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(name, 0, 0)])
        got = []
        while len(got) < 3:
            message = consumer.poll(10)
            assert message is not None, got
            assert message.error() is None, message.error()
            got.append(message)
        low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10)
        assert (low, high) == (0, 3)
        # ListOffsets by time: the first record at or after the second one's ms
        second_ms = polled[1].timestamp // 1000
        found = consumer.offsets_for_times([TopicPartition(name, 0, second_ms)], timeout=10)
        assert found[0].offset == (0 if polled[0].timestamp // 1000 >= second_ms else 1)
    finally:
        consumer.close()
    assert [m.offset() for m in got] == [0, 1, 2]
    assert [(m.key(), m.value(), m.headers() or []) for m in got] == WANTED
    assert [m.timestamp() for m in got] == [(1, p.timestamp // 1000) for p in polled]


def test_kafka_python_reads_an_iggy_topic(server, iggy):
    name, polled = iggy_topic(server, iggy)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(server), enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    try:
        partition = KpTopicPartition(name, 0)
        consumer.assign([partition])
        consumer.seek(partition, 1)
        got = [next(consumer), next(consumer)]
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in got] == [
        (1, None, b"second", [], polled[1].timestamp // 1000),
        (2, None, b"third", [("flag", b"\x01")], polled[2].timestamp // 1000)]


# -- Kafka writers -> an Iggy topic (issue 27 item 1) ---------------------------------------

def empty_iggy_topic(iggy, name: str) -> None:
    try:
        iggy.create_stream("kafka")
    except Exception:  # noqa: BLE001 - it exists
        pass
    iggy.create_topic("kafka", name, partitions_count=1)


def http_topic(server, name: str) -> None:
    """An Iggy-format topic made through the HTTP API (the Kafka stream exists)."""
    login = httpx.post(f"{server.http_url}/users/login",
                       json={"username": "iggy", "password": "iggy"})
    token = login.json()["access_token"]["token"]
    made = httpx.post(f"{server.http_url}/streams/kafka/topics",
                      json={"name": name, "partitions_count": 1, "message_expiry": 0,
                            "compression_algorithm": "none", "max_topic_size": 0,
                            "replication_factor": 1},
                      headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert made.status_code in (200, 201), made.text


KAFKA_WRITES = [(f"key-{n}".encode() if n % 3 else None, f"value-{n}".encode() * (n + 1),
                 BASE_MS + 10 * n, [("trace", f"t{n}".encode()), ("n", b"%d" % n)])
                for n in range(12)]


def check_iggy_topic_written_by_kafka(server, iggy, name: str) -> None:
    """What KAFKA_WRITES wrote, read back by the Iggy SDK and by librdkafka."""
    polled = iggy.poll_messages("kafka", name, partition_id=1, strategy=PollingStrategy.first(),
                                count=100).messages
    assert [m.offset for m in polled] == list(range(len(KAFKA_WRITES)))
    for message, (key, value, timestamp, headers) in zip(polled, KAFKA_WRITES):
        assert (message.payload, message.timestamp, message.id) == (value, timestamp * 1000, 0)
        assert message.checksum == zlib.crc32(value)
        wanted = {} if key is None else {"rill.key": HeaderValue.raw(key)}
        assert message.headers == wanted | {name: HeaderValue.raw(raw) for name, raw in headers}
    got = consume_kafka(server, name, len(KAFKA_WRITES))
    assert [(m.offset(), m.key(), m.value(), m.timestamp(), m.headers()) for m in got] == [
        (n, key, value, (1, timestamp), headers)
        for n, (key, value, timestamp, headers) in enumerate(KAFKA_WRITES)]


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_librdkafka_produces_into_an_iggy_sdk_topic(server, iggy, compression):
    name = "ik-" + uuid.uuid4().hex[:8]
    empty_iggy_topic(iggy, name)
    producer = Producer({"bootstrap.servers": bootstrap(server), "compression.type": compression,
                         "linger.ms": 20, "acks": "all", "enable.idempotence": True})
    for key, value, timestamp, headers in KAFKA_WRITES:
        producer.produce(name, key=key, value=value, partition=0, timestamp=timestamp,
                         headers=headers)
    assert producer.flush(20) == 0
    check_iggy_topic_written_by_kafka(server, iggy, name)


def test_kafka_python_produces_into_an_http_topic(server, iggy):
    name = "hk-" + uuid.uuid4().hex[:8]
    empty_iggy_topic(iggy, "hk-first-" + uuid.uuid4().hex[:8])  # the Kafka stream exists
    http_topic(server, name)
    producer = KafkaProducer(bootstrap_servers=bootstrap(server), compression_type="gzip",
                             linger_ms=20)
    try:
        for key, value, timestamp, headers in KAFKA_WRITES:
            producer.send(name, key=key, value=value, partition=0, timestamp_ms=timestamp,
                          headers=headers)
        producer.flush(20)
    finally:
        producer.close(10)
    check_iggy_topic_written_by_kafka(server, iggy, name)


def test_an_idempotent_producer_keeps_its_sequences_on_an_iggy_topic(server, iggy):
    name, _ = iggy_topic(server, iggy)  # offsets 0..2 written by the Iggy SDK
    raw = Raw(server)
    try:
        producer_id = new_producer(raw)
        first = idempotent_batch(producer_id, 0, 0, [b"a", b"b"])
        assert produce(raw, name, first).base_offset == 3
        retried = produce(raw, name, first)  # the retry of a batch: its original offset
        assert (retried.error_code, retried.base_offset) == (ErrorCode.NONE, 3)
        gap = produce(raw, name, idempotent_batch(producer_id, 0, 5, [b"gap"]))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(raw, name, idempotent_batch(producer_id, 0, 2, [b"c"])).base_offset == 5
        assert list_offset(raw, name, -1).offset == 6
    finally:
        raw.close()
    polled = iggy.poll_messages("kafka", name, partition_id=1, strategy=PollingStrategy.offset(3),
                                count=10).messages
    assert [(m.offset, m.payload) for m in polled] == [(3, b"a"), (4, b"b"), (5, b"c")]


# -- Iggy writers -> a Kafka topic -----------------------------------------------------------

def kafka_topic(server) -> str:
    """A topic created through Kafka (format kafka-v2), one partition."""
    name = "kt-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap(server)})
    for future in admin.create_topics([NewTopic(name, num_partitions=1,
                                                replication_factor=1)]).values():
        future.result(10)
    return name


def consume_kafka(server, name: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": "g-" + name,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(name, 0, 0)])
        got = []
        while len(got) < count:
            message = consumer.poll(10)
            assert message is not None, got
            assert message.error() is None, message.error()
            got.append(message)
        assert consumer.poll(0.2) is None
    finally:
        consumer.close()
    return got


def test_iggy_sdk_http_and_cli_write_into_a_kafka_topic(server, iggy, tmp_path):
    name = kafka_topic(server)
    before_ms = int(time.time() * 1000)
    iggy.send_messages("kafka", name, [
        Message(b"sdk-0", id=99, headers={"rill.key": HeaderValue.raw(b"k0"),
                                          "trace": HeaderValue.string("abc"),
                                          "n": HeaderValue.int(HeaderKind.UINT32, 7)}),
        Message(b"sdk-1")], partitioning=1)
    host, port = server.quic_address
    with Client(f"{host}:{port}", transport="quic", ca_file=server.certificate,
                reconnect=False) as quic:
        quic.login_user("iggy", "iggy")
        quic.send_messages("kafka", name, [Message(b"quic", headers={
            "rill.key": HeaderValue.raw(b"qk")})], partitioning=1)
    login = httpx.post(f"{server.http_url}/users/login",
                       json={"username": "iggy", "password": "iggy"})
    token = login.json()["access_token"]["token"]
    sent = httpx.post(
        f"{server.http_url}/streams/kafka/topics/{name}/messages",
        headers={"Authorization": f"Bearer {token}"}, timeout=30,
        json={"partitioning": {"kind": "partition_id",
                               "value": base64.b64encode(struct.pack("<I", 1)).decode()},
              "messages": [{"payload": base64.b64encode(b"http").decode(), "headers": {
                  "rill.key": {"kind": "raw", "value": base64.b64encode(b"hk").decode()}}}]})
    assert sent.status_code in (200, 201, 204), sent.text
    env = {k: v for k, v in os.environ.items() if not k.startswith("RILL_")}
    env.update(RILL_HOME=str(tmp_path), RILL_ADDRESS=server.address, RILL_USERNAME="iggy",
               RILL_PASSWORD="iggy", NO_COLOR="1", TERM="dumb")
    rill = os.path.join(os.path.dirname(os.sys.executable), "rill")
    done = subprocess.run([rill, "message", "send", "kafka", name, "cli", "--partition", "1",
                           "--header", "src:string:cli"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    after_ms = int(time.time() * 1000)
    got = consume_kafka(server, name, 5)
    assert [m.offset() for m in got] == [0, 1, 2, 3, 4]
    assert [(m.key(), m.value(), m.headers() or []) for m in got] == [
        (b"k0", b"sdk-0", [("trace", b"abc"), ("n", (7).to_bytes(4, "little"))]),
        (None, b"sdk-1", []), (b"qk", b"quic", []), (b"hk", b"http", []),
        (None, b"cli", [("src", b"cli")])]
    stamps = [m.timestamp() for m in got]
    assert all(kind == 1 for kind, _ in stamps)  # CreateTime, the server's append time
    assert before_ms <= stamps[0][1] <= stamps[4][1] <= after_ms
    assert stamps[0][1] == stamps[1][1]  # one SEND, one batch, one append time
    # Iggy readers get them back through the read conversion: the id is not kept
    polled = iggy.poll_messages("kafka", name, partition_id=1, strategy=PollingStrategy.first(),
                                count=10).messages
    assert [(m.offset, m.id, m.payload, m.timestamp) for m in polled] == [
        (m.offset(), 0, m.value(), m.timestamp()[1] * 1000) for m in got]
    assert polled[0].headers == {"rill.key": HeaderValue.raw(b"k0"),
                                 "trace": HeaderValue.raw(b"abc"),
                                 "n": HeaderValue.raw((7).to_bytes(4, "little"))}
    # ListOffsets by time finds them (exact to the record)
    raw = Raw(server)
    try:
        found = list_offset(raw, name, stamps[3][1])
        assert found.offset == (2 if stamps[2][1] == stamps[3][1] else 3)
        assert found.timestamp == stamps[3][1]
    finally:
        raw.close()


def test_message_ids_are_not_deduplicated_in_a_kafka_topic(server, iggy):
    name = kafka_topic(server)
    for _ in range(2):
        iggy.send_messages("kafka", name, [Message(b"same", id=7)], partitioning=1)
    assert [m.value() for m in consume_kafka(server, name, 2)] == [b"same", b"same"]
    # the server does deduplicate: an Iggy-format topic keeps the first only
    other, _ = iggy_topic(server, iggy)
    for _ in range(2):
        iggy.send_messages("kafka", other, [Message(b"same", id=7)], partitioning=1)
    assert iggy.poll_messages("kafka", other, partition_id=1, strategy=PollingStrategy.offset(3),
                              count=10).count == 1


def test_a_bad_send_into_a_kafka_topic_gets_iggy_errors_and_writes_nothing(server, iggy):
    name = kafka_topic(server)
    iggy.send_messages("kafka", name, [Message(b"good")], partitioning=1)
    region = b"".join([bytes(16), struct.pack("<I", 0), struct.pack("<I", 3), b"abc"])
    with pytest.raises(errors.InvalidCommand):
        iggy.send_messages_raw("kafka", name, 1, region[:-1])  # cut short
    big = [Message(b"x", headers={"h": HeaderValue.raw(b"v" * 255)}) for _ in range(400)]
    with pytest.raises(errors.TooBigHeadersPayload):  # 400 x 255 header bytes > 100,000
        iggy.send_messages("kafka", name, big, partitioning=1)
    assert [m.value() for m in consume_kafka(server, name, 1)] == [b"good"]
    iggy.send_messages("kafka", name, [Message(b"after")], partitioning=1)
    assert [m.value() for m in consume_kafka(server, name, 2)] == [b"good", b"after"]
