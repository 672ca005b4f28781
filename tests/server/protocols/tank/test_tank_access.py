"""Who TANK clients are (``[tank] user``): the root user only on loopback, a named user's
permissions on every TANK request, and the starts the server refuses."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from rill.client.tank import TankClient, TankProduceError
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from rill.protocol.tank.errors import ConsumeFlag, CreateTopicError, ProduceError
from server_process import RillProcess, session

BASE_ENV = {"RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}
TANK_ENV = {**BASE_ENV, "RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0"}


def serve(data_dir, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rill", "serve", "--data-dir", str(data_dir),
         "--tcp-address", "127.0.0.1:0", *args],
        capture_output=True, text=True, env=dict(os.environ, **BASE_ENV, **env), timeout=60)


def test_a_non_loopback_tank_listener_without_a_user_is_refused(tmp_path):
    refused = serve(tmp_path / "data", "--tank-address", "0.0.0.0:0")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "rill: cannot start: refusing to listen on tank 0.0.0.0:0: TANK clients cannot log in "
        "and would act as the root user; set [tank] user (RILL_TANK_USER) to the rill user "
        "whose permissions TANK clients get, or listen on a loopback address")
    assert "listening" not in refused.stdout


def test_a_tank_user_that_does_not_exist_is_refused(tmp_path):
    refused = serve(tmp_path / "data", "--tank-address", "127.0.0.1:0", RILL_TANK_USER="ghost")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "rill: cannot start: [tank] user 'ghost': no such user")


def test_the_named_user_may_use_an_explicit_non_loopback_address():
    # the rule itself, without binding anything but loopback in tests
    from rill.server.app import Server
    from rill.server.config import ServerConfig

    config = ServerConfig()
    config.tank.address = "0.0.0.0:11011"
    config.tank.user = "iggy"

    server = server_with_user(config, "iggy", permissions=None)
    assert isinstance(server, Server) and server._tank_user_id() == 42


def server_with_user(config, name: str, permissions):
    """A Server (not started) whose users are one user ``name`` (id 42) with ``permissions``."""
    from rill.server.app import Server

    class Users:
        @staticmethod
        def find_by_username(wanted):
            user = type("User", (), {"id": 42, "permissions": permissions})
            return user() if wanted == name else None

    server = Server.__new__(Server)
    server.config = config
    server.core = type("Core", (), {"users": Users})()
    return server


def test_a_privileged_tank_user_off_loopback_is_refused(tmp_path):
    # the root user by name: every client reaching the address would be root without a password
    # (a documentation address: should the refusal ever break, nothing could listen on it)
    refused = serve(tmp_path / "data", "--tank-address", "192.0.2.1:0", RILL_TANK_USER="iggy")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "rill: cannot start: refusing to listen on tank 192.0.2.1:0: TANK clients cannot log in "
        "and would act as 'iggy', who holds global manage_servers, manage_users, "
        "manage_streams, manage_topics, send_messages; give TANK a user with per-stream "
        "rights, listen on a loopback address, or set [tank] allow_privileged_user "
        "(RILL_TANK_ALLOW_PRIVILEGED_USER) to accept it")
    assert "listening" not in refused.stdout


@pytest.mark.parametrize("rights, refused", [
    (GlobalPermissions(send_messages=True), True),
    (GlobalPermissions(manage_topics=True), True),
    (GlobalPermissions(read_streams=True, poll_messages=True), False),
])
def test_global_manage_or_send_rights_off_loopback_need_the_override(rights, refused):
    from rill.server.config import ServerConfig
    from rill.server.core.reconciliation import StartupRefused

    config = ServerConfig()
    config.tank.address, config.tank.user = "0.0.0.0:11011", "bob"
    server = server_with_user(config, "bob", Permissions(global_permissions=rights))
    if refused:
        with pytest.raises(StartupRefused, match="who holds global"):
            server._tank_user_id()
    else:
        assert server._tank_user_id() == 42
    config.tank.allow_privileged_user = True  # the explicit override
    assert server._tank_user_id() == 42
    config.tank.allow_privileged_user, config.tank.address = False, "127.0.0.1:11011"
    assert server._tank_user_id() == 42  # loopback: only this machine's clients


def test_an_exposed_tank_listener_is_warned_of_in_the_start_summary():
    from rill.server.app import Server, start_summary, tank_exposure
    from rill.server.config import ServerConfig

    config = ServerConfig()
    config.tank.user = "bob"
    server = Server.__new__(Server)
    server.core = type("Core", (), {"summary": staticmethod(lambda: "0 streams")})()
    server.addresses = {"tcp": ("127.0.0.1", 8090), "tank": ("127.0.0.1", 11011)}
    assert tank_exposure(config, server) == ""
    assert "WARNING" not in start_summary(config, server)
    server.addresses["tank"] = ("0.0.0.0", 11011)
    warning = ("TANK is exposed on 0.0.0.0:11011: every client that reaches it acts as 'bob' "
               "without a password")
    assert tank_exposure(config, server) == warning
    assert start_summary(config, server).endswith(f"; WARNING: {warning}")


def produce(address, topic: str) -> int:
    async def go():
        async with TankClient(*address) as client:
            try:
                await client.produce(topic, 0, [b"x"])
            except TankProduceError as refused:
                return refused.code
            return ProduceError.OK

    return asyncio.run(go())


def consume(address, topic: str):
    async def go():
        async with TankClient(*address) as client:
            return (await client.consume([(topic, 0, 0)]))[0]

    return asyncio.run(go())


def create(address, topic: str) -> int:
    async def go():
        async with TankClient(*address) as client:
            return await client.create_topic(topic, 1)

    return asyncio.run(go())


def test_a_named_users_permissions_apply_to_every_tank_request(tmp_path):
    process = RillProcess(tmp_path / "data", env=TANK_ENV).start()
    try:
        assert create(process.tank_address, "guarded") == CreateTopicError.OK  # as root
        assert produce(process.tank_address, "guarded") == ProduceError.OK
        with session(process) as iggy:
            iggy.create_user("nobody", "secret-1", permissions=None)
            iggy.create_user("reader", "secret-2", permissions=Permissions(GlobalPermissions(
                read_streams=True, read_topics=True, poll_messages=True), None))
        process.stop()

        process = RillProcess(tmp_path / "data", env={**TANK_ENV,
                                                      "RILL_TANK_USER": "nobody"}).start()
        address = process.tank_address
        # may not list the stream: every topic is unknown to it, and nothing is written
        assert produce(address, "guarded") == ProduceError.UNKNOWN_TOPIC
        assert consume(address, "guarded").flag == -1  # unknown topic
        assert create(address, "other") == CreateTopicError.SYSTEM
        process.stop()

        process = RillProcess(tmp_path / "data", env={**TANK_ENV,
                                                      "RILL_TANK_USER": "reader"}).start()
        address = process.tank_address
        fetched = consume(address, "guarded")
        assert fetched.flag == ConsumeFlag.OK and fetched.values == [b"x"]
        assert produce(address, "guarded") == ProduceError.SYSTEM  # may read, not write
        assert consume(address, "guarded").hwm == 1
    finally:
        process.kill()


def test_rights_on_one_topic_reach_that_topic_only(tmp_path):
    """A user with no stream-wide rights but read rights on one topic consumes that topic over
    TANK; the topic beside it stays unknown to it, and it may not write."""
    process = RillProcess(tmp_path / "data", env=TANK_ENV).start()
    try:
        for name in ("granted", "withheld"):
            assert create(process.tank_address, name) == CreateTopicError.OK  # as root
            assert produce(process.tank_address, name) == ProduceError.OK
        with session(process) as iggy:
            stream = iggy.get_stream("kafka").id
            topic = iggy.get_topic("kafka", "granted").id
            iggy.create_user("one-topic", "secret-3", permissions=Permissions(
                GlobalPermissions(), {stream: StreamPermissions(topics={
                    topic: TopicPermissions(read_topic=True, poll_messages=True)})}))
        process.stop()

        process = RillProcess(tmp_path / "data", env={**TANK_ENV,
                                                      "RILL_TANK_USER": "one-topic"}).start()
        address = process.tank_address
        fetched = consume(address, "granted")
        assert fetched.flag == ConsumeFlag.OK and fetched.values == [b"x"]
        assert consume(address, "withheld").flag == -1  # unknown topic
        assert produce(address, "granted") == ProduceError.SYSTEM  # may read, not write
        assert produce(address, "withheld") == ProduceError.UNKNOWN_TOPIC
    finally:
        process.kill()


@pytest.mark.parametrize("flag", [False, True])
def test_the_tank_listener_line_and_the_flag(tmp_path, flag):
    env = dict(BASE_ENV) if flag else dict(TANK_ENV)
    process = RillProcess(tmp_path / "data", env=env,
                          args=["--tank-address", "127.0.0.1:0"] if flag else []).start()
    try:
        assert any(line.startswith("rill listening on tank 127.0.0.1:")
                   for line in process.output)
        assert create(process.tank_address, "lined") == 0
    finally:
        process.kill()
