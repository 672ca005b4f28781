"""The Kafka group APIs: OffsetCommit/OffsetFetch (offsets: the core's) and the classic group
coordinator's JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups
(membership: ``groups.Coordinator``, one per core).

Rules:

* a group's committed offsets are the core's consumer positions of the consumer named
  ``kafka-group:<group id>`` (``broker.commit_offset``/``committed_offset``), durable in the
  metadata store; Kafka's committed offset is the next offset to read, as the core's;
* commit metadata is kept with the offset, as the core position's note (durable in the same
  row, gone with the partition; a null metadata is stored as none and read back as ""); the
  committed leader epoch (v6+) is kept in the same row and answered by OffsetFetch (v5+; -1
  when none was committed); commit timestamps and retention
  are ignored;
* OffsetCommit v0 (ZooKeeper-stored in Kafka 0.8) carries no member or generation: it is
  stored like the others, unchecked, whatever the group's membership; v1's commit timestamp is
  ignored like v2-4's retention;
* OffsetCommit: a group with members checks member and generation (UNKNOWN_MEMBER_ID,
  ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while assignments are handed out); a simple commit
  (generation -1, empty member id) is accepted for a group with no members; an unknown topic or
  partition is UNKNOWN_TOPIC_OR_PARTITION for that partition; an offset beyond the log's end is
  OFFSET_OUT_OF_RANGE (the core keeps positions within the log);
* OffsetFetch: -1 where the group never committed; topics null (v2+) lists every partition of
  the Kafka topics where the group has a committed offset;
* ListGroups/DescribeGroups (Kafka's rule): a group with no members is Empty while it has
  committed offsets (also one the coordinator does not know, as after a restart: protocol type
  "consumer"), else Dead: not listed, described as Dead, and forgotten by the coordinator;
* in a cluster the controller coordinates every group (``common.coordinator_elsewhere``, what
  FindCoordinator answers): on another node JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  OffsetCommit, OffsetFetch and DescribeGroups answer NOT_COORDINATOR (16), which sends the
  client back to FindCoordinator; ListGroups lists the groups this node coordinates (none);
* permissions: rill has none for groups, so a group stands for what its members read: the
  group APIs are GROUP_AUTHORIZATION_FAILED for a principal that may poll messages from none
  of the Kafka stream's topics (while the stream has no topic, groups are open to any login);
  committing or fetching an offset also needs the right to poll that topic
  (TOPIC_AUTHORIZATION_FAILED for that partition); ListGroups lists nothing then.
"""

from __future__ import annotations

import struct
import weakref
from typing import Any

from rill import errors
from rill.protocol.kafka import ErrorCode, apis, response_class
from rill.server.core.broker import PartitionRef
from rill.server.core.core import Core
from rill.server.core.types import LiveMember, MemberSource, Session
from rill.server.protocols.kafka.common import (
    KafkaSettings,
    coordinator_elsewhere,
    kafka_error,
    kafka_topics,
)
from rill.server.protocols.kafka.groups import (
    DEAD, EMPTY, PREPARING, STABLE, Coordinator,
)

GROUP_RANGES: dict[int, tuple[int, int]] = {
    apis.OFFSET_COMMIT: (0, 8),
    apis.OFFSET_FETCH: (0, 7),
    apis.JOIN_GROUP: (0, 7),
    apis.SYNC_GROUP: (0, 5),
    apis.HEARTBEAT: (0, 4),
    apis.LEAVE_GROUP: (0, 4),
    apis.DESCRIBE_GROUPS: (0, 5),
    apis.LIST_GROUPS: (0, 4),
}

_COORDINATORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def coordinator(core: Core) -> Coordinator:
    found = _COORDINATORS.get(core)
    if found is None:
        found = _COORDINATORS[core] = Coordinator()
    return found


def consumer_name(group_id: str) -> str:
    return f"kafka-group:{group_id}"


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    """Topic -> Kafka partitions of a member's assignment, as the "consumer" protocol type's
    clients encode it (ConsumerProtocolAssignment v0-v3: int16 version, [topic: string,
    [partition: int32]], user data); {} for bytes of another shape (the coordinator stores
    what the leader sent without reading it)."""
    try:
        at = 2  # the version: the fields read are the same in v0-v3
        (count,) = struct.unpack_from(">i", assignment, at)
        at += 4
        topics: dict[str, list[int]] = {}
        for _ in range(count):
            (length,) = struct.unpack_from(">h", assignment, at)
            name = bytes(assignment[at + 2:at + 2 + length]).decode("utf-8")
            at += 2 + length
            (partitions,) = struct.unpack_from(">i", assignment, at)
            topics[name] = list(struct.unpack_from(f">{partitions}i", assignment, at + 4))
            at += 4 + 4 * partitions
        return topics
    except (struct.error, UnicodeDecodeError, ValueError):
        return {}


