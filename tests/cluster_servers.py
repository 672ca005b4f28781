"""In-process rill servers in a cluster set by hand (``ClusterServer``), without etcd or
replication: each a real ``rill.server.app.Server`` with Iggy TCP, HTTP, Kafka and TANK
listeners on 127.0.0.1 port 0 (QUIC off), run on an event loop of its own in a thread (so
blocking clients, kafka-python, kcat, raw sockets, the ``rill`` CLI in a subprocess and a
browser reach it as any server), whose ``core.cluster`` is a
``cluster_views.StaticClusterView``.

``call(fn, ...)`` runs ``fn`` on the server's loop (where the core lives) and gives its result,
awaited when a coroutine; ``run(coroutine)`` runs a coroutine there.

A test starts the servers and joins them: ``start_cluster`` (every node knows every other's
listeners, and ``forward`` of one reaches the ``Broker.forwarded`` of the other, as the peer
link does), or ``cluster_of`` on servers already started (members only, no forwarding; by
default with ``StatusView``, whose ``status()`` lists the partitions placed on it with
counters and follower lag a test sets, and with ``instant_followers`` commits acks=all
writes at once: what ``GET /cluster``, the console's Cluster page, ``rill cluster status``,
the cluster metrics and the SDK's leader routing read). Then it creates topics through any
door (``create_topic``: as root, on the core) and places partitions by hand (``place``:
leader, epoch, replicas, ISR), as etcd's partition state would.
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
from rill.server.core.model import LEADER
from rill.server.core.types import TopicSpec

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

    def stop(self) -> None:
        """Close the open connections (as a dead process's sockets close), stop the server,
        end every task left, then the loop. A second call does nothing."""
        if self.loop.is_closed():
            return

        async def stop() -> None:
            for connection in list(self.server.supervisor.connections):
                connection.expire("the test stops the node")
            await self.server.stop()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        try:
            self.run(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(_WAIT)
            self.loop.close()

    def run(self, coroutine) -> Any:
        """Run ``coroutine`` on the server's loop; its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(_WAIT)

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call ``function`` on the server's loop thread; its result (awaited when it is a
        coroutine)."""

        async def called() -> Any:
            result = function(*args, **kwargs)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return self.run(called())

    @property
    def core(self) -> Any:
        return self.server.core

    def address(self, listener: str) -> tuple[str, int]:
        """(host, port) of ``listener``: "tcp", "http", "kafka" or "tank"."""
        return self.server.addresses[listener]

    def endpoint(self, listener: str) -> str:
        """"host:port" of ``listener``, as clients and the CLI take it."""
        return "%s:%d" % self.address(listener)

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

    @property
    def http_url(self) -> str:
        return f"http://{self.endpoint('http')}"

    def node_info(self) -> NodeInfo:
        return NodeInfo(self.node_id, {"kafka": self.address("kafka"),
                                       "tank": self.address("tank"),
                                       "iggy_tcp": self.address("tcp"),
                                       "http": self.address("http")})

    def join(self, nodes: list[NodeInfo], controller_id: int | None = None, name: str = "test",
             view: type[StaticClusterView] = StaticClusterView) -> Any:
        """Make this server a member of a cluster ``name`` of ``nodes`` (this one among
        them) through a new ``view`` (``StaticClusterView`` or a subclass); that view."""
        self.view = self.call(view, self.server.core, self.node_id, nodes, controller_id, name)
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

    def commit(self, stream: str | int, topic: str | int, partition_id: int,
               offset: int | None = None) -> None:
        """The partition's high watermark to ``offset`` (its log end when None), as the
        ISR's fetches would move it."""
        assert self.view is not None

        def commit() -> None:
            partition = self.partition(stream, topic, partition_id)
            self.view.commit(partition, partition.log.next_offset if offset is None else offset)

        self.call(commit)


