"""Idempotent producers in a cluster: producer ids are unique across the
cluster. The soak found two producers bootstrapped on different nodes handed the same id
(each node counting from 0): the leader then took one's batches for the other's retries and
acknowledged them at the other's offsets without writing them (lost writes, inconsistent
offsets), and refused the other with OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_ID_MAPPING."""

from __future__ import annotations

from kafka import KafkaProducer

from cluster.workload import create_topic, kafka_python_config


def producer_id(bootstrap: str, topic: str) -> int:
    producer = KafkaProducer(**kafka_python_config(bootstrap), acks="all", enable_idempotence=True)
    try:
        producer.send(topic, b"x", partition=0).get(timeout=60)
        return producer._transaction_manager.producer_id_and_epoch.producer_id
    finally:
        producer.close(timeout=10)


def test_producers_bootstrapped_on_different_nodes_get_distinct_ids(local_cluster):
    cluster = local_cluster(size=3)
    create_topic(cluster.kafka_bootstrap, "ids", 1, 3)
    ids = [producer_id(node.kafka, "ids") for node in cluster.nodes]  # one bootstrap node each
    assert len(set(ids)) == 3, ids


def bump(bootstrap: str, node_id: int, producer: int, epoch: int) -> tuple[int, int, int]:
    """InitProducerId v4 carrying (producer, epoch) -- KIP-360's epoch bump, which a client
    sends to any broker -- sent to node ``node_id``: (error code, producer id, epoch)."""
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    client = KafkaNetClient(**kafka_python_config(bootstrap))
    try:
        client.check_version()  # bootstraps: the brokers' ids become known
        answer = client.send_and_receive(node_id, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=producer,
            producer_epoch=epoch, min_version=3, max_version=4))
        return answer.error_code, answer.producer_id, answer.producer_epoch
    finally:
        client.close()


def test_any_node_bumps_the_epoch_of_a_producer_id_another_node_handed_out(local_cluster):
    """kafka-python bumps its epoch (KIP-360) on any broker after a batch's outcome is unknown
    (e.g. a leader paused past the request timeout). A node that had handed out producer ids of
    its own judged an id from another node's block never handed out and refused the bump with
    INVALID_PRODUCER_ID_MAPPING, a fatal error to the client."""
    cluster = local_cluster(size=3)
    create_topic(cluster.kafka_bootstrap, "bumps", 1, 3)
    ids = [producer_id(node.kafka, "bumps") for node in cluster.nodes]  # every node hands one out
    for node in cluster.nodes:
        answers = [bump(cluster.kafka_bootstrap, node.node_id, each, 0) for each in ids]
        assert answers == [(0, each, 1) for each in ids], (node.node_id, ids, answers)
