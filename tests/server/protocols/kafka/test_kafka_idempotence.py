"""Idempotent producers on a real server's Kafka listener (issue 13 item 8, kafka-notes §5):
InitProducerId (fresh durable ids, KIP-360 epoch bumps, transactional ids refused), the
sequence rule of Produce (a retried batch answers its original offset and is stored once, a gap
is OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH, nothing written for a
refused batch, two connections racing with one batch store it once), producer ids and sequence
state across restarts and crashes, real idempotent clients (confluent-kafka
``enable.idempotence=true``, kafka-python's default producer), and kill -9 under an idempotent
producer: every acknowledged record is in the log exactly once, and no record twice."""

from __future__ import annotations

import threading
import time

import pytest

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from rill.bench.ports import free_port
from rill.protocol.kafka import apis, decode_response, encode_request, request_class
from rill.protocol.kafka.errors import ErrorCode
from rill.server.protocols.kafka import producers
from rill.server.protocols.kafka.dispatch import SERVED
from rill.server.storage.formats.kafka_v2 import producer_batches
from server_process import RillProcess
from test_kafka_data import consume_all, fetch, high_watermark, new_topic, produce
from kafka_link import KAFKA_ENV, Raw, bootstrap

InitProducerId = request_class(apis.INIT_PRODUCER_ID)
Produce = request_class(apis.PRODUCE)

DURABLE_ENV = {**KAFKA_ENV, "RILL_SYSTEM_FSYNC": "always"}


SERVER_ENV = DURABLE_ENV


def idempotent_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    """A RecordBatch v2 as an idempotent producer builds it."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 20)
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=1_700_000_000_000 + offset, key=None, value=value,
                       headers=[])
    return bytes(builder.build())


def init_producer_id(raw: Raw, version: int = 4, transactional_id: str | None = None,
                     producer_id: int = -1, epoch: int = -1):
    return raw.call(apis.INIT_PRODUCER_ID, version, InitProducerId(
        transactional_id=transactional_id, transaction_timeout_ms=60_000,
        producer_id=producer_id, producer_epoch=epoch))


def new_producer(raw: Raw) -> int:
    body = init_producer_id(raw)
    assert body.error_code == 0 and body.producer_epoch == 0
    return body.producer_id


def stored_values(raw: Raw, topic: str) -> list[bytes]:
    """Every record value of partition 0, in log order (read back by kafka-python's parser)."""
    data = fetch(raw, topic, 0).responses[0].partitions[0].records
    records = MemoryRecords(bytes(data))
    values = []
    while records.has_next():
        values.extend(record.value for record in records.next_batch())
    return values


# -- InitProducerId ----------------------------------------------------------------------------


def test_init_producer_id_is_advertised_0_to_4():
    assert SERVED[apis.INIT_PRODUCER_ID] == (0, 4)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_init_producer_id_gets_a_new_id_at_epoch_0(raw, version):
    answers = [init_producer_id(raw, version) for _ in range(3)]
    assert [(body.error_code, body.producer_epoch) for body in answers] == [(0, 0)] * 3
    ids = [body.producer_id for body in answers]
    assert len(set(ids)) == 3 and min(ids) >= 0


def test_a_transactional_id_is_refused(raw):
    body = init_producer_id(raw, transactional_id="tx-1")
    assert body.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert body.producer_id == -1


def test_an_epoch_bump_keeps_the_id_and_fences_the_old_epoch(raw):
    producer_id = new_producer(raw)
    bumped = init_producer_id(raw, 3, producer_id=producer_id, epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, producer_id, 1)
    again = init_producer_id(raw, 4, producer_id=producer_id, epoch=1)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, producer_id, 2)
    assert init_producer_id(raw, 4, producer_id=producer_id, epoch=0).error_code == (
        ErrorCode.PRODUCER_FENCED)
    assert init_producer_id(raw, 3, producer_id=producer_id, epoch=1).error_code == (
        ErrorCode.INVALID_PRODUCER_EPOCH)
    # an id never handed out, or half of the pair
    assert init_producer_id(raw, 4, producer_id=1 << 50, epoch=0).error_code == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert init_producer_id(raw, 4, producer_id=producer_id, epoch=-1).error_code == (
        ErrorCode.INVALID_REQUEST)


# -- the sequence rule -------------------------------------------------------------------------


