"""The Kafka listener of a real server (``[kafka] enabled``), driven by the real kafka-python
client and by raw frames through the codec: ApiVersions (exact bytes, the v0 answer to an
unknown version), Metadata at every version, the admin APIs, the connection rules (an unknown
API or a bad frame size closes only that connection) and one catalogue shared with Iggy."""

from __future__ import annotations

import struct
import uuid

import pytest

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
)

from rill.protocol.kafka import apis, encode_request, request_class
from rill.protocol.kafka.errors import ErrorCode
from rill.server.protocols.kafka.dispatch import SERVED
from kafka_link import KAFKA_ENV, Raw, bootstrap
from server_process import RillProcess, session

@pytest.fixture
def admin(server):
    client = KafkaAdminClient(bootstrap_servers=bootstrap(server), request_timeout_ms=10_000)
    yield client
    client.close()


# -- ApiVersions -------------------------------------------------------------------------------

ApiVersionsRequest = request_class(apis.API_VERSIONS)


def test_api_versions_v0_exact_bytes(raw):
    raw.send(encode_request(apis.API_VERSIONS, 0, 7, ApiVersionsRequest()))
    table = sorted(SERVED.items())
    expected = struct.pack(">ihi", 7, 0, len(table)) + b"".join(
        struct.pack(">hhh", key, low, high) for key, (low, high) in table)
    assert raw.receive() == expected


def test_api_versions_v3_exact_bytes_header_v0_and_no_tagged_fields(raw):
    request = ApiVersionsRequest(client_software_name="test", client_software_version="1")
    raw.send(encode_request(apis.API_VERSIONS, 3, 8, request))
    table = sorted(SERVED.items())
    # header v0 (no tag section after the correlation id), compact array, empty tag sections
    expected = (struct.pack(">ih", 8, 0) + bytes([len(table) + 1])
                + b"".join(struct.pack(">hhh", key, low, high) + b"\x00"
                           for key, (low, high) in table)
                + struct.pack(">i", 0) + b"\x00")
    assert raw.receive() == expected


def test_the_advertised_table_is_what_is_served(raw):
    body = raw.call(apis.API_VERSIONS, 4, ApiVersionsRequest())
    assert {entry.api_key for entry in body.api_keys} == {
        apis.API_VERSIONS, apis.METADATA, apis.CREATE_TOPICS, apis.DELETE_TOPICS,
        apis.CREATE_PARTITIONS, apis.FIND_COORDINATOR, apis.PRODUCE, apis.FETCH,
        apis.LIST_OFFSETS, apis.OFFSET_COMMIT, apis.OFFSET_FETCH, apis.JOIN_GROUP,
        apis.SYNC_GROUP, apis.HEARTBEAT, apis.LEAVE_GROUP, apis.DESCRIBE_GROUPS, apis.LIST_GROUPS,
        apis.INIT_PRODUCER_ID, apis.DESCRIBE_CONFIGS, apis.SASL_HANDSHAKE,
        apis.SASL_AUTHENTICATE}
    assert {(entry.api_key, entry.min_version, entry.max_version)
            for entry in body.api_keys} == {(key, low, high) for key, (low, high) in SERVED.items()}


def test_an_unknown_api_versions_version_is_answered_in_v0_layout_and_the_link_stays(raw):
    # a v99 request: the header prefix is all a server can read
    raw.send(struct.pack(">ihhi", 8, apis.API_VERSIONS, 99, 41))
    payload = raw.receive()
    table = sorted(SERVED.items())
    assert payload == struct.pack(">ihi", 41, ErrorCode.UNSUPPORTED_VERSION, len(table)) + b"".join(
        struct.pack(">hhh", key, low, high) for key, (low, high) in table)
    assert raw.call(apis.API_VERSIONS, 3, ApiVersionsRequest()).error_code == 0


@pytest.mark.parametrize("api_key, version", [(999, 0), (apis.PRODUCE, 10),
                                              (apis.FETCH, 3), (apis.METADATA, 13)])
def test_an_unknown_api_or_version_closes_the_connection(raw, api_key, version):
    raw.send(struct.pack(">ihhi", 8, api_key, version, 5))
    assert raw.receive() is None


