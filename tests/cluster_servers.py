"""In-process servers set up as cluster nodes by hand: for the tests of what operators and the
SDK see of a cluster (``GET /cluster``, the console's Cluster page, ``rill cluster status``,
the cluster metrics, the SDK's leader routing) without etcd or replication.

``ThreadServer`` runs a real ``rill.server.app.Server`` (Iggy TCP and HTTP listeners on
127.0.0.1 port 0) on its own event loop in a thread, so synchronous tests, subprocesses (the
``rill`` CLI) and a browser reach it as any server; ``on_loop(fn)`` runs ``fn`` on that loop
(where the core lives). ``StatusView`` is ``tests/cluster_views.StaticClusterView`` whose
``status()`` lists the partitions placed on it, with counters and follower lag a test sets
(and, with ``instant_followers``, whose acks=all writes commit at once).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

from cluster_views import StaticClusterView
from rill.server.app import Server
from rill.server.config import ServerConfig
from rill.server.core.cluster_view import NodeInfo
from rill.server.core.model import LEADER
from rill.server.core.types import TopicSpec

T = TypeVar("T")


class ThreadServer:
    def __init__(self, data_dir: Path) -> None:
        config = ServerConfig()
        config.system.path = str(data_dir)
        config.root.password_hash_cost = 4
        config.quic.enabled = False
        config.tcp.address = config.http.address = "127.0.0.1:0"
        self.server = Server(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rill-test-server",
                                       daemon=True)

    def start(self) -> ThreadServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(60)
        return self

    def stop(self) -> None:
        """Close the open connections (as a dead process's sockets close), stop the server,
        then end every task left."""
        async def stop() -> None:
            for connection in list(self.server.supervisor.connections):
                connection.expire("the test stops the node")
            await self.server.stop()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)
            self.loop.close()

    def on_loop(self, function: Callable[[], T]) -> T:
        """``function()`` run on the server's loop; its result (awaited when a coroutine)."""
        async def call() -> Any:
            result = function()
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(60)  # type: ignore[no-any-return]

    @property
    def core(self) -> Any:
        return self.server.core

    @property
    def tcp(self) -> tuple[str, int]:
        return self.server.addresses["tcp"]

    @property
    def http(self) -> tuple[str, int]:
        return self.server.addresses["http"]

    @property
    def tcp_address(self) -> str:
        return "%s:%d" % self.tcp

    @property
    def http_address(self) -> str:
        return "%s:%d" % self.http

    @property
    def http_url(self) -> str:
        return f"http://{self.http_address}"

    def node_info(self, node_id: int) -> NodeInfo:
        return NodeInfo(node_id, {"iggy_tcp": self.tcp, "http": self.http})

    def partition(self, stream: str, topic: str, partition_id: int) -> Any:
        for candidate in self.core.state.streams.values():
            if candidate.name == stream:
                for found in candidate.topics.values():
                    if found.name == topic:
                        return found.partitions[partition_id]
        raise KeyError((stream, topic, partition_id))


class StatusView(StaticClusterView):
    """A hand-set view whose ``status()`` has every placed partition, ``counters`` and the
    follower lag in ``followers`` ((stream id, topic id, partition id) -> rows), as the
    real view's does on the node that leads them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counters = {"isr_shrinks": 0, "isr_expands": 0, "leader_elections": 0,
                         "fenced_requests": 0, "under_replicated_partitions": 0}
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


def create_topic(node: ThreadServer, stream: str, topic: str, partitions: int) -> None:
    """Stream ``stream`` (made if missing) with topic ``topic`` on ``node``, as root."""
    async def make() -> None:
        broker = node.core.broker
        session = broker.connect("127.0.0.1:1", "tcp")
        await broker.authenticate(session, "iggy", "iggy")
        if not any(s.name == stream for s in node.core.state.streams.values()):
            await broker.create_namespace(session, stream)
        await broker.create_topic(session, stream, TopicSpec(topic, partitions_count=partitions))

    node.on_loop(make)


def cluster_of(nodes: list[ThreadServer], controller_id: int | None = 1, name: str = "test",
               others: tuple[NodeInfo, ...] = ()) -> list[StatusView]:
    """One view per node (node ids 1, 2, ... in order), each listing every node (and
    ``others``) as live members."""
    members = [node.node_info(index + 1) for index, node in enumerate(nodes)] + list(others)
    return [node.on_loop(lambda node=node, index=index: StatusView(
        node.core, index + 1, members, controller_id, name)) for index, node in enumerate(nodes)]


def place(nodes: list[ThreadServer], views: list[StatusView], stream: str, topic: str,
          partition_id: int, leader: int | None, leader_epoch: int, replicas: tuple[int, ...],
          isr: tuple[int, ...] | None = None) -> None:
    """The same placement of one partition on every node."""
    for node, view in zip(nodes, views):
        node.on_loop(lambda node=node, view=view: view.place(
            node.partition(stream, topic, partition_id), leader, leader_epoch, replicas, isr))
