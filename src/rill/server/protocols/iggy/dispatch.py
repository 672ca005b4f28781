"""The Iggy commands as calls of the neutral core: one function per command, by its NAME.

Owns: ``execute(core, session, command)``, which every Iggy transport (TCP, QUIC, HTTP) runs a
decoded command through, and the Iggy rules that sit between a command and the core: the login
gate (only PING, the logins and LOGOUT without a session; an unauthenticated PURGE_STREAM is 41,
not 40, wire §3.6), identifiers passed on as ids or names, message expiries and sizes with
Iggy's sentinels, the dialect's rules (``partitioning``, ``deduplication``, ``polling``,
``consumers``, ``groups``) and the answers built by ``views``. Every command calls the core
through its one door, the ``Broker`` and its facades (``broker.catalog``, ``.access``,
``.groups``, ``.server``, ``.staging``). No permission check, journal write or state change
lives here: the core does those.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from typing import TYPE_CHECKING, Any, Callable

from rill import errors
from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.commands.columnar import DEFAULT_COLUMNAR_BYTES, MAX_COLUMNAR_BYTES
from rill.protocol.iggy.commands.long_poll import MAX_WAIT_MS
from rill.protocol.iggy.commands.topics import record_format_short, record_format_stored
from rill.protocol.iggy.primitives import Partitioning
from rill.protocol.iggy.responses.topics import TopicRecordFormat
from rill.protocol.iggy.responses.transactions import CommitResult, ProducerState, StageResult
from rill.protocol.iggy.responses.users import IdentityInfo, RawPersonalAccessToken
from rill.server.core.broker import Broker, PartitionRef, TopicRef
from rill.server.core.cluster_view import ACKS_ALL, ACKS_LEADER
from rill.server.core.types import Session, TopicSpec
from rill.server.protocols.iggy import views
from rill.server.protocols.iggy.consumers import iggy_lag, position, reader
from rill.server.protocols.iggy.deduplication import MessageDeduplicator
from rill.server.protocols.iggy.forwarding import Relayed, forward, leader_elsewhere
from rill.server.protocols.iggy.groups import IggyGroupMembers
from rill.server.protocols.iggy.partitioning import Partitioners
from rill.server.protocols.iggy.polling import RECORD_FORMAT, poll_messages as poll

if TYPE_CHECKING:
    from rill.server.core.core import Core

Call = Callable[[Broker, Session, Any], Any]  # a coroutine function where the core call awaits

# commands that need no login (wire §6.1, except GET_STATS: it tells the host's name, OS,
# memory and the server's version and load, which a stranger has no use for but an attacker
# does; any logged-in user may read it)
PUBLIC_COMMANDS = frozenset(
    {"ping", "login_user", "login_with_personal_access_token", "logout_user"}
)

RECORDS_PER_TURN = 256  # records a listing builds (and the handler encodes) between loop turns

COMMANDS: dict[str, Call] = {}
AWAITED: set[str] = set()  # the commands whose call is a coroutine function


def command(call: Call) -> Call:
    """Register ``call`` as the Iggy command of the same name."""
    COMMANDS[call.__name__] = call
    if inspect.iscoroutinefunction(call):
        AWAITED.add(call.__name__)
    return call


async def execute(core: Core, session: Session, command: Command) -> Any:
    """Run one decoded command for ``session``; raises RillError on failure."""
    if not session.is_authenticated and command.NAME not in PUBLIC_COMMANDS:
        # the login gate comes before any lookup, so strangers learn nothing about ids
        if command.NAME == "purge_stream":  # the dialect answers 41 here (wire §3.6)
            raise errors.Unauthorized()
        raise errors.Unauthenticated()
    call = COMMANDS.get(command.NAME)
    if call is None:
        raise errors.FeatureUnavailable(reason=f"{command.NAME} is not available yet")
    if command.NAME in AWAITED:
        return await call(core.broker, session, command)
    return call(core.broker, session, command)


class _Rules:
    """The Iggy dialect's state of one server: balanced partitioning's counters and, when
    ``[system.message_deduplication]`` is on, the message-id windows."""

    def __init__(self, broker: Broker) -> None:
        self.partitioners = Partitioners()
        deduplicator = MessageDeduplicator.from_config(
            broker.config.system.message_deduplication)
        self.admit = None if deduplicator is None else deduplicator.admit


def rules(broker: Broker) -> _Rules:
    """The dialect's state of ``broker``'s server (``Broker.dialects``: a dict lookup a request)."""
    found = broker.dialects.get("iggy")
    if found is None:
        found = broker.dialects["iggy"] = _Rules(broker)
    return found


# -- system, clients, snapshot ---------------------------------------------------------------


@command
def ping(broker: Broker, session: Session, c) -> None:
    return None  # the handler already counted the request as the session's heartbeat


@command
def get_stats(broker: Broker, session: Session, c):
    return views.stats(broker.server.get_stats(session))


@command
async def get_snapshot(broker: Broker, session: Session, c) -> bytes:
    return await broker.server.get_snapshot(session, c.compression, c.types)


@command
def get_me(broker: Broker, session: Session, c):
    return views.client_details(broker.server.get_me(session))


@command
def get_client(broker: Broker, session: Session, c):
    return views.client_details(broker.server.get_client(session, c.client_id))


@command
def get_clients(broker: Broker, session: Session, c):
    return [views.client_info(client) for client in broker.server.get_clients(session)]


# -- users and tokens ------------------------------------------------------------------------


@command
def get_user(broker: Broker, session: Session, c):
    return views.user_details(broker.access.get_user(session, c.user_id.value))


@command
def get_users(broker: Broker, session: Session, c):
    return [views.user_info(user) for user in broker.access.get_users(session)]


@command
async def create_user(broker: Broker, session: Session, c):
    return views.user_details(
        await broker.access.create_user(session, c.username, c.password, c.status,
                                        c.permissions))


@command
async def delete_user(broker: Broker, session: Session, c) -> None:
    await broker.access.delete_user(session, c.user_id.value)


@command
def unlock_user(broker: Broker, session: Session, c) -> None:
    broker.access.unlock_user(session, c.user_id.value)


@command
async def update_user(broker: Broker, session: Session, c) -> None:
    await broker.access.update_user(session, c.user_id.value, c.username, c.status)


@command
async def update_permissions(broker: Broker, session: Session, c) -> None:
    await broker.access.update_permissions(session, c.user_id.value, c.permissions)


@command
async def change_password(broker: Broker, session: Session, c) -> None:
    await broker.access.change_password(session, c.user_id.value, c.current_password,
                                        c.new_password)


@command
async def login_user(broker: Broker, session: Session, c):
    return IdentityInfo(await broker.access.login_user(session, c.username, c.password))


@command
def logout_user(broker: Broker, session: Session, c) -> None:
    broker.access.logout_user(session)


@command
def get_personal_access_tokens(broker: Broker, session: Session, c):
    return [views.token_info(token)
            for token in broker.access.get_personal_access_tokens(session)]


@command
async def create_personal_access_token(broker: Broker, session: Session, c):
    return RawPersonalAccessToken(
        await broker.access.create_personal_access_token(session, c.name, c.expiry))


@command
async def delete_personal_access_token(broker: Broker, session: Session, c) -> None:
    await broker.access.delete_personal_access_token(session, c.name)


@command
def login_with_personal_access_token(broker: Broker, session: Session, c):
    return IdentityInfo(broker.access.login_with_personal_access_token(session, c.token))


# -- streams, topics, partitions -------------------------------------------------------------


@command
def get_stream(broker: Broker, session: Session, c):
    return views.stream_details(broker.catalog.get_stream(session, c.stream_id.value))


async def in_turns(items: list[Any], make: Callable[[Any], Any]) -> list[Any]:
    """``[make(item) for item in items]``, yielding to the event loop every
    ``RECORDS_PER_TURN`` items: 100,000 streams take the loop for a second at once, so other
    connections are served between the pieces. ``items`` is a snapshot (a stream or topic
    deleted meanwhile is still described as it was; one created meanwhile is not)."""
    made = []
    for start in range(0, len(items), RECORDS_PER_TURN):
        if start:
            await asyncio.sleep(0)
        made.extend(make(item) for item in items[start:start + RECORDS_PER_TURN])
    return made


@command
async def get_streams(broker: Broker, session: Session, c):
    return await in_turns(broker.catalog.get_streams(session), views.stream_record)


@command
async def create_stream(broker: Broker, session: Session, c):
    return views.stream_details(
        await broker.catalog.create_stream(session, c.name, c.stream_id or 0))


@command
async def update_stream(broker: Broker, session: Session, c) -> None:
    await broker.catalog.update_stream(session, c.stream_id.value, c.name)


@command
async def delete_stream(broker: Broker, session: Session, c) -> None:
    await broker.catalog.delete_stream(session, c.stream_id.value)


@command
async def purge_stream(broker: Broker, session: Session, c) -> None:
    await broker.catalog.purge_stream(session, c.stream_id.value)


@command
def get_topic(broker: Broker, session: Session, c):
    return views.topic_details(
        broker.catalog.get_topic(session, c.stream_id.value, c.topic_id.value))


@command
async def get_topics(broker: Broker, session: Session, c):
    return await in_turns(broker.catalog.get_topics(session, c.stream_id.value),
                          views.topic_record)


def _topic_spec(c, partitions_count: int = 0, topic_id: int = 0) -> TopicSpec:
    return TopicSpec(c.name, partitions_count, topic_id, int(c.compression_algorithm),
                     c.message_expiry, c.max_topic_size, c.replication_factor or 0)


@command
async def create_topic(broker: Broker, session: Session, c):
    spec = _topic_spec(c, c.partitions_count, c.topic_id or 0)
    return views.topic_details(await broker.catalog.create_topic(session, c.stream_id.value,
                                                                 spec))


@command
async def create_topic_with_format(broker: Broker, session: Session, c):
    spec = dataclasses.replace(_topic_spec(c, c.partitions_count, c.topic_id or 0),
                               record_format=record_format_stored(c.record_format))
    return views.topic_details(await broker.catalog.create_topic(session, c.stream_id.value,
                                                                 spec))


@command
def get_topic_record_formats(broker: Broker, session: Session, c):
    return [TopicRecordFormat(topic.id, record_format_short(topic.record_format))
            for topic in broker.catalog.get_topics(session, c.stream_id.value)]


@command
async def update_topic(broker: Broker, session: Session, c) -> None:
    await broker.catalog.update_topic(session, c.stream_id.value, c.topic_id.value, _topic_spec(c))


@command
async def delete_topic(broker: Broker, session: Session, c) -> None:
    await broker.catalog.delete_topic(session, c.stream_id.value, c.topic_id.value)


@command
async def purge_topic(broker: Broker, session: Session, c) -> None:
    await broker.catalog.purge_topic(session, c.stream_id.value, c.topic_id.value)


@command
async def create_partitions(broker: Broker, session: Session, c) -> None:
    await broker.catalog.create_partitions(session, c.stream_id.value, c.topic_id.value,
                                           c.partitions_count)


@command
async def delete_partitions(broker: Broker, session: Session, c) -> None:
    await broker.catalog.delete_partitions(session, c.stream_id.value, c.topic_id.value,
                                           c.partitions_count)


# -- messages --------------------------------------------------------------------------------


class _Chosen(Exception):
    """The partition a SEND chose, in a cluster: raised by the chooser (once the append is
    authorized, before anything is written) so the append is made knowing where it goes."""

    def __init__(self, partition_id: int, replicated: bool) -> None:
        super().__init__(partition_id)
        self.partition_id, self.replicated = partition_id, replicated


def _choosing(choose: Callable[[Any], int]) -> Callable[[Any], int]:
    def chosen(topic) -> int:
        partition_id = choose(topic)
        found = topic.partitions.get(partition_id)
        placement = found.placement if found is not None else None
        if placement is None:  # (standalone partitions in a cluster: none, but harmless)
            return partition_id
        raise _Chosen(partition_id, len(placement.replicas) > 1)

    return chosen


@command
async def send_messages(broker: Broker, session: Session, c) -> Relayed | None:
    dialect = rules(broker)
    where = TopicRef(c.stream_id.value, c.topic_id.value)
    choose = dialect.partitioners.chooser(c.partitioning)
    if broker.cluster is None:
        await broker.append(session, where, c.messages, record_format=RECORD_FORMAT,
                            choose=choose, admit=dialect.admit)
        return None
    try:  # choose first (the balanced counter moves once), then append or proxy there
        await broker.append(session, where, c.messages, record_format=RECORD_FORMAT,
                            choose=_choosing(choose), admit=dialect.admit)
        return None
    except _Chosen as chosen:
        partition_id = chosen.partition_id
        acks = ACKS_ALL if chosen.replicated else ACKS_LEADER
    try:
        await broker.append(session, where, c.messages, record_format=RECORD_FORMAT,
                            choose=lambda topic: partition_id, admit=dialect.admit, acks=acks)
    except errors.NotLeaderForPartition as error:
        leader = leader_elsewhere(session, error)
        if leader is None:
            raise
        return await forward(broker, session, leader, dataclasses.replace(
            c, partitioning=Partitioning.partition_id(partition_id)))
    return None


@command
async def poll_messages(broker: Broker, session: Session, c):
    return await _poll(broker, session, c, c, 0.0)


@command
async def poll_messages_waiting(broker: Broker, session: Session, c):
    return await _poll(broker, session, c, c.poll, min(c.max_wait_ms, MAX_WAIT_MS) / 1000)


async def _poll(broker: Broker, session: Session, c, p, max_wait: float):
    """POLL_MESSAGES ``p`` (the command ``c`` itself, or the poll inside it), waiting at most
    ``max_wait`` seconds for its messages when it finds none."""
    consumer, partition_id = reader(p.consumer, p.partition_id)
    strategy = p.strategy
    try:
        return views.polled_messages(await poll(
            broker, session, p.stream_id.value, p.topic_id.value, consumer, partition_id,
            strategy.kind, strategy.value, p.count, p.auto_commit, session.sends_files,
            max_wait))
    except errors.NotLeaderForPartition as error:
        leader = leader_elsewhere(session, error)
        if leader is None:
            raise
        chosen = dataclasses.replace(p, partition_id=error.args_values[0])
        return await forward(broker, session, leader,
                             chosen if c is p else dataclasses.replace(c, poll=chosen))


@command
async def flush_unsaved_buffer(broker: Broker, session: Session, c) -> None:
    await broker.flush(session, PartitionRef(c.stream_id.value, c.topic_id.value,
                                             c.partition_id))


@command
def poll_messages_columnar(broker: Broker, session: Session, c):
    max_bytes = min(c.max_bytes or DEFAULT_COLUMNAR_BYTES, MAX_COLUMNAR_BYTES)
    return views.columnar_messages(broker.read_columnar(
        session, PartitionRef(c.stream_id.value, c.topic_id.value, c.partition_id), c.offset,
        c.count, max_bytes))


@command
def poll_stored_batches(broker: Broker, session: Session, c):
    max_bytes = min(c.max_bytes or DEFAULT_COLUMNAR_BYTES, MAX_COLUMNAR_BYTES)
    return views.stored_batches(broker.read(
        session, PartitionRef(c.stream_id.value, c.topic_id.value, c.partition_id), c.offset,
        c.count, max_bytes))


@command
async def wait_for_messages(broker: Broker, session: Session, c):
    ends = await broker.wait(
        session, TopicRef(c.stream_id.value, c.topic_id.value), c.positions, c.min_bytes,
        min(c.max_wait_ms, MAX_WAIT_MS) / 1000)
    return [views.partition_end(end) for end in ends]


# -- consumer offsets and groups -------------------------------------------------------------


def _led_elsewhere(broker: Broker, session: Session, ref: PartitionRef) -> int | None:
    """In a cluster, the node that leads ``ref`` when it is not this one and the request may
    be proxied there (``forwarding``; a request that may not be is refused,
    NotLeaderForPartition); None: run it here (other errors included)."""
    if broker.cluster is None:
        return None
    try:
        broker.bounds(session, ref)  # a follower's refusal names the leader
    except errors.NotLeaderForPartition as error:
        leader = leader_elsewhere(session, error)
        if leader is None:  # not proxied (HTTP: redirected; a forwarded request): refused
            raise
        return leader
    except errors.RillError:
        return None  # (the request's own call answers it)
    return None


@command
async def get_consumer_offset(broker: Broker, session: Session, c):
    consumer, ref = position(broker, session, c.stream_id.value, c.topic_id.value, c.consumer,
                             c.partition_id)
    leader = _led_elsewhere(broker, session, ref)
    if leader is not None:
        return await forward(broker, session, leader,
                             dataclasses.replace(c, partition_id=ref.partition_id))
    return views.consumer_offset(broker.committed_position(session, consumer, ref))


@command
async def store_consumer_offset(broker: Broker, session: Session, c) -> Relayed | None:
    # Iggy stores the last offset consumed; the core keeps the next one to read
    consumer, ref = position(broker, session, c.stream_id.value, c.topic_id.value, c.consumer,
                             c.partition_id)
    leader = _led_elsewhere(broker, session, ref)
    if leader is not None:
        return await forward(broker, session, leader,
                             dataclasses.replace(c, partition_id=ref.partition_id))
    await broker.commit_offset(session, consumer, ref, c.offset + 1)
    return None


@command
def get_consumer_lag(broker: Broker, session: Session, c):
    return [views.consumer_lag(row) for row in iggy_lag(broker.consumer_lag(
        session, TopicRef(c.stream_id.value, c.topic_id.value)))]


def _members(broker: Broker) -> IggyGroupMembers:
    """The Iggy membership this server's groups were built with."""
    members = broker.groups.membership
    if not isinstance(members, IggyGroupMembers):
        raise errors.FeatureUnavailable(reason="consumer group members are not Iggy's here")
    return members


