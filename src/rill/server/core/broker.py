"""The broker: the one door into the core, the neutral API every wire protocol and transport
calls (Iggy over TCP, QUIC and HTTP; Kafka; TANK), with its facades beside it
(``core.facades``: ``broker.catalog``, ``broker.access``, ``broker.groups``,
``broker.server``, ``broker.staging``). A protocol never calls a service module directly.

Owns: the protocol-facing surface of the core in neutral types (``core.types``): sessions
and authentication (username/password, token), namespaces (Iggy's streams) and topics,
partitions, ``append`` that returns what it assigned, ``read`` of a partition range bounded by
records and bytes and by the high watermark, log bounds, offset for a timestamp, a long poll
over many partitions, durable unique ids (``new_id``), and consumer positions with "next
offset to read" semantics. Every call authorizes as (principal, action, resource) in the
services it reaches (``auth.permissioner``); nothing here knows a frame, a command or a
response record.

Partitions are numbered 1..N here (``PartitionRef.partition_id``), as everywhere in the core
API (``core.types``): the model's partition ids, the directory names on disk and Iggy's wire
numbering; Kafka and TANK, which count from 0, convert at their edge.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

from rill import errors
from rill.server.auth.permissioner import Action
from rill.server.auth.scram import ScramExchange
from rill.server.config import ServerConfig
from rill.server.core.cluster_view import ACKS_LEADER, ClusterView
from rill.server.core.columnar import ColumnarRead
from rill.server.core.consumer_groups import Group, GroupMembership, GroupRoster, MemberKey, deal
from rill.server.core.facades import Access, Catalog, Groups, ServerInfo, Staging
from rill.server.core.messages import PartitionReader
from rill.server.core.model import Session, Stream, Topic
from rill.server.core.unique_ids import UniqueIds
from rill.server.core.types import (
    Admission,
    AppendResult,
    ConsumerLag,
    ConsumerPosition,
    LiveMember,
    LogBounds,
    PartitionChooser,
    PartitionEnd,
    RecordRange,
    Ref,
    TopicSpec,
)

from rill.server.core.system import ServerStats
from rill.server.core.tokens import PersonalAccessToken
from rill.server.core.users import ROOT_USER_ID, User

if TYPE_CHECKING:
    from rill.server.core.core import Core

# what the broker's calls answer, besides ``core.types``: re-exported here, so that a protocol
# imports the core's door and its neutral types, never a service module
__all__ = ["Broker", "ColumnarRead", "Group", "GroupMembership", "GroupRoster", "MemberKey",
           "PartitionReader", "PartitionRef", "PersonalAccessToken", "ServerStats", "TopicRef", "User",
           "deal"]


_ALLOWING: dict[str, tuple[Action, ...]] = {
    "describe": (Action.READ_TOPIC, Action.READ_MESSAGES, Action.WRITE_MESSAGES),
    "read": (Action.READ_MESSAGES,),
    "write": (Action.WRITE_MESSAGES,),
}


@dataclass(frozen=True, slots=True)
class TopicRef:
    namespace: Ref  # the stream the topic is in
    topic: Ref


@dataclass(frozen=True, slots=True)
class PartitionRef:
    namespace: Ref
    topic: Ref
    partition_id: int  # 1..N


class Broker:
    def __init__(self, core: Core) -> None:
        self._core = core
        self._messages = core.messages
        self._ids = UniqueIds(lambda: core.state.store)
        self.catalog = Catalog(core)
        self.access = Access(core)
        self.groups = Groups(core)
        self.server = ServerInfo(core)
        self.staging = Staging(core)
        # what a wire protocol keeps for this server (its dialect's counters and windows), by
        # the protocol's name: the protocol's own, never read by the core
        self.dialects: dict[str, Any] = {}
        # how each protocol runs a request another node forwarded to this one
        # (``ClusterView.forward``): protocol name -> (user id, request frame) -> answer frame
        self.forwarded: dict[str, Callable[[int, bytes], Awaitable[bytes]]] = {}

    @property
    def cluster(self) -> ClusterView | None:
        """The cluster this node belongs to (who leads what: ``core.cluster_view``); None on a
        standalone server."""
        return self._core.cluster

    def leadership_certain(self) -> bool:
        """Whether this node may tell a client that its position is out of range: always
        standalone; in a cluster, only while it surely still holds its member lease
        (``ClusterView.leadership_certain``). Else its leaderships may be another node's
        already, where the position may be valid: the answer is "not the leader" (the client
        asks again where it leads), never "out of range" (the client would reset it)."""
        cluster = self._core.cluster
        return cluster is None or cluster.leadership_certain()

    # -- sessions and identity -------------------------------------------------------------

    def connect(self, address: str, transport: str) -> Session:
        """A session for a connection over ``transport`` (its neutral name: "tcp", "quic")."""
        return self._core.connect(address, transport)

    def disconnect(self, session: Session) -> None:
        self._core.disconnect(session)

    async def authenticate(self, session: Session, username: str, password: str) -> int:
        """Log ``session`` in (SASL PLAIN, Iggy LOGIN); the principal's user id."""
        return await self._core.users.login_user(session, username, password)

    def authenticate_as(self, session: Session, user: Ref) -> int:
        """Log ``session`` in as ``user`` (id or username) without credentials: a listener's
        own rule (Kafka's ``anonymous_user``); the user must exist and be active."""
        users = self._core.users
        found = users.users.get(user) if isinstance(user, int) else users.find_by_username(user)
        if found is None:
            raise errors.InvalidCredentials()
        return users.log_in(session, found)

    def authenticate_node(self, session: Session) -> int:
        """Log a peer link in once it proved the cluster's secret (another node): as the root
        user, so that the connection loop's limits for logged-in links apply to it."""
        return self.authenticate_as(session, ROOT_USER_ID)

    def begin_scram(self, session: Session, mechanism: str, client_first: bytes
                    ) -> ScramExchange:
        """Start a SCRAM login (SASL SCRAM-SHA-256/512): the exchange, whose server-first
        message goes to the client (``ScramError``: malformed; 11100: throttled)."""
        return self._core.users.begin_scram(session, mechanism, client_first)

    def finish_scram(self, session: Session, exchange: ScramExchange, client_final: bytes
                     ) -> tuple[int, bytes]:
        """Finish a SCRAM login: (the principal's user id, the server-final message)."""
        return self._core.users.finish_scram(session, exchange, client_final)

    def authenticate_token(self, session: Session, token: str) -> int:
        return self._core.tokens.login_with_personal_access_token(session, token)

    @property
    def config(self) -> ServerConfig:
        """The server's settings (read them; a protocol's own rules may depend on them)."""
        return self._core.config

    # -- ids -------------------------------------------------------------------------------

    async def new_id(self, session: Session, name: str) -> int:
        """A number (>= 0) this server never handed out under ``name`` before, across restarts
        and crashes (``core.unique_ids``): e.g. Kafka's producer ids. Any logged-in session."""
        if not session.is_authenticated:
            raise errors.Unauthenticated()
        return await self._ids.next(name)

    def id_handed_out(self, name: str, number: int) -> bool:
        """Whether ``new_id(name)`` may have returned ``number`` (now or before a restart)."""
        return self._ids.handed_out(name, number)

    # -- catalogue -------------------------------------------------------------------------

    async def create_namespace(self, session: Session, name: str) -> Stream:
        return await self._core.streams.create_stream(session, name)

    def namespaces(self, session: Session) -> list[Stream]:
        return self._core.streams.get_streams(session)

    async def create_topic(self, session: Session, namespace: Ref, spec: TopicSpec) -> Topic:
        return await self._core.topics.create_topic(session, namespace, spec)

    def check_topic_creation(self, session: Session, namespace: Ref) -> None:
        """Raise unless ``session`` may create a topic in ``namespace``; in a namespace that
        does not exist yet, unless it may create the namespace (as its first topic would).
        For a caller that validates a creation without making it (Kafka's validate_only)."""
        state = self._core.state
        try:
            stream = state.find_stream(namespace)
        except (errors.StreamNameNotFound, errors.StreamIdNotFound):
            state.authorize(session, Action.CREATE_STREAM)
            return
        state.authorize(session, Action.CREATE_TOPIC, stream.id)

    async def delete_topic(self, session: Session, ref: TopicRef) -> None:
        await self._core.topics.delete_topic(session, ref.namespace, ref.topic)

    def describe_topics(self, session: Session, namespace: Ref,
                        topics: Sequence[Ref] | None = None) -> list[Topic]:
        """The topics named (every topic of the namespace for None); unknown ones raise."""
        service = self._core.topics
        if topics is None:
            return service.get_topics(session, namespace)
        return [service.get_topic(session, namespace, topic) for topic in topics]

    def check_server_access(self, session: Session) -> None:
        """Raise unless ``session`` may read the server's settings (READ_SERVER)."""
        self._core.state.authorize(session, Action.READ_SERVER)

    def list_topics(self, session: Session, namespace: Ref, allowing: str = "describe"
                    ) -> list[Topic]:
        """The namespace's topics the principal may act on: ``describe`` (read its metadata,
        or read or write its messages: Kafka's Describe, which Read and Write imply), ``read``
        (its messages), ``write``. Never Unauthorized (a user without rights gets none), but a
        login is needed (40)."""
        state = self._core.state
        state.authorize(session, Action.LOGGED_IN)
        stream = state.find_stream(namespace)
        return [stream.topics[tid] for tid in sorted(stream.topics)
                if self.topic_allows(session, stream.topics[tid], allowing)]

    def may_write_somewhere(self, session: Session) -> bool:
        """Whether the principal may append messages to some topic: a large write request of
        one who may not is refused from its header, before its body is read."""
        return self._core.state.permissioner.allows_somewhere(session.user_id,
                                                              Action.WRITE_MESSAGES)

    def topic_allows(self, session: Session, topic: Topic, allowing: str = "describe") -> bool:
        """Whether the principal may act on ``topic`` as ``allowing`` says (``list_topics``)."""
        allowed = self._core.state.permissioner.is_allowed
        return any(allowed(session.user_id, action, topic.stream_id, topic.id)
                   for action in _ALLOWING[allowing])

    def topics_by_name(self, session: Session, namespace: Ref) -> Mapping[str, Topic]:
        """Every topic of the namespace by name, to resolve the names a request gives (each
        operation on one then authorizes itself): a live view, nothing copied, so a request
        costs the same among 10,000 topics as among one. A login is needed (40)."""
        state = self._core.state
        state.authorize(session, Action.LOGGED_IN)
        return state.find_stream(namespace).topics.by_name()

    async def create_partitions(self, session: Session, ref: TopicRef, count: int,
                                up_to: bool = False) -> None:
        """``count`` new partitions; with ``up_to``, as many as make ``count`` in all (Kafka's
        CreatePartitions), counted when the change runs, so that changes of the topic made
        meanwhile are counted too (TooManyPartitions when it would not grow)."""
        await self._core.partitions.create_partitions(session, ref.namespace, ref.topic, count,
                                                      up_to)

    # -- data ------------------------------------------------------------------------------

    def append(self, session: Session, ref: PartitionRef | TopicRef,
               region: bytes | memoryview, timestamp_us: int | None = None,
               gaps: bool = False, record_format: str | None = None,
               choose: PartitionChooser | None = None,
               admit: Admission | None = None, acks: int = ACKS_LEADER,
               ack_timeout: float = 30.0) -> Awaitable[AppendResult]:
        """Append a batch in the topic's record format (``iggy-v1``: a SEND region,
        ``storage.formats.iggy_v1``; ``kafka-v2``: RecordBatch v2, ``storage.formats.kafka_v2``) and answer
        once it is as durable as the fsync policy promises, with the offsets it got.
        ``ref``: the partition; or the topic, with ``choose`` picking the partition once the
        append is authorized (a protocol's partitioning rule).
        ``timestamp_us``: the index timestamp when the batch carries its own (Kafka's
        maxTimestamp), else the server's clock. ``gaps``: the batch's offsets may skip (a
        kafka-v2 batch the caller built with lastOffsetDelta >= recordsCount - 1: TANK's
        explicit sequence numbers); its last offset is then base + lastOffsetDelta.
        ``record_format``: the format ``region`` is in (None: the topic's); a topic of another
        format gets it converted on the way in (``Log.append_as``: Kafka and TANK
        batches, ``kafka-v2``, into an ``iggy-v1`` topic, one Iggy record per Kafka record).
        ``admit``: a rule run atomically with the append (``core.types.Admission``).
        ``acks``/``ack_timeout``: in a cluster, ``core.cluster_view.ACKS_ALL`` answers once
        every in-sync replica holds the batch (``MessageService.append``).
        (The service's coroutine itself, to await: no second coroutine on the SEND path.)"""
        return self._messages.append(
            session, ref.namespace, ref.topic,
            choose if type(ref) is TopicRef else ref.partition_id,  # type: ignore[union-attr,arg-type]
            region, timestamp_us, record_format, gaps, admit, acks, ack_timeout)

    def read(self, session: Session, ref: PartitionRef, offset: int, max_records: int,
             max_bytes: int, record_format: str | None = None, regions: bool = False
             ) -> RecordRange:
        """Stored records from ``offset`` up to the high watermark, at most ``max_records``
        and ``max_bytes`` (at least one record when any is there). ``record_format``: the
        format the caller takes; a topic of another format is converted per record
        (``storage.formats.conversion``); None: as stored. ``regions`` (for a link that sends
        files, ``Session.sends_files``): large verified ranges of stored records may come as
        file regions among the chunks, to send as they are; the caller sends or closes them."""
        return self._messages.read(session, ref.namespace, ref.topic, ref.partition_id,
                                   offset, max_records, max_bytes, record_format, regions)

    def reader(self, session: Session, ref: PartitionRef) -> PartitionReader:
        """The partition opened for reading by ``session`` (READ_MESSAGES, checked once): its
        bounds, start offsets, reads up to the high watermark and consumer positions, for one
        request's several steps with one lookup (``core.messages.PartitionReader``)."""
        return self._messages.reader(session, ref.namespace, ref.topic, ref.partition_id)

    async def flush(self, session: Session, ref: PartitionRef) -> None:
        """Make the partition's written records durable now (an fsync), whatever the fsync
        policy; WRITE_MESSAGES."""
        await self._messages.flush_unsaved_buffer(session, ref.namespace, ref.topic,
                                                  ref.partition_id)

    def read_columnar(self, session: Session, ref: PartitionRef, offset: int, count: int,
                      max_bytes: int) -> ColumnarRead:
        """Records from ``offset`` as columns (rill extension, ``core.columnar``)."""
        return self._core.columnar.poll_messages_columnar(
            session, ref.namespace, ref.topic, ref.partition_id, offset, count, max_bytes)

    def bounds(self, session: Session, ref: PartitionRef) -> LogBounds:
        return self._messages.bounds(session, ref.namespace, ref.topic, ref.partition_id)

    def offset_for_timestamp(self, session: Session, ref: PartitionRef, timestamp_us: int
                             ) -> int | None:
        return self._messages.offset_for_timestamp(session, ref.namespace, ref.topic,
                                                        ref.partition_id, timestamp_us)

    def record_at_or_after(self, session: Session, ref: PartitionRef, timestamp_us: int
                           ) -> tuple[int, int] | None:
        """(offset, timestamp µs) of the first record whose timestamp is >= ``timestamp_us``,
        exact to the record whatever the topic's format or a batch's codec (the storage
        opens the batch the index finds); None when no record is."""
        return self._messages.record_at_or_after(session, ref.namespace, ref.topic,
                                                      ref.partition_id, timestamp_us)

    def max_timestamp(self, session: Session, ref: PartitionRef) -> int:
        """The largest index timestamp (µs) of the partition; 0 when it is empty."""
        return self._messages.max_timestamp(session, ref.namespace, ref.topic,
                                                 ref.partition_id)

    async def wait(self, session: Session, ref: TopicRef, positions: Sequence[tuple[int, int]],
                   min_bytes: int, timeout: float) -> list[PartitionEnd]:
        """Until the partitions (ids, with the offset to wait past) of one topic hold
        ``min_bytes`` from their offsets on, or ``timeout`` seconds passed."""
        return await self._core.long_poll.wait_for_messages(
            session, ref.namespace, ref.topic, positions, min_bytes, timeout)

    async def wait_any(self, session: Session, namespace: str,
                       positions: Mapping[str, Sequence[tuple[int, int]]], min_bytes: int,
                       timeout: float) -> int:
        """``wait`` on several topics of a namespace at once (topic -> partitions and offsets):
        until their partitions hold ``min_bytes`` past their offsets, counted together across
        topics (Kafka's Fetch and TANK's Consume count the whole request), or ``timeout``
        passes (with no topic: sleeps it, as a Kafka Fetch waits its max wait). The bytes found
        past the offsets, all topics together; a wait that cannot start (a topic deleted
        meanwhile) counts nothing, and the caller's next read shows why."""
        if not positions:
            await asyncio.sleep(timeout)
            return 0
        try:
            return await self._core.long_poll.wait_for_any(session, namespace, positions,
                                                           min_bytes, timeout)
        except errors.RillError:
            return 0

    # -- consumer positions (the next offset to read) --------------------------------------
    # A consumer is any name; a protocol names its own so that they do not meet by chance
    # (Iggy's are ``iggy-consumer:<u32>``, protocols.iggy.consumers; its groups' are
    # ``iggy-group:<id>``, protocols.iggy.groups, given to the core as the membership's
    # ``position_name``).

    async def commit_offset(self, session: Session, consumer: str, ref: PartitionRef,
                            next_offset: int, note: str | None = None,
                            leader_epoch: int | None = None) -> None:
        """Store where ``consumer`` reads next (Kafka's OffsetCommit meaning), with its opaque
        ``note`` (Kafka's commit metadata) and the ``leader_epoch`` it read it in (Kafka's
        committed leader epoch); None: none."""
        await self._core.consumer_offsets.store_consumer_offset(
            session, ref.namespace, ref.topic, consumer, ref.partition_id, next_offset, note,
            leader_epoch)

    def group_members(self, session: Session, ref: TopicRef) -> list[LiveMember]:
        """The live members of the protocols' groups (those whose membership lives outside
        the core: ``core.member_sources``) that read the topic; READ_TOPIC."""
        topic = self._core.topics.get_topic(session, ref.namespace, ref.topic)
        stream = self._core.state.find_stream(topic.stream_id)
        return [member for source in self._core.member_sources
                for member in source(stream.name, topic.name)]

    def consumer_lag(self, session: Session, ref: TopicRef) -> list[ConsumerLag]:
        """Every consumer's position and lag in every partition of the topic, under the names
        the protocols store them by (groups first); READ_TOPIC."""
        return self._core.consumer_offsets.get_consumer_lag(session, ref.namespace, ref.topic)

    def committed_offset(self, session: Session, consumer: str, ref: PartitionRef) -> int | None:
        """The next offset ``consumer`` reads, or None when it never committed one."""
        return self.committed_position(session, consumer, ref).next_offset

    def committed_position(self, session: Session, consumer: str, ref: PartitionRef
                           ) -> ConsumerPosition:
        """The next offset ``consumer`` reads and the note and leader epoch it committed with
        it (``next_offset`` None: it never committed one)."""
        return self._core.consumer_offsets.get_consumer_offset(
            session, ref.namespace, ref.topic, consumer, ref.partition_id)

