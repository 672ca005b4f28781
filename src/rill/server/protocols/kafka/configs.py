"""Kafka's DescribeConfigs (key 32, v1-4): a topic's and the broker's settings under Kafka's
config names, read from the topic and the server's configuration.

Owns: which Kafka configs a TOPIC and a BROKER resource have, their values and sources.

Rules:

* TOPIC (resource type 2, a topic of the Kafka stream): ``retention.ms`` and
  ``retention.bytes`` are the topic's message expiry and max size (-1: never / unlimited;
  rill's max size bounds the whole topic); source TOPIC_CONFIG (1) when they differ from the
  server's defaults (``[system.segment] message_expiry``, ``[system.topic] max_size``), else
  STATIC_BROKER_CONFIG (4); ``max.message.bytes`` is the request frame limit
  (``[tcp] max_frame_size``) and ``segment.bytes`` the segment size (``[system.segment]
  size``), both STATIC_BROKER_CONFIG; ``cleanup.policy=delete``, ``compression.type=producer``
  (batches are stored as sent), ``message.timestamp.type=CreateTime``,
  ``min.insync.replicas=1`` are rill's fixed behaviour, DEFAULT_CONFIG (5);
* BROKER (resource type 4, node "0"): ``log.segment.bytes``, ``message.max.bytes``,
  ``log.retention.ms``, ``log.retention.bytes``, ``num.partitions`` (1, what a topic gets
  without a count), ``auto.create.topics.enable`` (``[kafka] auto_create_topics``),
  ``default.replication.factor`` (1), ``group.initial.rebalance.delay.ms``
  (``[kafka] group_initial_rebalance_delay``), ``log.cleanup.policy``, ``compression.type``;
  STATIC_BROKER_CONFIG for those a rill setting gives, DEFAULT_CONFIG for fixed ones;
* every config is read-only (rill serves no AlterConfigs; settings change in the server's
  configuration or through rill's own APIs), never sensitive; ``configuration_keys`` filters
  (unknown names are left out, as Kafka does), null means all; synonyms (``include_synonyms``)
  list the topic's own value (TOPIC_CONFIG) when it has one, then the broker setting it
  defaults to; documentation (v3+, ``include_documentation``) a one-line description, else
  null;
* errors per resource: an unknown topic or an invalid name UNKNOWN_TOPIC_OR_PARTITION, no read
  access to the topic TOPIC_AUTHORIZATION_FAILED (the core's READ_TOPIC); a broker other than
  node 0 INVALID_REQUEST, no server read access CLUSTER_AUTHORIZATION_FAILED (the core's
  READ_SERVER); any other resource type INVALID_REQUEST.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rill import errors
from rill.protocol.kafka import ErrorCode, apis, response_class
from rill.protocol.primitives import EXPIRY_NEVER, MAX_TOPIC_SIZE_UNLIMITED
from rill.server.core.core import Core
from rill.server.core.types import Session, Topic
from rill.server.protocols.kafka.common import (
    DEFAULT_PARTITIONS, NODE_ID, KafkaSettings, find_topic, kafka_error, valid_name,
)

TOPIC = 2
BROKER = 4

# ConfigSource
TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# ConfigType
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7

_DescribeConfigs = response_class(apis.DESCRIBE_CONFIGS)
_Result = _DescribeConfigs.DescribeConfigsResult
_Config = _Result.DescribeConfigsResourceResult
_Synonym = _Config.DescribeConfigsSynonym


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    value: str
    source: int
    config_type: int
    doc: str
    broker_name: str | None = None  # the broker setting a topic config defaults to
    broker_value: str | None = None  # its value (when the topic's own value differs)


def _retention_ms(expiry_us: int) -> str:
    return "-1" if expiry_us == EXPIRY_NEVER else str(expiry_us // 1000)


def _retention_bytes(size: int) -> str:
    return "-1" if size == MAX_TOPIC_SIZE_UNLIMITED else str(size)


def _defaults(settings: KafkaSettings) -> dict[str, tuple[str, int, int, str]]:
    """The broker's settings: name -> (value, source, type, documentation)."""
    delay_ms = int(settings.group_initial_rebalance_delay * 1000)
    return {
        "auto.create.topics.enable": (
            "true" if settings.auto_create_topics else "false", STATIC_BROKER_CONFIG, BOOLEAN,
            "Metadata for an unknown topic creates it ([kafka] auto_create_topics)."),
        "compression.type": ("producer", DEFAULT_CONFIG, STRING,
                             "Record batches are stored as the producer sent them."),
        "default.replication.factor": ("1", DEFAULT_CONFIG, INT,
                                       "One broker: every partition has one replica."),
        "group.initial.rebalance.delay.ms": (
            str(delay_ms), STATIC_BROKER_CONFIG, INT,
            "An empty group's first rebalance waits this long for more members "
            "([kafka] group_initial_rebalance_delay)."),
        "log.cleanup.policy": ("delete", DEFAULT_CONFIG, LIST,
                               "Old segments are deleted by retention; no compaction."),
        "log.message.timestamp.type": ("CreateTime", DEFAULT_CONFIG, STRING,
                                       "Records keep the producer's timestamps."),
        "log.retention.bytes": (
            _retention_bytes(settings.default_max_topic_size), STATIC_BROKER_CONFIG, LONG,
            "Default size limit of a topic (all its partitions) ([system.topic] max_size)."),
        "log.retention.ms": (
            _retention_ms(settings.default_message_expiry), STATIC_BROKER_CONFIG, LONG,
            "Default message expiry ([system.segment] message_expiry)."),
        "log.segment.bytes": (str(settings.segment_bytes), STATIC_BROKER_CONFIG, INT,
                              "Size of a log segment ([system.segment] size)."),
        "message.max.bytes": (str(settings.max_message_bytes), STATIC_BROKER_CONFIG, INT,
                              "Largest request accepted ([tcp] max_frame_size)."),
        "min.insync.replicas": ("1", DEFAULT_CONFIG, INT, "One broker, one replica."),
        "num.partitions": (str(DEFAULT_PARTITIONS), DEFAULT_CONFIG, INT,
                           "Partitions of a topic created without a count."),
    }


