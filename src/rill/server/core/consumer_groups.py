"""Consumer groups: commands 600-605, membership, partition assignment and rebalancing
(wire §3.9, §4.4, §6.5, §6.6).

Owns: the groups of every topic (their ids, names and live members), each member's assigned
partitions and round-robin cursor, and the group side of consumer offsets (it is the
``groups`` resolver of ConsumerOffsetService, so polls and GET/STORE_CONSUMER_OFFSET with a
group consumer come here to learn which partition they address).

Invariants and decisions (where the wire reference leaves a choice):

* Groups and their offsets are durable (metadata store); members are live connections only and
  are never persisted: after a restart every group is empty until clients join again.
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
  partition: the one its last group poll returned since the last rebalance; none ⇒ 3007.
  With a partition id there is no membership check (the group must still exist).
* A group's ``partitions_count`` is the topic's current partition count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.core.consumer_offsets import iggy_group_key
from rill.server.core.model import Partition, Session, Stream, Topic
from rill.server.core.names import validate_name
from rill.server.core.state import CoreState
from rill.server.core.types import Ref
from rill.server.storage.metadata import ConsumerGroupRow

TopicKey = tuple[int, int]  # (stream id, topic id)


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


@dataclass(eq=False)
class Group:
    stream_id: int
    topic_id: int
    id: int
    name: str
    members: dict[int, Member] = field(default_factory=dict)  # client id -> member, join order
    partitions_count: int = 0  # the topic's, as of the last rebalance

    @property
    def membership(self) -> tuple[int, int, int]:
        return (self.stream_id, self.topic_id, self.id)

    def rebalance(self, partitions_count: int) -> None:
        self.partitions_count = partitions_count
        members = list(self.members.values())
        for member in members:
            member.partitions.clear()
            member.cursor = 0
            member.current_partition = 0
        if not members:
            return
        for index in range(partitions_count):
            members[index % len(members)].partitions.append(index + 1)


class _NoMessagesLog:
    """The log of the stand-in partition a member without assigned partitions polls."""

    is_empty = True
    current_offset = 0
    first_offset = 0
    next_offset = 0
    messages_count = 0

    def read(self, offset: int, count: int) -> tuple[int, list[bytes]]:
        return 0, [b""]


def _no_partition(topic: Topic) -> Partition:
    return Partition(topic.stream_id, topic.id, 0, 0, _NoMessagesLog())  # type: ignore[arg-type]


class ConsumerGroupService:
    def __init__(self, state: CoreState) -> None:
        self.state = state
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
                                   partitions_count=len(stream.topics[row.topic_id].partitions))

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

    def group_names(self, topic: Topic) -> dict[int, str]:
        return {group_id: group.name for group_id, group in self._groups(topic).items()}

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

    def create_consumer_group(self, session: Session, stream_id: Ref, topic_id: Ref, name: str,
                              group_id: int = 0) -> Group:
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
        state.store.create_consumer_group(row)
        group = Group(topic.stream_id, topic.id, group_id, name,
                      partitions_count=len(topic.partitions))
        self.topics.setdefault((topic.stream_id, topic.id), {})[group_id] = group
        return group

    def delete_consumer_group(self, session: Session, stream_id: Ref, topic_id: Ref,
                              group_id: Ref) -> None:
        topic, group = self._topic_and_group(session, stream_id, topic_id, group_id)
        key = iggy_group_key(group.id)
        self.state.store.delete_consumer_group(topic.stream_id, topic.id, group.id, key)
        for partition in topic.partitions.values():
            partition.positions.pop(key, None)
        self._drop(group)

    def join_consumer_group(self, session: Session, stream_id: Ref, topic_id: Ref,
                            group_id: Ref) -> None:
        topic, group = self._topic_and_group(session, stream_id, topic_id, group_id)
        if session.client_id not in group.members:
            group.members[session.client_id] = Member(session)
            session.consumer_groups.append(group.membership)
        group.rebalance(len(topic.partitions))

    def leave_consumer_group(self, session: Session, stream_id: Ref, topic_id: Ref,
                             group_id: Ref) -> None:
        topic, group = self._topic_and_group(session, stream_id, topic_id, group_id)
        if group.members.pop(session.client_id, None) is None:
            return  # not a member: nothing changes (Iggy answers OK too)
        _forget(session, group.membership)
        group.rebalance(len(topic.partitions))

    # -- hooks -----------------------------------------------------------------------------

    def client_disconnected(self, session: Session) -> None:
        """A closed connection leaves every group it had joined."""
        for stream_id, topic_id, group_id in list(session.consumer_groups):
            group = self.topics.get((stream_id, topic_id), {}).get(group_id)
            if group is not None and group.members.pop(session.client_id, None) is not None:
                topic = self.state.streams[stream_id].topics[topic_id]
                group.rebalance(len(topic.partitions))
        session.consumer_groups.clear()

    def partitions_changed(self, topic: Topic) -> None:
        for group in self._groups(topic).values():
            group.rebalance(len(topic.partitions))

    def topic_deleted(self, topic: Topic) -> None:
        """Drop the topic's groups from memory (the store cascades their rows and offsets)."""
        for group in list(self._groups(topic).values()):
            self._drop(group)
        self.topics.pop((topic.stream_id, topic.id), None)

    def stream_deleted(self, stream: Stream) -> None:
        for topic in stream.topics.values():
            self.topic_deleted(topic)

    def _drop(self, group: Group) -> None:
        for member in group.members.values():
            _forget(member.session, group.membership)
        group.members.clear()
        groups = self.topics.get((group.stream_id, group.topic_id), {})
        groups.pop(group.id, None)

    # -- the offsets resolver --------------------------------------------------------------

    def resolve_group_partition(
        self, session: Session, topic: Topic, group_id: Ref, partition_id: int,
        advance: bool,
    ) -> tuple[Partition, str]:
        """The partition a group consumer addresses, and the group's offset key.

        ``advance`` (polls) moves the member's cursor; without it (GET/STORE offset) the
        member's current partition is used.
        """
        group = self.find_group(topic, group_id)
        key = iggy_group_key(group.id)
        if partition_id:
            return self.state.find_partition(topic, partition_id), key
        member = group.members.get(session.client_id)
        if member is None:
            raise errors.ConsumerGroupMemberNotFound(session.client_id, group.id, topic.id)
        if advance:
            if not member.partitions:
                return _no_partition(topic), key
            partition_id = member.next_partition()
        else:
            partition_id = member.current_partition
            if partition_id == 0:
                raise errors.PartitionNotFound(0, topic.id, topic.stream_id, field="partition_id")
        return self.state.find_partition(topic, partition_id), key


def _forget(session: Session, membership: tuple[int, int, int]) -> None:
    if membership in session.consumer_groups:
        session.consumer_groups.remove(membership)
