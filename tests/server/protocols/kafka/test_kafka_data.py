"""Produce, Fetch and ListOffsets on a real server's Kafka listener (issue 13 items 2-4, 6):
kafka-python's producer and consumer reading back exactly what they wrote (keys, values,
headers, timestamps, offsets; gzip), the long poll, ListOffsets, bad batches and unknown
partitions writing nothing, acks=0 answered by silence in order, and data across a restart."""

from __future__ import annotations

import time
import uuid

import pytest

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.protocol.kafka import apis, request_class
from rill.protocol.kafka.errors import ErrorCode
from rill.server.protocols.kafka.dispatch import SERVED
from server_process import RillProcess, session
from kafka_link import KAFKA_ENV, Raw, bootstrap

Produce = request_class(apis.PRODUCE)
Fetch = request_class(apis.FETCH)
ListOffsets = request_class(apis.LIST_OFFSETS)
Metadata = request_class(apis.METADATA)
CreateTopics = request_class(apis.CREATE_TOPICS)


def new_topic(raw: Raw, partitions: int = 1) -> str:
    name = "t-" + uuid.uuid4().hex[:12]
    topic = CreateTopics.CreatableTopic(name=name, num_partitions=partitions,
                                        replication_factor=1, assignments=(), configs=())
    body = raw.call(apis.CREATE_TOPICS, 7, CreateTopics(topics=(topic,), timeout_ms=5000,
                                                         validate_only=False))
    assert body.topics[0].error_code == 0
    return name