@pytest.mark.parametrize("size", [-1, 3, 7, 1 << 30])
def test_a_bad_frame_size_closes_only_that_connection(server, raw, size):
    other = Raw(server)
    try:
        raw.send(struct.pack(">i", size) + b"\x00" * 8)
        assert raw.receive() is None
        assert other.call(apis.API_VERSIONS, 0, ApiVersionsRequest()).error_code == 0
        with session(server) as iggy:  # Iggy on the same server keeps working
            iggy.ping()
            assert isinstance(iggy.get_streams(), list)
    finally:
        other.close()


def test_refusals_are_logged_once_per_client_and_cause_with_the_frame_limit(tmp_path):
    """Issue 27 item 5: a client looping on a refused request (each closes its connection, as
    Kafka does) or on a frame above the limit leaves one line per cause, not one per request;
    the frame's line names its size and the setting that bounds it."""
    process = RillProcess(tmp_path / "data", env={
        **KAFKA_ENV, "RILL_LOGGING_LEVEL": "info", "RILL_TCP_MAX_FRAME_SIZE": "1 MiB"}).start()
    try:
        for request in [struct.pack(">ihhi", 8, 999, 0, 5)] * 30 + [
                struct.pack(">i", 5 << 20) + b"\x00" * 8] * 10:
            link = Raw(process)
            link.send(request)
            assert link.receive() is None
            link.close()
        answered = Raw(process)  # served after every refusal: their lines are written
        assert answered.call(apis.API_VERSIONS, 0, ApiVersionsRequest()).error_code == 0
        answered.close()
    finally:
        process.stop()
    refused = [line for line in process.output if "Kafka API key 999" in line]
    too_large = [line for line in process.output if "request frame of" in line]
    assert len(refused) == 1 and "closing the connection" in refused[0], refused
    assert len(too_large) == 1, too_large
    assert "%d bytes is above [tcp] max_frame_size = %d bytes" % (5 << 20, 1 << 20) in too_large[0]


# -- Metadata ----------------------------------------------------------------------------------

MetadataRequest = request_class(apis.METADATA)


def metadata(raw: Raw, version: int, names=None, auto_create: bool = False):
    topics = None if names is None else tuple(
        MetadataRequest.MetadataRequestTopic(name=name) for name in names)
    if version == 0 and topics is None:
        topics = ()
    if version < 4:  # the field is absent: True is the default
        return raw.call(apis.METADATA, version, MetadataRequest(topics=topics))
    return raw.call(apis.METADATA, version,
                    MetadataRequest(topics=topics, allow_auto_topic_creation=auto_create))


