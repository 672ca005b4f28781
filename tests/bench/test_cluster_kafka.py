"""``bench.cluster_kafka``'s producer keeps at most ``in_flight`` batches unanswered and records
each batch once it is answered (a unit test: librdkafka's ``Producer`` replaced by one that
answers a batch per ``poll``, in order, as a broker's acks come back). The real client runs in
``test_cluster.py``'s bounded run."""

from __future__ import annotations

import pytest

from rill.bench import cluster_kafka
from rill.bench.cluster_kafka import KafkaActor


class Barrier:
    def wait(self, timeout: float) -> None:
        pass


class Broker:
    """Answers the oldest unanswered batch on each ``poll``; notes the most batches that were
    ever unanswered at once."""

    def __init__(self, batch: int, fail_at: int | None = None) -> None:
        self.batch = batch
        self.fail_at = fail_at
        self.produced = 0
        self.delivered = 0
        self.most_unanswered = 0

    def producer(self, config: dict) -> Producer:
        return Producer(self, config["on_delivery"])


class Producer:
    def __init__(self, broker: Broker, on_delivery) -> None:
        self.broker = broker
        self.on_delivery = on_delivery

    def list_topics(self, topic: str, timeout: float) -> None:
        pass

    def produce(self, topic: str, value: bytes, partition: int) -> None:
        broker = self.broker
        broker.produced += 1
        unanswered = -(-(broker.produced - broker.delivered) // broker.batch)
        broker.most_unanswered = max(broker.most_unanswered, unanswered)

    def poll(self, timeout: float) -> int:
        broker = self.broker
        answered = min(broker.batch, broker.produced - broker.delivered)
        for _ in range(answered):
            broker.delivered += 1
            failed = broker.fail_at is not None and broker.delivered == broker.fail_at
            self.on_delivery("broker said no" if failed else None, None)
        return answered

    def flush(self, timeout: float) -> int:
        while self.poll(0):
            pass
        return 0


def actor(in_flight: int, batches: int = 12, size: int = 10) -> KafkaActor:
    return KafkaActor("producer-1", "producer", "127.0.0.1:9", "t", 0, "all", size, 100, batches,
                      in_flight)


@pytest.mark.parametrize("in_flight", [1, 3, 5])
def test_a_producer_keeps_at_most_in_flight_batches_unanswered(monkeypatch, in_flight):
    broker = Broker(10)
    monkeypatch.setattr("confluent_kafka.Producer", broker.producer)
    result = cluster_kafka._produce(actor(in_flight), Barrier())
    assert broker.most_unanswered == in_flight
    assert broker.delivered == broker.produced == 120
    assert (result.messages, result.bytes) == (120, 120 * 100)
    assert len(result.latencies_us) == 12  # one round trip per batch


def test_a_failed_delivery_ends_the_producer_with_the_brokers_error(monkeypatch):
    broker = Broker(10, fail_at=35)
    monkeypatch.setattr("confluent_kafka.Producer", broker.producer)
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException, match="broker said no"):
        cluster_kafka._produce(actor(3), Barrier())
