"""Iggy in a cluster: the requests for a partition another node leads, proxied to that leader
(cluster-design §2.10: the 0.4.x protocol knows no leaders, so unmodified clients keep working
through any node, one extra hop).

Owns: ``Relayed`` (a leader's answer frame, which the binary handler sends as it came),
``leader_elsewhere`` (whether the broker refused a partition because another node leads it,
and which) and ``forward`` (the request, re-encoded with the partition it addresses, run on the
leader by ``ClusterView.forward`` as the session's user; ``handler.run_forwarded`` runs it
there). The rules:

* SEND_MESSAGES, POLL_MESSAGES, STORE_CONSUMER_OFFSET and GET_CONSUMER_OFFSET are run here
  first; the broker refuses, before writing or reading anything, a partition this node does not
  lead (``NotLeaderForPartition``, naming the leader). The request then goes to that leader
  with the partition this node resolved in place of the client's choice: a SEND balanced or by
  key is given the partition chosen here (chosen once, the balanced counter advanced once), a
  group member's poll or offset the partition the group dealt it;
* only requests of Iggy's binary transports (TCP, QUIC) are proxied; a request that was itself
  forwarded never is again (its session's transport is ``peer``): a stale placement answers
  the refusal instead of bouncing between nodes;
* a partition with no leader is LeaderNotAvailable (11201), a leader that cannot be reached
  too (``ClusterView.forward``), but a SEND the leader was sent and never answered (in 35 s,
  or before the leader left the cluster's members) is ``LeaderAnswerLost``
  (``replication_timed_out``: it may be stored); a write this node
  appended and then stopped leading before the ISR held it is never proxied
  (``LeaderReplica.step_down`` answers it ``LeaderSteppedDown``, a ``ReplicationTimedOut``:
  sent again, it could be stored twice);
* a replicated partition's SEND waits for every in-sync replica (``dispatch.send_messages``:
  ``acks=ACKS_ALL``; Iggy has no acks setting, and an OK means stored).
"""

from __future__ import annotations

from dataclasses import dataclass

from rill import errors
from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.framing import encode_request
from rill.server.core.broker import Broker
from rill.server.core.types import Session

PROTOCOL = "iggy"  # the name forwarded requests go under (``Broker.forwarded``)
PEER_TRANSPORT = "peer"  # the transport of a session running a forwarded request
PROXIED_TRANSPORTS = frozenset({"tcp", "quic"})


@dataclass(frozen=True, slots=True)
class Relayed:
    """A leader's whole answer frame (status, length, payload), to send as it is."""

    frame: bytes


def leader_elsewhere(session: Session, error: Exception) -> int | None:
    """The node to proxy the refused request to: the leader ``error`` names, when it is a
    ``NotLeaderForPartition`` and ``session`` may be proxied; else None (answer the error)."""
    if type(error) is not errors.NotLeaderForPartition:
        return None
    if session.transport not in PROXIED_TRANSPORTS:
        return None
    values = error.args_values
    leader = values[2] if len(values) > 2 else None
    return leader if isinstance(leader, int) else None


async def forward(broker: Broker, session: Session, leader: int, command: Command) -> Relayed:
    """Run ``command`` on node ``leader`` as ``session``'s user; its answer frame."""
    cluster = broker.cluster
    if cluster is None:  # (placements exist only in a cluster)
        raise errors.LeaderNotAvailable(reason="no cluster to forward the request in")
    frame = encode_request(command.CODE, command.encode())
    try:
        return Relayed(await cluster.forward(leader, PROTOCOL, session.user_id, frame))
    except errors.LeaderAnswerLost as lost:
        if command.CODE == SendMessages.CODE:  # may be stored: sent again, stored twice
            raise
        # a read or an offset store (which the same value only sets again) is safe to retry
        raise errors.LeaderNotAvailable(reason=lost.reason) from None
