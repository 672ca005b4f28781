"""The Kafka slice of the permission matrix (wire §6.2, as ``tests/server/auth/
test_permission_matrix.py`` checks it for Iggy's commands), against a real server over SASL.

One server for the module; one connection per permission shape, logged in by SASL PLAIN: a user
with no permissions, a reader of the Kafka stream (``read_stream``), a reader of one topic
(``read_topic``), a writer to that topic (``send_messages``: it may produce and see the topic
but not read it), a user who manages topics (global ``manage_topics``), and root. Every Kafka
API of the list runs once per shape; the expected allow/deny comes from the table below,
written out again from §6.2 (not imported from the server). Denied: TOPIC_AUTHORIZATION_FAILED
(29) for the topic APIs, GROUP_AUTHORIZATION_FAILED (30) for the group APIs; a denied call
changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from rill.protocol.kafka import ErrorCode, apis, request_class
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from server_process import RillProcess, session
from kafka_link import Raw

ENV = {"RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
       "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false",
       "RILL_ROOT_PASSWORD_HASH_COST": "4", "RILL_LOGIN_THROTTLE_ENABLED": "false"}
TOPIC = "shared"  # every shape's reads and writes go here; managing uses fresh topics

Metadata = request_class(apis.METADATA)
Produce = request_class(apis.PRODUCE)
Fetch = request_class(apis.FETCH)
ListOffsets = request_class(apis.LIST_OFFSETS)
CreateTopics = request_class(apis.CREATE_TOPICS)
DeleteTopics = request_class(apis.DELETE_TOPICS)
CreatePartitions = request_class(apis.CREATE_PARTITIONS)
OffsetCommit = request_class(apis.OFFSET_COMMIT)
OffsetFetch = request_class(apis.OFFSET_FETCH)
JoinGroup = request_class(apis.JOIN_GROUP)
LeaveGroup = request_class(apis.LEAVE_GROUP)
DescribeGroups = request_class(apis.DESCRIBE_GROUPS)
Handshake = request_class(apis.SASL_HANDSHAKE)
Authenticate = request_class(apis.SASL_AUTHENTICATE)

# -- §6.2 for the Kafka APIs, written out again ----------------------------------------------
# (global flags, flags on the Kafka stream, flags on topic TOPIC) that grant each right
DESCRIBE = "describe"  # read the topic, or read or write its messages (Kafka's Describe)
READ = "read"
WRITE = "write"
CREATE = "create"
MANAGE = "manage"
GRANTS = {
    READ: ({"poll_messages"}, {"poll_messages", "read_stream", "manage_topics", "read_topics"},
           {"poll_messages", "read_topic", "manage_topic"}),
    WRITE: ({"send_messages"}, {"send_messages", "manage_stream", "manage_topics"},
            {"send_messages", "manage_topic"}),
    CREATE: ({"manage_streams", "manage_topics"}, {"manage_topics"}, set()),
    # on a fresh topic: no topic-level flags apply to it
    MANAGE: ({"manage_streams", "manage_topics"}, {"manage_topics"}, set()),
}
READ_TOPIC = ({"read_streams", "manage_streams", "manage_topics", "read_topics"},
              {"manage_topics", "read_topics"}, {"manage_topic", "read_topic"})


@dataclass(frozen=True)
class Shape:
    name: str
    global_flags: frozenset[str] = frozenset()
    stream_flags: frozenset[str] = frozenset()
    topic_flags: frozenset[str] = frozenset()

    @property
    def username(self) -> str:
        return "iggy" if self.name == "root" else f"k.{self.name}"

    @property
    def password(self) -> str:
        return "iggy" if self.name == "root" else "kafka-matrix-pw"

    def permissions(self, stream_id: int, topic_id: int) -> Permissions:
        streams = None
        if self.stream_flags or self.topic_flags:
            topics = {topic_id: TopicPermissions(**dict.fromkeys(self.topic_flags, True))}
            streams = {stream_id: StreamPermissions(**dict.fromkeys(self.stream_flags, True),
                                                    topics=topics if self.topic_flags else None)}
        return Permissions(GlobalPermissions(**dict.fromkeys(self.global_flags, True)), streams)

    def has(self, right: str) -> bool:
        if self.name == "root":
            return True
        if right == DESCRIBE:
            return any(self._granted(grant) for grant in (READ_TOPIC, GRANTS[READ], GRANTS[WRITE]))
        return self._granted(GRANTS[right])

    def _granted(self, grant) -> bool:
        global_flags, stream_flags, topic_flags = grant
        return bool(self.global_flags & global_flags or self.stream_flags & stream_flags
                    or self.topic_flags & topic_flags)


SHAPES = [
    Shape("none"),
    Shape("stream-reader", stream_flags=frozenset({"read_stream"})),
    Shape("topic-reader", topic_flags=frozenset({"read_topic"})),
    Shape("topic-writer", topic_flags=frozenset({"send_messages"})),
    Shape("topic-manager", global_flags=frozenset({"manage_topics"})),
    Shape("root"),
]


# -- the world ----------------------------------------------------------------------------------


def log_in(link: Raw, username: str, password: str) -> None:
    assert link.call(apis.SASL_HANDSHAKE, 1, Handshake(mechanism="PLAIN")).error_code == 0
    token = b"\0" + username.encode() + b"\0" + password.encode()
    assert link.call(apis.SASL_AUTHENTICATE, 2, Authenticate(auth_bytes=token)).error_code == 0


def one_record_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


@dataclass
class World:
    server: RillProcess
    root: Raw
    links: dict[str, Raw]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    server = RillProcess(tmp_path_factory.mktemp("kafka-matrix") / "data", env=ENV).start()
    links: dict[str, Raw] = {}
    try:
        root = links["root"] = Raw(server)
        log_in(root, "iggy", "iggy")
        assert create_topics(root, TOPIC) == 0
        assert produce(root, TOPIC) == 0
        with session(server) as keeper:
            stream = keeper.get_stream("kafka")
            topic_id = next(topic.id for topic in stream.topics if topic.name == TOPIC)
            for shape in SHAPES:
                if shape.name != "root":
                    keeper.create_user(shape.username, shape.password,
                                       permissions=shape.permissions(stream.id, topic_id))
        for shape in SHAPES:
            if shape.name != "root":
                links[shape.name] = Raw(server)
                log_in(links[shape.name], shape.username, shape.password)
        yield World(server, root, links)
    finally:
        for link in links.values():
            link.close()
        server.kill()


# -- the requests -------------------------------------------------------------------------------


def metadata(link: Raw, name: str) -> int:
    return link.call(apis.METADATA, 12, Metadata(topics=(Metadata.MetadataRequestTopic(
        topic_id=uuid.UUID(int=0), name=name),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)).topics[0].error_code


def produce(link: Raw, name: str) -> int:
    data = Produce.TopicProduceData(name=name, partition_data=(
        Produce.TopicProduceData.PartitionProduceData(index=0, records=one_record_batch()),))
    body = Produce(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=(data,))
    return link.call(apis.PRODUCE, 9, body).responses[0].partition_responses[0].error_code


def fetch(link: Raw, name: str) -> int:
    part = Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=0,
                                           partition_max_bytes=1 << 20)
    body = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1,
                 topics=(Fetch.FetchTopic(topic=name, partitions=(part,)),),
                 forgotten_topics_data=(), rack_id="")
    return link.call(apis.FETCH, 12, body).responses[0].partitions[0].error_code


def latest_offset(link: Raw, name: str) -> tuple[int, int]:
    part = ListOffsets.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)
    body = ListOffsets(replica_id=-1, isolation_level=0, topics=(
        ListOffsets.ListOffsetsTopic(name=name, partitions=(part,)),))
    found = link.call(apis.LIST_OFFSETS, 7, body).topics[0].partitions[0]
    return found.error_code, found.offset


def create_topics(link: Raw, name: str, validate_only: bool = False) -> int:
    topic = CreateTopics.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                        assignments=(), configs=())
    return link.call(apis.CREATE_TOPICS, 7, CreateTopics(
        topics=(topic,), timeout_ms=5000, validate_only=validate_only)).topics[0].error_code


def delete_topics(link: Raw, name: str) -> int:
    return link.call(apis.DELETE_TOPICS, 5, DeleteTopics(
        topic_names=(name,), timeout_ms=5000)).responses[0].error_code


def partition_count(link: Raw, name: str) -> int:
    return len(link.call(apis.METADATA, 12, Metadata(topics=(Metadata.MetadataRequestTopic(
        topic_id=uuid.UUID(int=0), name=name),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)).topics[0].partitions)


def create_partitions(link: Raw, name: str) -> int:
    return link.call(apis.CREATE_PARTITIONS, 3, CreatePartitions(
        topics=(CreatePartitions.CreatePartitionsTopic(name=name, count=2, assignments=None),),
        timeout_ms=5000, validate_only=False)).results[0].error_code


def offset_commit(link: Raw, group: str) -> int:
    body = OffsetCommit(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                        topics=(OffsetCommit.OffsetCommitRequestTopic(name=TOPIC, partitions=(
                            OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=1),)),))
    return link.call(apis.OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code


def offset_fetch(link: Raw, group: str) -> tuple[int, int]:
    """(error code, committed offset) of partition 0 of TOPIC."""
    body = link.call(apis.OFFSET_FETCH, 7, OffsetFetch(group_id=group, topics=(
        OffsetFetch.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),)))
    found = body.topics[0].partitions[0]
    return (body.error_code or found.error_code), found.committed_offset


def join_group(link: Raw, group: str, member_id: str = ""):
    protocol = JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"meta")
    answer = link.call(apis.JOIN_GROUP, 7, JoinGroup(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=None, protocol_type="consumer",
        protocols=(protocol,)))
    return answer.error_code if not member_id else answer


def group_members(link: Raw, group: str) -> list[str]:
    body = link.call(apis.DESCRIBE_GROUPS, 5, DescribeGroups(
        groups=(group,), include_authorized_operations=False))
    return [member.member_id for member in body.groups[0].members]


# -- one case per API ---------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class Case:
    api: str
    right: str
    denied: ErrorCode
    check: Callable[[World, Raw], bool]  # runs the API; True when it was allowed, and
    # asserts that a denial changed nothing


def case_metadata(world: World, link: Raw) -> bool:
    return metadata(link, TOPIC) == 0


def case_produce(world: World, link: Raw) -> bool:
    before = latest_offset(world.root, TOPIC)
    code = produce(link, TOPIC)
    if code:
        assert latest_offset(world.root, TOPIC) == before
    return code == 0


def case_fetch(world: World, link: Raw) -> bool:
    return fetch(link, TOPIC) == 0


def case_list_offsets(world: World, link: Raw) -> bool:
    return latest_offset(link, TOPIC)[0] == 0


def case_create_topics(world: World, link: Raw) -> bool:
    name = unique("made")
    code = create_topics(link, name)
    if code:
        assert metadata(world.root, name) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return code == 0


def case_validate_create_topics(world: World, link: Raw) -> bool:
    name = unique("validated")
    code = create_topics(link, name, validate_only=True)
    assert metadata(world.root, name) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # never made
    return code == 0


def case_delete_topics(world: World, link: Raw) -> bool:
    name = unique("doomed")
    assert create_topics(world.root, name) == 0
    code = delete_topics(link, name)
    if code:
        assert metadata(world.root, name) == 0
    return code == 0


def case_create_partitions(world: World, link: Raw) -> bool:
    name = unique("grown")
    assert create_topics(world.root, name) == 0
    code = create_partitions(link, name)
    assert partition_count(world.root, name) == (1 if code else 2)
    return code == 0


def case_offset_commit(world: World, link: Raw) -> bool:
    group = unique("commits")
    code = offset_commit(link, group)
    assert offset_fetch(world.root, group) == (0, -1 if code else 1)
    return code == 0


def case_offset_fetch(world: World, link: Raw) -> bool:
    group = unique("fetches")
    assert offset_commit(world.root, group) == 0
    code, offset = offset_fetch(link, group)
    assert offset == (-1 if code else 1)
    return code == 0


def case_join_group(world: World, link: Raw) -> bool:
    code = join_group(link, unique("joins"))
    return code in (0, ErrorCode.MEMBER_ID_REQUIRED)  # v4+: the first join asks for an id


def case_leave_group(world: World, link: Raw) -> bool:
    group = unique("leaves")
    assert join_group(world.root, group) == ErrorCode.MEMBER_ID_REQUIRED
    member_id = world.root.call(apis.JOIN_GROUP, 7, JoinGroup(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        group_instance_id=None, protocol_type="consumer",
        protocols=(JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"m"),))).member_id
    assert join_group(world.root, group, member_id).error_code == 0
    assert group_members(world.root, group) == [member_id]
    answer = link.call(apis.LEAVE_GROUP, 4, LeaveGroup(group_id=group, members=(
        LeaveGroup.MemberIdentity(member_id=member_id, group_instance_id=None),)))
    code = answer.error_code or (answer.members[0].error_code if answer.members else 0)
    assert group_members(world.root, group) == ([] if code == 0 else [member_id])
    return code == 0


TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CASES = [
    Case("Metadata", DESCRIBE, TOPIC_DENIED, case_metadata),
    Case("Produce", WRITE, TOPIC_DENIED, case_produce),
    Case("Fetch", READ, TOPIC_DENIED, case_fetch),
    Case("ListOffsets", READ, TOPIC_DENIED, case_list_offsets),
    Case("CreateTopics", CREATE, TOPIC_DENIED, case_create_topics),
    Case("CreateTopics validate_only", CREATE, TOPIC_DENIED, case_validate_create_topics),
    Case("DeleteTopics", MANAGE, TOPIC_DENIED, case_delete_topics),
    Case("CreatePartitions", MANAGE, TOPIC_DENIED, case_create_partitions),
    # rill has no group permissions: a group needs the right to read some Kafka topic
    Case("OffsetCommit", READ, GROUP_DENIED, case_offset_commit),
    Case("OffsetFetch", READ, GROUP_DENIED, case_offset_fetch),
    Case("JoinGroup", READ, GROUP_DENIED, case_join_group),
    Case("LeaveGroup", READ, GROUP_DENIED, case_leave_group),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.api)
def test_kafka_api_permissions(world, case, shape, monkeypatch):
    link = world.links[shape.name]
    codes: list[int] = []
    real_call = link.call

    def recording_call(api_key, version, body):  # the shape's own answer, for the denial code
        answer = real_call(api_key, version, body)
        codes.append(_first_code(answer))
        return answer

    monkeypatch.setattr(link, "call", recording_call)
    allowed = case.check(world, link)
    assert allowed == shape.has(case.right), (case.api, shape.name, codes)
    if not allowed:
        assert codes and codes[-1] == case.denied, (case.api, shape.name, codes)


def _first_code(answer) -> int:
    """The error code of the first entry of a response (or its top-level one)."""
    for field in ("topics", "responses", "results", "groups"):
        entries = getattr(answer, field, None)
        if entries:
            entry = entries[0]
            for inner in ("partitions", "partition_responses"):
                parts = getattr(entry, inner, None)
                if parts:
                    return parts[0].error_code
            return entry.error_code
    return answer.error_code
