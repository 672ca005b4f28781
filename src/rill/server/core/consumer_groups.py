"""Consumer groups: the named groups of each topic (commands 600-605, wire §3.9, §4.4), durable
in the metadata store, and the group side of consumer positions.

Owns: the groups of every topic (ids, names, the topic's partition count), and the answer to
"which partition, under which position name" for a group consumer (it is the ``groups``
resolver of ConsumerOffsetService). Who the members are and which partitions each is dealt is
a protocol's (``GroupMembership``, given when the Core is built: Iggy's is
``protocols.iggy.groups``); this module tells it every change that moves partitions or ends
groups, and asks it for a member's partition.

* A group's positions are stored under the name its membership gives (``GroupMembership.
  position_name``: a protocol's dialect; Iggy's is ``iggy-group:<id>``,
  ``protocols.iggy.groups``) and deleted with it. Without a protocol (``NoMembership``: the
  core's tests) the name is ``group:<id>``.
* With a partition id a group consumer addresses that partition, with no membership check
  (the group must still exist); without one, the membership picks it (0: the member has none
  to read; what a read of none answers is the protocol's rule).
* Partitions are dealt by ``deal``, a pure function of the members in join order: partition
  ids 1..N round robin (partition i, 0-based, to member i mod M). In a cluster the members
  of every node are shared through a ``GroupRoster`` (``cluster.group_members``), so every
  node deals the same partitions to the same members, and a member reads a partition only
  while it holds its claim (no two members anywhere read one partition at once).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Callable, Protocol, TypeVar

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.core.catalog import ConsumerGroupRow
from rill.server.core.model import Session, Stream, Topic
from rill.server.core.names import validate_name
from rill.server.core.state import CoreState
from rill.server.core.types import Ref

TopicKey = tuple[int, int]  # (stream id, topic id)
Membership = tuple[int, int, int]  # (stream id, topic id, group id)
MemberKey = tuple[int, int]  # (node id, client id): a member wherever its client is connected
K = TypeVar("K", bound=Hashable)


def deal(members: Sequence[K], partitions_count: int) -> dict[K, list[int]]:
    """Each member's partitions: ids 1..``partitions_count`` dealt round robin over
    ``members`` in their order (partition i, 0-based, to member i mod M); every member has an
    entry, empty when there are more members than partitions."""
    dealt: dict[K, list[int]] = {member: [] for member in members}
    if members:
        for index in range(partitions_count):
            dealt[members[index % len(members)]].append(index + 1)
    return dealt


class GroupRoster(Protocol):
    """The members of every node's groups, shared (a cluster's: ``cluster.group_members``).
    A node tells it its own clients' joins and leaves; it calls ``watch``'s function with a
    group's membership whenever that group's member set changed (on any node)."""

    node_id: int

    def members(self, membership: Membership) -> list[MemberKey]:
        """The group's members on every node, in join order."""

    async def join(self, membership: Membership, client_id: int) -> None:
        """This node's client joined; returns once the roster holds it."""

    async def leave(self, membership: Membership, client_id: int) -> None:
        """This node's client left; returns once the roster dropped it."""

    def left(self, membership: Membership, client_id: int) -> None:
        """This node's client is gone (a disconnect): dropped in the background."""

    def settle(self, membership: Membership, dealt: dict[int, list[int]]) -> None:
        """This node's members (client id -> partitions) were dealt ``dealt``: the roster
        takes the partitions' claims for them (and lets go of the others) when it can."""

    def holds(self, membership: Membership, partition_id: int, client_id: int) -> bool:
        """Whether this node's member ``client_id`` may read the partition now (it holds
        its claim: no other member anywhere does)."""

    def watch(self, changed: Callable[[Membership], None]) -> None: ...


