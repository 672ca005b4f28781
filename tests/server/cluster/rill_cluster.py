"""Three (or N) real ``rill serve`` nodes in one cluster on 127.0.0.1, over a real etcd cluster:
the integration tests' harness (every process started and stopped by pid).

``RillCluster(etcd, directory, name).start()`` starts the nodes (ids 1..N, Kafka and TANK
enabled, every port chosen by the system); ``client(i)`` is a logged-in blocking SDK client of
node i; ``state(stream, topic, partition)`` reads the partition's state from etcd (the truth the
nodes apply); ``leader_of`` waits for a partition to have a live leader; ``kill``, ``pause``,
``resume`` and ``restart`` inject faults; ``stop`` kills what is left.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

from server_process import RillProcess

from rill.client import Client
from rill.server.cluster.etcd_gateway import EtcdGateway
from rill.server.cluster.keys import ClusterKeys


class RillCluster:
    def __init__(self, etcd, directory: Path, name: str, size: int = 3,
                 env: dict[str, str] | None = None) -> None:
        self.etcd = etcd
        self.directory = directory
        self.name = name
        self.size = size
        self.extra_env = dict(env or {})
        self.nodes: dict[int, RillProcess] = {}
        self.keys = ClusterKeys(name)

    def env(self, node_id: int) -> dict[str, str]:
        return {"RILL_CLUSTER_ETCD_ENDPOINTS": ",".join(self.etcd.endpoints),
                "RILL_CLUSTER_NODE_ID": str(node_id),
                "RILL_CLUSTER_PEER_ADDRESS": "127.0.0.1:0", "RILL_CLUSTER_NAME": self.name,
                "RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
                "RILL_KAFKA_ANONYMOUS_USER": "iggy",
                "RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
                "RILL_QUIC_ENABLED": "false", "RILL_LOGGING_LEVEL": "info",
                **self.extra_env}

    def start(self) -> RillCluster:
        for node_id in range(1, self.size + 1):
            self.start_node(node_id)
        return self

    def start_node(self, node_id: int) -> RillProcess:
        node = RillProcess(self.directory / f"node{node_id}", env=self.env(node_id))
        self.nodes[node_id] = node.start()
        return node

    def client(self, node_id: int) -> Client:
        client = Client(self.nodes[node_id].address)
        client.connect()
        client.login_user("iggy", "iggy")
        return client

    def read(self, prefix: bytes) -> list[tuple[bytes, dict]]:
        async def get():
            gateway = EtcdGateway(self.etcd.endpoints)
            try:
                return (await gateway.range(prefix, prefix=True)).kvs
            finally:
                await gateway.close()
        return [(kv.key, json.loads(kv.value)) for kv in asyncio.run(get())]

    def state(self, stream_id: int, topic_id: int, partition_id: int) -> dict:
        found = self.read(self.keys.partition(stream_id, topic_id, partition_id))
        assert found, f"no partition state {stream_id}/{topic_id}/{partition_id} in etcd"
        return found[0][1]

    def members(self) -> list[int]:
        return sorted(int(key.rsplit(b"/", 1)[1]) for key, _ in self.read(self.keys.members))

    def leader_of(self, stream_id: int, topic_id: int, partition_id: int,
                  other_than: int | None = None, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(stream_id, topic_id, partition_id)
            leader = state["leader"]
            if leader is not None and leader != other_than and self.is_alive(leader):
                return leader
            assert time.monotonic() < deadline, f"no new leader in {timeout} s: {state}"
            time.sleep(0.05)

    def is_alive(self, node_id: int) -> bool:
        node = self.nodes.get(node_id)
        return node is not None and node.is_running()

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill()

    def pause(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert node.process is not None
        node.process.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert node.process is not None
        node.process.send_signal(signal.SIGCONT)

    def restart(self, node_id: int, timeout: float = 20.0) -> RillProcess:
        """Start the node again on its data directory (once etcd let its member key go)."""
        deadline = time.monotonic() + timeout
        while node_id in self.members():
            assert time.monotonic() < deadline, "the old member key stayed"
            time.sleep(0.1)
        return self.start_node(node_id)

    def kafka_bootstrap(self, node_id: int) -> str:
        host, port = self.nodes[node_id].kafka_address  # type: ignore[misc]
        return f"{host}:{port}"

    def output(self, node_id: int) -> str:
        return "".join(self.nodes[node_id].output)

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)
                node.kill()