def batch(records: list[tuple[bytes | None, bytes | None, int]], compression: int = 0) -> bytes:
    """A RecordBatch v2 as a client builds it: (key, value, timestamp ms) per record."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for offset, (key, value, timestamp) in enumerate(records):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=[])
    return bytes(builder.build())


def produce(raw: Raw, topic: str, records: bytes, partition: int = 0, acks: int = -1,
            version: int = 9):
    data = Produce.TopicProduceData(name=topic, partition_data=(
        Produce.TopicProduceData.PartitionProduceData(index=partition, records=records),))
    body = Produce(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=(data,))
    if acks == 0:
        raw.correlation += 1
        from rill.protocol.kafka import encode_request
        raw.send(encode_request(apis.PRODUCE, version, raw.correlation, body))
        return None
    return raw.call(apis.PRODUCE, version, body).responses[0].partition_responses[0]


def fetch(raw: Raw, topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0,
          min_bytes: int = 1, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
          version: int = 12):
    part = Fetch.FetchTopic.FetchPartition(partition=partition, fetch_offset=offset,
                                           partition_max_bytes=partition_max_bytes)
    body = Fetch(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                 max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                 topics=(Fetch.FetchTopic(topic=topic, partitions=(part,)),),
                 forgotten_topics_data=(), rack_id="")
    return raw.call(apis.FETCH, version, body)


def list_offset(raw: Raw, topic: str, timestamp: int, partition: int = 0, version: int = 7):
    part = ListOffsets.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition,
                                                             timestamp=timestamp)
    body = ListOffsets(replica_id=-1, isolation_level=0, topics=(
        ListOffsets.ListOffsetsTopic(name=topic, partitions=(part,)),))
    return raw.call(apis.LIST_OFFSETS, version, body).topics[0].partitions[0]


def high_watermark(raw: Raw, topic: str, partition: int = 0) -> int:
    return fetch(raw, topic, 0, partition).responses[0].partitions[0].high_watermark


# -- the served table ----------------------------------------------------------------------------


def test_the_data_apis_are_advertised():
    assert SERVED[apis.PRODUCE] == (0, 9)
    assert SERVED[apis.FETCH] == (0, 12)  # 0-3: the seed's dialect (test_kafka_legacy)
    assert SERVED[apis.LIST_OFFSETS] == (0, 7)


# -- kafka-python end to end -----------------------------------------------------------------


def consume_all(server, topic: str, partition: int, count: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(server), enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=5000, request_timeout_ms=10_000,
                             fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        found = []
        deadline = time.monotonic() + 20
        while len(found) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                found.extend(records)
        return found
    finally:
        consumer.close()


@pytest.mark.parametrize("acks,compression", [(0, None), (1, None), ("all", None),
                                              (1, "gzip")])
def test_kafka_python_round_trip(server, raw, acks, compression):
    topic = new_topic(raw)
    producer = KafkaProducer(bootstrap_servers=bootstrap(server), acks=acks,
                             compression_type=compression, enable_idempotence=False,
                             linger_ms=5, request_timeout_ms=10_000)
    base = 1_700_000_000_000
    sent = []
    for number in range(50):
        key = None if number % 7 == 0 else b"key-%d" % number
        value = b"value-%d-" % number + b"x" * (number * 13)
        headers = [("h", b"%d" % number), ("h", b"dup")] if number % 3 else []
        timestamp = base + number * 1000
        sent.append((key, value, headers, timestamp))
        producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=timestamp,
                      partition=0)
    producer.flush(timeout=20)
    producer.close(timeout=20)
    if acks == 0:  # nothing acknowledged: wait until the log holds them all
        deadline = time.monotonic() + 10
        while high_watermark(raw, topic) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.05)
    found = consume_all(server, topic, 0, len(sent))
    assert [record.offset for record in found] == list(range(len(sent)))
    assert [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in found] == sent


# -- long poll ---------------------------------------------------------------------------------


def test_fetch_on_an_empty_partition_returns_when_a_produce_arrives(server, raw):
    topic = new_topic(raw)
    waiting = Raw(server)
    try:
        started = time.monotonic()
        part = Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=0,
                                               partition_max_bytes=1 << 20)
        body = Fetch(replica_id=-1, max_wait_ms=20_000, min_bytes=1, max_bytes=1 << 20,
                     isolation_level=0, session_id=0, session_epoch=-1,
                     topics=(Fetch.FetchTopic(topic=topic, partitions=(part,)),),
                     forgotten_topics_data=(), rack_id="")
        from rill.protocol.kafka import decode_response, encode_request
        waiting.correlation += 1
        waiting.send(encode_request(apis.FETCH, 12, waiting.correlation, body))
        time.sleep(0.3)  # the fetch is waiting now
        assert produce(raw, topic, batch([(b"k", b"v", 1000)])).error_code == 0
        payload = waiting.receive()
        elapsed = time.monotonic() - started
        answer = decode_response(apis.FETCH, 12, payload).body.responses[0].partitions[0]
        assert answer.error_code == 0 and answer.high_watermark == 1
        assert len(answer.records) > 61
        assert elapsed < 10  # woken by the append, long before max_wait_ms
    finally:
        waiting.close()


def test_fetch_max_wait_is_honoured_on_an_empty_partition(raw):
    topic = new_topic(raw)
    started = time.monotonic()
    answer = fetch(raw, topic, 0, max_wait_ms=500).responses[0].partitions[0]
    elapsed = time.monotonic() - started
    assert answer.error_code == 0 and answer.high_watermark == 0 and not answer.records
    assert 0.4 <= elapsed < 5


def test_fetch_bounds_and_out_of_range(raw):
    topic = new_topic(raw)
    first = batch([(None, b"a" * 3000, 1000), (None, b"b", 1001)])
    second = batch([(None, b"c", 1002)])
    assert produce(raw, topic, first).base_offset == 0
    assert produce(raw, topic, second).base_offset == 2
    whole = fetch(raw, topic, 0).responses[0].partitions[0]
    stored = bytes(whole.records)
    assert len(stored) == len(first) + len(second)
    # the client's bytes, only baseOffset and partitionLeaderEpoch (bytes 0-16) rewritten
    assert stored[16:len(first)] == first[16:]
    assert stored[len(first) + 16:] == second[16:]
    assert whole.high_watermark == whole.last_stable_offset == 3 and whole.log_start_offset == 0
    # at least one whole batch even when larger than the limits
    small = fetch(raw, topic, 1, max_bytes=10, partition_max_bytes=10).responses[0].partitions[0]
    assert len(small.records) == len(first)
    assert fetch(raw, topic, 3).responses[0].partitions[0].records in (b"", None)
    beyond = fetch(raw, topic, 4).responses[0].partitions[0]
    assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


# -- ListOffsets -------------------------------------------------------------------------------


def test_list_offsets_earliest_latest_and_by_timestamp(raw):
    topic = new_topic(raw)
    empty = list_offset(raw, topic, 5000)
    assert (empty.offset, empty.timestamp) == (-1, -1)
    produce(raw, topic, batch([(None, b"a", 1000), (None, b"b", 2000), (None, b"c", 3000)]))
    produce(raw, topic, batch([(None, b"d", 4000), (None, b"e", 9000), (None, b"f", 5000)], 1))
    assert list_offset(raw, topic, -2).offset == 0
    assert list_offset(raw, topic, -1).offset == 6
    exact = {t: (p.offset, p.timestamp) for t in (0, 1000, 1500, 2000, 3000, 3001, 4500, 9000)
             for p in [list_offset(raw, topic, t)]}
    assert exact == {0: (0, 1000), 1000: (0, 1000), 1500: (1, 2000), 2000: (1, 2000),
                     3000: (2, 3000), 3001: (3, 4000), 4500: (4, 9000), 9000: (4, 9000)}
    assert (list_offset(raw, topic, 9001).offset, list_offset(raw, topic, 9001).timestamp) == (
        -1, -1)
    maximum = list_offset(raw, topic, -3)
    assert (maximum.offset, maximum.timestamp) == (4, 9000)
    assert list_offset(raw, topic, -1, version=1).offset == 6


# -- bad input writes nothing --------------------------------------------------------------------


def test_a_corrupt_batch_is_refused_and_nothing_written(raw):
    topic = new_topic(raw)
    good = bytearray(batch([(b"k", b"value", 1000)]))
    good[-1] ^= 0xFF  # inside the CRC-32C range
    answer = produce(raw, topic, bytes(good))
    assert answer.error_code == ErrorCode.CORRUPT_MESSAGE and answer.base_offset == -1
    assert high_watermark(raw, topic) == 0
    assert produce(raw, topic, batch([(b"k", b"value", 1000)])).base_offset == 0


def test_produce_to_an_unknown_partition_or_topic_writes_nothing(raw):
    topic = new_topic(raw)
    answer = produce(raw, topic, batch([(None, b"v", 1)]), partition=1)
    assert answer.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert high_watermark(raw, topic) == 0
    missing = produce(raw, "no-such-" + uuid.uuid4().hex[:8], batch([(None, b"v", 1)]))
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    fetched = fetch(raw, topic, 0, partition=3).responses[0].partitions[0]
    assert fetched.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_v2_with_a_batch_posing_as_a_message_set_is_corrupt(raw):
    # magic 1 makes it a legacy MessageSet (test_kafka_legacy): its CRC-32 is then wrong
    topic = new_topic(raw)
    legacy = bytearray(batch([(None, b"v", 1)]))
    legacy[16] = 1  # magic 1
    assert produce(raw, topic, bytes(legacy), version=2).error_code == (
        ErrorCode.CORRUPT_MESSAGE)
    assert high_watermark(raw, topic) == 0
    assert produce(raw, topic, batch([(None, b"v", 1)]), version=2).base_offset == 0


def test_acks_0_gets_no_response_and_the_next_answer_is_in_order(raw):
    topic = new_topic(raw)
    produce(raw, topic, batch([(None, b"silent", 1)]), acks=0)
    body = raw.call(apis.METADATA, 12, Metadata(topics=None, allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    assert topic in {t.name for t in body.topics}
    assert high_watermark(raw, topic) == 1


def test_an_iggy_format_topic_is_produced_to_converted(server, raw):
    """Issue 27 item 1 (was: refused with UNSUPPORTED_FOR_MESSAGE_FORMAT 43): a Produce into
    an Iggy-format topic is converted on the way in; what the kafka-v2 format refuses, a CRC
    that does not match, and a value an Iggy record cannot hold write nothing."""
    new_topic(raw)  # the Kafka stream exists
    name = "iggy-" + uuid.uuid4().hex[:8]
    with session(server) as iggy:
        iggy.create_topic("kafka", name, partitions_count=1)
    # an empty Iggy topic reads as empty (reads are converted: test_kafka_cross_protocol.py)
    fetched = fetch(raw, name, 0).responses[0].partitions[0]
    assert (fetched.error_code, fetched.high_watermark, fetched.records) == (0, 0, b"")
    corrupt = bytearray(batch([(b"k", b"bad", 1)]))
    corrupt[-1] ^= 0xFF  # inside the CRC-32C range
    answer = produce(raw, name, bytes(corrupt))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.CORRUPT_MESSAGE, -1)
    answer = produce(raw, name, batch([(b"k", b"kept", 1), (b"k", None, 2)]))
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert "null or empty value" in answer.error_message
    assert list_offset(raw, name, -1).offset == 0  # nothing of either was written
    answer = produce(raw, name, batch([(b"k", b"v0", 1), (None, b"v1", 2)]))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    answer = produce(raw, name, batch([(b"k2", b"v2", 3)], compression=1))  # gzip, inflated
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 2)
    assert list_offset(raw, name, -1).offset == 3
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(server), enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    try:
        partition = TopicPartition(name, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        got = [next(consumer) for _ in range(3)]
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in got] == [
        (0, b"k", b"v0", 1), (1, None, b"v1", 2), (2, b"k2", b"v2", 3)]


def test_a_failed_acks_0_produce_closes_the_connection(raw):
    topic = new_topic(raw)
    produce(raw, topic, batch([(None, b"v", 1)]), partition=5, acks=0)
    assert raw.receive() is None


def test_fetch_max_bytes_is_shared_by_the_partitions(raw):
    topic = new_topic(raw, partitions=2)
    big = batch([(None, b"x" * 5000, 1)])
    produce(raw, topic, big, partition=0)
    produce(raw, topic, big, partition=1)
    parts = tuple(Fetch.FetchTopic.FetchPartition(partition=p, fetch_offset=0,
                                                  partition_max_bytes=1 << 20) for p in (0, 1))
    body = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=100, isolation_level=0,
                 session_id=0, session_epoch=-1,
                 topics=(Fetch.FetchTopic(topic=topic, partitions=parts),),
                 forgotten_topics_data=(), rack_id="")
    first, second = raw.call(apis.FETCH, 12, body).responses[0].partitions
    assert len(first.records) == len(big)  # one whole batch over the budget
    assert not second.records and second.high_watermark == 1  # budget spent


# -- restart -----------------------------------------------------------------------------------


def test_data_survives_a_restart(tmp_path):
    process = RillProcess(tmp_path / "data", env=KAFKA_ENV).start()
    try:
        link = Raw(process)
        topic = new_topic(link)
        stored = batch([(b"k%d" % n, b"v%d" % n, 1000 + n) for n in range(10)], 1)
        assert produce(link, topic, stored).base_offset == 0
        link.close()
        process.restart()
        link = Raw(process)
        answer = fetch(link, topic, 0).responses[0].partitions[0]
        assert answer.error_code == 0 and answer.high_watermark == 10
        assert bytes(answer.records)[12:] == stored[12:]  # only baseOffset differs (it is 0)
        assert (list_offset(link, topic, 1005).offset, list_offset(link, topic, 1005).timestamp) \
            == (5, 1005)
        link.close()
    finally:
        process.kill()


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_every_served_version(raw, version):
    topic = new_topic(raw)
    stored = batch([(None, b"v", 1)])
    produce(raw, topic, stored)
    answer = fetch(raw, topic, 0, version=version).responses[0].partitions[0]
    assert answer.error_code == 0 and answer.high_watermark == 1
    assert bytes(answer.records)[16:] == stored[16:]


@pytest.mark.parametrize("version", range(1, 8))
def test_list_offsets_every_served_version(raw, version):
    topic = new_topic(raw)
    produce(raw, topic, batch([(None, b"v", 1000), (None, b"w", 2000)]))
    assert list_offset(raw, topic, -1, version=version).offset == 2
    assert list_offset(raw, topic, 1500, version=version).offset == 1


@pytest.mark.parametrize("version", range(0, 10))
def test_produce_every_served_version(raw, version):
    topic = new_topic(raw)
    answer = produce(raw, topic, batch([(None, b"v", 1000)]), version=version)
    assert answer.error_code == 0 and answer.base_offset == 0
