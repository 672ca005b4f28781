"""Iggy's consumer groups as a live membership: who joined, which partitions each member is
dealt, and where each member's group polls go next (wire §3.9, §4.4, §6.5, §6.6).

Owns: ``IggyGroupMembers``, the ``GroupMembership`` the core is built with when it serves Iggy
(the core keeps the groups themselves, durable, and asks this for a member's
partition and for the name a group's positions are stored under: ``iggy-group:<id>``,
``group_position_name``, the name schema 2 of the metadata store gave schema 1's group
offsets, ``storage.metadata_schema``, so it never changes). Kafka's groups are its own
coordinator's (``protocols/kafka/groups.py``); the core learns of their members through
``member_sources``.

Invariants and decisions (where the wire reference leaves a choice):

* Members are live connections only and are never persisted: after a restart every group is
  empty until clients join again.
* Member order is join order. Every join, leave, disconnect, CREATE_PARTITIONS and
  DELETE_PARTITIONS rebalances: assignments, cursors and "current partition" are cleared and
  partition ids 1..N are dealt round-robin (partition i, 0-based, goes to member i mod M:
  the broker's ``deal``).
* In a cluster (``share``: a ``GroupRoster``) the members are those of every node, in the
  order the roster holds them (when etcd stored each join); a JOIN or LEAVE answers once the
  roster holds the change, and every node rebalances its own members when a group's member
  set changes anywhere (a node's death included: its members leave with its lease). For the
  milliseconds between two nodes applying the same change their deals differ, so a member
  reads only the partitions whose claim its node holds (``GroupRoster.holds``; taken and let
  go by ``settle`` after every rebalance): until the old member's node lets go, the new
  member's group polls skip the partition (none claimed: an empty answer, as below).
* Joining again while already a member keeps the member's place in the join order and still
  rebalances (every cursor restarts).
* Leaving a group one is not a member of succeeds silently (Iggy behaviour) and changes
  nothing; the group itself must exist (5000/5003).
* A group poll without a partition id by a member with no assigned partitions (more members
  than partitions) answers an empty result with partition id 0 and current offset 0, instead
  of Iggy's quirk of reading partition 1 (wire §11).
* GET/STORE_CONSUMER_OFFSET for a group without a partition id use the member's current
  partition: the one its last group poll returned since the last rebalance; none => 3007.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from rill import errors
from rill.server.core.broker import Group, GroupRoster, MemberKey, deal
from rill.server.core.types import Session

Membership = tuple[int, int, int]  # (stream id, topic id, group id)
GROUP_PREFIX = "iggy-group:"


def group_position_name(group_id: int) -> str:
    """The name Iggy's group ``group_id`` stores its positions under."""
    return f"{GROUP_PREFIX}{group_id}"


@dataclass(eq=False)
class Member:
    session: Session
    partitions: list[int] = field(default_factory=list)
    cursor: int = 0  # index into ``partitions`` of the next group poll
    current_partition: int = 0  # partition of the last group poll since the rebalance; 0 = none

    def next_partition(self) -> int:
        partition_id = self.partitions[self.cursor]
        self.cursor = (self.cursor + 1) % len(self.partitions)
        self.current_partition = partition_id
        return partition_id


