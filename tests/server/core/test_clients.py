"""Connected clients (GET_ME, GET_CLIENT, GET_CLIENTS: wire §3.1, §4.7) and the heartbeat
verifier (wire §1.4), over real sockets."""

from __future__ import annotations

import socket
import time

import pytest
import xxhash

from rill import errors
from rill.client import Client, Permissions
from rill.protocol.permissions import GlobalPermissions
from rill.server.core.clients import stale_sessions
from rill.server.protocols.iggy.views import client_details, client_info
from rill.server.core.model import Session

HEARTBEAT = {"RILL_HEARTBEAT_ENABLED": "true", "RILL_HEARTBEAT_INTERVAL": "300 ms"}


def open_client(server, login=True, **options):
    client = Client(server.address, **options)
    client.connect()
    client.ping()  # answered: the server has registered this connection
    if login:
        client.login_user("iggy", "iggy")
    return client


@pytest.fixture
def three(rill_server):
    clients = [open_client(rill_server, login=index != 2) for index in range(3)]
    yield clients
    for client in clients:
        client.close()


def wait_until(predicate, timeout=20.0, interval=0.05, message="condition not reached"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, message
        time.sleep(interval)


# -- records -----------------------------------------------------------------------------------


def test_session_records_carry_the_group_triples():
    session = Session(7, "10.0.0.1:5000", "tcp", user_id=3)
    session.consumer_groups.extend([(1, 2, 3), (4, 5, 6)])
    info = client_info(session)
    assert (info.client_id, info.user_id, info.transport, info.address) == (7, 3, 1, "10.0.0.1:5000")
    assert info.consumer_groups_count == 2
    details = client_details(session)
    assert [(g.stream_id, g.topic_id, g.group_id) for g in details.consumer_groups] == [
        (1, 2, 3), (4, 5, 6)
    ]


def test_stale_sessions_are_those_silent_for_more_than_1_2_intervals():
    fresh = Session(1, "a:1", "tcp", last_heartbeat=1_000_000)
    edge = Session(2, "a:2", "tcp", last_heartbeat=1_000_000 - 1_200_000)
    stale = Session(3, "a:3", "tcp", last_heartbeat=1_000_000 - 1_200_001)
    sessions = {s.client_id: s for s in (fresh, edge, stale)}
    assert stale_sessions(sessions, 1_000_000, 1.0) == [stale]


# -- GET_ME / GET_CLIENT / GET_CLIENTS ---------------------------------------------------------


def test_get_clients_lists_every_connection_sorted(three):
    first, second, anonymous = three
    listed = first.get_clients()
    assert [c.client_id for c in listed] == sorted(c.client_id for c in listed)
    assert len(listed) == 3
    for info in listed:
        host, _, port = info.address.rpartition(":")
        assert host == "127.0.0.1" and port.isdigit()
        assert info.transport == 1
        assert info.client_id == xxhash.xxh32_intdigest(info.address.encode())  # wire §1.4
        assert info.consumer_groups_count == 0
    assert sorted(info.user_id for info in listed) == [0, 1, 1]  # the third never logged in
    assert len({info.address for info in listed}) == 3


def test_get_me_and_get_client_describe_the_same_session(three):
    first, second, _ = three
    me = first.get_me()
    other = second.get_me()
    assert me.client_id != other.client_id and me.user_id == 1
    assert first.get_client(other.client_id) == other
    assert second.get_client(me.client_id) == me
    assert {me.address, other.address} <= {c.address for c in first.get_clients()}


def test_get_client_zero_or_unknown_is_an_empty_ok_and_the_link_stays(three):
    first = three[0]
    known = {c.client_id for c in first.get_clients()}
    unknown = next(candidate for candidate in range(1, 100) if candidate not in known)
    assert first.get_client(0) is None  # 101 invalid_client_id -> empty OK
    assert first.get_client(unknown) is None  # 100 client_not_found -> empty OK, not dropped
    assert first.is_connected
    assert first.get_me().user_id == 1


def test_clients_listing_follows_connections(rill_server, three):
    first = three[0]
    extra = open_client(rill_server, login=False)
    wait_until(lambda: len(first.get_clients()) == 4)
    extra.close()
    wait_until(lambda: len(first.get_clients()) == 3)


def test_get_me_lists_joined_consumer_groups(rill_server, three):
    first = three[0]
    first.create_stream("s", stream_id=3)
    first.create_topic(3, "t", partitions_count=2, topic_id=4)
    first.create_consumer_group(3, 4, "g", group_id=5)
    first.join_consumer_group(3, 4, 5)
    me = first.get_me()
    assert me.client.consumer_groups_count == 1
    assert [(g.stream_id, g.topic_id, g.group_id) for g in me.consumer_groups] == [(3, 4, 5)]
    listed = {c.client_id: c for c in three[1].get_clients()}
    assert listed[me.client_id].consumer_groups_count == 1
    assert three[1].get_client(me.client_id) == me


def test_client_commands_need_a_login(three):
    anonymous = three[2]
    with pytest.raises(errors.Unauthenticated):
        anonymous.get_me()
    with pytest.raises(errors.Unauthenticated):
        anonymous.get_clients()
    assert anonymous.get_client(three[0].get_me().client_id) is None


def test_client_commands_need_read_servers_or_manage_servers(rill_server, three):
    root = three[0]
    root.create_user("plain", "secret-1")
    root.create_user("reader", "secret-2",
                     permissions=Permissions(GlobalPermissions(read_servers=True)))
    root.create_user("manager", "secret-3",
                     permissions=Permissions(GlobalPermissions(manage_servers=True)))
    with open_client(rill_server, login=False) as plain:
        plain.login_user("plain", "secret-1")
        with pytest.raises(errors.Unauthorized):
            plain.get_me()  # the §3.1 quirk: even one's own record needs the server rule
        with pytest.raises(errors.Unauthorized):
            plain.get_clients()
        assert plain.get_client(root.get_me().client_id) is None  # 41 -> empty OK
        assert plain.is_connected
    for username, password in (("reader", "secret-2"), ("manager", "secret-3")):
        with open_client(rill_server, login=False) as allowed:
            identity = allowed.login_user(username, password)
            me = allowed.get_me()
            assert me.user_id == identity.user_id != 1
            assert me.client_id in {c.client_id for c in allowed.get_clients()}
            assert allowed.get_client(root.get_me().client_id).user_id == 1


# -- heartbeat ---------------------------------------------------------------------------------


def test_heartbeat_removes_an_idle_client_and_keeps_active_ones(rill_factory):
    server = rill_factory(HEARTBEAT).start()
    # the SDK's own heartbeat pings the active clients from its loop thread, every 50 ms
    with open_client(server, heartbeat_interval=0.05) as watcher, \
            open_client(server, login=False, heartbeat_interval=0.05) as pinger, \
            open_client(server, reconnect=False) as idle:
        idle_id = idle.get_me().client_id
        pinger_id = next(c.client_id for c in watcher.get_clients() if c.user_id == 0)

        def idle_removed():
            pinger.ping()
            return idle_id not in {c.client_id for c in watcher.get_clients()}

        wait_until(idle_removed, message="the idle client was never removed")
        assert pinger_id in {c.client_id for c in watcher.get_clients()}
        assert watcher.get_stats().clients_count == 2
        with pytest.raises((errors.NotConnected, errors.Disconnected)):
            idle.ping()  # its connection was closed with its session
        pinger.ping()
        assert watcher.get_me().user_id == 1


def test_a_stale_session_has_its_socket_closed(rill_factory):
    server = rill_factory(HEARTBEAT).start()
    host, port = server.tcp_address
    with open_client(server, heartbeat_interval=0.05) as watcher, \
            socket.create_connection((host, port), timeout=10) as raw:
        wait_until(lambda: len(watcher.get_clients()) == 2)
        wait_until(lambda: len(watcher.get_clients()) == 1, message="raw socket never went stale")
        assert raw.recv(1) == b""  # closed by the server, without a request from the client


def test_heartbeat_is_off_by_default(rill_factory):
    server = rill_factory({"RILL_HEARTBEAT_INTERVAL": "100 ms"}).start()  # interval, not enabled
    with open_client(server) as watcher, open_client(server, login=False) as quiet:
        assert len(watcher.get_clients()) == 2
        time.sleep(0.6)  # six intervals of silence: a verifier, if any, would have struck
        assert len(watcher.get_clients()) == 2
        quiet.ping()

