"""Every cross-protocol scenario over every (writer, reader) pair of protocols against ONE real
server (issue 13 item 5, "the scenario matrix grows a protocol axis").

Protocols (``PROTOCOLS``): ``iggy`` (the SDK over TCP), ``http`` (the SDK over the HTTP JSON
API) and ``kafka`` (confluent-kafka on the Kafka listener). A topic keeps the record format of
the protocol that created it (Kafka: ``kafka-v2``, Iggy/HTTP: ``iggy-v1``), so every pair
exercises one of: the native path, the read conversion of either direction, an Iggy writer's
conversion into a Kafka topic or a Kafka writer's into an Iggy topic (docs/kafka.md, "One
log, every protocol"). What every
pair must agree on, within the documented lossless subset (non-empty keys and values of at
most 255 bytes, unique non-empty raw header values, no ``rill.key`` header): offsets, values,
keys (Kafka's key = Iggy's ``rill.key`` header), headers, timestamps in ms; offsets by time
(Iggy's poll by timestamp, Kafka's ListOffsets); consumer positions shared where they are by
design (Iggy consumers across Iggy transports) and independent where they are not (Kafka
groups ``kafka-group:<id>`` vs Iggy consumers ``iggy-consumer:<id>``); topics created by one
protocol visible to the other, partitions 0-based (Kafka) <-> 1-based (Iggy).

Bounded: one module-scoped server, a handful of records per topic, each pair in its own
topics (named after the pair). TANK joins by adding its name to ``PROTOCOLS`` and one branch
to each of the helpers below (create, write, read, offset by time, commit, topic listing).
"""

from __future__ import annotations

import itertools
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rill.client import Client, HeaderValue, Message, PollingStrategy
from server_process import RillProcess

PROTOCOLS = ("iggy", "http", "kafka")  # TANK joins here
IGGY_FAMILY = {"iggy", "http"}  # share Iggy consumer positions (one namespace by design)
PAIRS = list(itertools.product(PROTOCOLS, PROTOCOLS))
# (writer, reader, creator): the topic created by the writer, and by the other family: by
# Kafka for Iggy writers (an Iggy SEND into a Kafka topic), by Iggy for the Kafka writer (a
# Produce into an Iggy-format topic, converted on the way in: issue 27 item 1)
WRITES = [(writer, reader, creator) for writer, reader in PAIRS
          for creator in (writer, "kafka" if writer != "kafka" else "iggy")]
STREAM = "kafka"  # [kafka] stream: where Kafka topics live
ENV = {"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
       "RILL_KAFKA_ANONYMOUS_USER": "iggy", "RILL_HTTP_ENABLED": "true",
       "RILL_QUIC_ENABLED": "false"}


def pair_id(pair: tuple[str, ...]) -> str:
    name = f"{pair[0]}-to-{pair[1]}"
    return name if len(pair) == 2 else f"{name}-in-{pair[2]}-topic"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = RillProcess(tmp_path_factory.mktemp("protocol-matrix") / "data", env=ENV).start()
    with Client(process.address) as client:
        client.login_user("iggy", "iggy")
        client.create_stream(STREAM)
    yield process
    process.kill()


@pytest.fixture(scope="module")
def clients(server):
    """One logged-in SDK client per Iggy-family protocol, shared by the module."""
    opened = {"iggy": Client(server.address),
              "http": Client(f"{server.http_address[0]}:{server.http_address[1]}",
                             transport="http")}
    for client in opened.values():
        client.__enter__()
        client.login_user("iggy", "iggy")
    yield opened
    for client in opened.values():
        client.__exit__(None, None, None)


def bootstrap(server) -> str:
    host, port = server.kafka_address
    return f"{host}:{port}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- the protocols' own calls ----------------------------------------------------------------

def create_topic(server, clients, protocol: str, name: str, partitions: int = 1) -> None:
    if protocol == "kafka":
        admin = AdminClient({"bootstrap.servers": bootstrap(server)})
        for future in admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                    replication_factor=1)]).values():
            future.result(10)
    else:
        clients[protocol].create_topic(STREAM, name, partitions_count=partitions)


def write(server, clients, protocol: str, name: str, batches: list[list[tuple]],
          partition: int = 0) -> None:
    """Each batch (one SEND, one Kafka batch) of (key, value, headers, timestamp ms); Iggy
    writers cannot choose a timestamp (the server's append time is taken)."""
    if protocol == "kafka":
        producer = Producer({"bootstrap.servers": bootstrap(server), "linger.ms": 20})
        for batch in batches:
            for key, value, headers, timestamp in batch:
                producer.produce(name, key=key, value=value, partition=partition,
                                 timestamp=timestamp, headers=list(headers.items()))
            assert producer.flush(20) == 0
        return
    for batch in batches:
        clients[protocol].send_messages(STREAM, name, [
            Message(value, headers={"rill.key": HeaderValue.raw(key)}
                    | {k: HeaderValue.raw(v) for k, v in headers.items()})
            for key, value, headers, _ in batch], partitioning=partition + 1)