class GroupMembership(Protocol):
    """A protocol's live membership of the groups (Iggy's: ``protocols.iggy.groups``)."""

    def position_name(self, group_id: int) -> str:
        """The name group ``group_id``'s positions are stored under (the protocol's; kept as
        it is on disk, so it never changes for a group that has positions)."""

    def rebalance(self, group: Group) -> None:
        """The group's topic has another partition count now (``group.partitions_count``)."""

    def forget(self, group: Group) -> None:
        """The group is gone (deleted, or its topic or stream)."""

    def client_disconnected(self, session: Session,
                            find: Callable[[Membership], Group | None]) -> None:
        """``session``'s connection closed."""

    def member_partition(self, session: Session, group: Group, advance: bool) -> int:
        """The partition id a member addresses without naming one (0: none to read)."""

    def share(self, roster: GroupRoster) -> None:
        """From now on members are shared with other nodes through ``roster``."""


class NoMembership:
    """Groups with no protocol to manage their members: every member is unknown."""

    def position_name(self, group_id: int) -> str:
        return f"group:{group_id}"

    def rebalance(self, group: Group) -> None:
        pass

    def forget(self, group: Group) -> None:
        pass

    def client_disconnected(self, session: Session, find) -> None:
        pass

    def member_partition(self, session: Session, group: Group, advance: bool) -> int:
        raise errors.ConsumerGroupMemberNotFound(session.client_id, group.id, group.topic_id)

    def share(self, roster: GroupRoster) -> None:
        pass


@dataclass(eq=False)
class Group:
    stream_id: int
    topic_id: int
    id: int
    name: str
    partitions_count: int = 0  # the topic's
    key: str = ""  # the name its positions are stored under (``GroupMembership.position_name``)

    @property
    def membership(self) -> Membership:
        return (self.stream_id, self.topic_id, self.id)


