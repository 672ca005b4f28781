"""What Kafka's API modules share: the listener's settings, the one-broker constants, topic ids,
names, the namespace of Kafka topics and the mapping of rill errors onto Kafka codes.

Owns: ``KafkaSettings``; ``NODE_ID`` (one broker, node 0: the controller, the leader and only
replica of every partition) and ``RECORD_FORMAT`` (topics created through Kafka store
RecordBatch v2 as sent); ``topic_id`` (a UUID-5 of stream id, topic id and creation time: the
core keeps none); ``valid_name`` (Kafka's rule and rill's stored form); ``kafka_topics``,
``find_topic`` and ``create_topic`` (the ``[kafka] stream`` namespace, made on first use);
``kafka_error``; in a cluster, ``this_node``, ``coordinator_elsewhere`` (the groups'
coordinator), ``partition_of`` and ``epoch_error`` (a partition's placement as its APIs
answer it). It imports no API module: the modules of the APIs (``dispatch`` for admin and
metadata, ``data``, ``group_apis``, ``configs``, ``producers``, ``sasl``) import it, and
``dispatch.HANDLERS`` names them all.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from rill import errors
from rill.protocol.kafka import ErrorCode
from rill.protocol.primitives import EXPIRY_NEVER
from rill.server.core.core import Core
from rill.server.core.types import Partition, Session, Topic, TopicSpec, normalize_name


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """What the dispatch needs from the listener and ``[kafka]``."""

    stream: str  # the rill stream Kafka topics live in
    host: str  # advertised in Metadata and FindCoordinator
    port: int
    auto_create_topics: bool = True
    cluster_id: str = "rill"
    group_initial_rebalance_delay: float = 0.0  # seconds (``groups``)
    max_message_bytes: int = 64 * 1024 * 1024  # the request frame limit (DescribeConfigs)
    segment_bytes: int = 1024 ** 3  # the segment size (DescribeConfigs)
    default_message_expiry: int = EXPIRY_NEVER  # µs, a topic's default (DescribeConfigs)
    default_max_topic_size: int = 10 * 1000 ** 3  # a topic's default (DescribeConfigs)
    session_lifetime: float = 0.0  # seconds a SASL login lasts; 0 = the connection's life




NODE_ID = 0
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
DEFAULT_PARTITIONS = 1
RECORD_FORMAT = "kafka-v2"  # topics created through Kafka store RecordBatch v2 as sent
_TOPIC_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "rill:kafka-topic-id")
ZERO_UUID = uuid.UUID(int=0)
_KAFKA_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

# one API: (core, session, settings, decoded request) -> the response body
Handler = Callable[[Core, Session, KafkaSettings, Any], Awaitable[Any]]


def topic_id(topic: Topic) -> uuid.UUID:
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{topic.stream_id}/{topic.id}/{topic.created_at}")


def kafka_error(error: Exception, cluster: bool = False) -> ErrorCode:
    """The Kafka error code clients act on for a rill error."""
    if isinstance(error, (errors.Unauthorized, errors.Unauthenticated)):
        return (ErrorCode.CLUSTER_AUTHORIZATION_FAILED if cluster
                else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if isinstance(error, (errors.StreamIdNotFound, errors.StreamNameNotFound,
                          errors.TopicIdNotFound, errors.TopicNameNotFound)):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if isinstance(error, (errors.TopicNameAlreadyExists, errors.TopicIdAlreadyExists)):
        return ErrorCode.TOPIC_ALREADY_EXISTS
    if isinstance(error, (errors.InvalidTopicName, errors.InvalidStreamName)):
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if isinstance(error, errors.TooManyPartitions):
        return ErrorCode.INVALID_PARTITIONS
    code = _CLUSTER_ERRORS.get(type(error))
    if code is not None:
        return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


# the cluster's refusals (``core.cluster_view``; never raised on a standalone server): every
# Kafka client refreshes its metadata on NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE and the
# epoch errors, and retries NOT_ENOUGH_REPLICAS and REQUEST_TIMED_OUT (a timed-out acks=all
# write may still be committed: idempotence makes the retry safe); a write whose leader
# stepped down while it waited for the ISR is NOT_LEADER_OR_FOLLOWER, as Kafka answers it
_CLUSTER_ERRORS: dict[type, ErrorCode] = {
    errors.NotLeaderForPartition: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    errors.LeaderSteppedDown: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    errors.LeaderNotAvailable: ErrorCode.LEADER_NOT_AVAILABLE,
    errors.NotEnoughReplicas: ErrorCode.NOT_ENOUGH_REPLICAS,
    errors.ReplicationTimedOut: ErrorCode.REQUEST_TIMED_OUT,
    errors.FencedLeaderEpoch: ErrorCode.FENCED_LEADER_EPOCH,
    errors.UnknownLeaderEpoch: ErrorCode.UNKNOWN_LEADER_EPOCH,
}


# -- the cluster -----------------------------------------------------------------------------


def this_node(core: Core) -> int:
    """This node's id as Kafka names it: the cluster's, ``NODE_ID`` standalone."""
    cluster = core.broker.cluster
    return NODE_ID if cluster is None else cluster.node_id


def coordinator_elsewhere(core: Core) -> tuple[int, tuple[str, int]] | None:
    """The node that coordinates Kafka's groups when it is not this one: (its id, its Kafka
    address). In a cluster the controller does (FindCoordinator names it, and the group APIs
    of another node answer NOT_COORDINATOR); None standalone, while no controller is elected,
    when this node is the controller, or when it advertises no Kafka listener (this node
    coordinates then)."""
    cluster = core.broker.cluster
    if cluster is None or cluster.controller_id is None or (
            cluster.controller_id == cluster.node_id):
        return None
    controller = cluster.node(cluster.controller_id)
    address = controller.address("kafka") if controller is not None else None
    return None if address is None else (controller.node_id, address)


def partition_of(topics: Mapping[str, Topic], name: str | None, index: int
                 ) -> Partition | None:
    """Kafka partition ``index`` of topic ``name`` (the model's, with its placement), or None."""
    topic = topics.get(name) if name is not None else None
    return None if topic is None else topic.partitions.get(index + 1)


def epoch_error(partition: Partition | None, current_leader_epoch: int) -> ErrorCode:
    """A request's ``current_leader_epoch`` (KIP-320; -1: none given) against the partition's
    placement: older FENCED_LEADER_EPOCH (74), newer UNKNOWN_LEADER_EPOCH (75) (the client
    knows of an election this node has not applied yet); NONE standalone."""
    placement = partition.placement if partition is not None else None
    if placement is None or current_leader_epoch < 0:
        return ErrorCode.NONE
    if current_leader_epoch < placement.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_leader_epoch > placement.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def valid_name(name: str | None) -> bool:
    return (name is not None and bool(_KAFKA_NAME.match(name)) and name not in (".", "..")
            and normalize_name(name) == name)


# -- the namespace ---------------------------------------------------------------------------


def kafka_topics(core: Core, session: Session, settings: KafkaSettings,
                 allowing: str | None = None) -> Mapping[str, Topic]:
    """The topics of the Kafka stream by name (none while the stream does not exist): every
    one (``allowing`` None: to resolve names, each operation on a topic authorizes itself; a
    live view, ``broker.topics_by_name``), or those the principal may
    ``describe``/``read``/``write`` (``broker.list_topics``)."""
    broker = core.broker
    try:
        if allowing is None:
            return broker.topics_by_name(session, settings.stream)
        topics = broker.list_topics(session, settings.stream, allowing)
    except (errors.StreamNameNotFound, errors.StreamIdNotFound):
        return {}
    return {topic.name: topic for topic in topics}


def find_topic(core: Core, session: Session, settings: KafkaSettings, name: str) -> Topic:
    return core.broker.describe_topics(session, settings.stream, [name])[0]


async def create_topic(core: Core, session: Session, settings: KafkaSettings, spec: TopicSpec
                       ) -> Topic:
    """Create a topic in the Kafka stream, creating the stream on first use."""
    broker = core.broker
    try:
        return await broker.create_topic(session, settings.stream, spec)
    except (errors.StreamNameNotFound, errors.StreamIdNotFound):
        try:
            await broker.create_namespace(session, settings.stream)
        except errors.StreamNameAlreadyExists:
            pass
        return await broker.create_topic(session, settings.stream, spec)