def test_a_retried_batch_gets_its_original_offset_and_is_stored_once(raw):
    topic = new_topic(raw)
    producer_id = new_producer(raw)
    first = idempotent_batch(producer_id, 0, 0, [b"a", b"b", b"c"])
    second = idempotent_batch(producer_id, 0, 3, [b"d", b"e"])
    answer = produce(raw, topic, first)
    assert (answer.error_code, answer.base_offset) == (0, 0)
    answer = produce(raw, topic, second)
    assert (answer.error_code, answer.base_offset) == (0, 3)
    for retried, offset in ((first, 0), (second, 3), (first, 0)):
        answer = produce(raw, topic, retried)
        assert (answer.error_code, answer.base_offset) == (0, offset)
    assert high_watermark(raw, topic) == 5
    assert stored_values(raw, topic) == [b"a", b"b", b"c", b"d", b"e"]
    answer = produce(raw, topic, idempotent_batch(producer_id, 0, 5, [b"f"]))
    assert (answer.error_code, answer.base_offset) == (0, 5)


def test_a_sequence_gap_is_out_of_order_and_writes_nothing(raw):
    topic = new_topic(raw)
    producer_id = new_producer(raw)
    assert produce(raw, topic, idempotent_batch(producer_id, 0, 0, [b"a", b"b"])).error_code == 0
    for sequence in (3, 1, 7):  # ahead, overlapping, far ahead
        answer = produce(raw, topic, idempotent_batch(producer_id, 0, sequence, [b"x"]))
        assert answer.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert high_watermark(raw, topic) == 2
    assert produce(raw, topic, idempotent_batch(producer_id, 0, 2, [b"c"])).base_offset == 2
    assert stored_values(raw, topic) == [b"a", b"b", b"c"]


def test_only_the_last_five_batches_are_recognised_as_retries(raw):
    topic = new_topic(raw)
    producer_id = new_producer(raw)
    batches = [idempotent_batch(producer_id, 0, n, [b"%d" % n]) for n in range(6)]
    for number, records in enumerate(batches):
        assert produce(raw, topic, records).base_offset == number
    assert produce(raw, topic, batches[1]).base_offset == 1  # the oldest of the last five
    assert produce(raw, topic, batches[0]).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert high_watermark(raw, topic) == 6


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_sequence_0(raw):
    topic = new_topic(raw)
    producer_id = new_producer(raw)
    assert produce(raw, topic, idempotent_batch(producer_id, 0, 0, [b"a"])).error_code == 0
    # a newer epoch must start again at 0
    answer = produce(raw, topic, idempotent_batch(producer_id, 1, 1, [b"x"]))
    assert answer.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    answer = produce(raw, topic, idempotent_batch(producer_id, 1, 0, [b"b"]))
    assert (answer.error_code, answer.base_offset) == (0, 1)
    for sequence in (0, 1):  # the old epoch, retry or not, is fenced
        answer = produce(raw, topic, idempotent_batch(producer_id, 0, sequence, [b"z"]))
        assert answer.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert stored_values(raw, topic) == [b"a", b"b"]


