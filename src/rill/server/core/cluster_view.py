"""The core's view of the cluster: who the nodes are, who leads each partition, and the wait
an acks=all write makes (``shared/spec/cluster-design.md`` §2.8, §2.10, §2.12).

Owns the neutral values every protocol reads to find leaders (``NodeInfo``, ``Placement``) and
the port the cluster implements (``ClusterView``; ``server.cluster.node.ClusterNode``). The core
and the protocols name only this module: no etcd type, no cluster module.

A standalone server has no view (``Core.cluster`` and ``Broker.cluster`` are None) and every
partition has ``placement`` None: it leads every partition, its high watermark is its log end,
and acks=all is acks=1. In a cluster every partition has a ``Placement`` (etcd's partition
state as this node last applied it) and ``Partition.role`` says whether this node leads it.

Vocabulary (Kafka's): a partition's ``replicas`` are the nodes that keep a copy (the first is
the preferred leader), its ``isr`` the replicas in sync with the leader, the ``leader_epoch``
grows by one at every election; acks=all (``ACKS_ALL``) answers once every ISR member holds the
records (the high watermark passed them), acks=1 (``ACKS_LEADER``) once the leader does, acks=0
(``ACKS_NONE``) never (Kafka's rule; a protocol without that answer treats it as acks=1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rill.server.core.model import Partition

ACKS_ALL = -1
ACKS_NONE = 0
ACKS_LEADER = 1

# the listener names a node advertises (``NodeInfo.listeners``)
LISTENERS = ("iggy_tcp", "iggy_quic", "http", "kafka", "tank", "peer")


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A live member of the cluster: its id and the address clients and nodes are told for
    each of its listeners (advertised addresses; a listener it does not run is absent)."""

    node_id: int
    listeners: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def address(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of ``listener`` (one of ``LISTENERS``), or None."""
        return self.listeners.get(listener)


@dataclass(frozen=True, slots=True)
class Placement:
    """One partition's replicas and leader as the cluster holds them."""

    leader: int | None  # node id; None: no leader now (offline partition)
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int
    offline: tuple[int, ...] = ()  # replicas that are not live members


# a partition's placement before the cluster's state placed it: no leader (offline)
UNPLACED = Placement(None, 0, (), (), 1)


class ClusterView(Protocol):
    """What the core and the protocols ask of the cluster this node belongs to."""

    @property
    def name(self) -> str: ...  # the cluster's name ([cluster] name)

    @property
    def node_id(self) -> int: ...  # this node's id

    @property
    def controller_id(self) -> int | None: ...  # the controller's node id; None while electing

    def nodes(self) -> Sequence[NodeInfo]:
        """The live members, by node id."""
        ...

    def node(self, node_id: int) -> NodeInfo | None:
        """A live member, or None."""
        ...

    def leadership_certain(self) -> bool:
        """Whether this node surely still holds its member lease (its local deadline has not
        passed without a confirmed keepalive). While it does not -- cut off from etcd, or
        paused -- another node may lead its partitions already. It still serves what it holds
        below its high watermark (committed records; during an etcd outage the data path goes
        on), but it never tells a client that a position is out of range: the client would
        reset it, and the position may be valid at the new leader. It answers "not the
        leader" there instead (``Broker.leadership_certain``)."""
        ...

    def listed_nodes(self) -> Sequence[NodeInfo]:
        """The nodes clients are told of (Kafka Metadata's brokers), by node id: the live
        members and those that left the members a short while ago (a lease lost for a moment,
        a restart), so that a client whose view was taken in such a moment is not left with
        the one node that may then be cut off."""
        ...

    async def replicated(self, partition: Partition, last_offset: int, timeout: float) -> None:
        """Until the partition's high watermark passes ``last_offset`` (every ISR member holds
        the records up to it): the wait of an acks=all write, after the local append. Raises
        ``errors.ReplicationTimedOut`` after ``timeout`` seconds (the write may still commit),
        ``errors.LeaderSteppedDown`` (one of them) when this node stopped leading meanwhile."""
        ...

    async def forward(self, node_id: int, protocol: str, user_id: int, request: bytes) -> bytes:
        """Run one request of ``protocol`` (its whole frame, as a client sent it) on node
        ``node_id`` over the peer link, acting as user ``user_id``, and return the answer's
        whole frame: how a protocol whose clients know no leaders (Iggy) reaches a
        partition's leader. The leader runs it with ``Broker.forwarded[protocol]``. Raises
        ``errors.LeaderNotAvailable`` when the node cannot be reached (nothing was sent), and
        ``errors.LeaderAnswerLost`` when the request was sent but its answer never came (it
        may have been applied): not in 35 s, or not before the node left the members."""
        ...

    def status(self) -> dict[str, Any]:
        """Members, controller and every partition's leader, epoch, ISR and follower lag, as
        JSON values (``GET /cluster``, ``rill cluster status``)::

            {"name": "rill", "node_id": 1, "controller_id": 2,   # None while electing
             "members": [{"node_id": 1, "member_epoch": 55,
                          "listeners": {"kafka": "127.0.0.1:9092", "http": ..., ...}}],
             "partitions": [{"stream_id": 1, "topic_id": 1, "stream": "s", "topic": "t",
                             "partition_id": 1, "leader": 1, "leader_epoch": 3,
                             "replicas": [1, 2, 3], "isr": [1, 2], "offline": [3],
                             # what this node knows of it (any role):
                             "role": "leader", "high_watermark": 100, "log_end": 100,
                             # only on the node that leads it:
                             "followers": [{"node_id": 2, "fetch_offset": 100,
                                            "lag_messages": 0, "lag_seconds": 0.0}]}],
             "counters": {"isr_shrinks": 0, "isr_expands": 0, "leader_elections": 0,
                          "fenced_requests": 0, "replicas_emptied": 0,
                          "under_replicated_partitions": 0}}

        Follower lag is known only on each partition's leader: a tool that shows it for every
        partition asks every member (their ``http`` listener)."""
        ...
