"""TANK's admin and discovery requests as calls of the neutral broker (``core.broker``), and the
namespace every TANK request shares.

Owns: these rules (tank-wire-reference §7, §8):

* a TANK topic is a topic of the ``[tank] stream`` namespace (by default ``[kafka] stream``:
  Kafka and TANK share one flat topic namespace), created on first use by the first
  CreateTopic; TANK partition N (0-based on the wire) is the broker's partition N, rill's
  partition N + 1; sequence number = offset + 1 (``numbers``);
* names: TANK's rule (1-64 bytes of ``[A-Za-z0-9_-]``, a letter or digit, not starting or
  ending with ``-`` / ``_``) and rill's (stored lowercased): a name rill would store
  differently (upper case) is refused by CreateTopic (10) and unknown to the other requests,
  so that a name always means the same topic over every protocol;
* a session that may not list the namespace (no permission) sees no topics: every topic is
  unknown to it (the codes clients know for that);
* **CreateTopic**: partitions 0 or a bad name -> 10, an existing topic -> 1, configuration text
  that is not ``key = value`` lines (``#`` comments) -> 4 (keys are accepted and ignored), any
  other refusal (permissions, storage) -> 2. Topics created here store RecordBatch v2
  (``kafka-v2``), so Kafka clients read them natively;
* **DiscoverPartitions**: (first available: the first stored seq, ``first_available``;
  high-water mark) per partition as sequence
  numbers; an unknown topic, or an explicit list naming a partition the topic lacks, -> count
  0 (the reference's advice: no per-partition code is safe there);
* **ReloadConf**: unknown topic 11, unknown partition 10, else 12 (not supported: rill topics
  have no TANK configuration file);
* **Status**: topics and partitions of the namespace, open partitions = partitions, the
  server's start time, version 400 (TANK v4.0's layout);
* **DiscoverTopics**: every topic of the namespace, enabled, with its partition count;
* **DiscoverTopology**: standalone the standalone answer (0xFFFF); in a cluster
  (``Broker.cluster``) the cluster's name and every live member: its id, flags (bit0: it
  advertises a ``tank`` listener on an IPv4 address, which follows; bit1: available, every
  live member is) and the number of the namespace's partitions it leads; and, for 30 s, a
  node that left the members (``ClusterView.listed_nodes``), not available;
* **in a cluster**, a partition another node leads is answered, by Produce, Consume and
  DiscoverPartitions (in place of its numbers), 0xfc and that leader's ``tank`` address (``leadership``: addr4 + port; a leader advertising no
  TANK listener on an IPv4 address is answered as no leader), and one with no leader 0xfd.
  DiscoverTopics is then cluster-aware (each topic's replication factor).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
from dataclasses import dataclass, field

from rill import errors
from rill.protocol.tank import messages as m
from rill.protocol.tank.errors import CreateTopicError, DiscoverReason, ReloadConfError
from rill.protocol.tank.record_batches import FIRST_RECORD_PEEK, first_record_offset
from rill.server.core.broker import PartitionRef
from rill.server.core.cluster_view import NodeInfo
from rill.server.core.core import Core
from rill.server.core.types import LogBounds, Session, Topic, TopicSpec, normalize_name
from rill.server.storage.file_region import FileRegion

RECORD_FORMAT = "kafka-v2"  # topics created through TANK store RecordBatch v2
VERSION = 400  # Status: TANK v4.0's answer layout
_TANK_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONFIG_LINE = re.compile(r"^\s*[A-Za-z0-9_.]+\s*=\s*\S.{0,127}$")


@dataclass(frozen=True, slots=True)
class TankSettings:
    stream: str  # the rill stream TANK topics live in
    started_at: float = 0.0  # the server's start (Unix seconds), for Status
    # per (topic id, partition): the lock that keeps appends with explicit sequence numbers
    # one at a time between their check and their append (protocols.tank.data)
    numbered_appends: dict[tuple[int, int], asyncio.Lock] = field(
        default_factory=dict, compare=False, repr=False)

    def numbered_append_lock(self, topic_id: int, partition: int) -> asyncio.Lock:
        key = (topic_id, partition)
        lock = self.numbered_appends.get(key)
        if lock is None:
            lock = self.numbered_appends[key] = asyncio.Lock()
        return lock


def valid_name(name: str) -> bool:
    return (bool(_TANK_NAME.match(name)) and name[0] not in "-_" and name[-1] not in "-_"
            and normalize_name(name) == name)


def topics(core: Core, session: Session, settings: TankSettings) -> dict[str, Topic]:
    """The TANK namespace's topics by name; none while the stream does not exist or the
    session may not list it."""
    try:
        found = core.broker.describe_topics(session, settings.stream)
    except (errors.StreamNameNotFound, errors.StreamIdNotFound, errors.Unauthorized,
            errors.Unauthenticated):
        return {}
    return {topic.name: topic for topic in found}


def topic_named(core: Core, session: Session, settings: TankSettings, name: str
                ) -> Topic | None:
    """The TANK namespace's topic ``name``; None when there is none or the session may not
    read it (the request path's lookup: by name, never a listing of the namespace)."""
    try:
        return core.broker.describe_topics(session, settings.stream, (name,))[0]
    except (errors.StreamNameNotFound, errors.StreamIdNotFound, errors.TopicNameNotFound,
            errors.Unauthorized, errors.Unauthenticated):
        return None


def leadership(core: Core, topic: Topic, partition: int) -> tuple[bool, tuple[str, int] | None]:
    """Whether another node answers for ``topic``'s TANK partition ``partition`` (0-based),
    and then its leader's TANK address (None: no leader, or one TANK cannot be sent to); (False,
    None) when this node leads it, or standalone."""
    found = topic.partitions.get(partition + 1)
    placement = found.placement if found is not None else None
    cluster = core.broker.cluster
    if placement is None or cluster is None or placement.leader == cluster.node_id:
        return False, None
    return True, tank_endpoint(core, placement.leader)


def tank_endpoint(core: Core, node_id: int | None) -> tuple[str, int] | None:
    """The ``tank`` listener node ``node_id`` advertises, when it is an IPv4 address (TANK
    names nodes by addr4 + port); else None."""
    cluster = core.broker.cluster
    node = cluster.node(node_id) if cluster is not None and node_id is not None else None
    return _ipv4_tank(node)


def _ipv4_tank(node: NodeInfo | None) -> tuple[str, int] | None:
    """``node``'s advertised ``tank`` listener when it is an IPv4 address; else None."""
    address = node.address("tank") if node is not None else None
    if address is None:
        return None
    try:
        if ipaddress.ip_address(address[0]).version != 4:
            return None
    except ValueError:
        return None
    return address


def ref(settings: TankSettings, topic: str, partition: int) -> PartitionRef:
    return PartitionRef(settings.stream, topic, partition + 1)  # TANK counts from 0


def numbers(bounds: LogBounds) -> tuple[int, int]:
    """(lowest possible first seq, high-water mark) of a partition: 0, 0 when it holds
    nothing. The first stored seq may be above it (a partition whose first produce used
    explicit numbers begins with a hole): ``first_available`` says which it is."""
    last = bounds.high_watermark  # seq of the last message = its offset + 1
    first = bounds.first_offset + 1 if last > bounds.first_offset else 0
    return first, last


def first_available(core: Core, session: Session, where: PartitionRef,
                    bounds: LogBounds | None = None) -> int:
    """The seq of the partition's first stored message (TANK's "first available"; 0 when it
    holds nothing): the oldest kept offset + 1, unless the batch there begins with a hole
    (explicit numbers: seqs 100.. produced first are 100, not 1). Reads the head of that one
    batch (a large one only its first bytes)."""
    if bounds is None:
        bounds = core.broker.bounds(session, where)
    first, _last = numbers(bounds)
    if not first:
        return 0
    found = core.broker.read(session, where, bounds.first_offset, 1, 1, RECORD_FORMAT,
                             regions=True)
    if not found.count or not found.chunks:
        return first
    chunk = found.chunks[0]
    try:
        if type(chunk) is FileRegion:  # a large verified batch: its head tells, mostly
            offset = first_record_offset(os.pread(chunk.descriptor, FIRST_RECORD_PEEK,
                                                  chunk.position))
            if offset is None:
                offset = first_record_offset(chunk.read())
        else:
            offset = first_record_offset(chunk)
    finally:
        for region in found.chunks:
            if type(region) is FileRegion:
                region.close()
    return first if offset is None else max(offset + 1, first)


# -- requests ------------------------------------------------------------------------------


def discover_partitions(core: Core, session: Session, settings: TankSettings,
                        request: m.DiscoverPartitionsRequest) -> m.DiscoverPartitionsResponse:
    topic = topic_named(core, session, settings, request.topic)
    empty = m.DiscoverPartitionsResponse(request.request_id, request.topic, ())
    if topic is None:
        return empty
    count = len(topic.partitions)
    wanted = request.partitions if request.partitions is not None else range(count)
    found = []
    for partition in wanted:
        if not 0 <= partition < count:
            return empty
        elsewhere, endpoint = leadership(core, topic, partition)
        if elsewhere:  # in a cluster: that leader's numbers, not this replica's
            found.append(m.PartitionNumbers(
                m.NO_NUMBERS, m.NO_NUMBERS,
                DiscoverReason.NO_LEADER if endpoint is None else DiscoverReason.OTHER_LEADER,
                endpoint))
            continue
        where = ref(settings, topic.name, partition)
        try:
            bounds = core.broker.bounds(session, where)
            first = first_available(core, session, where, bounds)
        except errors.RillError:
            return empty
        last = bounds.high_watermark
        found.append(m.PartitionNumbers(first, last))
    return m.DiscoverPartitionsResponse(request.request_id, request.topic, tuple(found))


def _config_valid(text: bytes) -> bool:
    try:
        lines = text.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return False
    for line in lines:
        line = line.split("#", 1)[0]
        if line.strip() and not _CONFIG_LINE.match(line):
            return False
    return True


async def create_topic(core: Core, session: Session, settings: TankSettings,
                       request: m.CreateTopicRequest) -> m.CreateTopicResponse:
    def answer(code: int) -> m.CreateTopicResponse:
        return m.CreateTopicResponse(request.request_id, request.topic, code)

    if request.partitions == 0 or not valid_name(request.topic):
        return answer(CreateTopicError.INVALID_REQUEST)
    if not _config_valid(bytes(request.config)):
        return answer(CreateTopicError.INVALID_CONFIG)
    spec = TopicSpec(request.topic, request.partitions, record_format=RECORD_FORMAT)
    broker = core.broker
    try:
        try:
            await broker.create_topic(session, settings.stream, spec)
        except (errors.StreamNameNotFound, errors.StreamIdNotFound):
            try:
                await broker.create_namespace(session, settings.stream)
            except errors.StreamNameAlreadyExists:
                pass
            await broker.create_topic(session, settings.stream, spec)
    except (errors.TopicNameAlreadyExists, errors.TopicIdAlreadyExists):
        return answer(CreateTopicError.EXISTS)
    except (errors.InvalidTopicName, errors.TooManyPartitions):
        return answer(CreateTopicError.INVALID_REQUEST)
    except errors.RillError:
        return answer(CreateTopicError.SYSTEM)
    return answer(CreateTopicError.OK)


def reload_conf(core: Core, session: Session, settings: TankSettings,
                request: m.ReloadConfRequest) -> m.ReloadConfResponse:
    topic = topic_named(core, session, settings, request.topic)
    if topic is None:
        code = ReloadConfError.UNKNOWN_TOPIC
    elif not 0 <= request.partition < len(topic.partitions):
        code = ReloadConfError.UNKNOWN_PARTITION
    else:
        code = ReloadConfError.UNSUPPORTED
    return m.ReloadConfResponse(request.request_id, request.topic, request.partition, code)


def status(core: Core, session: Session, settings: TankSettings,
           request: m.StatusRequest) -> m.StatusResponse:
    found = topics(core, session, settings)
    partitions = sum(len(topic.partitions) for topic in found.values())
    return m.StatusResponse(request.request_id, len(found), partitions, partitions, 0,
                            int(settings.started_at) & 0xFFFF_FFFF, VERSION)


def discover_topics(core: Core, session: Session, settings: TankSettings,
                    request: m.DiscoverTopicsRequest) -> m.DiscoverTopicsResponse:
    found = topics(core, session, settings)
    if core.broker.cluster is None:
        return m.DiscoverTopicsResponse(request.request_id, tuple(
            m.TopicInfo(name, min(len(topic.partitions), 0xFFFF))
            for name, topic in found.items()))
    return m.DiscoverTopicsResponse(request.request_id, tuple(
        m.TopicInfo(name, min(len(topic.partitions), 0xFFFF),
                    replication_factor=min(max(topic.replication_factor, 1), 0xFF))
        for name, topic in found.items()), cluster_aware=True)


_HAS_ENDPOINT, _AVAILABLE = 1, 2  # DiscoverTopology's node flags (bit2, blocked: never)


def discover_topology(core: Core, session: Session, settings: TankSettings,
                      request: m.DiscoverTopologyRequest) -> m.DiscoverTopologyResponse:
    cluster = core.broker.cluster
    if cluster is None:
        return m.DiscoverTopologyResponse(request.request_id)  # standalone: 0xFFFF
    led: dict[int, int] = {}
    for topic in topics(core, session, settings).values():
        for partition in topic.partitions.values():
            placement = partition.placement
            if placement is not None and placement.leader is not None:
                led[placement.leader] = led.get(placement.leader, 0) + 1
    nodes = []
    for node in cluster.listed_nodes():  # (one that left the members a moment ago: unavailable)
        endpoint = _ipv4_tank(node)
        flags = ((_AVAILABLE if cluster.node(node.node_id) is not None else 0)
                 | (_HAS_ENDPOINT if endpoint is not None else 0))
        nodes.append(m.TopologyNode(node.node_id & 0xFFFF, flags,
                                    min(led.get(node.node_id, 0), 0xFFFF), endpoint))
    return m.DiscoverTopologyResponse(request.request_id, cluster.name, tuple(nodes))


HANDLERS = {
    m.DiscoverPartitionsRequest: discover_partitions,
    m.CreateTopicRequest: create_topic,
    m.ReloadConfRequest: reload_conf,
    m.StatusRequest: status,
    m.DiscoverTopicsRequest: discover_topics,
    m.DiscoverTopologyRequest: discover_topology,
}