def test_a_producer_unknown_to_the_partition_may_start_anywhere_and_sequences_wrap(raw):
    # Kafka 2.5+'s rule (KIP-360): no state for the producer here, any first sequence
    topic = new_topic(raw)
    producer_id = new_producer(raw)
    near_end = (1 << 31) - 2
    answer = produce(raw, topic, idempotent_batch(producer_id, 0, near_end, [b"a", b"b", b"c"]))
    assert (answer.error_code, answer.base_offset) == (0, 0)  # sequences 2^31-2, 2^31-1, 0
    retried = produce(raw, topic, idempotent_batch(producer_id, 0, near_end, [b"a", b"b", b"c"]))
    assert (retried.error_code, retried.base_offset) == (0, 0)
    assert produce(raw, topic, idempotent_batch(producer_id, 0, 0, [b"x"])).error_code == (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    answer = produce(raw, topic, idempotent_batch(producer_id, 0, 1, [b"d"]))
    assert (answer.error_code, answer.base_offset) == (0, 3)
    assert stored_values(raw, topic) == [b"a", b"b", b"c", b"d"]


def test_a_partition_forgets_the_producer_that_wrote_least_recently(monkeypatch):
    monkeypatch.setattr(producers, "MAX_PRODUCERS", 3)
    state = producers.PartitionProducers()
    for producer_id in (1, 2, 3):
        state.record(producer_id, 0, 0, 0, producer_id)
    state.record(1, 0, 1, 1, 10)  # 1 wrote again: 2 is now the least recent
    state.record(4, 0, 0, 0, 11)
    assert sorted(state.producers) == [1, 3, 4]
    assert list(state.producers[1].batches) == [(0, 0, 1), (1, 1, 10)]


def test_producers_and_partitions_are_tracked_apart(raw):
    topic = new_topic(raw, partitions=2)
    one, other = new_producer(raw), new_producer(raw)
    for partition in (0, 1):
        for producer_id in (one, other):
            answer = produce(raw, topic, idempotent_batch(producer_id, 0, 0, [b"v"]),
                             partition=partition)
            assert answer.error_code == 0
    assert high_watermark(raw, topic, 0) == high_watermark(raw, topic, 1) == 2


def test_two_connections_racing_with_one_batch_store_it_once(server, raw):
    topic = new_topic(raw)
    producer_id = new_producer(raw)
    records = idempotent_batch(producer_id, 0, 0, [b"x" * 200_000])  # a threaded append
    links = [Raw(server) for _ in range(4)]
    try:
        body = Produce(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=(
            Produce.TopicProduceData(name=topic, partition_data=(
                Produce.TopicProduceData.PartitionProduceData(index=0, records=records),)),))
        for link in links:
            link.correlation += 1
            link.send(encode_request(apis.PRODUCE, 9, link.correlation, body))
        answers = [decode_response(apis.PRODUCE, 9, link.receive()).body.responses[0]
                   .partition_responses[0] for link in links]
    finally:
        for link in links:
            link.close()
    assert [(answer.error_code, answer.base_offset) for answer in answers] == [(0, 0)] * 4
    assert high_watermark(raw, topic) == 1


def test_a_batch_without_a_producer_id_is_not_checked(raw):
    topic = new_topic(raw)
    plain = idempotent_batch(-1, -1, -1, [b"p"])
    assert [produce(raw, topic, plain).base_offset for _ in range(2)] == [0, 1]


# -- restarts ----------------------------------------------------------------------------------


def test_producer_ids_are_never_reused_after_a_restart_or_a_crash(tmp_path):
    process = RillProcess(tmp_path / "data", env=DURABLE_ENV).start()
    try:
        seen = set()
        for crash in (False, True, False):
            link = Raw(process)
            ids = {new_producer(link) for _ in range(5)}
            link.close()
            assert not ids & seen
            seen |= ids
            if crash:
                process.kill()
                process.start()
            else:
                process.restart()
        link = Raw(process)
        assert new_producer(link) not in seen
        link.close()
    finally:
        process.kill()


def test_the_sequence_state_is_rebuilt_from_the_log_after_a_crash(tmp_path):
    process = RillProcess(tmp_path / "data", env=DURABLE_ENV).start()
    try:
        link = Raw(process)
        topic = new_topic(link)
        producer_id = new_producer(link)
        other = new_producer(link)
        sent = [idempotent_batch(producer_id, 0, 0, [b"a", b"b"]),
                idempotent_batch(producer_id, 0, 2, [b"c"])]
        for records in sent:
            assert produce(link, topic, records).error_code == 0
        assert produce(link, topic, idempotent_batch(other, 0, 0, [b"o"])).base_offset == 3
        link.close()
        process.kill()
        process.start()
        link = Raw(process)
        # retries of batches written before the crash are recognised (a lost acknowledgement)
        assert [(answer.error_code, answer.base_offset) for answer in
                (produce(link, topic, records) for records in sent)] == [(0, 0), (0, 2)]
        gap = produce(link, topic, idempotent_batch(producer_id, 0, 5, [b"x"]))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(link, topic, idempotent_batch(producer_id, 0, 3, [b"d"])).base_offset == 4
        assert produce(link, topic, idempotent_batch(other, 0, 0, [b"o"])).base_offset == 3
        assert stored_values(link, topic) == [b"a", b"b", b"c", b"o", b"d"]
        link.close()
    finally:
        process.kill()


# -- real clients --------------------------------------------------------------------------------


def _producer_ids(raw: Raw, topic: str, partition: int) -> set[int]:
    data = fetch(raw, topic, 0, partition).responses[0].partitions[0].records
    return {batch[2] for batch in producer_batches(bytes(data))}


def test_confluent_kafka_idempotent_producer_round_trip(server, raw):
    topic = new_topic(raw, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap(server), "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    sent = [(number % 2, b"c-%d" % number) for number in range(400)]
    for partition, value in sent:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    received = []
    while len(received) < len(sent):
        message = consumer.poll(10)
        assert message is not None, f"only {len(received)} of {len(sent)} arrived"
        assert message.error() is None, message.error()
        received.append((message.partition(), message.value()))
    consumer.close()
    assert sorted(received) == sorted(sent)
    for partition in (0, 1):  # the batches carry the producer id InitProducerId gave
        ids = _producer_ids(raw, topic, partition)
        assert len(ids) == 1 and min(ids) >= 0


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python_default_producer_is_idempotent_and_round_trips(server, raw, compression):
    """test_kafka_data's round trip with kafka-python's defaults (idempotent, acks=all)."""
    topic = new_topic(raw)
    producer = KafkaProducer(bootstrap_servers=bootstrap(server), compression_type=compression,
                             linger_ms=5, request_timeout_ms=10_000)
    base = 1_700_000_000_000
    sent, futures = [], []
    for number in range(100):
        key = None if number % 7 == 0 else b"key-%d" % number
        value = b"value-%d-" % number + b"x" * (number * 13)
        headers = [("h", b"%d" % number), ("h", b"dup")] if number % 3 else []
        timestamp = base + number * 1000
        sent.append((key, value, headers, timestamp))
        futures.append(producer.send(topic, key=key, value=value, headers=headers,
                                     timestamp_ms=timestamp, partition=0))
    offsets = [future.get(timeout=20).offset for future in futures]
    producer.close(timeout=20)
    assert offsets == list(range(100))
    found = consume_all(server, topic, 0, len(sent))
    assert [record.offset for record in found] == list(range(len(sent)))
    assert [(r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp) for r in found] == sent
    ids = _producer_ids(raw, topic, 0)  # the batches carry the id InitProducerId gave
    assert len(ids) == 1 and min(ids) >= 0


# -- kill -9 under an idempotent producer --------------------------------------------------------


def test_kill_9_under_an_idempotent_producer_loses_and_duplicates_nothing(tmp_path):
    port = free_port()
    env = {**DURABLE_ENV, "RILL_KAFKA_ADDRESS": f"127.0.0.1:{port}"}
    process = RillProcess(tmp_path / "data", env=env).start()
    try:
        link = Raw(process)
        topic = new_topic(link, partitions=2)
        link.close()
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                             "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                             "batch.num.messages": 50, "message.timeout.ms": 120_000,
                             "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
                             "retry.backoff.ms": 50, "socket.timeout.ms": 30_000})
        acknowledged: list[bytes] = []
        failed: list[str] = []

        def delivered(error, message) -> None:
            if error is None:
                acknowledged.append(message.value())
            else:
                failed.append(str(error))

        stop = threading.Event()
        produced = [0]

        def keep_producing() -> None:
            while not stop.is_set():
                value = b"m-%06d" % produced[0]
                try:
                    producer.produce(topic, value=value, partition=produced[0] % 2,
                                     on_delivery=delivered)
                except BufferError:
                    producer.poll(0.05)
                    continue
                produced[0] += 1
                if produced[0] % 20 == 0:
                    producer.poll(0)
                    time.sleep(0.001)

        worker = threading.Thread(target=keep_producing, daemon=True)
        worker.start()
        try:
            for _ in range(3):  # crash while acknowledgements are flowing, three times
                mark = len(acknowledged)
                deadline = time.monotonic() + 30
                while len(acknowledged) < mark + 500 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert len(acknowledged) >= mark + 500, "no acknowledgements"
                process.kill()
                process.start()
            mark = len(acknowledged)
            deadline = time.monotonic() + 30
            while len(acknowledged) < mark + 500 and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            stop.set()
            worker.join(10)
        assert producer.flush(60) == 0
        assert failed == []
        assert len(acknowledged) == produced[0]

        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "unused",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        stored: list[bytes] = []
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in (0, 1)]
        while len(stored) < sum(ends):
            message = consumer.poll(10)
            assert message is not None, f"only {len(stored)} of {sum(ends)} read"
            assert message.error() is None, message.error()
            stored.append(message.value())
        consumer.close()
        assert len(stored) == len(set(stored)), "a record is stored twice"
        assert sorted(stored) == sorted(acknowledged)  # every acknowledged one, exactly once
    finally:
        process.kill()