def member_source(core: Core, kafka_stream: str) -> MemberSource:
    """The live members of this core's Kafka groups assigned partitions of a topic of the
    Kafka stream (``Core.member_sources``; Kafka partition p is rill's p + 1)."""

    def members(stream_name: str, topic_name: str) -> list[LiveMember]:
        if stream_name != kafka_stream:
            return []
        found = []
        for group in list(coordinator(core).groups.values()):
            for member in list(group.members.values()):
                partitions = assigned_partitions(member.assignment).get(topic_name)
                if partitions is not None:
                    found.append(LiveMember(consumer_name(group.group_id), member.member_id,
                                            f"{member.client_id} ({member.client_host})",
                                            tuple(sorted(p + 1 for p in partitions))))
        return found

    return members


def group_denied(core: Core, session: Session, settings: KafkaSettings) -> bool:
    """Whether the principal may use no group (see the module's rules)."""
    topics = kafka_topics(core, session, settings)
    return bool(topics) and not any(core.broker.topic_allows(session, topic, "read")
                                    for topic in topics.values())


def _client_id(request) -> str:
    return getattr(request.header, "client_id", None) or ""


# -- OffsetCommit (8) ------------------------------------------------------------------------

_OffsetCommit = response_class(apis.OFFSET_COMMIT)
_CommitTopic = _OffsetCommit.OffsetCommitResponseTopic
_CommitPartition = _CommitTopic.OffsetCommitResponsePartition


