"""DescribeConfigs (issue 13 item 9) on a real server's Kafka listener: confluent-kafka's and
kafka-python's admin clients describe a topic (retention from its message expiry and max size,
segment and message size from the server's settings, fixed behaviour as Kafka defaults) and
broker 0; the raw wire for the filter, synonyms, documentation and the errors."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType

from rill.protocol.kafka import apis, request_class
from rill.protocol.kafka.errors import ErrorCode
from rill.server.protocols.kafka.configs import describe_configs
from rill.server.protocols.kafka.dispatch import KafkaSettings

from in_process_core import run_with_broker
from kafka_link import KAFKA_ENV, Raw, bootstrap

DescribeConfigs = request_class(apis.DESCRIBE_CONFIGS)
Resource = DescribeConfigs.DescribeConfigsResource

SEGMENT = 8 * 1024 * 1024
FRAME = 4 * 1024 * 1024
ENV = {**KAFKA_ENV, "RILL_KAFKA_ANONYMOUS_USER": "iggy",
       "RILL_SYSTEM_SEGMENT_SIZE": str(SEGMENT), "RILL_TCP_MAX_FRAME_SIZE": str(FRAME),
       "RILL_KAFKA_AUTO_CREATE_TOPICS": "false"}


SERVER_ENV = ENV


def create(server, configs: dict[str, str] | None = None) -> str:
    name = "cfg-" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bootstrap(server)})
    for future in admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1,
                                                config=configs or {})]).values():
        future.result(10)
    return name


def describe(server, resource: ConfigResource) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap(server)})
    return admin.describe_configs([resource])[resource].result(10)


def test_librdkafka_describes_a_topic_from_its_settings(server):
    topic = create(server, {"retention.ms": "3600000", "retention.bytes": str(64 * SEGMENT)})
    configs = describe(server, ConfigResource("topic", topic))
    values = {name: entry.value for name, entry in configs.items()}
    assert values["retention.ms"] == "3600000"
    assert values["retention.bytes"] == str(64 * SEGMENT)
    assert values["segment.bytes"] == str(SEGMENT)
    assert values["max.message.bytes"] == str(FRAME)
    assert values["cleanup.policy"] == "delete"
    assert values["message.timestamp.type"] == "CreateTime"
    assert values["compression.type"] == "producer"
    # set on the topic: its own config; the others: the server's, or Kafka's fixed defaults
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].is_default
    assert not configs["retention.ms"].is_default
    assert all(entry.is_read_only and not entry.is_sensitive for entry in configs.values())


def test_a_topic_without_settings_shows_the_server_defaults(server):
    topic = create(server)
    configs = describe(server, ConfigResource("topic", topic))
    assert configs["retention.ms"].value == "-1"  # [system.segment] message_expiry: none
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["retention.bytes"].value == str(10 * 1000 ** 3)  # [system.topic] max_size


def test_librdkafka_describes_broker_0_and_refuses_an_unknown_topic(server):
    configs = describe(server, ConfigResource("broker", "0"))
    values = {name: entry.value for name, entry in configs.items()}
    assert values["log.segment.bytes"] == str(SEGMENT)
    assert values["message.max.bytes"] == str(FRAME)
    assert values["num.partitions"] == "1"
    assert values["auto.create.topics.enable"] == "false"
    assert values["group.initial.rebalance.delay.ms"] == "0"
    with pytest.raises(KafkaException) as raised:
        describe(server, ConfigResource("topic", "no-such-topic"))
    assert raised.value.args[0].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_kafka_python_describes_a_topic_and_the_broker(server):
    topic = create(server, {"retention.ms": "60000"})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(server))
    try:
        described = admin.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, topic),
             KpConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        topic_configs = described["topic"][topic]
        assert topic_configs["retention.ms"]["value"] == "60000"
        assert topic_configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic_configs["segment.bytes"]["value"] == str(SEGMENT)
        assert described["broker"]["0"]["log.segment.bytes"]["value"] == str(SEGMENT)
        # kafka-python's default filter keeps what a topic sets itself
        modified = admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
        assert set(modified["topic"][topic]) == {"retention.ms"}
    finally:
        admin.close()


def test_the_wire_filter_synonyms_documentation_and_errors(server):
    topic = create(server, {"retention.ms": "60000"})
    raw = Raw(server)
    try:
        answer = raw.call(apis.DESCRIBE_CONFIGS, 4, DescribeConfigs(
            resources=(Resource(resource_type=2, resource_name=topic,
                                configuration_keys=("retention.ms", "segment.bytes", "nope")),
                       Resource(resource_type=2, resource_name="no-such-topic",
                                configuration_keys=None),
                       Resource(resource_type=4, resource_name="7", configuration_keys=None),
                       Resource(resource_type=32, resource_name="g", configuration_keys=None)),
            include_synonyms=True, include_documentation=True))
        found, unknown, other_broker, group = answer.results
        assert found.error_code == 0
        by_name = {entry.name: entry for entry in found.configs}
        assert set(by_name) == {"retention.ms", "segment.bytes"}
        assert [(s.name, s.value, s.source) for s in by_name["retention.ms"].synonyms] == [
            ("retention.ms", "60000", 1), ("log.retention.ms", "-1", 4)]
        assert [(s.name, s.source) for s in by_name["segment.bytes"].synonyms] == [
            ("log.segment.bytes", 4)]
        assert by_name["segment.bytes"].documentation
        assert by_name["segment.bytes"].config_type == 3  # INT
        assert (unknown.error_code, unknown.configs) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ())
        assert other_broker.error_code == ErrorCode.INVALID_REQUEST
        assert group.error_code == ErrorCode.INVALID_REQUEST and group.error_message
        # without synonyms or documentation asked for: none
        plain = raw.call(apis.DESCRIBE_CONFIGS, 4, DescribeConfigs(
            resources=(Resource(resource_type=2, resource_name=topic,
                                configuration_keys=("retention.ms",)),),
            include_synonyms=False, include_documentation=False)).results[0].configs[0]
        assert (plain.synonyms, plain.documentation) == ((), None)
        # the connection still works
        assert raw.call(apis.DESCRIBE_CONFIGS, 1, DescribeConfigs(
            resources=(Resource(resource_type=4, resource_name="0",
                                configuration_keys=("num.partitions",)),),
            include_synonyms=False)).results[0].configs[0].value == "1"
    finally:
        raw.close()


def test_describing_needs_read_access_through_the_core(tmp_path):
    """In process (Kafka connections act as one user until SASL): a user without permissions
    may describe neither the topic (READ_TOPIC) nor the broker (READ_SERVER); root may."""
    request = SimpleNamespace(api_version=4, body=DescribeConfigs(
        resources=(Resource(resource_type=2, resource_name="t", configuration_keys=None),
                   Resource(resource_type=4, resource_name="0", configuration_keys=None)),
        include_synonyms=False, include_documentation=False))
    settings = KafkaSettings("ns", "127.0.0.1", 9092)

    async def scenario(core, broker, session) -> None:
        await core.users.create_user(session, "plain", "plain-pw", 1, None)
        stranger = broker.connect("127.0.0.1:2", "tcp")
        await broker.authenticate(stranger, "plain", "plain-pw")
        refused = await describe_configs(core, stranger, settings, request)
        assert [(r.error_code, r.configs) for r in refused.results] == [
            (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ()),
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ())]
        allowed = await describe_configs(core, session, settings, request)
        assert [r.error_code for r in allowed.results] == [0, 0]
        assert all(r.configs for r in allowed.results)

    run_with_broker(tmp_path, scenario)
