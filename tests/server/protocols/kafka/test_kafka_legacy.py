"""The seed's Kafka 0.8 dialect on a real server (issue 13 item 3): Produce v0-2 with legacy
MessageSets (magic 0 and 1, every codec, built byte by byte here), read back with Fetch v0-3
(down-converted) and with Fetch v12 (the stored RecordBatch v2), a corrupt CRC writing nothing,
ListOffsets v0, OffsetCommit v0/v1 and OffsetFetch v0, and kafka-python pinned to 0.8.2 and
0.10.0 producing, consuming and committing."""

from __future__ import annotations

import gzip
import struct
import time
import uuid
import zlib

import cramjam
import pytest
import xxhash
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as RdTopicPartition

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.record.memory_records import MemoryRecords

from rill.protocol.kafka import apis, request_class
from rill.protocol.kafka.errors import ErrorCode
from rill.server.protocols.kafka.dispatch import SERVED
from test_kafka_data import batch, fetch, new_topic, produce
from test_kafka_groups import join_as_member
from kafka_link import KAFKA_ENV, Raw, bootstrap

ListOffsets = request_class(apis.LIST_OFFSETS)
OffsetCommit = request_class(apis.OFFSET_COMMIT)
OffsetFetch = request_class(apis.OFFSET_FETCH)

# the SASL helper may require an anonymous user for plain connections; harmless today
LEGACY_ENV = {**KAFKA_ENV, "RILL_KAFKA_ANONYMOUS_USER": "iggy"}


SERVER_ENV = LEGACY_ENV


# -- MessageSets, byte by byte (the seed's layout) ---------------------------------------------

NONE, GZIP, SNAPPY, LZ4 = 0, 1, 2, 3


