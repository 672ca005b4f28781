"""Kafka clients following leaders across two real in-process nodes of a cluster set by hand
(issue 30 item 6): bootstrapped at node 1, confluent-kafka and kafka-python send each
partition's records to its leader (node 1 or node 2, from Metadata), and when a partition's
leadership moves they get NOT_LEADER_OR_FOLLOWER, refresh their metadata and go on at the new
leader; a consumer reads each partition from its leader."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer

from cluster_servers import start_cluster
from kafka_link import Raw
from rill.protocol.kafka import apis, request_class

CreateTopics = request_class(apis.CREATE_TOPICS)


@pytest.fixture
def nodes(tmp_path):
    servers = start_cluster(tmp_path, 2, controller_id=1)
    yield servers
    for server in servers:
        server.stop()


def create_everywhere(nodes, name: str, partitions: int) -> None:
    """The catalog a cluster replicates: the topic on every node."""
    for server in nodes:
        raw = Raw(server)
        try:
            topic = CreateTopics.CreatableTopic(name=name, num_partitions=partitions,
                                                replication_factor=1, assignments=(),
                                                configs=())
            body = raw.call(apis.CREATE_TOPICS, 7, CreateTopics(
                topics=(topic,), timeout_ms=5000, validate_only=False))
            assert body.topics[0].error_code == 0
        finally:
            raw.close()


def place(nodes, topic: str, index: int, leader: int, epoch: int) -> None:
    """Leader ``leader`` alone in the ISR (its high watermark: its log end now)."""
    for server in nodes:
        server.place(server.config.kafka.stream, topic, index + 1, leader, epoch, (leader,),
                     (leader,), 1)


def stored(server, topic: str, index: int) -> int:
    stream = server.config.kafka.stream
    return server.call(lambda: server.partition(stream, topic, index + 1).log.next_offset)


def delivered(producer: Producer) -> None:
    assert producer.flush(30) == 0


def test_confluent_kafka_produces_to_each_leader_and_follows_a_move(nodes):
    one, two = nodes
    create_everywhere(nodes, "orders", 2)
    place(nodes, "orders", 0, leader=1, epoch=1)
    place(nodes, "orders", 1, leader=2, epoch=1)
    errors = []
    producer = Producer({"bootstrap.servers": "%s:%d" % one.kafka_address, "acks": 1,
                         "message.timeout.ms": 30_000, "retry.backoff.ms": 50})

    def report(error, message):
        if error is not None:
            errors.append(error)

    producer.produce("orders", b"a", partition=0, on_delivery=report)
    producer.produce("orders", b"b", partition=1, on_delivery=report)
    delivered(producer)
    assert errors == []
    assert [stored(one, "orders", 0), stored(one, "orders", 1)] == [1, 0]
    assert [stored(two, "orders", 0), stored(two, "orders", 1)] == [0, 1]

    place(nodes, "orders", 1, leader=1, epoch=2)  # partition 1 moves to node 1
    producer.produce("orders", b"c", partition=1, on_delivery=report)
    delivered(producer)
    assert errors == []
    assert stored(one, "orders", 1) == 1 and stored(two, "orders", 1) == 1

    place(nodes, "orders", 0, leader=1, epoch=1)  # (commits what was appended)
    place(nodes, "orders", 1, leader=1, epoch=2)
    consumer = Consumer({"bootstrap.servers": "%s:%d" % two.kafka_address, "group.id": "g",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("orders", 0, 0), TopicPartition("orders", 1, 0)])
        values = set()
        while len(values) < 2:
            message = consumer.poll(30)
            assert message is not None and message.error() is None, message
            values.add((message.partition(), message.value()))
        assert values == {(0, b"a"), (1, b"c")}
    finally:
        consumer.close()


def test_kafka_python_follows_a_leader_move(nodes):
    one, two = nodes
    create_everywhere(nodes, "moves", 1)
    place(nodes, "moves", 0, leader=2, epoch=1)
    producer = KafkaProducer(bootstrap_servers="%s:%d" % one.kafka_address, acks=1,
                             retry_backoff_ms=50)
    try:
        producer.send("moves", b"x", partition=0).get(timeout=30)
        assert (stored(one, "moves", 0), stored(two, "moves", 0)) == (0, 1)
        place(nodes, "moves", 0, leader=1, epoch=2)
        producer.send("moves", b"y", partition=0).get(timeout=30)
        assert (stored(one, "moves", 0), stored(two, "moves", 0)) == (1, 1)
    finally:
        producer.close(timeout=5)