@command
def get_consumer_group(broker: Broker, session: Session, c):
    group = broker.groups.get_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.group_id.value)
    return views.group_details(group, _members(broker).listing(group))


@command
def get_consumer_groups(broker: Broker, session: Session, c):
    members = _members(broker)
    return [views.group_record(group, members.listing(group))
            for group in broker.groups.get_consumer_groups(
                session, c.stream_id.value, c.topic_id.value)]


@command
async def create_consumer_group(broker: Broker, session: Session, c):
    group = await broker.groups.create_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.name, c.group_id or 0)
    return views.group_details(group, [])


@command
async def delete_consumer_group(broker: Broker, session: Session, c) -> None:
    await broker.groups.delete_consumer_group(session, c.stream_id.value, c.topic_id.value,
                                              c.group_id.value)


@command
async def join_consumer_group(broker: Broker, session: Session, c) -> None:
    await _members(broker).join(session, broker.groups.get_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.group_id.value))


@command
async def leave_consumer_group(broker: Broker, session: Session, c) -> None:
    await _members(broker).leave(session, broker.groups.get_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.group_id.value))


# -- staged appends (rill extension) ---------------------------------------------------------


@command
async def stage_messages(broker: Broker, session: Session, c):
    return StageResult(*await broker.staging.stage_messages(
        session, c.stream_id.value, c.topic_id.value,
        rules(broker).partitioners.chooser(c.partitioning), c.producer_id, c.batch_id,
        c.run_id, c.task_id, c.attempt_id, c.positions, c.records, c.owner))


@command
async def commit_staged_messages(broker: Broker, session: Session, c):
    return CommitResult(*await broker.staging.commit_staged_messages(
        session, c.producer_id, c.batch_id, c.handles, c.owner))


@command
async def abort_staged_messages(broker: Broker, session: Session, c) -> None:
    await broker.staging.abort_staged_messages(
        session, c.producer_id, c.batch_id, c.run_id, c.one_handle, c.task_id, c.attempt_id,
        c.owner)


@command
def get_producer_state(broker: Broker, session: Session, c):
    return ProducerState(*broker.staging.get_producer_state(session, c.producer_id))
