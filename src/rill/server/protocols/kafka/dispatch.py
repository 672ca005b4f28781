"""The Kafka APIs as calls of the neutral broker (``core.broker``): one coroutine per API key.

Owns: ``HANDLERS``, the declared table of every API served (API key -> coroutine; the data,
group, configs and producer-id APIs live in their modules, which import ``common`` and never
this table: an import-linter contract keeps it so), ``SERVED`` (the versions ApiVersions lists;
``CLUSTER_SERVED`` in a cluster, with the ``CLUSTER_ONLY`` APIs: OffsetForLeaderEpoch),
and the mapping of Kafka's admin and metadata APIs onto rill's catalogue, with its rules:

* a Kafka topic is a topic of the ``[kafka] stream`` namespace (created on first use: by the
  first topic created through Kafka); Kafka partition N is the broker's partition N (0-based,
  rill's partition N + 1);
* standalone: one broker, node id 0: the controller, the leader and only replica of every
  partition, at the advertised host and port; leader epoch 0;
* in a cluster (``Broker.cluster``, ``core.cluster_view``): Metadata lists every live member
  that has a ``kafka`` listener (its advertised address), and for 30 s one that left the
  members (``ClusterView.listed_nodes``: a lease lost in a moment of etcd churn must not leave
  a client that refreshed then with one broker, which kafka-python 3.0 then asks alone, even
  once it is cut off), never as a leader; ``controller_id`` the controller's
  (-1 while electing), and per partition its placement: leader (-1 and LEADER_NOT_AVAILABLE
  (5) when none), leader epoch, replicas, ISR, offline replicas; FindCoordinator names the
  controller (this node while there is none); CreateTopics' ``replication_factor`` goes into
  the topic's spec (-1: the cluster's default) and an explicit assignment must name member
  node ids (its replica count is the factor);
* topic ids (Metadata v10+, CreateTopics v7, DeleteTopics v6): the core keeps none, so they are
  derived: a UUID-5 of (stream id, topic id, creation time), stable across restarts and new
  for a topic deleted and created again under the same name;
* names: Kafka's rule (1-249 of ``[a-zA-Z0-9._-]``, not ``.``/``..``) and rill's (stored
  lowercased): a name rill would store differently (upper case) is INVALID_TOPIC_EXCEPTION,
  so that a name always means the same topic on both sides;
* Metadata naming an unknown topic creates it (one partition) when the client allows it and
  ``[kafka] auto_create_topics`` is on (Kafka's allow.auto.create.topics), else
  UNKNOWN_TOPIC_OR_PARTITION;
* CreateTopics: num_partitions (-1: 1) or an explicit assignment (its length), replication
  factor 1 or -1 standalone (else INVALID_REPLICATION_FACTOR), TOPIC_ALREADY_EXISTS, validate_only;
  configs ``retention.ms`` and ``retention.bytes`` become the topic's message expiry and max
  size, other configs are accepted and ignored;
* topics created through Kafka (CreateTopics, Metadata's auto-create) store records in the
  ``kafka-v2`` format (RecordBatch v2 as sent); Produce, Fetch and ListOffsets are ``data``;
* CreatePartitions takes the new total (INVALID_PARTITIONS unless it grows);
* rill errors map onto Kafka codes (``kafka_error``): authorization failures
  TOPIC/CLUSTER_AUTHORIZATION_FAILED, a missing topic or stream UNKNOWN_TOPIC_OR_PARTITION;
* permissions are rill's (Iggy's), checked by the broker per operation: Metadata lists the
  topics the principal may describe (read the topic, or read or write its messages: Kafka's
  Describe, implied by Read and Write) and answers TOPIC_AUTHORIZATION_FAILED for a named topic
  it may not; CreateTopics (and Metadata's auto-create) need the right to create topics in the
  stream, DeleteTopics/CreatePartitions the right to manage the topic, Produce to send, Fetch
  and ListOffsets to poll; each denial is TOPIC_AUTHORIZATION_FAILED for that topic.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rill import errors
from rill.protocol.kafka import ErrorCode, api_versions_body, apis, response_class
from rill.protocol.primitives import EXPIRY_NEVER, MAX_TOPIC_SIZE_UNLIMITED
from rill.server.core.broker import TopicRef
from rill.server.core.core import Core
from rill.server.core.types import Partition, Session, Topic, TopicSpec
from rill.server.protocols.kafka import configs, data, group_apis, producers, sasl
from rill.server.protocols.kafka.common import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DEFAULT_PARTITIONS,
    NODE_ID,
    RECORD_FORMAT,
    ZERO_UUID,
    Handler,
    KafkaSettings,
    coordinator_elsewhere,
    create_topic,
    find_topic,
    kafka_error,
    kafka_topics,
    this_node,
    topic_id,
    valid_name,
)

TOPICS_PER_TURN = 256  # Metadata topics built between two turns of the event loop


# -- ApiVersions (18) ------------------------------------------------------------------------


async def api_versions(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    return api_versions_body(supported=served(core))


# -- Metadata (3) ----------------------------------------------------------------------------

_Metadata = response_class(apis.METADATA)


_MetadataPartition = _Metadata.MetadataResponseTopic.MetadataResponsePartition


def _metadata_partition(index: int, partition: Partition | None, live: frozenset[int] | None
                        ) -> Any:
    """``live``: the live members this Metadata lists (None: standalone). A leader not among
    them (its member lease ended; the controller has not elected another yet) is answered as
    no leader, as Kafka does: a client told of a leader it has no address for cannot send to
    it (kafka-python 3.0's sender then fails on every turn until it is restarted), and one
    that just left cannot take a write."""
    placement = partition.placement if partition is not None else None
    if placement is None:
        if live is not None:  # not placed yet (the node has not applied its state): no leader
            return _MetadataPartition(
                error_code=int(ErrorCode.LEADER_NOT_AVAILABLE), partition_index=index,
                leader_id=-1, leader_epoch=-1, replica_nodes=(), isr_nodes=(),
                offline_replicas=())
        return _MetadataPartition(  # standalone: this node is everything
            error_code=0, partition_index=index, leader_id=NODE_ID, leader_epoch=0,
            replica_nodes=(NODE_ID,), isr_nodes=(NODE_ID,), offline_replicas=())
    leader = placement.leader
    if leader is not None and live is not None and leader not in live:
        leader = None
    return _MetadataPartition(
        error_code=int(ErrorCode.LEADER_NOT_AVAILABLE if leader is None else ErrorCode.NONE),
        partition_index=index, leader_id=-1 if leader is None else leader,
        leader_epoch=placement.leader_epoch, replica_nodes=placement.replicas,
        isr_nodes=placement.isr, offline_replicas=placement.offline)


def _metadata_topic(topic: Topic, live: frozenset[int] | None = None) -> Any:
    partitions = topic.partitions
    return _Metadata.MetadataResponseTopic(
        error_code=0, name=topic.name, topic_id=topic_id(topic), is_internal=False,
        partitions=tuple(_metadata_partition(index, partitions.get(index + 1), live)
                         for index in range(len(partitions))),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _brokers(core: Core, settings: KafkaSettings
             ) -> tuple[tuple[Any, ...], int, frozenset[int] | None]:
    """(the brokers, the controller's id, the live ones among them: None standalone) Metadata
    lists: the members and the nodes that left them a moment ago (``listed_nodes``), each
    with a ``kafka`` listener."""
    cluster = core.broker.cluster
    if cluster is None:
        return (_Metadata.MetadataResponseBroker(node_id=NODE_ID, host=settings.host,
                                                 port=settings.port, rack=None),), NODE_ID, None
    brokers = []
    for node in cluster.listed_nodes():
        address = node.address("kafka")
        if address is not None:
            brokers.append(_Metadata.MetadataResponseBroker(
                node_id=node.node_id, host=address[0], port=address[1], rack=None))
    live = frozenset(node.node_id for node in cluster.nodes() if node.address("kafka"))
    controller = cluster.controller_id
    return tuple(brokers), -1 if controller is None else controller, live


def _metadata_error(name: str | None, code: ErrorCode) -> Any:
    return _Metadata.MetadataResponseTopic(
        error_code=int(code), name=name, topic_id=ZERO_UUID, is_internal=False, partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


async def metadata(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    requested = body.topics
    if request.api_version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    topics = []  # built a few hundred at a time: 10,000 topics took the loop for 0.6 s
    brokers, controller, live = _brokers(core, settings)
    if requested is None:
        for number, topic in enumerate(
                kafka_topics(core, session, settings, "describe").values(), 1):
            topics.append(_metadata_topic(topic, live))
            if number % TOPICS_PER_TURN == 0:
                await asyncio.sleep(0)
    else:
        auto_create = settings.auto_create_topics and body.allow_auto_topic_creation
        for number, entry in enumerate(requested, 1):
            topics.append(await _requested_topic(core, session, settings, entry.name,
                                                 auto_create, live))
            if number % TOPICS_PER_TURN == 0:
                await asyncio.sleep(0)
    return _Metadata(
        throttle_time_ms=0, brokers=brokers,
        cluster_id=settings.cluster_id, controller_id=controller, topics=tuple(topics),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


async def _requested_topic(core: Core, session: Session, settings: KafkaSettings,
                           name: str | None, auto_create: bool, live: frozenset[int] | None
                           ) -> Any:
    if not valid_name(name):
        return _metadata_error(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    topic = kafka_topics(core, session, settings).get(name)
    if topic is not None:
        if core.broker.topic_allows(session, topic, "describe"):
            return _metadata_topic(topic, live)
        return _metadata_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if not auto_create:
        return _metadata_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        topic = await create_topic(core, session, settings,
                                   TopicSpec(name=name, partitions_count=DEFAULT_PARTITIONS,
                                             record_format=RECORD_FORMAT))
    except errors.RillError as error:
        if isinstance(error, errors.TopicNameAlreadyExists):  # created meanwhile
            return await _requested_topic(core, session, settings, name, False, live)
        return _metadata_error(name, kafka_error(error))
    return _metadata_topic(topic, live)


# -- CreateTopics (19) -----------------------------------------------------------------------

_CreateTopics = response_class(apis.CREATE_TOPICS)


def _replication(core: Core, entry) -> tuple[int, ErrorCode, str | None]:
    """The spec's replication factor (0: the cluster's default), or why the entry's is refused:
    standalone only 1 (or -1); in a cluster -1 or 1..the live members, and an assignment's
    replicas must be live members, as many for every partition (their count is the factor; the
    controller places the replicas)."""
    cluster = core.broker.cluster
    if cluster is None:
        if entry.replication_factor not in (-1, 1):
            return (0, ErrorCode.INVALID_REPLICATION_FACTOR,
                    "replication factor must be 1 (one broker)")
        if entry.assignments and any(tuple(a.broker_ids) != (NODE_ID,)
                                     for a in entry.assignments):
            return 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the only broker is node 0"
        return 1, ErrorCode.NONE, None
    members = {node.node_id for node in cluster.nodes()}
    if entry.assignments:
        counts = {len(a.broker_ids) for a in entry.assignments}
        if len(counts) != 1 or any(len(set(a.broker_ids)) != len(a.broker_ids)
                                   or not set(a.broker_ids) <= members
                                   for a in entry.assignments):
            return (0, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"each partition needs as many distinct live brokers {sorted(members)}")
        factor = counts.pop()
    else:
        factor = entry.replication_factor
        if factor == -1:
            return 0, ErrorCode.NONE, None
    if not 1 <= factor <= len(members):
        return (0, ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {factor}: the cluster has {len(members)} live brokers")
    return factor, ErrorCode.NONE, None


def _topic_spec(core: Core, entry) -> tuple[TopicSpec | None, ErrorCode, str | None]:
    if not valid_name(entry.name):
        return None, ErrorCode.INVALID_TOPIC_EXCEPTION, f"invalid topic name {entry.name!r}"
    if entry.assignments and (entry.num_partitions != -1 or entry.replication_factor != -1):
        return (None, ErrorCode.INVALID_REQUEST, "both an assignment and "
                "num_partitions/replication_factor")
    factor, code, message = _replication(core, entry)
    if code != ErrorCode.NONE:
        return None, code, message
    if entry.assignments:
        partitions = len(entry.assignments)
    else:
        partitions = DEFAULT_PARTITIONS if entry.num_partitions == -1 else entry.num_partitions
    if partitions < 1:
        return None, ErrorCode.INVALID_PARTITIONS, "a topic needs at least one partition"
    expiry = 0
    max_size = 0
    for config in entry.configs or ():
        try:
            if config.name == "retention.ms" and config.value is not None:
                value = int(config.value)
                expiry = EXPIRY_NEVER if value < 0 else value * 1000
            elif config.name == "retention.bytes" and config.value is not None:
                value = int(config.value)
                max_size = MAX_TOPIC_SIZE_UNLIMITED if value < 0 else value
        except ValueError:
            return None, ErrorCode.INVALID_CONFIG, f"{config.name}: not a number"
    return (TopicSpec(name=entry.name, partitions_count=partitions, replication_factor=factor,
                      message_expiry=expiry, max_topic_size=max_size,
                      record_format=RECORD_FORMAT), ErrorCode.NONE, None)


async def create_topics(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    result = _CreateTopics.CreatableTopicResult
    results = []
    seen: set[str] = set()
    for entry in request.body.topics:
        spec, code, message = _topic_spec(core, entry)
        if entry.name in seen:
            spec, code, message = None, ErrorCode.INVALID_REQUEST, "topic named twice"
        seen.add(entry.name)
        topic = None
        if spec is not None:
            try:
                if request.body.validate_only:  # the same checks, nothing made
                    core.broker.check_topic_creation(session, settings.stream)
                    existing = kafka_topics(core, session, settings)
                    if spec.name in existing:
                        raise errors.TopicNameAlreadyExists()
                else:
                    topic = await create_topic(core, session, settings, spec)
            except errors.RillError as error:
                code = kafka_error(error)
                message = f"topic {entry.name!r} already exists" if (
                    code == ErrorCode.TOPIC_ALREADY_EXISTS) else str(error)
                spec = None
        ok = spec is not None
        results.append(result(
            name=entry.name, topic_id=topic_id(topic) if topic is not None else ZERO_UUID,
            error_code=int(code), error_message=message,
            num_partitions=spec.partitions_count if ok else -1,
            replication_factor=_factor(topic, spec), configs=None if not ok else ()))
    return _CreateTopics(throttle_time_ms=0, topics=tuple(results))


def _factor(topic: Topic | None, spec: TopicSpec | None) -> int:
    """The replication factor CreateTopics answers: the created topic's, else the spec's
    (-1: refused, or the cluster's default not known without creating)."""
    if topic is not None:
        return max(topic.replication_factor, 1)
    if spec is None:
        return -1
    return spec.replication_factor or -1


# -- DeleteTopics (20) -----------------------------------------------------------------------

_DeleteTopics = response_class(apis.DELETE_TOPICS)


async def delete_topics(core: Core, session: Session, settings: KafkaSettings, request) -> Any:
    body = request.body
    if request.api_version >= 6:
        wanted = [(state.name, state.topic_id) for state in body.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in body.topic_names]
    results = []
    for name, wanted_id in wanted:
        if name is None:  # by id
            by_id = {topic_id(t): t for t in kafka_topics(core, session, settings).values()}
            topic = by_id.get(wanted_id)
            if topic is None:
                results.append(_DeleteTopics.DeletableTopicResult(
                    name=None, topic_id=wanted_id, error_code=int(ErrorCode.UNKNOWN_TOPIC_ID),
                    error_message="no topic has this id"))
                continue
            name = topic.name
        code, message, deleted_id = ErrorCode.NONE, None, wanted_id
        try:
            if not valid_name(name):
                raise errors.TopicNameNotFound()
            deleted_id = topic_id(find_topic(core, session, settings, name))
            await core.broker.delete_topic(session, TopicRef(settings.stream, name))
        except errors.RillError as error:
            code = kafka_error(error)
            message = str(error)
        results.append(_DeleteTopics.DeletableTopicResult(
            name=name, topic_id=deleted_id, error_code=int(code), error_message=message))
    return _DeleteTopics(throttle_time_ms=0, responses=tuple(results))


# -- CreatePartitions (37) -------------------------------------------------------------------

_CreatePartitions = response_class(apis.CREATE_PARTITIONS)


async def create_partitions(core: Core, session: Session, settings: KafkaSettings, request
                            ) -> Any:
    results = []
    for entry in request.body.topics:
        code, message = ErrorCode.NONE, None
        try:
            if not valid_name(entry.name):
                raise errors.TopicNameNotFound()
            topic = find_topic(core, session, settings, entry.name)
            current = len(topic.partitions)
            if entry.count <= current:
                code = ErrorCode.INVALID_PARTITIONS
                message = f"topic has {current} partitions, cannot grow to {entry.count}"
            elif entry.assignments and not _assignable(core, entry.assignments):
                code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                message = ("the only broker is node 0" if core.broker.cluster is None
                           else "an assignment names a broker that is not a live member")
            elif not request.body.validate_only:
                await core.broker.create_partitions(
                    session, TopicRef(settings.stream, entry.name), entry.count, up_to=True)
        except errors.RillError as error:
            code = kafka_error(error)
            message = str(error)
        results.append(_CreatePartitions.CreatePartitionsTopicResult(
            name=entry.name, error_code=int(code), error_message=message))
    return _CreatePartitions(throttle_time_ms=0, results=tuple(results))


def _assignable(core: Core, assignments) -> bool:
    """Whether CreatePartitions' assignments name only brokers there are (standalone: node
    0; in a cluster: live members; the controller places the replicas)."""
    cluster = core.broker.cluster
    if cluster is None:
        return all(tuple(a.broker_ids) == (NODE_ID,) for a in assignments)
    members = {node.node_id for node in cluster.nodes()}
    return all(a.broker_ids and set(a.broker_ids) <= members for a in assignments)


# -- FindCoordinator (10) --------------------------------------------------------------------

_FindCoordinator = response_class(apis.FIND_COORDINATOR)


async def find_coordinator(core: Core, session: Session, settings: KafkaSettings, request
                           ) -> Any:
    """Standalone this node coordinates every group and transaction (groups: ``groups``/
    ``group_apis``); in a cluster the controller does (this node while there is none, or
    while the controller advertises no Kafka listener)."""
    node_id, host, port = this_node(core), settings.host, settings.port
    elsewhere = coordinator_elsewhere(core)
    if elsewhere is not None:
        node_id, (host, port) = elsewhere
    return _FindCoordinator(throttle_time_ms=0, error_code=0, error_message=None,
                            node_id=node_id, host=host, port=port)


# -- the table -------------------------------------------------------------------------------

# API key -> its handler: every API served but SASL's (``handler`` runs those, ``sasl``)
HANDLERS: dict[int, Handler] = {
    apis.API_VERSIONS: api_versions,
    apis.METADATA: metadata,
    apis.CREATE_TOPICS: create_topics,
    apis.DELETE_TOPICS: delete_topics,
    apis.CREATE_PARTITIONS: create_partitions,
    apis.FIND_COORDINATOR: find_coordinator,
    apis.PRODUCE: data.produce,
    apis.FETCH: data.fetch,
    apis.LIST_OFFSETS: data.list_offsets,
    apis.OFFSET_FOR_LEADER_EPOCH: data.offset_for_leader_epoch,
    apis.INIT_PRODUCER_ID: producers.init_producer_id,
    apis.OFFSET_COMMIT: group_apis.offset_commit,
    apis.OFFSET_FETCH: group_apis.offset_fetch,
    apis.JOIN_GROUP: group_apis.join_group,
    apis.SYNC_GROUP: group_apis.sync_group,
    apis.HEARTBEAT: group_apis.heartbeat,
    apis.LEAVE_GROUP: group_apis.leave_group,
    apis.DESCRIBE_GROUPS: group_apis.describe_groups,
    apis.LIST_GROUPS: group_apis.list_groups,
    apis.DESCRIBE_CONFIGS: configs.describe_configs,
}

# the APIs served today, at the codec table's ranges (kafka-notes §2.4) except where a module
# names narrower ones (``data.RANGES``, ``group_apis.GROUP_RANGES``, ``sasl.RANGES``);
# ApiVersions lists exactly these
_RANGES = {**data.RANGES, **group_apis.GROUP_RANGES, **sasl.RANGES}
# the APIs served only by a node of a cluster: a standalone server neither lists nor takes them
CLUSTER_ONLY = frozenset({apis.OFFSET_FOR_LEADER_EPOCH})
CLUSTER_SERVED: dict[int, tuple[int, int]] = {key: _RANGES.get(key, apis.SUPPORTED[key])
                                              for key in sorted({*HANDLERS, *_RANGES})}
SERVED: dict[int, tuple[int, int]] = {key: versions for key, versions in CLUSTER_SERVED.items()
                                      if key not in CLUSTER_ONLY}


def served(core: Core) -> dict[int, tuple[int, int]]:
    """The APIs this server serves and lists: ``SERVED``, and ``CLUSTER_SERVED`` in a cluster."""
    return SERVED if core.broker.cluster is None else CLUSTER_SERVED
