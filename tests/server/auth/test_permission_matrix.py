"""The permission matrix of wire §6.2, against a real server over TCP.

One server for the module; one connection per permission shape: anonymous, a user without a
permissions object, a user with an all-false object, each of the 10 global flags alone, each
of the 6 stream flags for stream 1, each of the 4 topic flags for stream 1 / topic 1, and
root. Every command of the seed list runs once per shape; the expected allow/deny comes from
the table below, written out again from §6.2 (not imported from the server's permissioner).

Allowed: the command succeeds (a get-single command answers a record, not the empty OK).
Denied: 41 (40 when not logged in; PURGE_STREAM answers 41 even then), or the empty OK for
the get-single commands; and a denied command changes nothing. A command that the server
does not serve yet (status 5 to root) must answer 5 to everybody, and gets the full check the
moment it is served.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from server_process import RillProcess

from rill import errors
from rill.client import Client, PollingStrategy, UserStatus
from rill.protocol.iggy.codes import COMMANDS, IGGY_CODES
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from rill.protocol.primitives import SnapshotType

ENV = {"RILL_ROOT_PASSWORD_HASH_COST": "4", "RILL_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "none"}
GLOBAL_FLAGS = ("manage_servers", "read_servers", "manage_users", "read_users", "manage_streams",
                "read_streams", "manage_topics", "read_topics", "poll_messages", "send_messages")
STREAM_FLAGS = ("manage_stream", "read_stream", "manage_topics", "read_topics", "poll_messages",
                "send_messages")
TOPIC_FLAGS = ("manage_topic", "read_topic", "poll_messages", "send_messages")

# -- §6.2, written out again ----------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """The flags that grant a command, per level (stream 1, topic 1 of stream 1)."""

    global_flags: tuple[str, ...] = ()
    stream_flags: tuple[str, ...] = ()
    topic_flags: tuple[str, ...] = ()


ANYONE = Grant()  # marker: no login needed
LOGGED_IN = Grant()  # marker: any logged-in user
SERVER_INFO = Grant(("manage_servers", "read_servers"))
READ_USERS = Grant(("manage_users", "read_users"))
MANAGE_USERS = Grant(("manage_users",))
LIST_STREAMS = Grant(("manage_streams", "read_streams"))
READ_STREAM = Grant(("manage_streams", "read_streams"), ("manage_stream", "read_stream"))
CREATE_STREAM = Grant(("manage_streams",))
MANAGE_STREAM = Grant(("manage_streams",), ("manage_stream",))
TOPIC_READERS = ("read_streams", "manage_streams", "manage_topics", "read_topics")
READ_TOPIC = Grant(TOPIC_READERS, ("manage_topics", "read_topics"), ("manage_topic", "read_topic"))
# GET_TOPICS names no topic, so topic-level rights (keyed by topic id, §11) cannot grant it
LIST_TOPICS = Grant(TOPIC_READERS, ("manage_topics", "read_topics"))
CREATE_TOPIC = Grant(("manage_streams", "manage_topics"), ("manage_topics",))
MANAGE_TOPIC = Grant(("manage_streams", "manage_topics"), ("manage_topics",), ("manage_topic",))
POLL = Grant(("poll_messages",), ("poll_messages", "read_stream", "manage_topics", "read_topics"),
             ("poll_messages", "read_topic", "manage_topic"))
SEND = Grant(("send_messages",), ("send_messages", "manage_stream", "manage_topics"),
             ("send_messages", "manage_topic"))

EXPECTED: dict[str, Grant] = {
    "ping": ANYONE, "login_user": ANYONE, "logout_user": ANYONE,
    "login_with_personal_access_token": ANYONE,
    "get_stats": LOGGED_IN, "get_personal_access_tokens": LOGGED_IN,
    "get_snapshot": SERVER_INFO,
    "create_personal_access_token": LOGGED_IN, "delete_personal_access_token": LOGGED_IN,
    "get_me": SERVER_INFO, "get_client": SERVER_INFO, "get_clients": SERVER_INFO,
    "get_user": READ_USERS, "get_users": READ_USERS,  # get_user of someone else
    "create_user": MANAGE_USERS, "delete_user": MANAGE_USERS, "update_user": MANAGE_USERS,
    "update_permissions": MANAGE_USERS, "change_password": MANAGE_USERS,  # someone else's
    "get_streams": LIST_STREAMS, "get_stream": READ_STREAM, "create_stream": CREATE_STREAM,
    "update_stream": MANAGE_STREAM, "delete_stream": MANAGE_STREAM, "purge_stream": MANAGE_STREAM,
    "get_topic": READ_TOPIC, "get_topics": LIST_TOPICS, "create_topic": CREATE_TOPIC,
    "update_topic": MANAGE_TOPIC, "delete_topic": MANAGE_TOPIC, "purge_topic": MANAGE_TOPIC,
    "create_partitions": MANAGE_TOPIC, "delete_partitions": MANAGE_TOPIC,
    "get_consumer_group": READ_TOPIC, "get_consumer_groups": READ_TOPIC,
    "create_consumer_group": READ_TOPIC, "delete_consumer_group": READ_TOPIC,
    "join_consumer_group": READ_TOPIC, "leave_consumer_group": READ_TOPIC,
    "poll_messages": POLL, "get_consumer_offset": POLL, "store_consumer_offset": POLL,
    "send_messages": SEND, "flush_unsaved_buffer": SEND,
}


@dataclass(frozen=True)
class Shape:
    name: str
    global_flags: frozenset[str] = frozenset()
    stream_flags: frozenset[str] = frozenset()
    topic_flags: frozenset[str] = frozenset()
    logged_in: bool = True
    no_permissions_object: bool = False

    @property
    def username(self) -> str:
        return "iggy" if self.name == "root" else f"u.{self.name}"

    @property
    def password(self) -> str:
        return "iggy" if self.name == "root" else "matrix-pw"

    def permissions(self) -> Permissions | None:
        if self.no_permissions_object:
            return None
        streams = None
        if self.stream_flags or self.topic_flags:
            topics = {1: TopicPermissions(**dict.fromkeys(self.topic_flags, True))}
            streams = {1: StreamPermissions(**dict.fromkeys(self.stream_flags, True),
                                            topics=topics if self.topic_flags else None)}
        return Permissions(GlobalPermissions(**dict.fromkeys(self.global_flags, True)), streams)

    def allowed(self, command: str) -> bool:
        grant = EXPECTED[command]
        if grant is ANYONE:
            return True
        if not self.logged_in:
            return False
        if grant is LOGGED_IN:
            return True
        return bool(self.global_flags & set(grant.global_flags)
                    or self.stream_flags & set(grant.stream_flags)
                    or self.topic_flags & set(grant.topic_flags))


SHAPES = (
    [Shape("anonymous", logged_in=False), Shape("none", no_permissions_object=True),
     Shape("empty"), Shape("root", frozenset(GLOBAL_FLAGS))]
    + [Shape(f"global.{flag}", global_flags=frozenset({flag})) for flag in GLOBAL_FLAGS]
    + [Shape(f"stream.{flag}", stream_flags=frozenset({flag})) for flag in STREAM_FLAGS]
    + [Shape(f"topic.{flag}", topic_flags=frozenset({flag})) for flag in TOPIC_FLAGS]
)
SINGLE = frozenset({"get_stream", "get_topic", "get_user", "get_client", "get_consumer_group",
                    "get_consumer_offset"})

# -- the world: one server, one connection per shape, a keeper that restores the fixture ----


@dataclass
class World:
    server: RillProcess
    keeper: Client  # root; restores stream 1 / topic 1 / group 1 and reads fingerprints
    clients: dict[str, Client]
    target_id: int  # a user the user-management commands act on
    keeper_client_id: int = 0
    groups_served: bool = True
    counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def unique(self, prefix: str) -> str:
        return f"{prefix}.{next(self.counter)}"


def served(call: Callable[[], Any]) -> bool:
    return outcome(call) != ("error", errors.FeatureUnavailable.code)


def restore(world: World) -> None:
    keeper = world.keeper
    if keeper.get_stream(1) is None:
        keeper.create_stream("matrix", stream_id=1)
    if keeper.get_topic(1, 1) is None:
        keeper.create_topic(1, "orders", partitions_count=2, topic_id=1)
    topic = keeper.get_topic(1, 1)
    if len(topic.partitions) < 2:
        keeper.create_partitions(1, 1, 2 - len(topic.partitions))
    if topic.partitions[0].messages_count == 0:
        keeper.send_messages(1, 1, [b"seed"], partitioning=1)
    # nothing stored reads as stored_offset 0 (as Iggy 0.4.95), so store 0 then: the same value
    if keeper.get_consumer_offset(1, 1, consumer=1, partition_id=1).stored_offset == 0:
        keeper.store_consumer_offset(1, 1, 0, consumer=1, partition_id=1)
    if world.groups_served and keeper.get_consumer_group(1, 1, 1) is None:
        keeper.create_consumer_group(1, 1, "group", group_id=1)


def fingerprint(world: World) -> tuple[Any, ...]:
    """What any denied command must leave exactly as it was."""
    keeper = world.keeper
    topic = keeper.get_topic(1, 1)
    return (
        [(s.id, s.name, s.topics_count, s.messages_count) for s in keeper.get_streams()],
        [(t.id, t.name, t.partitions_count) for t in keeper.get_topics(1)],
        topic and [(p.id, p.messages_count) for p in topic.partitions],
        [(u.id, u.username, u.status) for u in keeper.get_users()],
        keeper.get_user(world.target_id).permissions,
        keeper.get_consumer_offset(1, 1, consumer=1, partition_id=1),
        world.groups_served and [(g.id, g.name) for g in keeper.get_consumer_groups(1, 1)],
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    server = RillProcess(tmp_path_factory.mktemp("matrix") / "data", env=ENV).start()
    opened: list[Client] = []

    def connect() -> Client:
        client = Client(server.address, reconnect=False)
        opened.append(client)
        client.connect()
        return client

    try:
        keeper = connect()
        keeper.login_user("iggy", "iggy")
        target = keeper.create_user("target", "target-pw")
        built = World(server, keeper, {}, target.id)
        for shape in SHAPES:
            if shape.logged_in and shape.name != "root":
                keeper.create_user(shape.username, shape.password, permissions=shape.permissions())
            built.clients[shape.name] = client = connect()
            relogin(client, shape)
        built.groups_served = False
        restore(built)
        built.groups_served = served(lambda: keeper.get_consumer_groups(1, 1))
        restore(built)
        if served(keeper.get_me):
            built.keeper_client_id = keeper.get_me().client.client_id
        yield built
    finally:
        for client in opened:
            client.close()
        server.kill()


# -- one case per command -------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    command: str
    call: Callable[[Client, World, Shape, Any], Any]
    prepare: Callable[[Client, World, Shape], Any] = lambda client, world, shape: None
    mutates: bool = False  # a denied call must leave the fingerprint unchanged
    destructive: bool = False  # the keeper restores the fixture after every call
    anonymous_error: int | None = None  # an ANYONE command's answer to bad credentials


def relogin(client: Client, shape: Shape) -> Any:
    return client.login_user(shape.username, shape.password) if shape.logged_in else None


def own_token(client: Client, world: World, shape: Shape) -> tuple[str, str] | None:
    """(name, raw token) of a fresh token of the shape's user; None when not logged in."""
    name = world.unique("own")
    return (name, client.create_personal_access_token(name)) if shape.logged_in else None


