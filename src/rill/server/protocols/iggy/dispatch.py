"""The Iggy commands as calls of the neutral core: one function per command, by its NAME.

Owns: ``execute(core, session, command)``, which every Iggy transport (TCP, QUIC, HTTP) runs a
decoded command through, and the Iggy rules that sit between a command and the core: the login
gate (only PING, the logins and LOGOUT without a session; an unauthenticated PURGE_STREAM is 41,
not 40, wire §3.6), identifiers passed on as ids or names, message expiries and sizes with
Iggy's sentinels, and the answers built by ``views``. No permission check, journal write or
state change lives here: the core's services do those.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from typing import Any, Callable

from rill import errors
from rill.protocol.commands.base import Command
from rill.protocol.commands.columnar import DEFAULT_COLUMNAR_BYTES, MAX_COLUMNAR_BYTES
from rill.protocol.commands.long_poll import MAX_WAIT_MS
from rill.protocol.commands.messages import SendMessages
from rill.protocol.commands.topics import record_format_short, record_format_stored
from rill.protocol.responses.messages import PolledMessages
from rill.protocol.responses.topics import TopicRecordFormat
from rill.protocol.responses.transactions import CommitResult, ProducerState, StageResult
from rill.protocol.responses.users import IdentityInfo, RawPersonalAccessToken
from rill.server.core.core import Core
from rill.server.core.model import Session
from rill.server.core.types import TopicSpec
from rill.server.protocols.iggy import views
from rill.server.protocols.iggy.consumers import iggy_lag, reader
from rill.server.protocols.iggy.groups import IggyGroupMembers

Call = Callable[[Core, Session, Any], Any]  # a coroutine function where the core call awaits

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
        return await call(core, session, command)
    return call(core, session, command)


# -- system, clients, snapshot ---------------------------------------------------------------


@command
def ping(core: Core, session: Session, c) -> None:
    return None  # the handler already counted the request as the session's heartbeat


@command
def get_stats(core: Core, session: Session, c):
    return views.stats(core.system.get_stats(session))


@command
async def get_snapshot(core: Core, session: Session, c) -> bytes:
    return await core.snapshot.get_snapshot(session, c.compression, c.types)


@command
def get_me(core: Core, session: Session, c):
    return views.client_details(core.clients.get_me(session))


@command
def get_client(core: Core, session: Session, c):
    return views.client_details(core.clients.get_client(session, c.client_id))


@command
def get_clients(core: Core, session: Session, c):
    return [views.client_info(client) for client in core.clients.get_clients(session)]


# -- users and tokens ------------------------------------------------------------------------


@command
def get_user(core: Core, session: Session, c):
    return views.user_details(core.users.get_user(session, c.user_id.value))


@command
def get_users(core: Core, session: Session, c):
    return [views.user_info(user) for user in core.users.get_users(session)]


@command
async def create_user(core: Core, session: Session, c):
    return views.user_details(
        await core.users.create_user(session, c.username, c.password, c.status, c.permissions))


@command
def delete_user(core: Core, session: Session, c) -> None:
    core.users.delete_user(session, c.user_id.value)


@command
def unlock_user(core: Core, session: Session, c) -> None:
    core.users.unlock_user(session, c.user_id.value)


@command
def update_user(core: Core, session: Session, c) -> None:
    core.users.update_user(session, c.user_id.value, c.username, c.status)


@command
def update_permissions(core: Core, session: Session, c) -> None:
    core.users.update_permissions(session, c.user_id.value, c.permissions)


@command
async def change_password(core: Core, session: Session, c) -> None:
    await core.users.change_password(session, c.user_id.value, c.current_password,
                                     c.new_password)


@command
async def login_user(core: Core, session: Session, c):
    return IdentityInfo(await core.users.login_user(session, c.username, c.password))


@command
def logout_user(core: Core, session: Session, c) -> None:
    core.users.logout_user(session)


@command
def get_personal_access_tokens(core: Core, session: Session, c):
    return [views.token_info(token) for token in core.tokens.get_personal_access_tokens(session)]


@command
def create_personal_access_token(core: Core, session: Session, c):
    return RawPersonalAccessToken(
        core.tokens.create_personal_access_token(session, c.name, c.expiry))


@command
def delete_personal_access_token(core: Core, session: Session, c) -> None:
    core.tokens.delete_personal_access_token(session, c.name)


@command
def login_with_personal_access_token(core: Core, session: Session, c):
    return IdentityInfo(core.tokens.login_with_personal_access_token(session, c.token))


# -- streams, topics, partitions -------------------------------------------------------------


@command
def get_stream(core: Core, session: Session, c):
    return views.stream_details(core.streams.get_stream(session, c.stream_id.value))


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
async def get_streams(core: Core, session: Session, c):
    return await in_turns(core.streams.get_streams(session), views.stream_record)


@command
async def create_stream(core: Core, session: Session, c):
    return views.stream_details(await core.streams.create_stream(session, c.name, c.stream_id or 0))


@command
def update_stream(core: Core, session: Session, c) -> None:
    core.streams.update_stream(session, c.stream_id.value, c.name)


@command
async def delete_stream(core: Core, session: Session, c) -> None:
    await core.streams.delete_stream(session, c.stream_id.value)


@command
def purge_stream(core: Core, session: Session, c) -> None:
    core.streams.purge_stream(session, c.stream_id.value)


@command
def get_topic(core: Core, session: Session, c):
    return views.topic_details(core.topics.get_topic(session, c.stream_id.value, c.topic_id.value))


@command
async def get_topics(core: Core, session: Session, c):
    return await in_turns(core.topics.get_topics(session, c.stream_id.value), views.topic_record)


def _topic_spec(c, partitions_count: int = 0, topic_id: int = 0) -> TopicSpec:
    return TopicSpec(c.name, partitions_count, topic_id, int(c.compression_algorithm),
                     c.message_expiry, c.max_topic_size, c.replication_factor or 0)


@command
async def create_topic(core: Core, session: Session, c):
    spec = _topic_spec(c, c.partitions_count, c.topic_id or 0)
    return views.topic_details(await core.topics.create_topic(session, c.stream_id.value, spec))


@command
async def create_topic_with_format(core: Core, session: Session, c):
    spec = dataclasses.replace(_topic_spec(c, c.partitions_count, c.topic_id or 0),
                               record_format=record_format_stored(c.record_format))
    return views.topic_details(await core.topics.create_topic(session, c.stream_id.value, spec))


@command
def get_topic_record_formats(core: Core, session: Session, c):
    return [TopicRecordFormat(topic.id, record_format_short(topic.record_format))
            for topic in core.topics.get_topics(session, c.stream_id.value)]


@command
def update_topic(core: Core, session: Session, c) -> None:
    core.topics.update_topic(session, c.stream_id.value, c.topic_id.value, _topic_spec(c))


@command
async def delete_topic(core: Core, session: Session, c) -> None:
    await core.topics.delete_topic(session, c.stream_id.value, c.topic_id.value)


@command
def purge_topic(core: Core, session: Session, c) -> None:
    core.topics.purge_topic(session, c.stream_id.value, c.topic_id.value)


@command
async def create_partitions(core: Core, session: Session, c) -> None:
    await core.partitions.create_partitions(session, c.stream_id.value, c.topic_id.value,
                                            c.partitions_count)


@command
async def delete_partitions(core: Core, session: Session, c) -> None:
    await core.partitions.delete_partitions(session, c.stream_id.value, c.topic_id.value,
                                            c.partitions_count)


# -- messages --------------------------------------------------------------------------------


@command
async def send_messages(core: Core, session: Session, c) -> None:
    await core.messages.send_messages(session, c.stream_id.value, c.topic_id.value,
                                      c.partitioning, c.messages)


# what an Iggy reader takes (storage.records); a Kafka-written topic is converted into it
RECORD_FORMAT = "iggy-v1"


@command
def poll_messages(core: Core, session: Session, c):
    consumer, partition_id = reader(c.consumer, c.partition_id)
    strategy = c.strategy  # (its kinds are the core's ReadFrom numbers)
    return views.polled_messages(core.messages.poll_messages(
        session, c.stream_id.value, c.topic_id.value, consumer, partition_id, strategy.kind,
        strategy.value, c.count, c.auto_commit, session.sends_files, RECORD_FORMAT))


@command
async def flush_unsaved_buffer(core: Core, session: Session, c) -> None:
    await core.messages.flush_unsaved_buffer(session, c.stream_id.value, c.topic_id.value,
                                             c.partition_id)


@command
def poll_messages_columnar(core: Core, session: Session, c):
    max_bytes = min(c.max_bytes or DEFAULT_COLUMNAR_BYTES, MAX_COLUMNAR_BYTES)
    return views.columnar_messages(core.columnar.poll_messages_columnar(
        session, c.stream_id.value, c.topic_id.value, c.partition_id, c.offset, c.count,
        max_bytes))


@command
async def wait_for_messages(core: Core, session: Session, c):
    ends = await core.long_poll.wait_for_messages(
        session, c.stream_id.value, c.topic_id.value, c.positions, c.min_bytes,
        min(c.max_wait_ms, MAX_WAIT_MS) / 1000)
    return [views.partition_end(end) for end in ends]


# -- consumer offsets and groups -------------------------------------------------------------


@command
def get_consumer_offset(core: Core, session: Session, c):
    return views.consumer_offset(core.consumer_offsets.get_consumer_offset(
        session, c.stream_id.value, c.topic_id.value, *reader(c.consumer, c.partition_id)))


@command
def store_consumer_offset(core: Core, session: Session, c) -> None:
    # Iggy stores the last offset consumed; the core keeps the next one to read
    core.consumer_offsets.store_consumer_offset(
        session, c.stream_id.value, c.topic_id.value, *reader(c.consumer, c.partition_id),
        c.offset + 1)


@command
def get_consumer_lag(core: Core, session: Session, c):
    return [views.consumer_lag(row) for row in iggy_lag(core.consumer_offsets.get_consumer_lag(
        session, c.stream_id.value, c.topic_id.value))]


def _members(core: Core) -> IggyGroupMembers:
    """The Iggy membership this server's groups were built with."""
    members = core.consumer_groups.membership
    if not isinstance(members, IggyGroupMembers):
        raise errors.FeatureUnavailable(reason="consumer group members are not Iggy's here")
    return members


