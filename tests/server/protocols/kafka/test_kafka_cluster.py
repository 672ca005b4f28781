"""What the Kafka listener tells clients in a cluster (issue 30 items 5-6, cluster-design §2.8,
§2.10), on a real in-process server (node 1) whose cluster view is set by hand
(``cluster_views.StaticClusterView``) with two more members (nodes 2 and 3, advertised only):
Metadata's brokers, controller and per-partition leader/epoch/replicas/ISR/offline replicas
(raw, confluent-kafka, kafka-python, kcat), NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE /
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, acks=-1 waiting for the ISR (NOT_ENOUGH_REPLICAS,
REQUEST_TIMED_OUT), FindCoordinator naming the controller, CreateTopics' replication factor,
and idempotent producers' state rebuilt from the replicated batches at a new leader epoch."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

import pytest

from cluster_servers import ClusterServer, start_cluster
from kafka_link import Raw
from rill.protocol.kafka import apis, encode_request, request_class
from rill.protocol.kafka.errors import ErrorCode
from rill.server.core.cluster_view import NodeInfo
from rill.server.protocols.kafka import producers
from test_kafka_data import batch
from test_kafka_idempotence import idempotent_batch, new_producer

Metadata = request_class(apis.METADATA)
CreateTopics = request_class(apis.CREATE_TOPICS)
Produce = request_class(apis.PRODUCE)
Fetch = request_class(apis.FETCH)
ListOffsets = request_class(apis.LIST_OFFSETS)
FindCoordinator = request_class(apis.FIND_COORDINATOR)

NODE_2 = NodeInfo(2, {"kafka": ("127.0.0.2", 19092), "tank": ("127.0.0.2", 11011)})
NODE_3 = NodeInfo(3, {"kafka": ("127.0.0.3", 29092)})


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    [server] = start_cluster(tmp_path_factory.mktemp("kafka-cluster"), 1, controller_id=2,
                             extra_nodes=(NODE_2, NODE_3))
    yield server
    server.stop()


@pytest.fixture
def raw(node):
    link = Raw(node)
    yield link
    link.close()


def create(raw: Raw, partitions: int = 1, factor: int = 1, name: str | None = None):
    name = name or "t-" + uuid.uuid4().hex[:12]
    topic = CreateTopics.CreatableTopic(name=name, num_partitions=partitions,
                                        replication_factor=factor, assignments=(), configs=())
    body = raw.call(apis.CREATE_TOPICS, 7, CreateTopics(topics=(topic,), timeout_ms=5000,
                                                         validate_only=False))
    return name, body.topics[0]


def new_topic(node: ClusterServer, raw: Raw, partitions: int = 1) -> str:
    name, result = create(raw, partitions)
    assert result.error_code == 0
    return name


def place(node: ClusterServer, topic: str, index: int, leader, epoch: int,
          replicas=(1, 2, 3), isr=None, min_isr: int = 2) -> None:
    node.place(node.config.kafka.stream, topic, index + 1, leader, epoch, replicas, isr, min_isr)


def metadata(raw: Raw, topic: str, version: int = 12):
    fields = {}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    body = Metadata(topics=(Metadata.MetadataRequestTopic(name=topic),), **fields)
    return raw.call(apis.METADATA, version, body)


def produce(raw: Raw, topic: str, records: bytes, index: int = 0, acks: int = -1,
            timeout_ms: int = 30_000, send_only: bool = False):
    data = Produce.TopicProduceData(name=topic, partition_data=(
        Produce.TopicProduceData.PartitionProduceData(index=index, records=records),))
    body = Produce(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=(data,))
    if send_only:
        raw.correlation += 1
        raw.send(encode_request(apis.PRODUCE, 9, raw.correlation, body))
        return None
    return raw.call(apis.PRODUCE, 9, body).responses[0].partition_responses[0]


def fetch(raw: Raw, topic: str, index: int = 0, epoch: int = -1, version: int = 12):
    part = Fetch.FetchTopic.FetchPartition(partition=index, fetch_offset=0,
                                           partition_max_bytes=1 << 20,
                                           current_leader_epoch=epoch)
    body = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1,
                 topics=(Fetch.FetchTopic(topic=topic, partitions=(part,)),),
                 forgotten_topics_data=(), rack_id="")
    return raw.call(apis.FETCH, version, body).responses[0].partitions[0]


def list_offset(raw: Raw, topic: str, index: int = 0, epoch: int = -1, version: int = 7):
    part = ListOffsets.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=index, timestamp=-1, current_leader_epoch=epoch)
    body = ListOffsets(replica_id=-1, isolation_level=0, topics=(
        ListOffsets.ListOffsetsTopic(name=topic, partitions=(part,)),))
    return raw.call(apis.LIST_OFFSETS, version, body).topics[0].partitions[0]


def log_end(node: ClusterServer, topic: str, index: int = 0) -> int:
    return node.call(lambda: node.partition(node.config.kafka.stream, topic,
                                            index + 1).log.next_offset)


def one() -> bytes:
    return batch([(None, b"v", 1_700_000_000_000)])


# -- Metadata ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 7, 9, 12])
def test_metadata_lists_the_members_the_controller_and_each_partitions_placement(
        node, raw, version):
    topic = new_topic(node, raw, partitions=3)
    place(node, topic, 0, leader=1, epoch=4, replicas=(1, 2, 3), isr=(1, 2))
    place(node, topic, 1, leader=2, epoch=7, replicas=(2, 3, 1), isr=(2, 3, 1))
    place(node, topic, 2, leader=None, epoch=9, replicas=(3, 4), isr=(3,))
    body = metadata(raw, topic, version)
    kafka = node.kafka_address
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [
        (1, kafka[0], kafka[1]), (2, "127.0.0.2", 19092), (3, "127.0.0.3", 29092)]
    if version >= 1:
        assert body.controller_id == 2
    partitions = {p.partition_index: p for p in body.topics[0].partitions}
    assert body.topics[0].error_code == 0
    got = {index: (p.error_code, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
           for index, p in partitions.items()}
    assert got == {0: (0, 1, [1, 2, 3], [1, 2]), 1: (0, 2, [2, 3, 1], [2, 3, 1]),
                   2: (ErrorCode.LEADER_NOT_AVAILABLE, -1, [3, 4], [3])}
    if version >= 7:
        assert [partitions[i].leader_epoch for i in range(3)] == [4, 7, 9]
    if version >= 5:
        assert [list(partitions[i].offline_replicas) for i in range(3)] == [[], [], [4]]


def test_a_partition_not_placed_yet_has_no_leader(node, raw):
    [partition] = metadata(raw, new_topic(node, raw)).topics[0].partitions
    assert (partition.error_code, partition.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)


def test_a_leader_that_is_no_live_broker_is_answered_as_no_leader(node, raw):
    """The partition state still names a node whose member lease ended (the controller has not
    elected another yet): Metadata lists no such broker, so it names no leader either, as Kafka
    does. The soak found kafka-python 3.0's sender failing on every turn (UnknownBrokerIdError)
    and never sending again after a leader named but not listed."""
    topic = new_topic(node, raw, partitions=2)
    place(node, topic, 0, leader=4, epoch=6, replicas=(4, 1, 2), isr=(4, 1, 2))
    place(node, topic, 1, leader=2, epoch=3, replicas=(2, 4, 1), isr=(2, 1))
    for version in (0, 1, 7, 12):
        body = metadata(raw, topic, version)
        assert 4 not in {broker.node_id for broker in body.brokers}
        got = {p.partition_index: (p.error_code, p.leader_id, list(p.replica_nodes))
               for p in body.topics[0].partitions}
        assert got == {0: (ErrorCode.LEADER_NOT_AVAILABLE, -1, [4, 1, 2]), 1: (0, 2, [2, 4, 1])}
        if version >= 7:
            assert [p.leader_epoch for p in body.topics[0].partitions] == [6, 3]


def test_a_node_that_just_left_the_members_is_still_listed_but_never_as_a_leader(node, raw):
    """A node whose member lease ended a moment ago (``ClusterView.listed_nodes``) is still a
    broker of Metadata, so that a client refreshing in a moment of churn keeps the other
    brokers to ask; a partition it still leads in the state is answered with no leader."""
    topic = new_topic(node, raw, partitions=2)
    node.call(setattr, node.view, "left", [NodeInfo(4, {"kafka": ("127.0.0.4", 49092)})])
    try:
        place(node, topic, 0, leader=4, epoch=6, replicas=(4, 1, 2), isr=(4, 1, 2))
        place(node, topic, 1, leader=2, epoch=3, replicas=(2, 4, 1), isr=(2, 1))
        for version in (0, 7, 12):
            body = metadata(raw, topic, version)
            assert [(b.node_id, b.host, b.port) for b in body.brokers][1:] == [
                (2, "127.0.0.2", 19092), (3, "127.0.0.3", 29092), (4, "127.0.0.4", 49092)]
            got = {p.partition_index: (p.error_code, p.leader_id)
                   for p in body.topics[0].partitions}
            assert got == {0: (ErrorCode.LEADER_NOT_AVAILABLE, -1), 1: (0, 2)}
    finally:
        node.call(setattr, node.view, "left", [])


def test_a_node_unsure_of_its_lease_never_answers_a_position_out_of_range(node, raw):
    """A leader past its member lease's local deadline (cut off from etcd: another node may
    lead now, where the consumer's position is valid) answers a fetch beyond its log
    NOT_LEADER_OR_FOLLOWER, so the consumer asks again where the partition is led, instead of
    OFFSET_OUT_OF_RANGE, on which it resets its position (the soak saw a group's committed
    position go back to 0 so). What it holds below its high watermark it still serves."""
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=2, isr=(1,), min_isr=1)
    assert produce(raw, topic, one(), acks=1).error_code == 0
    node.commit(node.config.kafka.stream, topic, 1)

    def fetch_at(offset: int):
        part = Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=offset,
                                               partition_max_bytes=1 << 20,
                                               current_leader_epoch=-1)
        body = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                     isolation_level=0, session_id=0, session_epoch=-1,
                     topics=(Fetch.FetchTopic(topic=topic, partitions=(part,)),),
                     forgotten_topics_data=(), rack_id="")
        return raw.call(apis.FETCH, 12, body).responses[0].partitions[0]

    assert fetch_at(5).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    node.call(setattr, node.view, "certain", False)
    try:
        assert fetch_at(5).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        served = fetch_at(0)
        assert served.error_code == 0 and served.high_watermark == 1 and served.records
    finally:
        node.call(setattr, node.view, "certain", True)


def test_metadata_says_no_controller_while_electing(node, raw):
    view = node.view
    node.call(setattr, view, "_controller_id", None)
    try:
        assert metadata(raw, new_topic(node, raw)).controller_id == -1
    finally:
        node.call(setattr, view, "_controller_id", 2)


def test_confluent_kafka_sees_the_cluster(node, raw):
    from confluent_kafka.admin import AdminClient

    topic = new_topic(node, raw, partitions=2)
    place(node, topic, 0, leader=1, epoch=3, replicas=(1, 3), isr=(1, 3))
    place(node, topic, 1, leader=3, epoch=5, replicas=(3, 1), isr=(3,))
    bootstrap = "%s:%d" % node.kafka_address
    cluster = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    assert sorted(cluster.brokers) == [1, 2, 3]
    assert cluster.brokers[3].host == "127.0.0.3" and cluster.brokers[3].port == 29092
    assert cluster.controller_id == 2
    found = cluster.topics[topic].partitions
    assert (found[0].leader, found[0].replicas, found[0].isrs) == (1, [1, 3], [1, 3])
    assert (found[1].leader, found[1].replicas, found[1].isrs) == (3, [3, 1], [3])



def test_kcat_lists_the_brokers_and_leaders(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=2, epoch=1, replicas=(2, 1), isr=(2, 1))
    out = subprocess.run(["kcat", "-b", "%s:%d" % node.kafka_address, "-L", "-J", "-t", topic],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    listing = json.loads(out)
    assert sorted(b["id"] for b in listing["brokers"]) == [1, 2, 3]
    [partition] = listing["topics"][0]["partitions"]
    assert partition["leader"] == 2
    assert [r["id"] for r in partition["replicas"]] == [2, 1]


# -- Produce -----------------------------------------------------------------------------------


def test_produce_to_a_partition_led_elsewhere_or_by_none_is_refused(node, raw):
    topic = new_topic(node, raw, partitions=2)
    place(node, topic, 0, leader=2, epoch=1)
    place(node, topic, 1, leader=None, epoch=1)
    assert produce(raw, topic, one(), 0).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert produce(raw, topic, one(), 1).error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert produce(raw, topic, one(), 0, acks=1).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert log_end(node, topic, 0) == log_end(node, topic, 1) == 0


def test_acks_all_below_the_minimum_isr_is_refused_and_acks_1_is_not(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2, 3), isr=(1,), min_isr=2)
    assert produce(raw, topic, one(), acks=-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert log_end(node, topic) == 0  # nothing written
    answer = produce(raw, topic, one(), acks=1)
    assert (answer.error_code, answer.base_offset) == (0, 0)


def test_acks_all_answers_once_the_isr_holds_the_batch(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2), isr=(1, 2))
    produce(raw, topic, one(), acks=-1, send_only=True)
    while log_end(node, topic) < 1:  # appended on the leader, not yet on the follower
        node.call(lambda: None)
    raw.sock.setblocking(False)
    try:
        with pytest.raises(BlockingIOError):
            raw.sock.recv(1)  # no answer while the high watermark is below the batch
    finally:
        raw.sock.setblocking(True)
        raw.sock.settimeout(30)
    node.commit(node.config.kafka.stream, topic, 1, 1)  # the follower fetched past it
    from rill.protocol.kafka import decode_response
    answer = decode_response(apis.PRODUCE, 9, raw.receive()).body
    assert answer.responses[0].partition_responses[0].error_code == 0


def test_acks_all_not_replicated_in_time_is_request_timed_out(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2), isr=(1, 2))
    answer = produce(raw, topic, one(), acks=-1, timeout_ms=50)
    assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert log_end(node, topic) == 1  # written on the leader: it may still commit


def test_acks_all_whose_leader_steps_down_meanwhile_is_not_leader_as_kafka_answers(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2), isr=(1, 2))
    produce(raw, topic, one(), acks=-1, send_only=True)
    while log_end(node, topic) < 1:  # appended here, waiting for node 2
        node.call(lambda: None)
    place(node, topic, 0, leader=2, epoch=2, replicas=(1, 2), isr=(1, 2))
    from rill.protocol.kafka import decode_response
    answer = decode_response(apis.PRODUCE, 9, raw.receive()).body
    # Kafka's own answer (a client refreshes its metadata and retries at node 2; an idempotent
    # producer's retry is deduplicated there), not the unknown outcome Iggy and TANK are told
    assert answer.responses[0].partition_responses[0].error_code == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_aiokafka_acks_all_is_refused_with_not_enough_replicas(node, raw):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import NotEnoughReplicasError

    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2, 3), isr=(1,), min_isr=2)

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers="%s:%d" % node.kafka_address, acks="all",
                                    request_timeout_ms=3000, retry_backoff_ms=50)
        await producer.start()
        try:
            with pytest.raises(NotEnoughReplicasError):
                await producer.send_and_wait(topic, b"v", partition=0)
        finally:
            await producer.stop()

    asyncio.run(main())


# -- reads -------------------------------------------------------------------------------------


def test_fetch_and_list_offsets_on_a_follower_are_not_leader(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=3, epoch=2)
    assert fetch(raw, topic).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(raw, topic, version=4).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert list_offset(raw, topic).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert list_offset(raw, topic, version=1).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("given, expected", [
    (-1, ErrorCode.NONE), (5, ErrorCode.NONE), (4, ErrorCode.FENCED_LEADER_EPOCH),
    (6, ErrorCode.UNKNOWN_LEADER_EPOCH)])
def test_a_current_leader_epoch_is_checked_against_the_placement(node, raw, given, expected):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=5)
    assert fetch(raw, topic, epoch=given).error_code == expected
    assert list_offset(raw, topic, epoch=given).error_code == expected
    if expected == ErrorCode.NONE:
        assert list_offset(raw, topic).leader_epoch == 5
    # versions without the field: never checked
    assert fetch(raw, topic, epoch=given, version=8).error_code == 0
    assert list_offset(raw, topic, epoch=given, version=3).error_code == 0


def test_the_epoch_is_checked_before_the_leadership(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=2, epoch=5)
    assert fetch(raw, topic, epoch=3).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(raw, topic, epoch=5).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- FindCoordinator, CreateTopics -------------------------------------------------------------


def test_find_coordinator_names_the_controller_or_this_node_while_electing(node, raw):
    body = raw.call(apis.FIND_COORDINATOR, 3, FindCoordinator(key="g", key_type=0))
    assert (body.error_code, body.node_id, body.host, body.port) == (0, 2, "127.0.0.2", 19092)
    node.call(setattr, node.view, "_controller_id", None)
    try:
        body = raw.call(apis.FIND_COORDINATOR, 3, FindCoordinator(key="g", key_type=0))
        assert (body.node_id, (body.host, body.port)) == (1, node.kafka_address)
    finally:
        node.call(setattr, node.view, "_controller_id", 2)


def test_create_topics_takes_the_replication_factor(node, raw):
    name, result = create(raw, factor=3)
    assert (result.error_code, result.replication_factor) == (0, 3)
    topic = node.call(lambda: node.server.core.state.find_topic(node.config.kafka.stream, name))
    assert topic.replication_factor == 3
    _, result = create(raw, factor=4)
    assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    _, result = create(raw, factor=0)
    assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_create_topics_with_the_default_factor_leaves_it_to_the_cluster(node, raw, monkeypatch):
    seen = []
    core = node.server.core
    real = core.broker.create_topic

    async def create_topic(session, namespace, spec):
        seen.append(spec.replication_factor)
        return await real(session, namespace, spec)

    monkeypatch.setattr(core.broker, "create_topic", create_topic)
    _, result = create(raw, factor=-1)
    assert result.error_code == 0 and seen == [0]


# -- idempotent producers across leader changes ------------------------------------------------


def test_a_new_leader_rebuilds_producer_state_from_the_replicated_batches(node, raw):
    stream = node.config.kafka.stream
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2), isr=(1, 2))
    producer = new_producer(raw)
    first = produce(raw, topic, idempotent_batch(producer, 0, 0, [b"a"]), acks=1)
    assert (first.error_code, first.base_offset) == (0, 0)
    # node 2 takes over; it appends the producer's next batch and node 1, now its follower,
    # copies it (what the replica fetch does: the batch as stored)
    place(node, topic, 0, leader=2, epoch=2, replicas=(1, 2), isr=(1, 2))
    copied = idempotent_batch(producer, 0, 1, [b"b"])
    node.call(lambda: node.partition(stream, topic, 1).log.append(copied, 1_700_000_000_000))
    # node 1 leads again: the client, which never got node 2's answer, retries the batch
    place(node, topic, 0, leader=1, epoch=3, replicas=(1, 2), isr=(1, 2))
    retry = produce(raw, topic, copied, acks=1)
    assert (retry.error_code, retry.base_offset) == (0, 1)  # a duplicate: not written twice
    assert log_end(node, topic) == 2
    after = produce(raw, topic, idempotent_batch(producer, 0, 2, [b"c"]), acks=1)
    assert (after.error_code, after.base_offset) == (0, 2)


def test_became_leader_rebuilds_at_once(node, raw):
    stream = node.config.kafka.stream
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=2, epoch=1, replicas=(1, 2), isr=(1, 2))
    copied = idempotent_batch(777, 3, 0, [b"x", b"y"])
    node.call(lambda: node.partition(stream, topic, 1).log.append(copied, 1_700_000_000_000))
    place(node, topic, 0, leader=1, epoch=2, replicas=(1, 2), isr=(1, 2))
    core = node.server.core
    model = node.call(lambda: core.state.find_topic(stream, topic))
    node.call(producers.became_leader, core, model, 1)
    state = producers.producers(core).partition(model, 0)
    assert state.loaded and state.epoch == 2
    assert list(state.producers[777].batches) == [(0, 1, 0)]


def test_a_timed_out_idempotent_batch_retried_is_a_duplicate(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2), isr=(1, 2))
    producer = new_producer(raw)
    records = idempotent_batch(producer, 0, 0, [b"a"])
    assert produce(raw, topic, records, timeout_ms=50).error_code == ErrorCode.REQUEST_TIMED_OUT
    node.commit(node.config.kafka.stream, topic, 1, 1)
    retry = produce(raw, topic, records)
    assert (retry.error_code, retry.base_offset) == (0, 0)
    assert log_end(node, topic) == 1


def test_an_idempotent_retry_on_a_follower_is_not_leader(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1, 2), isr=(1, 2))
    producer = new_producer(raw)
    records = idempotent_batch(producer, 0, 0, [b"a"])
    assert produce(raw, topic, records, acks=1).error_code == 0
    place(node, topic, 0, leader=2, epoch=2, replicas=(1, 2), isr=(1, 2))
    assert produce(raw, topic, records).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------

OffsetForLeaderEpoch = request_class(apis.OFFSET_FOR_LEADER_EPOCH)
ApiVersions = request_class(apis.API_VERSIONS)


def epoch_ends(raw: Raw, topic: str, epochs: list[int], current: int = -1, version: int = 4):
    body = OffsetForLeaderEpoch(replica_id=-1, topics=(OffsetForLeaderEpoch.OffsetForLeaderTopic(
        topic=topic, partitions=tuple(OffsetForLeaderEpoch.OffsetForLeaderTopic
                                      .OffsetForLeaderPartition(partition=0,
                                                                current_leader_epoch=current,
                                                                leader_epoch=epoch)
                                      for epoch in epochs)),))
    answer = raw.call(apis.OFFSET_FOR_LEADER_EPOCH, version, body)
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in answer.topics[0].partitions]


def test_offset_for_leader_epoch_is_served_in_a_cluster(node, raw):
    advertised = raw.call(apis.API_VERSIONS, 3, ApiVersions(client_software_name="t",
                                                            client_software_version="1"))
    found = {key.api_key: (key.min_version, key.max_version) for key in advertised.api_keys}
    assert found[apis.OFFSET_FOR_LEADER_EPOCH] == (2, 4)
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1,), isr=(1,), min_isr=1)
    assert produce(raw, topic, one(), acks=1).base_offset == 0
    place(node, topic, 0, leader=1, epoch=3, replicas=(1,), isr=(1,), min_isr=1)
    assert produce(raw, topic, batch([(None, b"a", 1), (None, b"b", 2)]), acks=1
                   ).base_offset == 1
    assert epoch_ends(raw, topic, [0, 1, 2, 3, 4, -1]) == [
        (0, 0, 0), (0, 1, 1), (0, 1, 1), (0, 3, 3), (0, -1, -1), (0, -1, -1)]
    for version in (2, 3):
        assert epoch_ends(raw, topic, [3], version=version) == [(0, 3, 3)]
    assert epoch_ends(raw, topic, [1], current=3) == [(0, 1, 1)]
    assert epoch_ends(raw, topic, [1], current=2)[0][0] == ErrorCode.FENCED_LEADER_EPOCH
    assert epoch_ends(raw, topic, [1], current=4)[0][0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    place(node, topic, 0, leader=2, epoch=4)
    assert epoch_ends(raw, topic, [3])[0][0] == ErrorCode.NOT_LEADER_OR_FOLLOWER


# -- groups: the controller coordinates them ---------------------------------------------------

JoinGroup = request_class(apis.JOIN_GROUP)
OffsetCommit = request_class(apis.OFFSET_COMMIT)
OffsetFetch = request_class(apis.OFFSET_FETCH)
Heartbeat = request_class(apis.HEARTBEAT)
ListGroups = request_class(apis.LIST_GROUPS)


def join(raw: Raw, group: str):
    return raw.call(apis.JOIN_GROUP, 7, JoinGroup(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        group_instance_id=None, protocol_type="consumer",
        protocols=(JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b""),)))


def commit(raw: Raw, group: str, topic: str):
    part = OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")
    body = OffsetCommit(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                        group_instance_id=None, topics=(OffsetCommit.OffsetCommitRequestTopic(
                            name=topic, partitions=(part,)),))
    return raw.call(apis.OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code


def fetch_offset(raw: Raw, group: str, topic: str):
    body = OffsetFetch(group_id=group, topics=(OffsetFetch.OffsetFetchRequestTopic(
        name=topic, partition_indexes=(0,)),), require_stable=False)
    return raw.call(apis.OFFSET_FETCH, 7, body)


def test_group_apis_on_a_node_that_does_not_coordinate_say_not_coordinator(node, raw):
    topic = new_topic(node, raw)
    place(node, topic, 0, leader=1, epoch=1, replicas=(1,), isr=(1,), min_isr=1)
    assert join(raw, "g1").error_code == ErrorCode.NOT_COORDINATOR  # node 2 coordinates
    assert commit(raw, "g1", topic) == ErrorCode.NOT_COORDINATOR
    assert fetch_offset(raw, "g1", topic).error_code == ErrorCode.NOT_COORDINATOR
    assert raw.call(apis.HEARTBEAT, 4, Heartbeat(
        group_id="g1", generation_id=1, member_id="m", group_instance_id=None)
    ).error_code == ErrorCode.NOT_COORDINATOR
    node.call(setattr, node.view, "_controller_id", 1)  # this node coordinates
    try:
        assert join(raw, "g1").error_code in (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.NONE)
        assert commit(raw, "g1", topic) == ErrorCode.NONE
        assert fetch_offset(raw, "g1", topic).error_code == ErrorCode.NONE
    finally:
        node.call(setattr, node.view, "_controller_id", 2)
