"""A partition's replicated state and the rules that change it, sans-I/O
(``shared/spec/cluster-design.md`` §2.5, §2.6, §2.8).

Owns: ``PartitionState`` (etcd's ``partitions/<s>/<t>/<p>`` value: replicas, leader, leader
epoch, ISR, minimum ISR; its key's mod_revision is the **partition epoch**, which every
change compares; its **incarnation** is its key's create_revision, or the revision a purge gave
it: a partition deleted and made again under the same ids, or purged, is another one, and
replicas of the two never mix), the replica assignment of a new topic (``assign``), the
controller's election (``elect``), the move of leadership back to the preferred replica
(``prefer``), the leader's ISR changes (``shrink``, ``expand``) and a purge (``purged``).

Invariants: the ISR is never empty (the last member stays in it even when it dies: it holds
everything committed, and the partition waits for it rather than electing a replica that may
lack committed records); a leader is elected only from live ISR members, in assignment order
(the first replica is the preferred leader); every election adds one to the leader epoch.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    min_isr: int
    revision: int = 0  # the key's mod_revision (the partition epoch); 0: not stored yet
    created: int = 0  # the key's create_revision; 0: not stored yet
    purged_at: int = 0  # one past the partition epoch its last purge replaced; 0: never purged

    @property
    def incarnation(self) -> int:
        """Which partition this is under its ids: the revision of its creation or of its last
        purge (replicas of two incarnations never mix)."""
        return self.purged_at or self.created

    def to_json(self) -> bytes:
        value = {"replicas": list(self.replicas), "leader": self.leader,
                 "leader_epoch": self.leader_epoch, "isr": list(self.isr),
                 "min_isr": self.min_isr}
        if self.purged_at:
            value["purged_at"] = self.purged_at
        return json.dumps(value, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, value: bytes, revision: int, created: int = 0) -> PartitionState:
        data = json.loads(value)
        return cls(tuple(data["replicas"]), data["leader"], int(data["leader_epoch"]),
                   tuple(data["isr"]), int(data["min_isr"]), revision, created,
                   int(data.get("purged_at", 0)))


def assign(nodes: Sequence[int], replication_factor: int, partitions: int,
           start: int = 0) -> list[tuple[int, ...]]:
    """Replica lists for ``partitions`` new partitions over ``nodes`` (sorted live node ids),
    round robin from ``start`` so that leaders spread: partition i's replicas are the
    ``replication_factor`` nodes from position start + i."""
    count = len(nodes)
    return [tuple(nodes[(start + index + shift) % count] for shift in range(replication_factor))
            for index in range(partitions)]


def first_state(replicas: tuple[int, ...], min_isr: int) -> PartitionState:
    """A new partition: its first replica leads at epoch 1, every replica in sync (empty)."""
    return PartitionState(replicas, replicas[0], 1, replicas, min_isr)


def elect(state: PartitionState, live: Collection[int],
          restarted: Collection[int] = ()) -> PartitionState | None:
    """The controller's view of a partition given the live members and those of them that
    joined again since the partition's state was written (``restarted``: a new member epoch;
    their log may have lost an unsynced tail): dead and restarted members leave the ISR
    (never the last live one), and a leader is elected, epoch + 1, when the leader is dead,
    missing or restarted (from the live ISR, non-restarted first, in assignment order; None
    when no ISR member is live). None: nothing to change."""
    fresh = [node for node in state.isr if node in live and node not in restarted]
    back = [node for node in state.isr if node in live and node in restarted]
    leader, epoch = state.leader, state.leader_epoch
    if leader is None or leader not in live or leader in restarted:
        candidates = ([node for node in state.replicas if node in fresh]
                      or [node for node in state.replicas if node in back])
        new_leader = candidates[0] if candidates else None
        if new_leader is not None or leader is not None:
            epoch += 1
        leader = new_leader
    if leader is None:
        isr = state.isr[-1:] if not fresh else tuple(fresh)
    else:
        isr = tuple(node for node in state.replicas if node in fresh or node == leader)
    if leader == state.leader and isr == state.isr and epoch == state.leader_epoch:
        return None
    return replace(state, leader=leader, leader_epoch=epoch, isr=isr)


def prefer(state: PartitionState, live: Collection[int]) -> PartitionState | None:
    """Leadership back to the preferred replica (the assignment's first) once it is live and
    in the ISR again, at epoch + 1: after a failover the survivors lead everything, and this
    spreads the leaders as the assignment did. An orderly election -- every ISR member holds
    what was committed -- so nothing acknowledged to acks=all is lost (the old leader's
    uncommitted tail is cut, as in any election). None: nothing to change."""
    preferred = state.replicas[0]
    if (state.leader is None or state.leader == preferred or preferred not in state.isr
            or preferred not in live):
        return None
    return replace(state, leader=preferred, leader_epoch=state.leader_epoch + 1)


def shrink(state: PartitionState, out: Collection[int]) -> PartitionState | None:
    """The leader's ISR without the followers ``out`` (never itself); None: no change."""
    isr = tuple(node for node in state.isr if node not in out or node == state.leader)
    return None if isr == state.isr else replace(state, isr=isr)


def expand(state: PartitionState, node: int) -> PartitionState | None:
    """The leader's ISR with caught-up follower ``node`` back in; None: no change."""
    if node in state.isr or node not in state.replicas:
        return None
    return replace(state, isr=tuple(n for n in state.replicas if n in state.isr or n == node))


def purged(state: PartitionState) -> PartitionState:
    """The partition emptied: a new incarnation at the next leader epoch, same replicas, leader
    and ISR. The incarnation is one past the partition epoch it replaces: above every earlier
    incarnation of the key (none was given after that epoch), at most the revision of the
    purge's own transaction, below any later re-creation's. Every replica empties its log
    when it learns it (``ClusterNode``); fetches of the old incarnation are refused from then
    on."""
    return replace(state, leader_epoch=state.leader_epoch + 1, purged_at=state.revision + 1)