class StatusView(StaticClusterView):
    """A hand-set view whose ``status()`` has every placed partition, ``counters`` and the
    follower lag in ``followers`` ((stream id, topic id, partition id) -> rows), as the
    real view's does on the node that leads them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counters = {"isr_shrinks": 0, "isr_expands": 0, "leader_elections": 0,
                         "fenced_requests": 0, "replicas_emptied": 0,
                         "under_replicated_partitions": 0}
        self.followers: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
        # an acks=all write commits at once, as if every ISR follower fetched it in no time
        self.instant_followers = False

    async def replicated(self, partition: Any, last_offset: int, timeout: float) -> None:
        if self.instant_followers and partition.role == LEADER:
            self.commit(partition, partition.log.next_offset)
        await super().replicated(partition, last_offset, timeout)

    def status(self) -> dict[str, Any]:
        status = super().status()
        rows = []
        for stream in sorted(self.core.state.streams.values(), key=lambda s: s.id):
            for topic in sorted(stream.topics.values(), key=lambda t: t.id):
                for partition_id in sorted(topic.partitions):
                    partition = topic.partitions[partition_id]
                    placement = partition.placement
                    if placement is None:
                        continue
                    row: dict[str, Any] = {
                        "stream_id": stream.id, "topic_id": topic.id, "stream": stream.name,
                        "topic": topic.name, "partition_id": partition_id,
                        "leader": placement.leader, "leader_epoch": placement.leader_epoch,
                        "replicas": list(placement.replicas), "isr": list(placement.isr),
                        "offline": list(placement.offline), "role": partition.role,
                        "high_watermark": partition.high_watermark,
                        "log_end": partition.log.next_offset}
                    if partition.role == LEADER:
                        row["followers"] = self.followers.get(
                            (stream.id, topic.id, partition_id),
                            [{"node_id": node, "fetch_offset": partition.log.next_offset,
                              "lag_messages": 0, "lag_seconds": 0.0}
                             for node in placement.replicas if node != self.node_id])
                    rows.append(row)
        status["partitions"] = rows
        status["counters"] = dict(self.counters)
        return status


def start_cluster(tmp_path: Path, count: int, controller_id: int | None = 1,
                  extra_nodes: tuple[NodeInfo, ...] = (), name: str = "test",
                  view: type[StaticClusterView] = StaticClusterView) -> list[ClusterServer]:
    """``count`` servers, nodes 1..count, started, joined (``cluster_of``) and linked: the
    ``forward`` of each reaches the others. ``extra_nodes``: members with no server (their
    listeners' addresses are only told to clients)."""
    servers = [ClusterServer(tmp_path / f"node{n}", n).start() for n in range(1, count + 1)]
    cluster_of(servers, controller_id, name, extra_nodes, view)
    for server in servers:
        for other in servers:
            if other is not server:
                server.view.peers[other.node_id] = _forwarder(other)
    return servers


def cluster_of(servers: list[ClusterServer], controller_id: int | None = 1, name: str = "test",
               extra_nodes: tuple[NodeInfo, ...] = (),
               view: type[StaticClusterView] = StatusView) -> list[Any]:
    """Join every server (started) to one cluster ``name``: a ``view`` each, listing every
    server (and ``extra_nodes``) as live members; no ``forward`` reaches another (a request
    for a partition led elsewhere is refused). The views, in the servers' order."""
    members = [server.node_info() for server in servers] + list(extra_nodes)
    return [server.join(members, controller_id, name, view) for server in servers]


def create_topic(node: ClusterServer, stream: str, topic: str, partitions: int) -> None:
    """Stream ``stream`` (made if missing) with topic ``topic`` on ``node``, as root."""
    async def make() -> None:
        broker = node.core.broker
        session = broker.connect("127.0.0.1:1", "tcp")
        await broker.authenticate(session, "iggy", "iggy")
        if not any(s.name == stream for s in node.core.state.streams.values()):
            await broker.create_namespace(session, stream)
        await broker.create_topic(session, stream, TopicSpec(topic, partitions_count=partitions))

    node.call(make)


def place(nodes: list[ClusterServer], stream: str | int, topic: str | int, partition_id: int,
          leader: int | None, leader_epoch: int, replicas: tuple[int, ...],
          isr: tuple[int, ...] | None = None, min_isr: int = 2) -> None:
    """The same placement of one partition on every node of ``nodes``."""
    for node in nodes:
        node.place(stream, topic, partition_id, leader, leader_epoch, replicas, isr, min_isr)


def _forwarder(target: ClusterServer):
    """What ``forward`` to ``target`` does: the peer link's hop, as a call on its loop."""

    async def forward(protocol: str, user_id: int, frame: bytes) -> bytes:
        run = target.server.core.broker.forwarded[protocol]
        future = asyncio.run_coroutine_threadsafe(run(user_id, frame), target.loop)
        return await asyncio.wrap_future(future)

    return forward
