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
  partition ids 1..N are dealt round-robin (partition i, 0-based, goes to member i mod M).
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
from rill.server.core.broker import Group
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
        self._groups: dict[Membership, dict[int, Member]] = {}  # client id -> member, join order

    def members(self, group: Group) -> dict[int, Member]:
        return self._groups.get(group.membership, {})

    # -- JOIN and LEAVE --------------------------------------------------------------------

    def join(self, session: Session, group: Group) -> None:
        members = self._groups.setdefault(group.membership, {})
        if session.client_id not in members:
            members[session.client_id] = Member(session)
            session.consumer_groups.append(group.membership)
        self.rebalance(group)

    def leave(self, session: Session, group: Group) -> None:
        if self.members(group).pop(session.client_id, None) is None:
            return  # not a member: nothing changes (Iggy answers OK too)
        _forget(session, group.membership)
        self.rebalance(group)

    # -- what the core tells (GroupMembership) ---------------------------------------------

    def position_name(self, group_id: int) -> str:
        return group_position_name(group_id)

    def rebalance(self, group: Group) -> None:
        members = list(self.members(group).values())
        for member in members:
            member.partitions.clear()
            member.cursor = 0
            member.current_partition = 0
        if not members:
            return
        for index in range(group.partitions_count):
            members[index % len(members)].partitions.append(index + 1)

    def forget(self, group: Group) -> None:
        """The group is gone (deleted, or its topic or stream): its members are let go."""
        for member in self._groups.pop(group.membership, {}).values():
            _forget(member.session, group.membership)

    def client_disconnected(self, session: Session,
                            find: Callable[[Membership], Group | None]) -> None:
        """A closed connection leaves every group it had joined (``find``: the group of a
        membership, None when it is gone)."""
        for membership in list(session.consumer_groups):
            group = find(membership)
            if group is not None and self.members(group).pop(session.client_id, None):
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
            return member.next_partition() if member.partitions else 0
        if member.current_partition == 0:
            raise errors.PartitionNotFound(0, group.topic_id, group.stream_id, field="partition_id")
        return member.current_partition


def _forget(session: Session, membership: Membership) -> None:
    if membership in session.consumer_groups:
        session.consumer_groups.remove(membership)
