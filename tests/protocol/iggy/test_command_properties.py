"""Hypothesis round-trips of the commands with the richest layouts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rill.protocol.iggy import codes
from rill.protocol.iggy.commands.messages import PollMessages
from rill.protocol.iggy.commands.topics import CreateTopic, UpdateTopic
from rill.protocol.iggy.commands.users import CreateUser, LoginUser, UpdatePermissions, UpdateUser
from rill.protocol.primitives import CompressionAlgorithm, UserStatus

from .strategies import (
    U32,
    U64,
    consumers,
    identifiers,
    names,
    permissions,
    polling_strategies,
    short_strings,
)

u8 = st.integers(0, 255)
compressions = st.sampled_from(CompressionAlgorithm)
statuses = st.sampled_from(UserStatus)


def _check(command) -> None:
    payload = command.encode()
    assert type(command).decode(payload) == command
    assert codes.decode_command(command.CODE, payload) == command


@given(identifiers, U32, U32, compressions, U64, U64, u8, names)
def test_create_topic(stream_id, topic_id, count, compression, expiry, size, replication, name) -> None:
    _check(CreateTopic(stream_id, topic_id, count, compression, expiry, size, replication, name))


@given(identifiers, identifiers, compressions, U64, U64, u8, names)
def test_update_topic(stream_id, topic_id, compression, expiry, size, replication, name) -> None:
    _check(UpdateTopic(stream_id, topic_id, compression, expiry, size, replication, name))


@given(short_strings, short_strings, statuses, st.one_of(st.none(), permissions))
def test_create_user(username, password, status, perms) -> None:
    _check(CreateUser(username, password, status, perms))


@given(identifiers, st.one_of(st.none(), short_strings), st.one_of(st.none(), statuses))
def test_update_user(user_id, username, status) -> None:
    _check(UpdateUser(user_id, username, status))


@given(identifiers, st.one_of(st.none(), permissions))
def test_update_permissions(user_id, perms) -> None:
    _check(UpdatePermissions(user_id, perms))


@given(short_strings, short_strings, st.one_of(st.none(), st.text(max_size=20)), st.one_of(st.none(), st.text(max_size=20)))
def test_login_user(username, password, version, context) -> None:
    _check(LoginUser(username, password, version, context))


@given(consumers, identifiers, identifiers, U32, polling_strategies, U32, st.booleans())
def test_poll_messages(consumer, stream_id, topic_id, partition_id, strategy, count, auto_commit) -> None:
    _check(PollMessages(consumer, stream_id, topic_id, partition_id, strategy, count, auto_commit))
