"""A cluster view set by hand (``StaticClusterView``): the twin of ``ClusterNode`` for tests of
what the protocols do in a cluster (leaders in Metadata, redirects, refusals, acks=all) on one
in-process server, without etcd or other nodes.

A test gives the members and the controller, places partitions (``place``: leader, epoch,
replicas, ISR; this node leads when the leader is its node id) and commits offsets by hand
(``commit``: what a follower's fetch does on a real leader), which wakes acks=all writes and
long polls as the real view does; placing another leader answers the acks=all writes waiting
here ``LeaderSteppedDown``, as ``LeaderReplica.step_down`` does.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from rill import errors
from rill.server.core.cluster_view import NodeInfo, Placement
from rill.server.core.core import Core
from rill.server.core.model import FOLLOWER, LEADER, Partition


class StaticClusterView:
    def __init__(self, core: Core, node_id: int, nodes: list[NodeInfo],
                 controller_id: int | None = None, name: str = "test") -> None:
        self.core = core
        self._node_id = node_id
        self._nodes = {node.node_id: node for node in nodes}
        self._controller_id = controller_id
        self._name = name
        self._commits: dict[int, asyncio.Event] = {}
        self.left: list[NodeInfo] = []  # listed to clients, no longer members
        self.certain = True  # ``leadership_certain``: False as past the lease's local deadline
        # node id -> (protocol, user id, frame) -> answer: what ``forward`` reaches
        self.peers: dict[int, Callable[[str, int, bytes], Awaitable[bytes]]] = {}
        core.cluster = self

    @property
    def name(self) -> str:
        return self._name

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def controller_id(self) -> int | None:
        return self._controller_id

    def nodes(self) -> list[NodeInfo]:
        return [self._nodes[key] for key in sorted(self._nodes)]

    def node(self, node_id: int) -> NodeInfo | None:
        return self._nodes.get(node_id)

    def leadership_certain(self) -> bool:
        return self.certain

    def listed_nodes(self) -> list[NodeInfo]:
        """``nodes`` and ``left`` (nodes that left the members a moment ago, set by hand)."""
        listed = {**{node.node_id: node for node in self.left}, **self._nodes}
        return [listed[key] for key in sorted(listed)]

    def place(self, partition: Partition, leader: int | None, leader_epoch: int,
              replicas: tuple[int, ...], isr: tuple[int, ...] | None = None,
              min_isr: int = 2) -> None:
        """Set the partition's placement and this node's role in it; a leader's high
        watermark starts at its log end (everything committed)."""
        isr = replicas if isr is None else isr
        offline = tuple(replica for replica in replicas if replica not in self._nodes)
        partition.placement = Placement(leader, leader_epoch, replicas, isr, min_isr, offline)
        was_leader = partition.role == LEADER
        partition.role = LEADER if leader == self._node_id else FOLLOWER
        if was_leader and partition.role != LEADER:  # wake the acks=all writes waiting here
            event = self._commits.pop(id(partition), None)
            if event is not None:
                event.set()
        if partition.role == LEADER:
            if leader_epoch > partition.leader_epoch:
                partition.leader_epoch = leader_epoch
            partition.high_watermark = partition.log.next_offset

    def commit(self, partition: Partition, offset: int) -> None:
        """Move the partition's high watermark to ``offset``, as the ISR's fetches would."""
        partition.high_watermark = offset
        self.core.appends.appended(partition.log)
        event = self._commits.pop(id(partition), None)
        if event is not None:
            event.set()

    async def replicated(self, partition: Partition, last_offset: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while partition.high_watermark <= last_offset:
            if partition.role != LEADER:  # stepped down: appended here, outcome unknown
                placement = partition.placement
                raise errors.LeaderSteppedDown(self._node_id, partition.id,
                                               placement.leader if placement else None)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise errors.ReplicationTimedOut()
            event = self._commits.setdefault(id(partition), asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                pass

    async def forward(self, node_id: int, protocol: str, user_id: int, request: bytes) -> bytes:
        peer = self.peers.get(node_id)
        if peer is None:
            raise errors.LeaderNotAvailable(reason=f"node {node_id} cannot be reached")
        return await peer(protocol, user_id, request)

    def status(self) -> dict[str, Any]:
        return {"name": self._name, "node_id": self._node_id,
                "controller_id": self._controller_id,
                "members": [{"node_id": node.node_id,
                             "listeners": {k: f"{h}:{p}" for k, (h, p) in node.listeners.items()}}
                            for node in self.nodes()],
                "partitions": []}