def logout(client: Client, world: World, shape: Shape, _: Any) -> None:
    try:
        return client.logout_user()
    finally:
        relogin(client, shape)


def join_then_leave(client: Client, world: World, shape: Shape, _: Any) -> None:
    client.join_consumer_group(1, 1, 1)
    client.leave_consumer_group(1, 1, 1)


def join_first(client: Client, world: World, shape: Shape) -> None:
    outcome(lambda: client.join_consumer_group(1, 1, 1))  # denied users' leave is denied too


def C(command: str, call: Callable[..., Any], **options: Any) -> Case:  # noqa: N802
    return Case(command, lambda client, world, shape, prepared: call(client, world, prepared),
                **options)


CASES = [
    C("ping", lambda c, w, p: c.ping()),
    C("get_stats", lambda c, w, p: c.get_stats()),
    C("get_snapshot", lambda c, w, p: c.get_snapshot(types=[SnapshotType.TEST])),
    C("get_me", lambda c, w, p: c.get_me()),
    C("get_client", lambda c, w, p: c.get_client(w.keeper_client_id)),
    C("get_clients", lambda c, w, p: c.get_clients()),
    C("get_user", lambda c, w, p: c.get_user(1)),
    C("get_users", lambda c, w, p: c.get_users()),
    C("create_user", lambda c, w, p: c.create_user(w.unique("made"), "made-pw"), mutates=True),
    C("update_user", lambda c, w, p: c.update_user(w.target_id, status=UserStatus.ACTIVE),
      mutates=True),
    C("update_permissions", lambda c, w, p: c.update_permissions(w.target_id, None),
      mutates=True),
    C("change_password", lambda c, w, p: c.change_password(w.target_id, "target-pw", "target-pw"),
      mutates=True),
    C("delete_user", lambda c, w, p: c.delete_user(p), mutates=True,
      prepare=lambda c, w, s: w.keeper.create_user(w.unique("victim"), "victim-pw").id),
    C("get_personal_access_tokens", lambda c, w, p: c.get_personal_access_tokens()),
    C("create_personal_access_token", lambda c, w, p: c.create_personal_access_token(
        w.unique("made")), mutates=True),
    C("delete_personal_access_token", lambda c, w, p: c.delete_personal_access_token(
        p[0] if p else "unknown"), prepare=own_token, mutates=True),
    C("login_with_personal_access_token", lambda c, w, p: c.login_with_personal_access_token(
        p[1] if p else "A" * 68), prepare=own_token, anonymous_error=errors.ResourceNotFound.code),
    Case("login_user", lambda c, w, s, p: relogin(c, s) if s.logged_in
         else c.login_user("nobody", "wrong"), anonymous_error=errors.InvalidCredentials.code),
    Case("logout_user", logout),
    C("get_streams", lambda c, w, p: c.get_streams()),
    C("get_stream", lambda c, w, p: c.get_stream(1)),
    C("create_stream", lambda c, w, p: c.create_stream(w.unique("made")), mutates=True),
    C("update_stream", lambda c, w, p: c.update_stream(1, "matrix"), mutates=True),
    C("get_topics", lambda c, w, p: c.get_topics(1)),
    C("get_topic", lambda c, w, p: c.get_topic(1, 1)),
    C("create_topic", lambda c, w, p: c.create_topic(1, w.unique("made")), mutates=True),
    C("update_topic", lambda c, w, p: c.update_topic(1, 1, "orders"), mutates=True),
    C("create_partitions", lambda c, w, p: c.create_partitions(1, 1, 1), mutates=True),
    C("delete_partitions", lambda c, w, p: c.delete_partitions(1, 1, 1), mutates=True,
      destructive=True),
    C("send_messages", lambda c, w, p: c.send_messages(1, 1, [b"matrix"], partitioning=1),
      mutates=True),
    C("flush_unsaved_buffer", lambda c, w, p: c.flush_unsaved_buffer(1, 1, 1)),
    C("poll_messages", lambda c, w, p: c.poll_messages(
        1, 1, consumer=1, partition_id=1, strategy=PollingStrategy.first(), count=1)),
    C("store_consumer_offset", lambda c, w, p: c.store_consumer_offset(
        1, 1, 0, consumer=1, partition_id=1), mutates=True),
    C("get_consumer_offset", lambda c, w, p: c.get_consumer_offset(
        1, 1, consumer=1, partition_id=1)),
    C("get_consumer_groups", lambda c, w, p: c.get_consumer_groups(1, 1)),
    C("get_consumer_group", lambda c, w, p: c.get_consumer_group(1, 1, 1)),
    C("create_consumer_group", lambda c, w, p: c.create_consumer_group(1, 1, w.unique("made")),
      mutates=True),
    Case("join_consumer_group", join_then_leave, mutates=True),
    C("leave_consumer_group", lambda c, w, p: c.leave_consumer_group(1, 1, 1),
      prepare=join_first, mutates=True),
    C("delete_consumer_group", lambda c, w, p: c.delete_consumer_group(1, 1, 1), mutates=True,
      destructive=True),
    C("purge_topic", lambda c, w, p: c.purge_topic(1, 1), mutates=True, destructive=True),
    C("delete_topic", lambda c, w, p: c.delete_topic(1, 1), mutates=True, destructive=True),
    C("purge_stream", lambda c, w, p: c.purge_stream(1), mutates=True, destructive=True),
    C("delete_stream", lambda c, w, p: c.delete_stream(1), mutates=True, destructive=True),
]


