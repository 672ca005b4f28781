"""Every API from the lowest version Kafka defined (issue 27 item 5): JoinGroup v0-1,
CreateTopics v0-1, DeleteTopics v0 and DescribeConfigs v0 (what Sarama and kafka-go as Debian
ships them send) on a real server's Kafka listener, each sent and read with kafka-python's own
hand-written layouts of those versions (``kafka.protocol.old``: not rill's codec), checking
exact fields and each version's semantics; JoinGroup v0's rebalance timeout is its session
timeout; and kafka-python pinned to 0.10.0 consumes in a group (JoinGroup v0) and to 0.10.2
creates a topic (CreateTopics v1). SaslHandshake v0's raw tokens: tests/server/protocols/kafka/
test_kafka_sasl_v0.py."""

from __future__ import annotations

import struct
import time
import uuid
from io import BytesIO

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.protocol.old import admin as old_admin
from kafka.protocol.old import group as old_group

from rill.protocol.kafka import apis, decode_request, encode_request, request_class
from rill.protocol.kafka.errors import ErrorCode
from rill.server.protocols.kafka import group_apis
from rill.server.protocols.kafka.dispatch import SERVED, KafkaSettings

from in_process_core import run_with_broker
from kafka_link import Raw, bootstrap

ApiVersions = request_class(apis.API_VERSIONS)
JoinGroup = request_class(apis.JOIN_GROUP)


def old_call(raw: Raw, request, response_class):
    """``request`` (a kafka-python old-layout Request) framed with a v1 request header, and the
    answer decoded with ``response_class``, which must use up the whole frame."""
    raw.correlation += 1
    client = b"old-client"
    payload = struct.pack(">hhih", request.API_KEY, request.API_VERSION, raw.correlation,
                          len(client)) + client + request.encode()
    raw.send(struct.pack(">i", len(payload)) + payload)
    answer = raw.receive()
    assert answer is not None, "the server closed the connection"
    assert struct.unpack_from(">i", answer)[0] == raw.correlation
    body = BytesIO(answer[4:])
    decoded = response_class.decode(body)
    assert body.read() == b"", "bytes left after the response"
    return decoded


def name(prefix: str = "old") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_every_api_is_served_from_version_0(raw):
    table = {entry.api_key: (entry.min_version, entry.max_version)
             for entry in raw.call(apis.API_VERSIONS, 3, ApiVersions()).api_keys}
    assert table == SERVED
    assert {key: low for key, (low, _) in table.items()} == {key: 0 for key in table}
    assert (table[apis.JOIN_GROUP], table[apis.CREATE_TOPICS], table[apis.DELETE_TOPICS],
            table[apis.DESCRIBE_CONFIGS]) == ((0, 7), (0, 7), (0, 6), (0, 4))


def create_v0(raw: Raw, topic: str, partitions: int = 2, configs=()):
    request = old_admin.CreateTopicsRequest_v0(
        topics=[(topic, partitions, 1, [], list(configs))], timeout_ms=5000)
    return old_call(raw, request, old_admin.CreateTopicsResponse_v0).topics


def topic_exists(raw: Raw, topic: str) -> bool:
    Metadata = request_class(apis.METADATA)
    body = raw.call(apis.METADATA, 4, Metadata(topics=(Metadata.MetadataRequestTopic(
        name=topic),), allow_auto_topic_creation=False))
    return body.topics[0].error_code == 0


def test_create_topics_v0_and_v1(raw):
    topic = name()
    assert create_v0(raw, topic) == [(topic, 0)]
    assert create_v0(raw, topic) == [(topic, ErrorCode.TOPIC_ALREADY_EXISTS)]
    assert topic_exists(raw, topic)
    checked = name()
    request = old_admin.CreateTopicsRequest_v1(topics=[(checked, 1, 1, [], [])],
                                               timeout_ms=5000, validate_only=True)
    answer = old_call(raw, request, old_admin.CreateTopicsResponse_v1).topics
    assert answer == [(checked, 0, None)] and not topic_exists(raw, checked)  # only checked
    request = old_admin.CreateTopicsRequest_v1(topics=[(topic, 1, 1, [], []),
                                                       (checked, 1, 3, [], [])],
                                               timeout_ms=5000, validate_only=False)
    answer = old_call(raw, request, old_admin.CreateTopicsResponse_v1).topics
    assert answer == [(topic, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic!r} already exists"),
                      (checked, ErrorCode.INVALID_REPLICATION_FACTOR,
                       "replication factor must be 1 (one broker)")]


def test_delete_topics_v0(raw):
    topic = name()
    assert create_v0(raw, topic) == [(topic, 0)]
    request = old_admin.DeleteTopicsRequest_v0(topic_names=[topic, name("missing")],
                                               timeout_ms=5000)
    answer = old_call(raw, request, old_admin.DeleteTopicsResponse_v0).responses
    assert answer[0] == (topic, 0)
    assert answer[1][1] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not topic_exists(raw, topic)