class ConsumerGroupService:
    def __init__(self, state: CoreState, membership: GroupMembership) -> None:
        self.state = state
        self.membership = membership
        self.topics: dict[TopicKey, dict[int, Group]] = {}

    def load(self) -> None:
        """Groups from the metadata store (their offsets are loaded with all the others)."""
        self.topics.clear()
        for row in self.state.store.load_consumer_groups():
            stream = self.state.streams.get(row.stream_id)
            if stream is None or row.topic_id not in stream.topics:
                continue
            groups = self.topics.setdefault((row.stream_id, row.topic_id), {})
            groups[row.id] = Group(row.stream_id, row.topic_id, row.id, row.name,
                                   partitions_count=len(stream.topics[row.topic_id].partitions),
                                   key=self.membership.position_name(row.id))

    # -- lookups ---------------------------------------------------------------------------

    def _groups(self, topic: Topic) -> dict[int, Group]:
        return self.topics.get((topic.stream_id, topic.id), {})

    def find_group(self, topic: Topic, group_id: Ref) -> Group:
        groups = self._groups(topic)
        value = group_id
        if isinstance(value, int):
            group = groups.get(value)
            if group is None:
                raise errors.ConsumerGroupIdNotFound(value, topic.id, field="group_id")
            return group
        for group in groups.values():
            if group.name == value:
                return group
        raise errors.ConsumerGroupNameNotFound(value, topic.id, field="group_id")

    def groups_of(self, topic: Topic) -> dict[int, Group]:
        return self._groups(topic)

    def group_position_names(self, topic: Topic) -> list[tuple[str, str]]:
        """(position name, group name) of the topic's groups, by id."""
        groups = self._groups(topic)
        return [(groups[group_id].key, groups[group_id].name) for group_id in sorted(groups)]

    def _topic_and_group(self, session: Session, stream_id: Ref, topic_id: Ref, group_id: Ref
                         ) -> tuple[Topic, Group]:
        topic = self.state.find_topic(stream_id, topic_id)
        self.state.authorize(session, Action.READ_TOPIC, topic.stream_id, topic.id)
        return topic, self.find_group(topic, group_id)

    # -- commands --------------------------------------------------------------------------

    def get_consumer_group(self, session: Session, stream_id: Ref, topic_id: Ref, group_id: Ref
                           ) -> Group:
        return self._topic_and_group(session, stream_id, topic_id, group_id)[1]

    def get_consumer_groups(self, session: Session, stream_id: Ref, topic_id: Ref) -> list[Group]:
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.READ_TOPIC, topic.stream_id, topic.id)
        groups = self._groups(topic)
        return [groups[gid] for gid in sorted(groups)]

    async def create_consumer_group(self, session: Session, stream_id: Ref, topic_id: Ref,
                                    name: str, group_id: int = 0) -> Group:
        """A new group; ``group_id`` 0 takes the topic's lowest free group id."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.READ_TOPIC, topic.stream_id, topic.id)
        name = validate_name(name, errors.InvalidConsumerGroupName)
        existing = self._groups(topic)
        if any(group.name == name for group in existing.values()):
            raise errors.ConsumerGroupNameAlreadyExists(name, topic.id, field="name")
        group_id = group_id or state.lowest_free_id(existing)
        if group_id in existing:
            raise errors.ConsumerGroupIdAlreadyExists(group_id, topic.id, field="group_id")
        row = ConsumerGroupRow(topic.stream_id, topic.id, group_id, name)
        return self.apply_created(topic, await state.store.create_consumer_group(row))

    async def delete_consumer_group(self, session: Session, stream_id: Ref, topic_id: Ref,
                                    group_id: Ref) -> None:
        topic, group = self._topic_and_group(session, stream_id, topic_id, group_id)
        await self.state.store.delete_consumer_group(topic.stream_id, topic.id, group.id,
                                                     group.key)
        self.apply_deleted(topic, group)

    # -- confirmed changes (this node's, or another's: ``core.applying``) ----------------

    def apply_created(self, topic: Topic, row: ConsumerGroupRow) -> Group:
        """A group the catalog holds now, in ``topic``."""
        group = Group(row.stream_id, row.topic_id, row.id, row.name,
                      partitions_count=len(topic.partitions),
                      key=self.membership.position_name(row.id))
        self.topics.setdefault((topic.stream_id, topic.id), {})[row.id] = group
        return group

    def apply_deleted(self, topic: Topic, group: Group) -> None:
        """A group the catalog deleted, with the positions stored under its name."""
        for partition in topic.partitions.values():
            for kept in (partition.positions, partition.position_notes,
                         partition.position_epochs):
                kept.pop(group.key, None)
        self._drop(group)

    # -- hooks -----------------------------------------------------------------------------

    def client_disconnected(self, session: Session) -> None:
        """A closed connection leaves every group it had joined."""
        self.membership.client_disconnected(
            session, lambda membership: self.topics.get(membership[:2], {}).get(membership[2]))

    def partitions_changed(self, topic: Topic) -> None:
        for group in self._groups(topic).values():
            group.partitions_count = len(topic.partitions)
            self.membership.rebalance(group)

    def topic_deleted(self, topic: Topic) -> None:
        """Drop the topic's groups from memory (the store cascades their rows and positions)."""
        for group in list(self._groups(topic).values()):
            self._drop(group)
        self.topics.pop((topic.stream_id, topic.id), None)

    def stream_deleted(self, stream: Stream) -> None:
        for topic in stream.topics.values():
            self.topic_deleted(topic)

    def _drop(self, group: Group) -> None:
        self.membership.forget(group)
        groups = self.topics.get((group.stream_id, group.topic_id), {})
        groups.pop(group.id, None)

    # -- who reads which partition ------------------------------------------------------

    def member_partition(self, session: Session, stream_id: Ref, topic_id: Ref, group_id: Ref,
                         partition_id: int, advance: bool) -> tuple[int, str]:
        """(the partition id a group consumer addresses, the name of the group's positions):
        ``partition_id`` when it names one (which must exist), else the membership's pick (0:
        none to read). ``advance`` (reads) moves the member on to its next partition.
        READ_MESSAGES on the topic."""
        state = self.state
        topic = state.find_topic(stream_id, topic_id)
        state.authorize(session, Action.READ_MESSAGES, topic.stream_id, topic.id)
        group = self.find_group(topic, group_id)
        if not partition_id:
            partition_id = self.membership.member_partition(session, group, advance)
            if partition_id == 0:
                return 0, group.key
        return state.find_partition(topic, partition_id).id, group.key