@command
def get_consumer_group(core: Core, session: Session, c):
    group = core.consumer_groups.get_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.group_id.value)
    return views.group_details(group, _members(core).members(group))


@command
def get_consumer_groups(core: Core, session: Session, c):
    members = _members(core)
    return [views.group_record(group, members.members(group))
            for group in core.consumer_groups.get_consumer_groups(
                session, c.stream_id.value, c.topic_id.value)]


@command
def create_consumer_group(core: Core, session: Session, c):
    group = core.consumer_groups.create_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.name, c.group_id or 0)
    return views.group_details(group, {})


@command
def delete_consumer_group(core: Core, session: Session, c) -> None:
    core.consumer_groups.delete_consumer_group(session, c.stream_id.value, c.topic_id.value,
                                               c.group_id.value)


@command
def join_consumer_group(core: Core, session: Session, c) -> None:
    _members(core).join(session, core.consumer_groups.get_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.group_id.value))


@command
def leave_consumer_group(core: Core, session: Session, c) -> None:
    _members(core).leave(session, core.consumer_groups.get_consumer_group(
        session, c.stream_id.value, c.topic_id.value, c.group_id.value))


# -- staged appends (rill extension) ---------------------------------------------------------


@command
async def stage_messages(core: Core, session: Session, c):
    return StageResult(*await core.transactions.stage_messages(
        session, c.stream_id.value, c.topic_id.value, c.partitioning, c.producer_id,
        c.batch_id, c.run_id, c.task_id, c.attempt_id, c.positions, c.records, c.owner))


@command
async def commit_staged_messages(core: Core, session: Session, c):
    return CommitResult(*await core.transactions.commit_staged_messages(
        session, c.producer_id, c.batch_id, c.handles, c.owner))


@command
async def abort_staged_messages(core: Core, session: Session, c) -> None:
    await core.transactions.abort_staged_messages(
        session, c.producer_id, c.batch_id, c.run_id, c.one_handle, c.task_id, c.attempt_id,
        c.owner)


@command
def get_producer_state(core: Core, session: Session, c):
    return ProducerState(*core.transactions.get_producer_state(session, c.producer_id))