def read(server, clients, protocol: str, name: str, offset: int, count: int,
         partition: int = 0) -> list[tuple]:
    """(offset, key, value, headers, timestamp µs) of ``count`` records from ``offset``; a
    Kafka reader's µs are its ms x 1000."""
    if protocol == "kafka":
        consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": unique("read"),
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(name, partition, offset)])
            got = []
            while len(got) < count:
                message = consumer.poll(10)
                assert message is not None and message.error() is None, got
                kind, timestamp = message.timestamp()
                assert kind == 1  # CreateTime
                got.append((message.offset(), message.key(), message.value(),
                            dict(message.headers() or []), timestamp * 1000))
            return got
        finally:
            consumer.close()
    polled = clients[protocol].poll_messages(STREAM, name, partition_id=partition + 1,
                                             strategy=PollingStrategy.offset(offset), count=count)
    got = []
    for message in polled.messages:
        headers = {k: v.value for k, v in (message.headers or {}).items()}
        got.append((message.offset, headers.pop("rill.key", None), message.payload, headers,
                    message.timestamp))
    return got


def offset_for_time(server, clients, protocol: str, name: str, timestamp_ms: int) -> int | None:
    """The first offset at or after a time: Kafka's ListOffsets, Iggy's poll by timestamp."""
    if protocol == "kafka":
        consumer = Consumer({"bootstrap.servers": bootstrap(server), "group.id": unique("time")})
        try:
            found = consumer.offsets_for_times([TopicPartition(name, 0, timestamp_ms)], 10)[0]
        finally:
            consumer.close()
        return None if found.offset < 0 else found.offset
    polled = clients[protocol].poll_messages(
        STREAM, name, partition_id=1, strategy=PollingStrategy.timestamp(timestamp_ms * 1000),
        count=1)
    return polled.messages[0].offset if polled.messages else None


