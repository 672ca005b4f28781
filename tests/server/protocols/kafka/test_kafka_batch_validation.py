"""A produced batch checked and repaired as Kafka's broker does (issue 27 item 5), on a real
server's Kafka listener: a batch whose maxTimestamp is -1 (Sarama 1.22) is stored with the
maxTimestamp of its records and a valid CRC-32C (read back by librdkafka with ``check.crcs``),
ListOffsets by time finds it, and retention keeps its fresh records (it deleted them at the
first pass once their segment was sealed, the batch being indexed at time 0); batches whose
offset deltas or counts disagree, or that claim LogAppendTime, are refused and write nothing."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from crc32c import crc32c

from rill.protocol.kafka import apis, record_batch, request_class
from rill.protocol.kafka.errors import ErrorCode
from server_process import RillProcess

from kafka_link import KAFKA_ENV, Raw, bootstrap
from test_kafka_data import fetch, high_watermark, list_offset, new_topic, produce

CreateTopics = request_class(apis.CREATE_TOPICS)


def sarama_batch(timestamps: list[int], offset_deltas: list[int] | None = None,
                 attributes: int = 0, value_size: int = 8) -> bytes:
    """A RecordBatch v2 as Sarama 1.22 sends it: maxTimestamp -1 (one record per timestamp,
    in ms; the records' offset deltas 0..n-1 unless given)."""
    block = bytearray()
    for number, timestamp in enumerate(timestamps):
        delta = number if offset_deltas is None else offset_deltas[number]
        record_batch.put_record(block, delta, timestamp - timestamps[0], b"k%d" % number,
                                b"v%d-" % number + b"x" * value_size)
    return record_batch.build(bytes(block), len(timestamps), len(timestamps) - 1, timestamps[0],
                              -1, attributes)


def stored_header(raw: Raw, topic: str, offset: int = 0) -> tuple[tuple, bytes]:
    records = bytes(fetch(raw, topic, offset).responses[0].partitions[0].records)
    return record_batch.HEADER.unpack_from(records, 0), records


def test_a_max_timestamp_of_minus_one_is_stored_recomputed_and_found_by_time(server, raw):
    topic = new_topic(raw)
    now = int(time.time() * 1000)
    times = [now - 3000, now - 1000, now - 2000]
    assert produce(raw, topic, sarama_batch(times)).error_code == 0
    header, records = stored_header(raw, topic)
    assert header[8] == now - 1000  # maxTimestamp: the newest record's
    assert header[4] == crc32c(records[21:12 + header[1]])
    # ListOffsets by time: the first record at or after it (by the batch's indexed time)
    found = list_offset(raw, topic, now - 1500)
    assert (found.offset, found.timestamp) == (1, now - 1000)
    found = list_offset(raw, topic, -3)  # the max timestamp
    assert (found.offset, found.timestamp) == (1, now - 1000)
    consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": "v-" + topic,
                         "check.crcs": True, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append((message.offset(), message.timestamp()[1], message.key()))
    finally:
        consumer.close()
    assert seen == [(n, times[n], b"k%d" % n) for n in range(3)]


def test_offset_deltas_out_of_order_are_refused_and_nothing_written(raw):
    topic = new_topic(raw)
    now = int(time.time() * 1000)
    answer = produce(raw, topic, sarama_batch([now, now, now], offset_deltas=[0, 2, 1]))
    assert answer.error_code == ErrorCode.INVALID_RECORD and answer.base_offset == -1
    assert "record 1: offsetDelta 2, not 1" in answer.error_message
    assert high_watermark(raw, topic) == 0
    assert produce(raw, topic, sarama_batch([now, now])).base_offset == 0


def test_a_count_the_records_do_not_hold_is_refused_and_nothing_written(raw):
    topic = new_topic(raw)
    now = int(time.time() * 1000)
    block = bytearray()
    for number in range(3):
        record_batch.put_record(block, number, 0, None, b"v")
    short = record_batch.build(bytes(block), 2, 1, now, now)  # declares 2, holds 3
    answer = produce(raw, topic, short)
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert "8 bytes after the last of 2 records" in answer.error_message
    assert high_watermark(raw, topic) == 0


def test_a_producer_setting_log_append_time_is_refused(raw):
    topic = new_topic(raw)
    now = int(time.time() * 1000)
    answer = produce(raw, topic, sarama_batch([now], attributes=record_batch.LOG_APPEND_TIME))
    assert answer.error_code == ErrorCode.INVALID_TIMESTAMP
    assert "LogAppendTime" in answer.error_message
    assert high_watermark(raw, topic) == 0


# -- retention -----------------------------------------------------------------------------

RETENTION_ENV = {**KAFKA_ENV, "RILL_SYSTEM_SEGMENT_SIZE": "2000",
                 "RILL_RETENTION_INTERVAL": "200 ms"}


def topic_with_retention(raw: Raw, retention_ms: int) -> str:
    name = "r-" + uuid.uuid4().hex[:12]
    config = CreateTopics.CreatableTopic.CreatableTopicConfig(name="retention.ms",
                                                              value=str(retention_ms))
    topic = CreateTopics.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                        assignments=(), configs=(config,))
    body = raw.call(apis.CREATE_TOPICS, 7, CreateTopics(topics=(topic,), timeout_ms=5000,
                                                         validate_only=False))
    assert body.topics[0].error_code == 0
    return name


def test_retention_keeps_fresh_records_of_a_batch_sent_without_max_timestamp(tmp_path):
    process = RillProcess(tmp_path / "data", env=RETENTION_ENV).start()
    link = Raw(process)
    try:
        fresh = topic_with_retention(link, 3_600_000)  # 1 h
        old = topic_with_retention(link, 3_600_000)
        now = int(time.time() * 1000)
        for number in range(8):  # ~700 bytes each: sealed segments of ~2 KB
            sent = sarama_batch([now, now + number], value_size=600)
            assert produce(link, fresh, sent).error_code == 0
            stale = sarama_batch([now - 7_200_000, now - 7_200_000 + number], value_size=600)
            assert produce(link, old, stale).error_code == 0  # 2 h old: expired
        # the retention pass that deletes the old topic's sealed segments has seen the fresh one
        deadline = time.monotonic() + 30
        while list_offset(link, old, -2).offset == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list_offset(link, old, -2).offset > 0
        assert list_offset(link, fresh, -2).offset == 0  # nothing of the fresh topic is gone
        assert high_watermark(link, fresh) == 16
        found = list_offset(link, fresh, now + 3)
        assert (found.offset, found.timestamp) == (7, now + 3)
    finally:
        link.close()
        process.kill()
