"""In-process rill servers in a cluster set by hand (``ClusterServer``): each a real
``rill.server.app.Server`` with its listeners on 127.0.0.1 port 0, run on an event loop of its
own in a thread (so blocking clients, kafka-python, kcat, raw sockets, reach it from the test),
whose ``core.cluster`` is a ``cluster_views.StaticClusterView``.

A test starts the servers (``start``), then joins them (``join``: every node knows every
other's listeners, and ``forward`` of one reaches the ``Broker.forwarded`` of the other, as the
peer link does), creates topics through any door, and places partitions by hand
(``place``: leader, epoch, replicas, ISR), as etcd's partition state would.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Callable

from cluster_views import StaticClusterView
from rill.server.app import Server
from rill.server.config import ServerConfig
from rill.server.core.cluster_view import NodeInfo

_WAIT = 60.0  # seconds a call on the server's loop may take before the test fails


class ClusterServer:
    """One rill server on its own loop thread: Iggy TCP, HTTP, Kafka and TANK on port 0."""

    def __init__(self, data_dir: Path, node_id: int) -> None:
        self.node_id = node_id
        config = ServerConfig()
        config.system.path = str(data_dir)
        config.root.password_hash_cost = 4
        config.tcp.address = "127.0.0.1:0"
        config.quic.enabled = False
        config.http.address = "127.0.0.1:0"
        config.kafka.enabled = True
        config.kafka.address = "127.0.0.1:0"
        config.kafka.anonymous_user = "iggy"
        config.tank.enabled = True
        config.tank.address = "127.0.0.1:0"
        self.config = config
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name=f"rill-node-{node_id}")
        self._thread.start()
        self.server: Server = self.call(Server, config)
        self.view: StaticClusterView | None = None

    def start(self) -> ClusterServer:
        self.run(self.server.start())
        return self

    def run(self, coroutine) -> Any:
        """Run ``coroutine`` on the server's loop; its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(_WAIT)

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call ``function`` on the server's loop thread; its result."""

        async def called() -> Any:
            return function(*args, **kwargs)

        return self.run(called())

    def address(self, listener: str) -> tuple[str, int]:
        return self.server.addresses[listener]

    @property
    def kafka_address(self) -> tuple[str, int]:  # as ``server_process.RillProcess`` names it
        return self.address("kafka")

    @property
    def tank_address(self) -> tuple[str, int]:
        return self.address("tank")

    @property
    def tcp_address(self) -> tuple[str, int]:
        return self.address("tcp")

    @property
    def http_address(self) -> tuple[str, int]:
        return self.address("http")

    def node_info(self) -> NodeInfo:
        return NodeInfo(self.node_id, {"kafka": self.address("kafka"),
                                       "tank": self.address("tank"),
                                       "iggy_tcp": self.address("tcp"),
                                       "http": self.address("http")})

    def join(self, nodes: list[NodeInfo], controller_id: int | None = None) -> StaticClusterView:
        """Make this server a member of a cluster of ``nodes`` (this one among them)."""
        self.view = self.call(StaticClusterView, self.server.core, self.node_id, nodes,
                              controller_id)
        return self.view

    def partition(self, stream: str | int, topic: str | int, partition_id: int):
        """The model's partition (1..N)."""
        state = self.server.core.state
        return state.find_partition(state.find_topic(stream, topic), partition_id)

    def place(self, stream: str | int, topic: str | int, partition_id: int, leader: int | None,
              leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None,
              min_isr: int = 2) -> None:
        assert self.view is not None
        self.call(self.view.place, self.partition(stream, topic, partition_id), leader,
                  leader_epoch, replicas, isr, min_isr)

    def commit(self, stream: str | int, topic: str | int, partition_id: int, offset: int
               ) -> None:
        assert self.view is not None
        self.call(self.view.commit, self.partition(stream, topic, partition_id), offset)

    def stop(self) -> None:
        try:
            self.run(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(_WAIT)
            self.loop.close()


def start_cluster(tmp_path: Path, count: int, controller_id: int | None = 1,
                  extra_nodes: tuple[NodeInfo, ...] = ()) -> list[ClusterServer]:
    """``count`` servers, nodes 1..count, joined; ``extra_nodes``: members with no server
    (their listeners' addresses are only told to clients)."""
    servers = [ClusterServer(tmp_path / f"node{n}", n).start() for n in range(1, count + 1)]
    nodes = [server.node_info() for server in servers] + list(extra_nodes)
    for server in servers:
        server.join(nodes, controller_id)
    for server in servers:
        for other in servers:
            if other is not server:
                server.view.peers[other.node_id] = _forwarder(other)
    return servers


def _forwarder(target: ClusterServer):
    """What ``forward`` to ``target`` does: the peer link's hop, as a call on its loop."""

    async def forward(protocol: str, user_id: int, frame: bytes) -> bytes:
        run = target.server.core.broker.forwarded[protocol]
        future = asyncio.run_coroutine_threadsafe(run(user_id, frame), target.loop)
        return await asyncio.wrap_future(future)

    return forward