class IggyGroupMembers:
    def __init__(self) -> None:
        # this node's members: client id -> member, join order
        self._groups: dict[Membership, dict[int, Member]] = {}
        self._known: dict[Membership, Group] = {}  # the groups this node has members of
        self.roster: GroupRoster | None = None

    def members(self, group: Group) -> dict[int, Member]:
        """This node's members of ``group``."""
        return self._groups.get(group.membership, {})

    def listing(self, group: Group) -> list[tuple[int, list[int]]]:
        """Every member of ``group`` (on every node, in a cluster) as (client id,
        partitions), in join order."""
        if self.roster is None:
            return [(client_id, member.partitions)
                    for client_id, member in self.members(group).items()]
        dealt = deal(self.roster.members(group.membership), group.partitions_count)
        return [(client_id, partitions) for (_, client_id), partitions in dealt.items()]

    # -- JOIN and LEAVE --------------------------------------------------------------------

    async def join(self, session: Session, group: Group) -> None:
        members = self._groups.setdefault(group.membership, {})
        self._known[group.membership] = group
        if session.client_id not in members:
            members[session.client_id] = Member(session)
            session.consumer_groups.append(group.membership)
        if self.roster is not None:
            try:
                await self.roster.join(group.membership, session.client_id)
            except BaseException:
                if members.get(session.client_id) is not None and \
                        members[session.client_id].session is session:
                    del members[session.client_id]
                    _forget(session, group.membership)
                raise
        self.rebalance(group)

    async def leave(self, session: Session, group: Group) -> None:
        if self.members(group).pop(session.client_id, None) is None:
            return  # not a member: nothing changes (Iggy answers OK too)
        _forget(session, group.membership)
        if self.roster is not None:
            await self.roster.leave(group.membership, session.client_id)
        self.rebalance(group)

    # -- sharing (a cluster) ---------------------------------------------------------------

    def share(self, roster: GroupRoster) -> None:
        self.roster = roster
        roster.watch(self._roster_changed)

    def _roster_changed(self, membership: Membership) -> None:
        group = self._known.get(membership)
        if group is not None and self._groups.get(membership):
            self.rebalance(group)

    # -- what the core tells (GroupMembership) ---------------------------------------------

    def position_name(self, group_id: int) -> str:
        return group_position_name(group_id)

    def rebalance(self, group: Group) -> None:
        local = self.members(group)
        for member in local.values():
            member.partitions.clear()
            member.cursor = 0
            member.current_partition = 0
        if not local:
            if self.roster is not None:  # its claims go (its last member here left)
                self.roster.settle(group.membership, {})
            return
        self._known[group.membership] = group
        if self.roster is None:
            order: list[MemberKey] = [(0, client_id) for client_id in local]
            me = 0
        else:
            order, me = self.roster.members(group.membership), self.roster.node_id
        for (node_id, client_id), partitions in deal(order, group.partitions_count).items():
            if node_id == me and client_id in local:
                local[client_id].partitions.extend(partitions)
        if self.roster is not None:
            self.roster.settle(group.membership,
                               {client_id: list(member.partitions)
                                for client_id, member in local.items()})

    def forget(self, group: Group) -> None:
        """The group is gone (deleted, or its topic or stream): its members are let go."""
        self._known.pop(group.membership, None)
        for member in self._groups.pop(group.membership, {}).values():
            _forget(member.session, group.membership)
        if self.roster is not None:
            self.roster.settle(group.membership, {})

    def client_disconnected(self, session: Session,
                            find: Callable[[Membership], Group | None]) -> None:
        """A closed connection leaves every group it had joined (``find``: the group of a
        membership, None when it is gone)."""
        for membership in list(session.consumer_groups):
            group = find(membership)
            if group is not None and self.members(group).pop(session.client_id, None):
                if self.roster is not None:
                    self.roster.left(membership, session.client_id)
                self.rebalance(group)
        session.consumer_groups.clear()

    def member_partition(self, session: Session, group: Group, advance: bool) -> int:
        """The partition a member's group request without a partition id addresses: with
        ``advance`` (polls) the next of its assigned ones (0: it has none), else its current
        one (GET/STORE offset)."""
        member = self.members(group).get(session.client_id)
        if member is None:
            raise errors.ConsumerGroupMemberNotFound(session.client_id, group.id, group.topic_id)
        if advance:
            if not member.partitions:
                return 0
            if self.roster is None:
                return member.next_partition()
            current = member.current_partition
            for _ in member.partitions:  # the next one whose claim it holds
                partition_id = member.next_partition()
                if self.roster.holds(group.membership, partition_id, session.client_id):
                    return partition_id
            member.current_partition = current
            return 0  # (its partitions' claims are not let go yet)
        if member.current_partition == 0:
            raise errors.PartitionNotFound(0, group.topic_id, group.stream_id, field="partition_id")
        return member.current_partition


def _forget(session: Session, membership: Membership) -> None:
    if membership in session.consumer_groups:
        session.consumer_groups.remove(membership)