def _bytes(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def message(magic: int, key: bytes | None, value: bytes | None, offset: int = 0,
            timestamp: int = -1, attributes: int = 0) -> bytes:
    """offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | [timestamp i64] | key | value"""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += _bytes(key) + _bytes(value)
    crc = struct.pack(">I", zlib.crc32(body))
    return struct.pack(">qi", offset, len(crc + body)) + crc + body


def xerial(data: bytes) -> bytes:
    """snappy in the xerial framing old Java clients write: header, then length-prefixed blocks."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for at in range(0, len(data), 64):  # several blocks
        block = bytes(cramjam.snappy.compress_raw(data[at:at + 64]))
        out += struct.pack(">i", len(block)) + block
    return out


def old_kafka_lz4(data: bytes) -> bytes:
    """An LZ4 frame with 0.8-era Kafka's header checksum: xxh32 over the magic too."""
    frame = bytearray(cramjam.lz4.compress(data))
    flags = frame[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    frame[end] = (xxhash.xxh32_intdigest(bytes(frame[:end])) >> 8) & 0xFF
    return bytes(frame)


CODECS = {
    "none": (NONE, None),
    "gzip": (GZIP, gzip.compress),
    "snappy-xerial": (SNAPPY, xerial),
    "snappy-raw": (SNAPPY, lambda data: bytes(cramjam.snappy.compress_raw(data))),
    "lz4": (LZ4, lambda data: bytes(cramjam.lz4.compress(data))),
}

RECORDS = [(None, b"first"), (b"k2", b""), (b"k3", None), (b"k4", b"x" * 300)]


def message_set(magic: int, codec: str, timestamps: list[int]) -> bytes:
    code, compress = CODECS[codec]
    inner = b"".join(message(magic, key, value, offset=i, timestamp=timestamps[i])
                     for i, (key, value) in enumerate(RECORDS))
    if code == NONE:
        return inner
    if code == LZ4 and magic == 0:
        compress = old_kafka_lz4
    if magic == 1:  # a v1 wrapper: inner offsets relative, the wrapper's the last one
        inner = b"".join(message(1, key, value, offset=i, timestamp=timestamps[i])
                         for i, (key, value) in enumerate(RECORDS))
    return message(magic, None, compress(inner), offset=len(RECORDS) - 1,
                   timestamp=max(timestamps), attributes=code)


def legacy_records(data) -> list:
    """Every record of a fetched ``records`` field, parsed by kafka-python (the oracle)."""
    records = MemoryRecords(bytes(data))
    found = []
    while records.has_next():
        found.extend(records.next_batch())
    return found


def list_offsets_v0(raw: Raw, topic: str, timestamp: int, max_offsets: int):
    part = ListOffsets.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=0, timestamp=timestamp, max_num_offsets=max_offsets)
    body = ListOffsets(replica_id=-1, topics=(ListOffsets.ListOffsetsTopic(name=topic,
                                                                           partitions=(part,)),))
    return raw.call(apis.LIST_OFFSETS, 0, body).topics[0].partitions[0]


# -- the served table ----------------------------------------------------------------------------


def test_the_legacy_versions_are_advertised():
    assert SERVED[apis.PRODUCE] == (0, 9)
    assert SERVED[apis.FETCH] == (0, 12)
    assert SERVED[apis.LIST_OFFSETS] == (0, 7)
    assert SERVED[apis.OFFSET_COMMIT] == (0, 8)
    assert SERVED[apis.OFFSET_FETCH] == (0, 7)


# -- Produce v0-2 with MessageSets, read back by every Fetch version ---------------------------


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("magic, produce_version", [(0, 0), (0, 1), (1, 2)])
def test_a_legacy_message_set_reads_back_through_every_fetch_version(raw, magic, produce_version,
                                                                     codec):
    topic = new_topic(raw)
    produce(raw, topic, batch([(b"before", b"v2", 1_600_000_000_000)]))  # offset 0
    stamps = [1_700_000_000_000 + i for i in range(len(RECORDS))]
    before = int(time.time() * 1000)
    answer = produce(raw, topic, message_set(magic, codec, stamps), version=produce_version)
    after = int(time.time() * 1000)
    assert answer.error_code == 0 and answer.base_offset == 1
    if produce_version >= 2:
        if magic == 1:
            assert answer.log_append_time_ms == -1  # CreateTime
        else:
            assert before <= answer.log_append_time_ms <= after
    expected_times = stamps if magic == 1 else None
    for version in range(4):
        partition = fetch(raw, topic, 1, version=version).responses[0].partitions[0]
        assert partition.error_code == 0 and partition.high_watermark == 1 + len(RECORDS)
        records = legacy_records(partition.records)
        want_magic = 0 if version < 2 else 1
        assert [r.offset for r in records] == [1, 2, 3, 4]
        assert [(r.key, r.value) for r in records] == RECORDS
        for record in records:
            assert record.magic == want_magic
            assert record.validate_crc()
        if want_magic == 0:
            assert all(r.timestamp is None for r in records)
        elif magic == 1:
            assert [r.timestamp for r in records] == stamps
            assert all(r.timestamp_type == 0 for r in records)
        else:  # magic 0 had no time: the broker's append time, as LogAppendTime
            assert all(before <= r.timestamp <= after and r.timestamp_type == 1 for r in records)
    # modern consumers read the same records from the stored RecordBatch v2
    modern = legacy_records(fetch(raw, topic, 1, version=12).responses[0].partitions[0].records)
    assert [(r.offset, r.key, r.value) for r in modern] == [
        (1 + i, key, value) for i, (key, value) in enumerate(RECORDS)]
    if expected_times is not None:
        assert [r.timestamp for r in modern] == expected_times
    else:
        assert len({r.timestamp for r in modern}) == 1
        assert before <= modern[0].timestamp <= after and modern[0].timestamp_type == 1
    # and the v2 batch produced before reads back on the legacy path too (down-converted)
    [first] = legacy_records(fetch(raw, topic, 0, version=3).responses[0].partitions[0].records)[:1]
    assert (first.offset, first.key, first.value, first.timestamp) == (
        0, b"before", b"v2", 1_600_000_000_000)


@pytest.mark.parametrize("corrupt", ["outer", "inner"])
def test_a_corrupt_crc_is_refused_and_nothing_is_written(raw, corrupt):
    topic = new_topic(raw)
    if corrupt == "outer":
        data = bytearray(message(0, b"k", b"value") + message(0, b"k", b"second", offset=1))
        data[-1] ^= 0x01  # the second message's last value byte
    else:
        inner = bytearray(message(1, b"k", b"value", timestamp=5))
        inner[-1] ^= 0x01
        data = bytearray(message(1, None, gzip.compress(bytes(inner)), timestamp=5,
                                 attributes=GZIP))  # the wrapper's own CRC is right
    answer = produce(raw, topic, bytes(data), version=2)
    assert answer.error_code == ErrorCode.CORRUPT_MESSAGE
    assert answer.base_offset == -1
    assert fetch(raw, topic, 0, version=0).responses[0].partitions[0].high_watermark == 0
    fixed = produce(raw, topic, message(0, b"k", b"good"), version=0)  # the link goes on
    assert (fixed.error_code, fixed.base_offset) == (0, 0)


def test_a_wrapper_inflating_past_64_mib_is_too_large_and_nothing_is_written(raw):
    topic = new_topic(raw)
    inner = message(0, None, bytes(64 << 20))  # 64 MiB of zeros: a 65 KB gzip
    bomb = message(0, None, gzip.compress(inner, compresslevel=1), attributes=GZIP)
    answer = produce(raw, topic, bomb, version=0)
    assert answer.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert fetch(raw, topic, 0, version=0).responses[0].partitions[0].high_watermark == 0


def test_fetch_v3_honours_max_bytes_in_whole_messages(raw):
    topic = new_topic(raw)
    data = b"".join(message(0, None, bytes([65 + i]) * 100, offset=i) for i in range(5))
    assert produce(raw, topic, data, version=0).error_code == 0
    one = len(message(1, None, b"A" * 100))  # 134 bytes down-converted to magic 1
    partition = fetch(raw, topic, 0, version=3, max_bytes=1 << 20,
                      partition_max_bytes=2 * one + 10).responses[0].partitions[0]
    assert len(partition.records) == 2 * one
    assert [r.value for r in legacy_records(partition.records)] == [b"A" * 100, b"B" * 100]
    partition = fetch(raw, topic, 3, version=3, max_bytes=one + 1,
                      partition_max_bytes=1 << 20).responses[0].partitions[0]
    assert [r.offset for r in legacy_records(partition.records)] == [3]
    # the first partition gets one whole message even when it alone is larger than allowed
    partition = fetch(raw, topic, 1, version=1, partition_max_bytes=10).responses[0].partitions[0]
    assert [(r.offset, r.value) for r in legacy_records(partition.records)] == [(1, b"B" * 100)]


def test_list_offsets_v0(raw):
    topic = new_topic(raw)
    assert list_offsets_v0(raw, topic, -1, 10).old_style_offsets == (0,)
    produce(raw, topic, batch([(None, b"a", 1000), (None, b"b", 2000)]))
    produce(raw, topic, batch([(None, b"c", 3000), (None, b"d", 4000)]))
    assert list_offsets_v0(raw, topic, -1, 10).old_style_offsets == (4, 0)
    assert list_offsets_v0(raw, topic, -1, 1).old_style_offsets == (4,)
    assert list_offsets_v0(raw, topic, -2, 10).old_style_offsets == (0,)
    assert list_offsets_v0(raw, topic, 2500, 10).old_style_offsets == (2, 0)
    assert list_offsets_v0(raw, topic, 500, 10).old_style_offsets == (0,)
    assert list_offsets_v0(raw, topic, 9000, 10).old_style_offsets == (4, 0)
    assert list_offsets_v0(raw, topic, -1, 0).old_style_offsets == ()
    unknown = list_offsets_v0(raw, "no-such-" + topic, -1, 1)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _commit(raw: Raw, version: int, group: str, topic: str, offset: int, **fields) -> int:
    part = OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_metadata="m", **fields)
    body = OffsetCommit(group_id=group, topics=(OffsetCommit.OffsetCommitRequestTopic(
        name=topic, partitions=(part,)),), **({} if version == 0 else
                                              {"generation_id_or_member_epoch": -1,
                                               "member_id": ""}))
    return raw.call(apis.OFFSET_COMMIT, version, body).topics[0].partitions[0].error_code


