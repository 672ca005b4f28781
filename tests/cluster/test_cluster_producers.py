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