def commit(server, clients, protocol: str, name: str, consumer_id: int, next_offset: int) -> None:
    """Store where consumer ``consumer_id`` reads next (Kafka: the group named by the number;
    Iggy: the consumer of that id, which stores the last offset consumed)."""
    if protocol == "kafka":
        consumer = Consumer({"bootstrap.servers": bootstrap(server),
                             "group.id": str(consumer_id), "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(name, 0, next_offset)], asynchronous=False)
        finally:
            consumer.close()
    else:
        clients[protocol].store_consumer_offset(STREAM, name, next_offset - 1,
                                                consumer=consumer_id, partition_id=1)


def committed(server, clients, protocol: str, name: str, consumer_id: int) -> int | None:
    """Where consumer ``consumer_id`` reads next; None when it never committed."""
    if protocol == "kafka":
        consumer = Consumer({"bootstrap.servers": bootstrap(server),
                             "group.id": str(consumer_id), "enable.auto.commit": False})
        try:
            found = consumer.committed([TopicPartition(name, 0)], timeout=10)[0]
        finally:
            consumer.close()
        return None if found.offset < 0 else found.offset
    info = clients[protocol].get_consumer_offset(STREAM, name, consumer=consumer_id,
                                                 partition_id=1)
    # a consumer that never stored reads stored_offset 0 (Iggy 0.4.95); this module's commits
    # are all of next offsets >= 2, so 0 means "never"
    return info.stored_offset + 1 if info is not None and info.stored_offset else None


def partitions_seen(server, clients, protocol: str, name: str) -> list[int] | None:
    """The partition numbers a protocol lists for a topic (None: not listed)."""
    if protocol == "kafka":
        metadata = AdminClient({"bootstrap.servers": bootstrap(server)}).list_topics(timeout=10)
        topic = metadata.topics.get(name)
        return None if topic is None else sorted(topic.partitions)
    listed = {t.name: t for t in clients[protocol].get_topics(STREAM)}
    if name not in listed:
        return None
    ids = [p.id for p in clients[protocol].get_topic(STREAM, name).partitions]
    assert listed[name].partitions_count == len(ids)
    return ids


# -- scenarios -------------------------------------------------------------------------------

def records(base_ms: int) -> list[list[tuple]]:
    """Two batches of three records, in the lossless subset; the Kafka timestamps ascend."""
    return [[(f"k{n}".encode(), f"value-{n}".encode() * 3,
              {"h": f"h{n}".encode(), "trace": b"t" * (n + 1)}, base_ms + 10 * n)
             for n in range(start, start + 3)] for start in (0, 3)]


@pytest.fixture(params=PAIRS, ids=pair_id)
def pair(request):
    return request.param


@pytest.fixture(params=WRITES, ids=pair_id)
def writes(request):
    return request.param


def test_records_written_by_one_protocol_are_read_by_the_other(server, clients, writes):
    writer, reader, creator = writes
    name = unique(f"rec-{pair_id(writes)}")
    create_topic(server, clients, creator, name)
    base_ms = int(time.time() * 1000) - 60_000
    before_ms = int(time.time() * 1000)
    write(server, clients, writer, name, records(base_ms))
    after_ms = int(time.time() * 1000)
    got = read(server, clients, reader, name, 0, 6)
    sent = [record for batch in records(base_ms) for record in batch]
    assert [(o, k, v, h) for o, k, v, h, _ in got] == [
        (offset, key, value, headers) for offset, (key, value, headers, _) in enumerate(sent)]
    stamps = [timestamp for *_, timestamp in got]
    if writer == "kafka":  # the producer's timestamps, to the millisecond
        assert stamps == [timestamp * 1000 for *_, timestamp in sent]
    else:  # the server's append time; what the writer's own protocol reads, in ms
        own = [timestamp for *_, timestamp in read(server, clients, writer, name, 0, 6)]
        assert [t // 1000 for t in stamps] == [t // 1000 for t in own]
        assert before_ms * 1000 <= min(own) <= max(own) <= (after_ms + 1) * 1000
        if reader != "kafka" and creator != "kafka":
            assert stamps == own  # Iggy readers of an Iggy topic keep the µs
        if creator == "kafka":  # an Iggy SEND into a Kafka topic: one batch, one append time
            assert len(set(own[:3])) == 1 and all(t % 1000 == 0 for t in own)
    # from inside a batch: exactly the offsets asked for
    assert [o for o, *_ in read(server, clients, reader, name, 4, 2)] == [4, 5]


def test_offsets_by_time_agree(server, clients, writes):
    writer, reader, creator = writes
    name = unique(f"time-{pair_id(writes)}")
    create_topic(server, clients, creator, name)
    base_ms = int(time.time() * 1000) - 60_000
    write(server, clients, writer, name, records(base_ms))
    stamps = [t for *_, t in read(server, clients, writer, name, 0, 6)]  # µs, as written
    probes = sorted({t // 1000 for t in stamps} | {t // 1000 + 1 for t in stamps}
                    | {stamps[0] // 1000 - 1})
    for probe in probes:
        wanted = next((offset for offset, t in enumerate(stamps) if t >= probe * 1000), None)
        assert offset_for_time(server, clients, reader, name, probe) == wanted, probe
    # the two protocols' lookups agree with each other too
    other = "kafka" if reader != "kafka" else "iggy"
    assert [offset_for_time(server, clients, reader, name, p) for p in probes] == [
        offset_for_time(server, clients, other, name, p) for p in probes]


def test_consumer_positions_are_shared_only_by_design(server, clients, pair):
    first, second = pair
    name = unique(f"pos-{pair_id(pair)}")
    create_topic(server, clients, "kafka" if "kafka" in pair else first, name)
    write(server, clients, first, name, records(int(time.time() * 1000)))
    consumer_id = 7
    shared = first == second or {first, second} <= IGGY_FAMILY
    commit(server, clients, first, name, consumer_id, 4)
    if shared:
        assert committed(server, clients, second, name, consumer_id) == 4
        commit(server, clients, second, name, consumer_id, 2)
        assert committed(server, clients, first, name, consumer_id) == 2
    else:  # Kafka group "7" and Iggy consumer 7 are different consumers
        assert committed(server, clients, second, name, consumer_id) is None
        commit(server, clients, second, name, consumer_id, 2)
        assert committed(server, clients, first, name, consumer_id) == 4
        assert committed(server, clients, second, name, consumer_id) == 2


def test_a_topic_created_by_one_protocol_is_visible_to_the_other(server, clients, pair):
    creator, viewer = pair
    name = unique(f"top-{pair_id(pair)}")
    create_topic(server, clients, creator, name, partitions=3)
    wanted = [0, 1, 2] if viewer == "kafka" else [1, 2, 3]
    assert partitions_seen(server, clients, viewer, name) == wanted
    # Kafka partition 2 is Iggy partition 3: a record written to the last one is read there
    write(server, clients, creator, name, [[(b"k", b"last", {}, int(time.time() * 1000))]],
          partition=2)
    assert [(o, k, v) for o, k, v, *_ in read(server, clients, viewer, name, 0, 1,
                                              partition=2)] == [(0, b"k", b"last")]