# topic config -> the broker setting it defaults to
_TOPIC_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
}
_TOPIC_OWN = {  # configs a topic holds itself: its value from the topic
    "retention.bytes": lambda topic: _retention_bytes(topic.max_topic_size),
    "retention.ms": lambda topic: _retention_ms(topic.message_expiry),
}


def topic_settings(topic: Topic, settings: KafkaSettings) -> list[Setting]:
    broker = _defaults(settings)
    found = []
    for name, broker_name in sorted(_TOPIC_SYNONYMS.items()):
        value, source, config_type, doc = broker[broker_name]
        own = _TOPIC_OWN.get(name)
        if own is not None and own(topic) != value:
            found.append(Setting(name, own(topic), TOPIC_CONFIG, config_type, doc, broker_name,
                                 value))
        else:
            found.append(Setting(name, value, source, config_type, doc, broker_name))
    return found


def broker_settings(settings: KafkaSettings) -> list[Setting]:
    return [Setting(name, value, source, config_type, doc)
            for name, (value, source, config_type, doc) in sorted(_defaults(settings).items())]


def _entry(setting: Setting, synonyms: bool, documentation: bool, version: int) -> Any:
    listed = ()
    if synonyms:
        listed = [_Synonym(name=setting.name, value=setting.value, source=setting.source)] \
            if setting.source == TOPIC_CONFIG else []
        if setting.broker_name is not None and setting.source != DEFAULT_CONFIG:
            value = setting.broker_value if setting.broker_value is not None else setting.value
            listed.append(_Synonym(name=setting.broker_name, value=value,
                                   source=STATIC_BROKER_CONFIG))
        elif setting.source == STATIC_BROKER_CONFIG:
            listed.append(_Synonym(name=setting.name, value=setting.value,
                                   source=STATIC_BROKER_CONFIG))
        listed = tuple(listed)
    return _Config(name=setting.name, value=setting.value, read_only=True,
                   config_source=setting.source,
                   # v0 says "not set" where v1+ give the source
                   is_default=version == 0 and setting.source == DEFAULT_CONFIG,
                   is_sensitive=False, synonyms=listed, config_type=setting.config_type,
                   documentation=setting.doc if documentation else None)


async def describe_configs(core: Core, session: Session, settings: KafkaSettings, request
                           ) -> Any:
    body = request.body
    synonyms = bool(body.include_synonyms)
    documentation = request.api_version >= 3 and bool(body.include_documentation)
    results = []
    for resource in body.resources:
        code, message, found = ErrorCode.NONE, None, []
        try:
            if resource.resource_type == TOPIC:
                if not valid_name(resource.resource_name):
                    raise errors.TopicNameNotFound()
                topic = find_topic(core, session, settings, resource.resource_name)
                found = topic_settings(topic, settings)
            elif resource.resource_type == BROKER:
                if resource.resource_name != str(NODE_ID):
                    code, message = ErrorCode.INVALID_REQUEST, \
                        f"no broker {resource.resource_name!r}: the only broker is node 0"
                else:
                    core.broker.check_server_access(session)
                    found = broker_settings(settings)
            else:
                code, message = ErrorCode.INVALID_REQUEST, \
                    f"resource type {resource.resource_type} has no configs here"
        except errors.RillError as error:
            code = kafka_error(error, cluster=resource.resource_type == BROKER)
            message = str(error) if code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else \
                f"unknown topic {resource.resource_name!r}"
            found = []
        if resource.configuration_keys is not None:
            wanted = set(resource.configuration_keys)
            found = [setting for setting in found if setting.name in wanted]
        results.append(_Result(
            error_code=int(code), error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=tuple(_entry(setting, synonyms, documentation, request.api_version)
                          for setting in found)))
    return _DescribeConfigs(throttle_time_ms=0, results=tuple(results))