def _fetched(raw: Raw, version: int, group: str, topic: str) -> int:
    body = OffsetFetch(group_id=group, topics=(OffsetFetch.OffsetFetchRequestTopic(
        name=topic, partition_indexes=(0,)),))
    [partition] = raw.call(apis.OFFSET_FETCH, version, body).topics[0].partitions
    assert partition.error_code == 0
    return partition.committed_offset


def test_offset_commit_v0_v1_and_offset_fetch_v0(raw):
    topic = new_topic(raw)
    produce(raw, topic, message(0, None, b"a") + message(0, None, b"b", offset=1), version=0)
    group = "g-" + uuid.uuid4().hex[:8]
    assert _fetched(raw, 0, group, topic) == -1
    assert _commit(raw, 0, group, topic, 1) == 0
    assert _fetched(raw, 0, group, topic) == 1
    assert _fetched(raw, 7, group, topic) == 1  # the same positions as the newer versions
    assert _commit(raw, 1, group, topic, 2, commit_timestamp=-1) == 0
    assert _fetched(raw, 0, group, topic) == 2
    assert _commit(raw, 0, group, topic, 99) == ErrorCode.OFFSET_OUT_OF_RANGE


def test_offset_commit_v0_is_stored_whatever_the_groups_members(raw):
    # 0.8 kept v0 commits in ZooKeeper, outside any group membership: no member, no generation
    topic = new_topic(raw)
    produce(raw, topic, message(0, None, b"a") + message(0, None, b"b", offset=1), version=0)
    group = "g-" + uuid.uuid4().hex[:8]
    join_as_member(raw, group)
    assert _commit(raw, 1, group, topic, 1) == ErrorCode.UNKNOWN_MEMBER_ID  # v1 is checked
    assert _fetched(raw, 0, group, topic) == -1
    assert _commit(raw, 0, group, topic, 2) == 0
    assert _fetched(raw, 0, group, topic) == 2


