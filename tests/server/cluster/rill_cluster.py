"""Three (or N) real ``rill serve`` nodes in one cluster on 127.0.0.1, over a real etcd cluster
shared with other tests (each cluster under a name of its own): the integration tests' harness
(every process started and stopped by pid).

Each node is a ``cluster.harness.RillNode``, the fault harness's (``LocalCluster``'s) node: one
way to start a real node and wait for its listeners, kill, pause and restart it. Its ports
(Iggy TCP, HTTP, Kafka, TANK, peer link) are picked once from ``rill.bench.ports`` and kept
across restarts; ``nodes[i].address("tcp")``, ``.kafka``, ``.http_url`` and ``.output`` are its
addresses and what it printed.

``RillCluster(etcd, directory, name).start()`` starts the nodes (ids 1..N, Kafka and TANK
enabled); ``client(i)`` is a logged-in blocking SDK client of node i; ``state(stream, topic,
partition)`` reads the partition's state from etcd (the truth the nodes apply); ``leader_of``
waits for a partition to have a live leader; ``kill``, ``pause``, ``resume`` and ``restart``
inject faults; ``stop`` kills what is left.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from cluster.harness import RillNode, node_env

from rill.bench.ports import free_ports
from rill.client import Client
from rill.server.cluster.etcd_gateway import EtcdGateway
from rill.server.cluster.keys import ClusterKeys

HOST = "127.0.0.1"


class RillCluster:
    def __init__(self, etcd, directory: Path, name: str, size: int = 3,
                 env: dict[str, str] | None = None) -> None:
        self.etcd = etcd
        self.directory = directory
        self.name = name
        self.size = size
        self.extra_env = dict(env or {})
        self.nodes: dict[int, RillNode] = {}
        self.keys = ClusterKeys(name)

    def env(self, node_id: int, ports: dict[str, int]) -> dict[str, str]:
        return {**node_env(node_id, HOST, ports, self.etcd.endpoints, self.name),
                "RILL_KAFKA_ANONYMOUS_USER": "iggy", "RILL_LOGGING_LEVEL": "info",
                **self.extra_env}

    def start(self) -> RillCluster:
        for node_id in range(1, self.size + 1):
            ports = dict(zip(("tcp", "http", "kafka", "tank", "peer"), free_ports(5)))
            self.nodes[node_id] = RillNode(node_id, HOST, self.directory / f"node{node_id}",
                                           self.env(node_id, ports), None, ports).start()
        return self

    def client(self, node_id: int) -> Client:
        client = Client(self.nodes[node_id].address("tcp"))
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
        return node is not None and node.running

    def kill(self, node_id: int) -> None:
        """SIGKILL (a crash)."""
        self.nodes[node_id].kill9()

    def pause(self, node_id: int) -> None:
        """SIGSTOP, returning once the process is stopped."""
        self.nodes[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].resume()

    def restart(self, node_id: int) -> RillNode:
        """The node again on its data directory and ports (killed first if running; started
        once etcd let its old member key go)."""
        node = self.nodes[node_id]
        node.kill9()
        return node.start()

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.paused and node.running:
                node.resume()
            node.kill9()