def test_describe_configs_v0_says_is_default_where_v1_says_the_source(raw):
    topic = name()
    assert create_v0(raw, topic, configs=[("retention.ms", "60000")]) == [(topic, 0)]
    v0 = old_call(raw, old_admin.DescribeConfigsRequest_v0(resources=[(2, topic, None)]),
                  old_admin.DescribeConfigsResponse_v0).results
    v1 = old_call(raw, old_admin.DescribeConfigsRequest_v1(resources=[(2, topic, None)],
                                                           include_synonyms=False),
                  old_admin.DescribeConfigsResponse_v1).results
    assert [entry[:4] for entry in v0] == [(0, None, 2, topic)]
    old_configs = {entry[0]: entry[1:] for entry in v0[0][4]}
    new_configs = {entry[0]: entry[1:] for entry in v1[0][4]}
    assert set(old_configs) == set(new_configs) and "retention.ms" in old_configs
    for config, (value, read_only, is_default, sensitive) in old_configs.items():
        source = new_configs[config][2]
        assert (value, read_only, sensitive) == (new_configs[config][0], True, False)
        assert is_default == (source == 5), config  # DEFAULT_CONFIG
    assert old_configs["retention.ms"] == ("60000", True, False, False)
    assert any(entry[2] for entry in old_configs.values())  # some are Kafka's defaults
    broker = old_call(raw, old_admin.DescribeConfigsRequest_v0(resources=[(4, "0", None)]),
                      old_admin.DescribeConfigsResponse_v0).results
    assert broker[0][0] == 0 and broker[0][4]


def test_a_group_of_join_group_v0_and_v1_members(server, raw):
    group = name("g")
    metadata = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"
    first = old_call(raw, old_group.JoinGroupRequest_v0(
        group_id=group, session_timeout_ms=30000, member_id="", protocol_type="consumer",
        protocols=[("range", metadata)]), old_group.JoinGroupResponse_v0)
    error, generation, protocol, leader, member, members = (
        first.error_code, first.generation_id, first.group_protocol, first.leader_id,
        first.member_id, first.members)
    assert (error, generation, protocol, leader) == (0, 1, "range", member)  # no 79 before v4
    assert members == [(member, metadata)]
    assignment = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"
    synced = old_call(raw, old_group.SyncGroupRequest_v0(
        group_id=group, generation_id=1, member_id=member, assignments=[(member, assignment)]),
        old_group.SyncGroupResponse_v0)
    assert (synced.error_code, synced.assignment) == (0, assignment)
    # a v1 member joins: its answer is held until the v0 member rejoins the rebalance
    other = Raw(server)
    try:
        request = old_group.JoinGroupRequest_v1(
            group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=60000, member_id="",
            protocol_type="consumer", protocols=[("range", metadata)])
        other.correlation += 1
        client = b"v1"
        payload = struct.pack(">hhih", 11, 1, other.correlation, len(client)) + client + \
            request.encode()
        other.send(struct.pack(">i", len(payload)) + payload)
        deadline = time.monotonic() + 10  # until the server has read the v1 join
        while True:
            beat = old_call(raw, old_group.HeartbeatRequest_v0(group_id=group, generation_id=1,
                                                                member_id=member),
                            old_group.HeartbeatResponse_v0)
            if beat.error_code or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert beat.error_code == ErrorCode.REBALANCE_IN_PROGRESS
        again = old_call(raw, old_group.JoinGroupRequest_v0(
            group_id=group, session_timeout_ms=30000, member_id=member,
            protocol_type="consumer", protocols=[("range", metadata)]),
            old_group.JoinGroupResponse_v0)
        held = other.receive()
        second = old_group.JoinGroupResponse_v1.decode(BytesIO(held[4:]))
        assert (again.error_code, again.generation_id, second.error_code,
                second.generation_id) == (0, 2, 0, 2)
        assert again.leader_id == second.leader_id == member  # the old leader stays leader
        assert sorted(m[0] for m in again.members) == sorted([member, second.member_id])
        assert second.members == []  # only the leader gets the member list
        left = old_call(other, old_group.LeaveGroupRequest_v0(group_id=group,
                                                              member_id=second.member_id),
                        old_group.LeaveGroupResponse_v0)
        assert left.error_code == 0
    finally:
        other.close()


def test_join_group_v0_rebalances_within_its_session_timeout(tmp_path):
    """v0 has no rebalance timeout: the member's is its session timeout (v1+: the field)."""

    async def scenario(core, broker, session):
        settings = KafkaSettings(stream="kafka", host="127.0.0.1", port=9092)
        timeouts = {}
        for version, rebalance in ((0, None), (1, 45000)):
            fields = dict(group_id=f"g{version}", session_timeout_ms=12000, member_id="",
                          group_instance_id=None, protocol_type="consumer", reason=None,
                          protocols=(JoinGroup.JoinGroupRequestProtocol(name="range",
                                                                        metadata=b""),))
            if rebalance is not None:
                fields["rebalance_timeout_ms"] = rebalance
            frame = encode_request(apis.JOIN_GROUP, version, 1, JoinGroup(**fields))
            request = decode_request(memoryview(frame)[4:])
            answer = await group_apis.join_group(core, session, settings, request)
            assert answer.error_code == 0
            members = group_apis.coordinator(core).groups[f"g{version}"].members
            timeouts[version] = [m.rebalance_timeout_ms for m in members.values()]
        assert timeouts == {0: [12000], 1: [45000]}

    run_with_broker(tmp_path, scenario)


# -- real clients pinned to old brokers ------------------------------------------------------


def test_kafka_python_pinned_to_0_10_creates_a_topic_and_consumes_in_a_group(server):
    topic = name("pinned")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(server), api_version=(0, 10, 2),
                             request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])  # CreateTopics v1 at 0.10.2
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap(server), api_version=(0, 10, 0))
    for number in range(3):
        producer.send(topic, b"v%d" % number)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap(server), api_version=(0, 10, 0),
                             group_id=name("group"), auto_offset_reset="earliest",
                             consumer_timeout_ms=15_000, request_timeout_ms=20_000)
    try:
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                values += [record.value for record in records]
        consumer.commit()
        assert values == [b"v0", b"v1", b"v2"]
        assert consumer.committed(next(iter(consumer.assignment()))) == 3
    finally:
        consumer.close()
