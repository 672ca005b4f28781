"""The peer drivers of ``rill bench compare`` by name (``peer_classes``): a module of its own,
beside the drivers, so that the package (their shared base) imports none of them."""

from __future__ import annotations

from rill.bench.peers import Peer
from rill.bench.peers.bare import BarePeer
from rill.bench.peers.kafka import NoidaPeer, RillKafkaPeer, RillKafkaWirePeer, TansuPeer
from rill.bench.peers.kafka_bare import KafkaBarePeer
from rill.bench.peers.nats import NatsPeer
from rill.bench.peers.redis import RedisPeer
from rill.bench.peers.tank import RillTankPeer


def peer_classes() -> dict[str, type[Peer]]:
    """The peer drivers by name (their client libraries are imported when a driver runs)."""
    return {"nats": NatsPeer, "redis": RedisPeer, "bare": BarePeer,
            "rill-kafka": RillKafkaPeer, "rill-kafka-wire": RillKafkaWirePeer,
            "kafka-bare": KafkaBarePeer, "tansu": TansuPeer, "noida-db": NoidaPeer,
            "rill-tank": RillTankPeer}
