"""``[kafka] sendfile`` against a real server: Fetch v4+ answers with large verified ranges of
a kafka-v2 topic's stored batches sent from the log files by sendfile (plain TCP only).

Real clients (kafka-python, librdkafka) read every record intact; a reply larger than the
socket takes waits with its file region open and goes on when the client reads (the next
reply behind it); no descriptor is left open after many fetches, after a connection closed
while its region waited, or at all over TLS (there the regions are read and sent as bytes).
The regions themselves: tests/server/storage/test_batch_segment.py."""

from __future__ import annotations

import os
import socket
import ssl
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafka_link import KAFKA_ENV, Raw, bootstrap
from rill.protocol.kafka import apis, decode_response, encode_request, request_class
from server_process import RillProcess

SENDFILE_ENV = {**KAFKA_ENV, "RILL_KAFKA_SENDFILE": "true", "RILL_KAFKA_ANONYMOUS_USER": "iggy"}
SERVER_ENV = SENDFILE_ENV  # (conftest.py's ``server``)
Produce = request_class(apis.PRODUCE)
Fetch = request_class(apis.FETCH)
CreateTopics = request_class(apis.CREATE_TOPICS)
ApiVersions = request_class(apis.API_VERSIONS)
VALUE = 1000  # bytes of a record's value
PER_BATCH = 100  # ~100 KB a batch


def new_topic(raw: Raw) -> str:
    name = "t-" + uuid.uuid4().hex[:12]
    topic = CreateTopics.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                        assignments=(), configs=())
    body = raw.call(apis.CREATE_TOPICS, 7, CreateTopics(topics=(topic,), timeout_ms=5000,
                                                         validate_only=False))
    assert body.topics[0].error_code == 0
    return name


def fill(raw: Raw, batches: int) -> tuple[str, list[bytes]]:
    """A new topic holding ``batches`` produced batches of random values; the values."""
    topic = new_topic(raw)
    values = []
    for _ in range(batches):
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 30)
        for index in range(PER_BATCH):
            values.append(os.urandom(VALUE))
            builder.append(index, int(time.time() * 1000), None, values[-1], [])
        data = Produce.TopicProduceData(name=topic, partition_data=(
            Produce.TopicProduceData.PartitionProduceData(index=0,
                                                          records=bytes(builder.build())),))
        answer = raw.call(apis.PRODUCE, 9, Produce(transactional_id=None, acks=-1,
                                                   timeout_ms=5000, topic_data=(data,)))
        assert answer.responses[0].partition_responses[0].error_code == 0
    return topic, values


def fetch_request(topic: str, offset: int, max_bytes: int) -> Fetch:
    part = Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=offset,
                                           partition_max_bytes=max_bytes)
    return Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes,
                 isolation_level=0, session_id=0, session_epoch=-1,
                 topics=(Fetch.FetchTopic(topic=topic, partitions=(part,)),),
                 forgotten_topics_data=(), rack_id="")


def values_of(records) -> list[tuple[int, bytes]]:
    """(offset, value) of every record, each batch's CRC checked (kafka-python's reader)."""
    found = []
    batches = MemoryRecords(bytes(records))
    while batches.has_next():
        batch = batches.next_batch()
        assert batch.validate_crc()
        found += [(record.offset, record.value) for record in batch]
    return found


def held(server: RillProcess) -> int:
    """The server's open descriptors of log files and sockets (``open_descriptors``, without
    the metadata database's, which its connections open and close on their own)."""
    total = server.open_descriptors()
    directory = f"/proc/{server.process.pid}/fd"
    for name in os.listdir(directory):
        try:
            if ".sqlite3" in os.readlink(f"{directory}/{name}"):
                total -= 1
        except FileNotFoundError:
            total -= 1  # closed meanwhile
    return total


def settled(server: RillProcess, wanted: int) -> int:
    """The server's open descriptor count once it is ``wanted`` (waits for the server's
    closing of what a gone client held; returns the last count seen when it never is)."""
    count = held(server)
    deadline = time.monotonic() + 10
    while count != wanted and time.monotonic() < deadline:
        time.sleep(0.05)
        count = held(server)
    return count


def steady(server: RillProcess) -> int:
    """The server's open descriptor count once it has stayed the same for a quarter second
    (a region sent to the client is closed by the server just after the client has its bytes:
    under load the count can lag the reply)."""
    count, unchanged_since = held(server), time.monotonic()
    deadline = unchanged_since + 10
    while time.monotonic() - unchanged_since < 0.25 and time.monotonic() < deadline:
        time.sleep(0.05)
        now = held(server)
        if now != count:
            count, unchanged_since = now, time.monotonic()
    return count


def receive(link: Raw) -> bytes:
    """The payload of the next response frame, read into one buffer (a large one in the
    small pieces a tiny receive window gives)."""
    head = bytearray(4)
    buffer = memoryview(head)
    for target in (head, None):
        if target is None:
            target = bytearray(int.from_bytes(head, "big"))
            buffer = memoryview(target)
        got = 0
        while got < len(target):
            count = link.sock.recv_into(buffer[got:])
            assert count, "the server closed the connection"
            got += count
    return bytes(target)


