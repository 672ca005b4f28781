"""The kafka-bare row of ``rill bench kafka``: a real bare Kafka broker process written to and
read back by confluent-kafka (every byte, contiguous offsets, the file holding each batch), its
requests answered one by one through rill's Kafka codec (offsets stamped, whole batches
fetched, fsync for ``always``, the versions rill serves), a bad start as PeerUnavailable, and
the row in the Kafka conclusion without a floor."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from rill.bench.compare import KAFKA_TARGETS, run_compare
from rill.bench.compare_report import KAFKA_FLOORS, NAMES
from rill.bench.peers import PeerUnavailable, Workload, run_async
from rill.bench.peers.registry import peer_classes
from rill.bench.peers import kafka_bare
from rill.bench.peers.kafka import TOPIC
from rill.bench.peers.kafka_bare import SERVED_APIS, KafkaBarePeer, KafkaBareServer
from rill.protocol.kafka import (
    ErrorCode,
    apis,
    decode_response,
    encode_request,
    record_batch,
    request_class,
)

MESSAGES, SIZE, BATCH = 3000, 100, 1000


class _KnownPayloads(Workload):
    """The workload with payloads the test can check (message i of a batch: byte i % 251)."""

    def payloads(self) -> list[bytes]:
        return [bytes([index % 251]) * self.message_size
                for index in range(min(self.batch, self.messages))]


def _read_back(peer: KafkaBarePeer, count: int) -> tuple[list[tuple[int, bytes]], tuple[int, int]]:
    """(offset, value) of ``count`` records from offset 0, with confluent-kafka; the
    watermarks."""
    consumer = Consumer({"bootstrap.servers": peer.bootstrap(), "group.id": "kafka-bare-test",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=BATCH, timeout=1):
                assert message.error() is None, message.error()
                got.append((message.offset(), message.value()))
        low_high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        return got, low_high
    finally:
        consumer.close()


@pytest.mark.parametrize("fsync", ["interval", "always"])
def test_confluent_kafka_writes_and_reads_back_every_record(tmp_path, fsync):
    workload = _KnownPayloads(MESSAGES, SIZE, BATCH, fsync)
    peer = KafkaBarePeer(workload)
    peer.start(tmp_path)
    try:
        assert peer.bootstrap().startswith("127.0.0.1:")
        described = peer.describe()
        produced = run_async(peer.publish)
        consumed = run_async(peer.consume)
        records, watermarks = _read_back(peer, MESSAGES)
    finally:
        peer.stop()
    assert peer.process is None
    assert (described["peer"], described["fsync"], described["file"]) == (
        "kafka-bare", fsync, str(tmp_path / "kafka-bare.log"))
    assert (produced.messages, produced.bytes, len(produced.latencies_us)) == (
        MESSAGES, MESSAGES * SIZE, MESSAGES // BATCH)
    assert (consumed.messages, consumed.bytes) == (MESSAGES, MESSAGES * SIZE)
    assert [offset for offset, _ in records] == list(range(MESSAGES))  # contiguous from 0
    payloads = workload.payloads()
    assert [value for _, value in records] == payloads * (MESSAGES // BATCH)
    assert watermarks == (0, MESSAGES)
    # the file holds every batch as it was sent, base offsets stamped 0, 1000, 2000
    stored = peer.file.read_bytes()
    at, bases = 0, []
    while at < len(stored):
        base, length, *_, count = record_batch.HEADER.unpack_from(stored, at)
        assert count == BATCH
        bases.append(base)
        at += 12 + length
    assert at == len(stored) and bases == [0, BATCH, 2 * BATCH]
    assert all(payload in stored for payload in set(payloads))


# --- the server's answers, one request at a time (no socket needed) ---------------------------

_Produce = request_class(apis.PRODUCE)
_Fetch = request_class(apis.FETCH)
_Metadata = request_class(apis.METADATA)
_ListOffsets = request_class(apis.LIST_OFFSETS)
_CreateTopics = request_class(apis.CREATE_TOPICS)


def _batch(values: list[bytes]) -> bytes:
    block = bytearray()
    for delta, value in enumerate(values):
        record_batch.put_record(block, delta, 0, None, value)
    return record_batch.build(block, len(values), len(values) - 1, 0, 0)


def _call(server: KafkaBareServer, api_key: int, version: int, body) -> object:
    frame = encode_request(api_key, version, 7, body)
    parts = server.answer(memoryview(bytearray(frame[4:])))
    assert parts, "no answer"
    return decode_response(api_key, version, b"".join(parts)[4:]).body


def _produce(server: KafkaBareServer, records: bytes, topic: str = "t", acks: int = -1):
    data = _Produce.TopicProduceData(name=topic, partition_data=(
        _Produce.TopicProduceData.PartitionProduceData(index=0, records=records),))
    body = _Produce(transactional_id=None, acks=acks, timeout_ms=1000, topic_data=(data,))
    if acks == 0:
        frame = encode_request(apis.PRODUCE, 9, 7, body)
        assert server.answer(memoryview(bytearray(frame[4:]))) == []
        return None
    return _call(server, apis.PRODUCE, 9, body).responses[0].partition_responses[0]


def _fetch(server: KafkaBareServer, offset: int, max_bytes: int = 1 << 20, wait_ms: int = 0,
           topic: str = "t"):
    partition = _Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=offset,
                                                 partition_max_bytes=max_bytes)
    body = _Fetch(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20,
                  isolation_level=0, session_id=0, session_epoch=-1,
                  topics=(_Fetch.FetchTopic(topic=topic, partitions=(partition,)),),
                  forgotten_topics_data=(), rack_id="")
    return _call(server, apis.FETCH, 12, body).responses[0].partitions[0]


def _bases(records: bytes) -> list[int]:
    at, bases = 0, []
    while at < len(records):
        base, length, *_ = record_batch.HEADER.unpack_from(records, at)
        bases.append(base)
        at += 12 + length
    assert at == len(records), "a batch cut short"
    return bases


@pytest.fixture
def server(tmp_path):
    server = KafkaBareServer(tmp_path / "log", "interval")
    yield server
    server.listener.close()
    os.close(server.fd)
    os.close(server.read_fd)


def _create(server: KafkaBareServer, name: str = "t", version: int = 7):
    topic = _CreateTopics.CreatableTopic(name=name, num_partitions=3, replication_factor=1,
                                         assignments=(), configs=())
    body = _CreateTopics(topics=(topic,), timeout_ms=1000, validate_only=False)
    return _call(server, apis.CREATE_TOPICS, version, body).topics[0]


def test_produce_stamps_contiguous_offsets_and_fetch_returns_whole_batches(server):
    assert _create(server).error_code == 0
    first, second = _batch([b"a", b"b", b"c"]), _batch([b"d", b"e"])
    assert (_produce(server, first).base_offset, _produce(server, second).base_offset) == (0, 3)
    assert _produce(server, first + second).base_offset == 5  # two batches in one field: 5, 8
    assert _produce(server, _batch([b"f"]), acks=0) is None  # stored, not answered
    stored = server.path.read_bytes()
    assert _bases(stored) == [0, 3, 5, 8, 10]
    assert stored[8:len(first)] == first[8:]  # only the base offset was rewritten

    answer = _fetch(server, 0)
    assert answer.error_code == 0 and answer.high_watermark == answer.last_stable_offset == 11
    assert answer.log_start_offset == 0 and answer.preferred_read_replica == -1
    assert bytes(answer.records) == stored
    assert _bases(bytes(_fetch(server, 4).records)) == [3, 5, 8, 10]  # the batch holding 4
    assert _bases(bytes(_fetch(server, 9, 10).records)) == [8]  # one whole batch past the budget
    assert _bases(bytes(_fetch(server, 0, len(first) + len(second)).records)) == [0, 3]
    assert _fetch(server, 12).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _fetch(server, 0, topic="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _produce(server, b"\x00" * 70).error_code == ErrorCode.CORRUPT_MESSAGE
    assert _produce(server, first, topic="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert server.path.read_bytes() == stored  # refused: nothing written


def test_a_fetch_at_the_end_waits_then_answers_empty(server):
    _create(server)
    started = time.monotonic()
    answer = _fetch(server, 0, wait_ms=200)
    assert time.monotonic() - started >= 0.19
    assert answer.error_code == 0 and not answer.records and answer.high_watermark == 0


@pytest.mark.parametrize("fsync", ["interval", "always"])
def test_always_syncs_before_answering(tmp_path, monkeypatch, fsync):
    server = KafkaBareServer(tmp_path / "log", fsync)
    synced: list[int] = []
    monkeypatch.setattr(kafka_bare.os, "fsync", synced.append)
    try:
        _create(server)
        _produce(server, _batch([b"x"]))
        _produce(server, _batch([b"y"]))
        assert synced == ([server.fd] * 2 if fsync == "always" else [])
        assert server.dirty == (fsync == "interval")  # the background thread's cue
    finally:
        server.listener.close()
        os.close(server.fd)
        os.close(server.read_fd)


def test_metadata_create_topics_list_offsets_and_versions(server):
    body = _Metadata(topics=(_Metadata.MetadataRequestTopic(name="auto"),),
                     allow_auto_topic_creation=True)
    topic = _call(server, apis.METADATA, 12, body).topics[0]
    assert (topic.error_code, topic.name, len(topic.partitions)) == (0, "auto", 1)
    forbidden = _Metadata(topics=(_Metadata.MetadataRequestTopic(name="other"),),
                          allow_auto_topic_creation=False)
    answer = _call(server, apis.METADATA, 12, forbidden)
    assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(0, "127.0.0.1", server.port)]
    assert answer.controller_id == 0
    everything = _call(server, apis.METADATA, 12, _Metadata(topics=None))
    assert [topic.name for topic in everything.topics] == ["auto"]
    assert _create(server, "auto").error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert _create(server, "new", 5).num_partitions == 1  # one partition whatever is asked
    assert _create(server, "old", 2).error_code == 0
    named = _Metadata(topics=(_Metadata.MetadataRequestTopic(name="old"),))
    assert len(_call(server, apis.METADATA, 1, named).topics[0].partitions) == 1

    _produce(server, _batch([b"a", b"b"]), topic="auto")
    asked = [_ListOffsets.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=when)
             for when in (-2, -1)]
    body = _ListOffsets(replica_id=-1, isolation_level=0,
                        topics=(_ListOffsets.ListOffsetsTopic(name="auto", partitions=tuple(asked)),))
    answers = _call(server, apis.LIST_OFFSETS, 7, body).topics[0].partitions
    assert [(answer.error_code, answer.offset) for answer in answers] == [(0, 0), (0, 2)]

    # ApiVersions: the table; at an unknown version, error 35 (v0 layout) and the table
    versions = _call(server, apis.API_VERSIONS, 3, request_class(apis.API_VERSIONS)(
        client_software_name="t", client_software_version="1"))
    assert {entry.api_key: (entry.min_version, entry.max_version)
            for entry in versions.api_keys} == SERVED_APIS
    frame = bytearray(encode_request(apis.API_VERSIONS, 3, 9, request_class(apis.API_VERSIONS)(
        client_software_name="t", client_software_version="1")))
    frame[6:8] = (99).to_bytes(2, "big")
    unsupported = server.answer(memoryview(frame[4:]))
    assert decode_response(apis.API_VERSIONS, 0, b"".join(unsupported)[4:]).body.error_code == 35
    # an API it does not serve, or Produce before RecordBatch v2: the connection is closed
    heartbeat = encode_request(apis.HEARTBEAT, 4, 1, request_class(apis.HEARTBEAT)(
        group_id="g", generation_id=1, member_id="m", group_instance_id=None))
    assert server.answer(memoryview(bytearray(heartbeat[4:]))) is None
    old = encode_request(apis.PRODUCE, 2, 1, _Produce(transactional_id=None, acks=1,
                                                      timeout_ms=1, topic_data=()))
    assert server.answer(memoryview(bytearray(old[4:]))) is None


def test_served_versions_are_rills_own():
    from rill.server.protocols.kafka.dispatch import SERVED

    assert SERVED_APIS == {key: SERVED[key] for key in SERVED_APIS}


# --- the driver -------------------------------------------------------------------------------


def test_a_bad_start_is_peer_unavailable(tmp_path):
    with pytest.raises(PeerUnavailable, match="cannot run"):
        KafkaBarePeer(Workload(10, 10, 10), python=str(tmp_path / "no-python")).start(tmp_path)
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no module named rill' >&2\nexit 1\n")
    broken.chmod(0o755)
    peer = KafkaBarePeer(Workload(10, 10, 10), python=str(broken))
    with pytest.raises(PeerUnavailable, match="kafka-bare server did not start.*no module named rill"):
        peer.start(tmp_path / "work")
    assert peer.process is None


def test_registered_between_rill_kafka_and_tansu_as_a_reference_without_floor():
    assert peer_classes()["kafka-bare"] is KafkaBarePeer
    assert KAFKA_TARGETS.index("rill-kafka") + 1 == KAFKA_TARGETS.index("kafka-bare")
    assert KAFKA_TARGETS.index("kafka-bare") + 1 == KAFKA_TARGETS.index("tansu")
    assert not KafkaBarePeer.memory_only
    assert NAMES["kafka-bare"] == "bare Python Kafka broker (stores)"
    assert not any("kafka-bare" in pair for pair in KAFKA_FLOORS)


def test_the_kafka_conclusion_divides_rill_kafka_by_kafka_bare(tmp_path: Path):
    peers = ("rill-kafka", "kafka-bare")
    report = run_compare(2000, 1000, 1000, fsync_modes=("always",), peers=peers, progress=False,
                         output_dir=tmp_path, machine=False, report_name="kafka")
    rows = report["comparison"]
    assert [(row["target"], row["status"]) for row in rows] == [(peer, "ok") for peer in peers]
    (entry,) = report["kafka"]
    assert (entry["target"], entry["against"], entry["fsync"], entry["floor"]) == (
        "rill-kafka", "kafka-bare", "always", None)
    for phase in ("publish", "consume"):
        assert entry[phase] == pytest.approx(
            rows[0][phase]["mb_per_s"] / rows[1][phase]["mb_per_s"], rel=1e-3)
    (row,) = report["summary"][0]["rows"]
    assert row[0] == "rill-kafka ÷ bare Python Kafka broker (stores)" and row[4] == "—"
    assert "rill-kafka ÷ bare Python Kafka broker (stores)" in (tmp_path / "kafka.html").read_text()