# -- kafka-python pinned to old releases -------------------------------------------------------


# what each sends (seen in kafka-python's debug log): 0.8.0 Produce v0 (magic 0), ListOffsets v0,
# Fetch v0, no commits; 0.8.1 the same plus OffsetCommit v0 / OffsetFetch v0 (ZooKeeper's in
# 0.8); 0.8.2 FindCoordinator v0, OffsetCommit v1, OffsetFetch v1; 0.10.0 Produce v2 (magic 1),
# Fetch v2, OffsetCommit v2
@pytest.mark.parametrize("api_version", [(0, 8, 0), (0, 8, 1), (0, 8, 2), (0, 10, 0)])
def test_kafka_python_pinned_to_an_old_release(server, raw, api_version):
    topic = new_topic(raw)
    producer = KafkaProducer(bootstrap_servers=bootstrap(server), api_version=api_version,
                             compression_type="gzip", linger_ms=50, request_timeout_ms=10_000)
    try:
        sent = [producer.send(topic, key=b"k%d" % i, value=b"value %d" % i,
                              **({"timestamp_ms": 1_700_000_000_000 + i}
                                 if api_version >= (0, 10, 0) else {}))
                for i in range(5)]
        producer.flush(10)
        offsets = [future.get(10).offset for future in sent]
    finally:
        producer.close(5)
    assert offsets == [0, 1, 2, 3, 4]
    group = "old-" + uuid.uuid4().hex[:8]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(server), api_version=api_version,
                             group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000,
                             request_timeout_ms=10_000, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        found = []
        deadline = time.monotonic() + 20
        while len(found) < 5 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                found.extend(records)
        assert [(r.offset, r.key, r.value) for r in found] == [
            (i, b"k%d" % i, b"value %d" % i) for i in range(5)]
        if api_version >= (0, 10, 0):
            assert [r.timestamp for r in found] == [1_700_000_000_000 + i for i in range(5)]
        else:
            assert all(r.timestamp in (None, -1) for r in found)
        if api_version >= (0, 8, 1):
            consumer.commit()
            assert consumer.committed(tp) == 5
    finally:
        consumer.close()
    assert _fetched(raw, 0, group, topic) == (5 if api_version >= (0, 8, 1) else -1)


# librdkafka with ApiVersions off speaks the fallback version's dialect: Produce v0 magic 0
# (lz4 with 0.8's header checksum), Fetch v0, ListOffsets v0, OffsetCommit v1 / OffsetFetch v1
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("fallback", ["0.8.2", "0.9.0"])
def test_librdkafka_told_the_broker_is_old(server, raw, fallback, codec):
    topic = new_topic(raw)
    old = {"bootstrap.servers": bootstrap(server), "api.version.request": False,
           "broker.version.fallback": fallback, "log_level": 2}
    failures: list = []
    producer = Producer({**old, "compression.codec": codec, "linger.ms": 20})
    for i in range(5):
        producer.produce(topic, key=b"k%d" % i, value=b"value %d " % i * 20,
                         on_delivery=lambda error, _: failures.append(error) if error else None)
    assert producer.flush(20) == 0 and failures == []
    group = "rd-" + uuid.uuid4().hex[:8]
    consumer = Consumer({**old, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([RdTopicPartition(topic, 0, 0)])
        found = []
        deadline = time.monotonic() + 20
        while len(found) < 5 and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
            if polled is not None:
                assert polled.error() is None, polled.error()
                found.append(polled)
        assert [(m.offset(), m.key(), m.value()) for m in found] == [
            (i, b"k%d" % i, b"value %d " % i * 20) for i in range(5)]
        consumer.commit(asynchronous=False)
        [committed] = consumer.committed([RdTopicPartition(topic, 0)], timeout=10)
        assert committed.offset == 5
    finally:
        consumer.close()
    assert _fetched(raw, 0, group, topic) == 5