def test_the_matrix_covers_every_seed_command():
    seed = {COMMANDS[code].NAME for code in IGGY_CODES}
    assert [case.command for case in CASES] == list(dict.fromkeys(c.command for c in CASES))
    assert {case.command for case in CASES} == seed == set(EXPECTED)
    assert len(SHAPES) == 4 + 10 + 6 + 4


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except errors.RillError as error:
        return "error", error.code


def judge(case: Case, shape: Shape, result: tuple[str, Any], is_served: bool) -> str | None:
    """None when ``result`` is what §6.2 says; else a description of the mismatch."""
    kind, value = result
    single = case.command in SINGLE
    if not is_served:
        expected_unserved = ("ok", None) if single else ("error", errors.FeatureUnavailable.code)
        return None if result == expected_unserved else "not served, yet did not answer 5"
    if shape.allowed(case.command):
        if not shape.logged_in and case.anonymous_error is not None:
            return None if result == ("error", case.anonymous_error) else "allowed, bad answer"
        if kind == "error":
            return "allowed, but failed"
        return "allowed, but the empty OK" if single and value is None else None
    if single:
        return None if result == ("ok", None) else "denied, expected the empty OK"
    status = 40 if not shape.logged_in and case.command != "purge_stream" else 41
    return None if result == ("error", status) else f"denied, expected {status}"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.command)
def test_permission_matrix(world, case):
    restore(world)
    results: dict[str, tuple[str, Any]] = {}
    problems: list[str] = []
    for shape in SHAPES:
        client = world.clients[shape.name]
        prepared = case.prepare(client, world, shape)
        check_unchanged = case.mutates and not shape.allowed(case.command)
        before = fingerprint(world) if check_unchanged else None
        results[shape.name] = outcome(lambda: case.call(client, world, shape, prepared))
        if check_unchanged and fingerprint(world) != before:
            problems.append(f"{shape.name}: denied, yet something changed")
        if case.destructive:
            restore(world)
    if case.command == "get_client":
        is_served = served(world.keeper.get_clients)
    elif case.command == "get_consumer_group":
        is_served = world.groups_served
    else:
        is_served = results["root"] != ("error", errors.FeatureUnavailable.code)
    for shape in SHAPES:
        problem = judge(case, shape, results[shape.name], is_served)
        if problem:
            problems.append(f"{shape.name}: {problem}: {results[shape.name]!r:.100}")
    assert not problems, f"{case.command}:\n" + "\n".join(problems)