async def offset_commit(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    instance_id = body.group_instance_id if request.api_version >= 7 else None
    group_code = ErrorCode.NONE if request.api_version == 0 else coordinator(core).check_commit(
        body.group_id, body.generation_id_or_member_epoch, body.member_id, instance_id)
    if group_denied(core, session, settings):
        group_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif coordinator_elsewhere(core) is not None:
        group_code = ErrorCode.NOT_COORDINATOR
    topics = kafka_topics(core, session, settings) if group_code == ErrorCode.NONE else {}
    name = consumer_name(body.group_id)
    responses = []
    for topic in body.topics:
        partitions = []
        for entry in topic.partitions:
            code = group_code
            if code == ErrorCode.NONE:
                known = topics.get(topic.name)
                if known is None or not 0 <= entry.partition_index < len(known.partitions):
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    ref = PartitionRef(settings.stream, topic.name, entry.partition_index + 1)
                    try:
                        epoch = entry.committed_leader_epoch  # -1 (none) before v6
                        await core.broker.commit_offset(
                            session, name, ref, entry.committed_offset,
                            entry.committed_metadata or None, epoch if epoch >= 0 else None)
                    except errors.InvalidOffset:
                        code = ErrorCode.OFFSET_OUT_OF_RANGE
                    except errors.RillError as error:
                        code = kafka_error(error)
            partitions.append(_CommitPartition(partition_index=entry.partition_index,
                                               error_code=int(code)))
        responses.append(_CommitTopic(name=topic.name, partitions=tuple(partitions)))
    return _OffsetCommit(throttle_time_ms=0, topics=tuple(responses))


# -- OffsetFetch (9) -------------------------------------------------------------------------

_OffsetFetch = response_class(apis.OFFSET_FETCH)
_FetchTopic = _OffsetFetch.OffsetFetchResponseTopic
_FetchPartition = _FetchTopic.OffsetFetchResponsePartition


async def offset_fetch(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    refused = (ErrorCode.GROUP_AUTHORIZATION_FAILED if group_denied(core, session, settings)
               else ErrorCode.NOT_COORDINATOR if coordinator_elsewhere(core) is not None
               else None)
    if refused is not None:
        return _OffsetFetch(throttle_time_ms=0, topics=tuple(
            _FetchTopic(name=topic.name, partitions=tuple(_FetchPartition(
                partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                metadata="", error_code=int(refused))
                for index in topic.partition_indexes)) for topic in body.topics or ()),
            error_code=int(refused))
    name = consumer_name(body.group_id)
    topics = kafka_topics(core, session, settings)
    broker = core.broker

    def committed(topic: str, index: int) -> tuple[int, int, str, ErrorCode]:
        """(offset, leader epoch, metadata, error) committed for one partition; -1: none."""
        known = topics.get(topic)
        if known is None or not 0 <= index < len(known.partitions):
            return -1, -1, "", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            position = broker.committed_position(session, name,
                                                 PartitionRef(settings.stream, topic, index + 1))
        except errors.RillError as error:
            return -1, -1, "", kafka_error(error)
        if position.next_offset is None:
            return -1, -1, "", ErrorCode.NONE
        epoch = -1 if position.leader_epoch is None else position.leader_epoch
        return position.next_offset, epoch, position.note or "", ErrorCode.NONE

    wanted: list[tuple[str, list[int]]]
    if body.topics is None:  # v2+: every partition the group committed
        wanted = [(topic, list(range(len(known.partitions))))
                  for topic, known in sorted(topics.items())]
        everything = True
    else:
        wanted = [(topic.name, list(topic.partition_indexes)) for topic in body.topics]
        everything = False
    responses = []
    for topic, indexes in wanted:
        partitions = []
        for index in indexes:
            offset, epoch, note, code = committed(topic, index)
            if everything and offset < 0:
                continue
            partitions.append(_FetchPartition(partition_index=index, committed_offset=offset,
                                              committed_leader_epoch=epoch, metadata=note,
                                              error_code=int(code)))
        if partitions or not everything:
            responses.append(_FetchTopic(name=topic, partitions=tuple(partitions)))
    return _OffsetFetch(throttle_time_ms=0, topics=tuple(responses), error_code=0)


# -- JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13) -------------------------


def _refused(core: Core, session: Session, settings: KafkaSettings) -> ErrorCode | None:
    """Why a group API is refused as a whole: GROUP_AUTHORIZATION_FAILED, or NOT_COORDINATOR
    on a node of a cluster that does not coordinate groups; None: served."""
    if group_denied(core, session, settings):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if coordinator_elsewhere(core) is not None:
        return ErrorCode.NOT_COORDINATOR
    return None

_JoinGroup = response_class(apis.JOIN_GROUP)
_SyncGroup = response_class(apis.SYNC_GROUP)
_Heartbeat = response_class(apis.HEARTBEAT)
_LeaveGroup = response_class(apis.LEAVE_GROUP)


async def join_group(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    version = request.api_version
    refused = _refused(core, session, settings)
    if refused is not None:
        return _JoinGroup(throttle_time_ms=0,
                          error_code=int(refused),
                          generation_id=-1, protocol_type=None, protocol_name="", leader="",
                          member_id=body.member_id, members=())
    result = await coordinator(core).join(
        body.group_id, body.member_id, body.group_instance_id if version >= 5 else None,
        body.session_timeout_ms,
        body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
        body.protocol_type, [(p.name, bytes(p.metadata)) for p in body.protocols],
        _client_id(request), session.address.rsplit(":", 1)[0], version,
        settings.group_initial_rebalance_delay)
    members = tuple(_JoinGroup.JoinGroupResponseMember(member_id=member_id,
                                                       group_instance_id=instance_id,
                                                       metadata=metadata)
                    for member_id, instance_id, metadata in result.members)
    return _JoinGroup(throttle_time_ms=0, error_code=int(result.error),
                      generation_id=result.generation, protocol_type=result.protocol_type,
                      protocol_name=result.protocol_name or "", leader=result.leader,
                      member_id=result.member_id, members=members)


async def sync_group(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    groups = coordinator(core)
    refused = _refused(core, session, settings)
    if refused is not None:
        return _SyncGroup(throttle_time_ms=0, error_code=int(refused),
                          protocol_type=None, protocol_name=None, assignment=b"")
    code, assignment = await groups.sync(
        body.group_id, body.generation_id, body.member_id,
        {a.member_id: bytes(a.assignment) for a in body.assignments},
        body.group_instance_id if request.api_version >= 3 else None)
    group = groups.describe(body.group_id)
    ok = code == ErrorCode.NONE and group is not None
    return _SyncGroup(throttle_time_ms=0, error_code=int(code),
                      protocol_type=group.protocol_type if ok else None,
                      protocol_name=group.protocol_name if ok else None, assignment=assignment)


async def heartbeat(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    code = (_refused(core, session, settings)
            or coordinator(core).heartbeat(body.group_id, body.generation_id,
                                             body.member_id,
                                             body.group_instance_id
                                             if request.api_version >= 3 else None))
    return _Heartbeat(throttle_time_ms=0, error_code=int(code))


async def leave_group(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    if request.api_version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    refused = _refused(core, session, settings)
    if refused is not None:
        denied = int(refused)
        if request.api_version < 3:
            return _LeaveGroup(throttle_time_ms=0, error_code=denied)
        return _LeaveGroup(throttle_time_ms=0, error_code=denied, members=())
    codes = coordinator(core).leave(body.group_id, leaving)
    if request.api_version < 3:
        return _LeaveGroup(throttle_time_ms=0, error_code=int(codes[0]))
    members = tuple(_LeaveGroup.MemberResponse(member_id=member_id,
                                               group_instance_id=instance_id,
                                               error_code=int(code))
                    for (member_id, instance_id), code in zip(leaving, codes))
    return _LeaveGroup(throttle_time_ms=0, error_code=0, members=members)


# -- DescribeGroups (15), ListGroups (16) ----------------------------------------------------

_DescribeGroups = response_class(apis.DESCRIBE_GROUPS)
_Described = _DescribeGroups.DescribedGroup


def _committed_groups(core: Core, session: Session, settings: KafkaSettings) -> set[str]:
    """The groups with a committed offset in a Kafka topic the session may see."""
    prefix = consumer_name("")
    try:
        topics = kafka_topics(core, session, settings)
    except errors.RillError:  # no access to the Kafka stream: no offsets seen
        return set()
    return {key[len(prefix):]
            for topic in topics.values()
            for partition in topic.partitions.values()
            for key in partition.positions if key.startswith(prefix)}


def _alive(core: Core, session: Session, settings: KafkaSettings, group_id: str,
           committed: set[str] | None = None) -> bool:
    """Is a known group alive (not Dead)? An empty group without committed offsets is
    forgotten."""
    groups = coordinator(core)
    group = groups.describe(group_id)
    if group is None or group.members or group.pending:
        return group is not None
    if committed is None:
        committed = _committed_groups(core, session, settings)
    if group_id in committed:
        return True
    groups.forget(group_id)
    return False


async def describe_groups(core: Core, session: Session, settings: KafkaSettings, request
                          ) -> Any:
    groups = coordinator(core)
    committed = _committed_groups(core, session, settings)
    described = []
    denied = _refused(core, session, settings)
    for group_id in request.body.groups:
        if denied is not None:
            described.append(_Described(
                error_code=int(denied), group_id=group_id,
                group_state="", protocol_type="", protocol_data="", members=()))
            continue
        group = groups.describe(group_id) if _alive(core, session, settings, group_id,
                                                    committed) else None
        if group is None:
            known = group_id in committed  # an Empty group the coordinator does not know
            described.append(_Described(error_code=0, group_id=group_id,
                                        group_state=EMPTY if known else DEAD,
                                        protocol_type="consumer" if known else "",
                                        protocol_data="", members=()))
            continue
        stable = group.state == STABLE
        members = tuple(_Described.DescribedGroupMember(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata(group.protocol_name) if group.state != PREPARING else b"",
            member_assignment=m.assignment if stable else b"")
            for m in group.members.values())
        described.append(_Described(
            error_code=0, group_id=group_id, group_state=group.state,
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if group.state != PREPARING else "",
            members=members))
    return _DescribeGroups(throttle_time_ms=0, groups=tuple(described))


_ListGroups = response_class(apis.LIST_GROUPS)


async def list_groups(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    wanted = {state.lower() for state in (request.body.states_filter or ())}
    if coordinator_elsewhere(core) is not None:  # the controller coordinates them all
        return _ListGroups(throttle_time_ms=0, error_code=0, groups=())
    committed = _committed_groups(core, session, settings)
    found: dict[str, tuple[str, str]] = {}
    for group in list(coordinator(core).groups.values()):
        if _alive(core, session, settings, group.group_id, committed):
            found[group.group_id] = (group.protocol_type or "", group.state)
    for group_id in committed - found.keys():
        found[group_id] = ("consumer", EMPTY)
    listed = tuple(
        _ListGroups.ListedGroup(group_id=group_id, protocol_type=protocol_type,
                                group_state=state)
        for group_id, (protocol_type, state) in sorted(found.items())
        if not wanted or state.lower() in wanted)
    if group_denied(core, session, settings):
        listed = ()
    return _ListGroups(throttle_time_ms=0, error_code=0, groups=listed)