@pytest.mark.parametrize("version", range(13))
def test_metadata_every_version(server, admin, raw, version):
    name = f"meta-v{version}"
    admin.create_topics([NewTopic(name, 2, 1)])
    body = metadata(raw, version)
    host, port = server.kafka_address
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(0, host, port)]
    if version >= 1:
        assert body.controller_id == 0
    topic = next(t for t in body.topics if t.name == name)
    assert topic.error_code == 0 and not topic.is_internal
    assert [(p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
            for p in topic.partitions] == [(0, 0, (0,), (0,)), (1, 0, (0,), (0,))]
    if version >= 10:
        assert topic.topic_id != uuid.UUID(int=0)
        assert metadata(raw, version, [name]).topics[0].topic_id == topic.topic_id  # stable
    admin.delete_topics([name])


def test_metadata_of_an_unknown_topic_auto_creates_only_when_allowed(raw):
    refused = metadata(raw, 12, ["never-created"], auto_create=False).topics[0]
    assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert refused.partitions == ()
    created = metadata(raw, 12, ["auto-created"], auto_create=True).topics[0]
    assert created.error_code == 0 and len(created.partitions) == 1
    assert metadata(raw, 12, ["never-created"]).topics[0].error_code == 3


def test_topic_ids_differ_after_delete_and_create(admin, raw):
    admin.create_topics([NewTopic("reborn", 1, 1)])
    first = metadata(raw, 12, ["reborn"]).topics[0].topic_id
    admin.delete_topics(["reborn"])
    admin.create_topics([NewTopic("reborn", 1, 1)])
    assert metadata(raw, 12, ["reborn"]).topics[0].topic_id != first
    admin.delete_topics(["reborn"])


def test_offset_for_leader_epoch_is_a_cluster_api(server, raw):
    """Standalone it is neither listed nor taken (the connection closes, as for any API not
    served): a node of a cluster serves it (test_kafka_cluster)."""
    ApiVersions = request_class(apis.API_VERSIONS)
    listed = raw.call(apis.API_VERSIONS, 3, ApiVersions(client_software_name="t",
                                                       client_software_version="1"))
    assert apis.OFFSET_FOR_LEADER_EPOCH not in {key.api_key for key in listed.api_keys}
    assert apis.OFFSET_FOR_LEADER_EPOCH not in SERVED
    OffsetForLeaderEpoch = request_class(apis.OFFSET_FOR_LEADER_EPOCH)
    raw.send(encode_request(apis.OFFSET_FOR_LEADER_EPOCH, 4, 99, OffsetForLeaderEpoch(
        replica_id=-1, topics=())))
    assert raw.receive() is None


def test_find_coordinator_answers_this_node(server, raw):
    FindCoordinator = request_class(apis.FIND_COORDINATOR)
    body = raw.call(apis.FIND_COORDINATOR, 3, FindCoordinator(key="group-1", key_type=0))
    assert (body.error_code, body.node_id, body.host, body.port) == (0, 0, *server.kafka_address)


# -- admin through kafka-python ----------------------------------------------------------------


def test_admin_client_creates_lists_describes_grows_and_deletes(server, admin):
    result = admin.create_topics([NewTopic("orders", 3, 1)])
    assert [t["error_code"] for t in result["topics"]] == [0]
    assert "orders" in admin.list_topics()
    [described] = admin.describe_topics(["orders"])
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]
    admin.create_partitions({"orders": NewPartitions(5)})
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(server))
    try:
        assert "orders" in consumer.topics()
        assert consumer.partitions_for_topic("orders") == {0, 1, 2, 3, 4}
    finally:
        consumer.close()
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"orders": NewPartitions(5)})
    admin.delete_topics(["orders"])
    assert "orders" not in admin.list_topics()


def test_create_topics_errors_and_validate_only(admin):
    admin.create_topics([NewTopic("twice", 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("twice", 1, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics([NewTopic("replicated", 1, 3)])
    admin.create_topics([NewTopic("dry-run", 4, 1)], validate_only=True)
    assert "dry-run" not in admin.list_topics()
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("twice", 1, 1)], validate_only=True)
    admin.delete_topics(["twice"])


def test_create_topics_raw_codes(raw):
    CreateTopics = request_class(apis.CREATE_TOPICS)
    topic = CreateTopics.CreatableTopic

    def create(*entries):
        body = raw.call(apis.CREATE_TOPICS, 7, CreateTopics(topics=entries, timeout_ms=5000))
        return [(t.name, t.error_code, t.num_partitions) for t in body.topics]

    assert create(topic(name="raw-a", num_partitions=-1, replication_factor=-1),
                  topic(name="Upper", num_partitions=1, replication_factor=1),
                  topic(name="raw-b", num_partitions=0, replication_factor=1)) == [
        ("raw-a", 0, 1), ("Upper", ErrorCode.INVALID_TOPIC_EXCEPTION, -1),
        ("raw-b", ErrorCode.INVALID_PARTITIONS, -1)]
    assert create(topic(name="raw-a", num_partitions=1, replication_factor=1)) == [
        ("raw-a", ErrorCode.TOPIC_ALREADY_EXISTS, -1)]


# -- one catalogue -----------------------------------------------------------------------------


def test_a_topic_created_through_kafka_is_an_iggy_topic_of_stream_kafka(server, admin):
    admin.create_topics([NewTopic("cross-k", 4, 1)])
    with session(server) as iggy:
        topic = iggy.get_topic("kafka", "cross-k")
        assert topic is not None and len(topic.partitions) == 4
    admin.delete_topics(["cross-k"])


def test_a_topic_created_through_iggy_is_listed_by_kafka(server, raw):
    with session(server) as iggy:
        if iggy.get_stream("kafka") is None:
            iggy.create_stream("kafka")
        iggy.create_topic("kafka", "cross-i", partitions_count=3)
    [topic] = metadata(raw, 12, ["cross-i"]).topics
    assert topic.error_code == 0 and len(topic.partitions) == 3
    assert "cross-i" in {t.name for t in metadata(raw, 1).topics}