def stalled_link(server: RillProcess) -> Raw:
    """A link whose client reads nothing yet, with a tiny receive window (set before the
    connection): a reply of several MB cannot fit the socket buffers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(20)
    sock.connect(server.kafka_address)
    link = Raw.__new__(Raw)
    link.sock, link.correlation = sock, 0
    return link


def test_kafka_python_and_librdkafka_read_every_record_sent_from_the_files(server) -> None:
    raw = Raw(server)
    try:
        topic, values = fill(raw, 30)  # ~3 MB
    finally:
        raw.close()
    expected = list(enumerate(values))
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(server), enable_auto_commit=False,
                             group_id=None, request_timeout_ms=10_000, fetch_max_wait_ms=100)
    try:
        partition = KpTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        found: list = []
        while len(found) < len(values):
            polled = consumer.poll(timeout_ms=10_000)
            assert polled, f"only {len(found)} of {len(values)} arrived"
            for records in polled.values():
                found.extend((record.offset, record.value) for record in records)
    finally:
        consumer.close()
    assert found == expected
    librdkafka = Consumer({"bootstrap.servers": bootstrap(server), "group.id": "unused",
                           "enable.auto.commit": False})
    try:
        librdkafka.assign([TopicPartition(topic, 0, 0)])
        found = []
        while len(found) < len(values):
            message = librdkafka.poll(10)
            assert message is not None, f"only {len(found)} of {len(values)} arrived"
            assert message.error() is None, message.error()
            found.append((message.offset(), message.value()))
    finally:
        librdkafka.close()
    assert found == expected


def test_a_reply_larger_than_the_socket_waits_for_the_reader_then_comes_whole(server) -> None:
    raw = Raw(server)
    try:
        topic, values = fill(raw, 80)  # ~8 MB: more than the socket buffers hold
    finally:
        raw.close()
    link = stalled_link(server)
    try:
        warm = link.call(apis.FETCH, 12, fetch_request(topic, 0, 1))  # one batch
        assert values_of(warm.responses[0].partitions[0].records)[0] == (0, values[0])
        assert link.call(apis.API_VERSIONS, 3, ApiVersions(client_software_name="t",
                                                           client_software_version="1"))
        idle = held(server)
        link.correlation += 1
        link.send(encode_request(apis.FETCH, 12, link.correlation,
                                 fetch_request(topic, 0, 16 << 20))
                  + encode_request(apis.API_VERSIONS, 3, link.correlation + 1,
                                   ApiVersions(client_software_name="t",
                                               client_software_version="1")))
        # the region (and a watch of the socket) stays open while the socket is full
        assert settled(server, idle + 2) == idle + 2
        payload = receive(link)
        assert payload is not None
        body = decode_response(apis.FETCH, 12, payload).body
        partition = body.responses[0].partitions[0]
        assert partition.error_code == 0
        assert values_of(partition.records) == list(enumerate(values))
        after = receive(link)  # the reply held behind it
        assert decode_response(apis.API_VERSIONS, 3, after).correlation_id == link.correlation + 1
        assert held(server) == idle
        # a client that goes away while its reply waits: the region is closed
        link.correlation += 2
        link.send(encode_request(apis.FETCH, 12, link.correlation,
                                 fetch_request(topic, 0, 16 << 20)))
        assert settled(server, idle + 2) == idle + 2
    finally:
        link.close()
    assert settled(server, idle - 1) == idle - 1  # (the link's own socket is gone too)


def test_many_fetches_leave_no_descriptor_open(server) -> None:
    raw = Raw(server)
    try:
        topic, values = fill(raw, 10)  # ~1 MB
        fetch = fetch_request(topic, 0, 300_000)
        first = raw.call(apis.FETCH, 12, fetch).responses[0].partitions[0]
        before = steady(server)  # the log file opened by the first read stays in the cache
        offset, found = 0, values_of(first.records)
        for _ in range(60):
            offset = (offset + 250) % len(values)  # reads from inside batches too
            answer = raw.call(apis.FETCH, 12, fetch_request(topic, offset, 300_000))
            partition = answer.responses[0].partitions[0]
            assert partition.error_code == 0
            found = values_of(partition.records)
            assert found[0][0] <= offset and dict(found)[offset] == values[offset]
            assert all(value == values[at] for at, value in found)
        # a long poll: what the first read found is dropped (closed), the second read is sent
        waiting = fetch_request(topic, 0, 300_000)._replace(min_bytes=10 << 20, max_wait_ms=100)
        answer = raw.call(apis.FETCH, 12, waiting).responses[0].partitions[0]
        assert values_of(answer.records) == values_of(first.records)
        assert settled(server, before) == before
    finally:
        raw.close()


def test_over_tls_fetch_answers_with_bytes(rill_factory, tmp_path) -> None:
    from rill.server.auth.certificates import generate_self_signed

    certificate_pem, key_pem = generate_self_signed()
    (tmp_path / "cert.pem").write_bytes(certificate_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server = rill_factory({
        **SENDFILE_ENV,  # (TLS cannot send files: the regions are read)
        "RILL_KAFKA_TLS_ENABLED": "true",
        "RILL_KAFKA_TLS_CERTIFICATE": str(tmp_path / "cert.pem"),
        "RILL_KAFKA_TLS_KEY": str(tmp_path / "key.pem"),
    }).start()
    trusting = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    trusting.check_hostname = False
    sock = socket.create_connection(server.kafka_address, timeout=20)
    link = Raw.__new__(Raw)
    link.sock, link.correlation = trusting.wrap_socket(sock), 0
    try:
        topic, values = fill(link, 60)  # ~6 MB
        idle = held(server)
        link.correlation += 1
        link.send(encode_request(apis.FETCH, 12, link.correlation,
                                 fetch_request(topic, 0, 16 << 20)))
        payload = receive(link)
        assert payload is not None
        partition = decode_response(apis.FETCH, 12, payload).body.responses[0].partitions[0]
        assert partition.error_code == 0
        assert values_of(partition.records) == list(enumerate(values))
        assert held(server) == idle
    finally:
        link.close()
