"""Login throttling against a real server, over TCP, QUIC and HTTP: after a few failed logins an
address gets 11100 (HTTP 429 + Retry-After), even with the right password, while another
address is not affected; the lock expires; token logins are throttled too."""

from __future__ import annotations

import socket
import struct
import time

import httpx
import pytest

from rill import errors
from rill.client import Client
from rill.protocol.iggy.commands.users import LoginUser

THROTTLE = {"RILL_LOGIN_THROTTLE_MAX_FAILURES": "3", "RILL_LOGIN_THROTTLE_LOCK_TIME": "2 s"}
THROTTLED = errors.LoginThrottled.code


def raw_login(server, password: str, source: str = "127.0.0.1") -> int:
    """LOGIN_USER from ``source`` (any 127/8 address is this machine); returns the status."""
    with socket.create_connection(server.tcp_address, timeout=10,
                                  source_address=(source, 0)) as sock:
        sock.sendall(LoginUser("iggy", password).to_frame())
        header = b""
        while len(header) < 8:
            chunk = sock.recv(8 - len(header))
            assert chunk, "closed"
            header += chunk
        status, length = struct.unpack("<II", header)
        while length:
            length -= len(sock.recv(length))
        return status


def test_tcp_locks_the_address_not_the_others_and_the_lock_expires(rill_factory):
    server = rill_factory(THROTTLE).start()
    assert [raw_login(server, "wrong") for _ in range(3)] == [42, 42, 42]
    started = time.monotonic()
    assert raw_login(server, "iggy") == THROTTLED  # the right password, refused all the same
    assert time.monotonic() - started < 1.0
    assert raw_login(server, "iggy", source="127.0.0.2") == 0  # another address logs in
    time.sleep(2.2)
    assert raw_login(server, "iggy") == 0  # the lock has expired
    assert "failed login from 127.0.0.1" in "".join(server.output)
    assert "wrong" not in "".join(server.output)  # never the password


def test_quic_logins_are_throttled_through_the_same_core(rill_factory):
    server = rill_factory(THROTTLE).start()
    quic_address = f"{server.quic_address[0]}:{server.quic_address[1]}"
    with Client(quic_address, transport="quic", ca_file=server.certificate,
                reconnect=False) as client:
        for _ in range(3):
            with pytest.raises(errors.InvalidCredentials):
                client.login_user("iggy", "wrong")
        with pytest.raises(errors.LoginThrottled, match="try again"):
            client.login_user("iggy", "iggy")
    assert raw_login(server, "iggy") == THROTTLED  # the same address over TCP


def test_http_answers_429_with_retry_after(rill_factory):
    server = rill_factory(THROTTLE).start()
    with httpx.Client(base_url=server.http_url, timeout=10) as http:
        for _ in range(3):
            assert http.post("/users/login", json={"username": "iggy", "password": "no"}
                             ).status_code == 400
        refused = http.post("/users/login", json={"username": "iggy", "password": "iggy"})
        assert refused.status_code == 429
        assert refused.json()["code"] == "login_throttled"
        assert 1 <= int(refused.headers["Retry-After"]) <= 3


def test_token_logins_are_throttled(rill_factory):
    server = rill_factory(THROTTLE).start()
    with Client(server.address) as owner:
        owner.login_user("iggy", "iggy")
        token = owner.create_personal_access_token("ci-token")
    with Client(server.address, reconnect=False) as guesser:
        for attempt in range(3):
            with pytest.raises(errors.RillError) as raised:
                guesser.login_with_personal_access_token(f"not-a-token-{attempt:040d}")
            assert not isinstance(raised.value, errors.LoginThrottled)
        with pytest.raises(errors.LoginThrottled):
            guesser.login_with_personal_access_token(token)


# a user locked after 3 failures from any addresses (before any pair's 10)
USER_LOCK = {"RILL_LOGIN_THROTTLE_MAX_FAILURES_PER_USER": "3",
             "RILL_LOGIN_THROTTLE_LOCK_TIME": "10 min"}


def lock_root(server, *sources: str) -> None:
    """Wrong passwords for root from ``sources`` until root is locked for new addresses."""
    assert [raw_login(server, "wrong", source) for source in sources] == [42] * len(sources)


def test_the_trust_of_an_address_survives_a_restart(rill_factory):
    server = rill_factory(USER_LOCK).start()
    assert raw_login(server, "iggy", "127.0.0.2") == 0  # root's own address
    assert server.stop() == 0
    server.start()  # a real restart (on new ports: the old ones may be taken meanwhile)
    lock_root(server, "127.0.0.3", "127.0.0.4", "127.0.0.5")
    assert raw_login(server, "iggy", "127.0.0.6") == THROTTLED  # a new address: locked out
    assert raw_login(server, "iggy", "127.0.0.2") == 0  # root's address is still trusted


def test_unlock_over_http_lets_a_locked_user_in_at_once(rill_factory):
    server = rill_factory(USER_LOCK).start()
    with httpx.Client(base_url=server.http_url, timeout=10) as http:
        login = http.post("/users/login", json={"username": "iggy", "password": "iggy"})
        admin = {"Authorization": f"Bearer {login.json()['access_token']['token']}"}
        assert http.post("/users", headers=admin, json={
            "username": "bob", "password": "bob-secret", "status": "active"}).status_code == 200
        lock_root(server, "127.0.0.3", "127.0.0.4", "127.0.0.5")
        assert raw_login(server, "iggy", "127.0.0.6") == THROTTLED

        bob_login = http.post("/users/login", json={"username": "bob", "password": "bob-secret"})
        bob = {"Authorization": f"Bearer {bob_login.json()['access_token']['token']}"}
        refused = http.post("/users/iggy/unlock", headers=bob)  # no manage_users
        assert (refused.status_code, refused.json()["code"]) == (403, "unauthorized")
        assert raw_login(server, "iggy", "127.0.0.6") == THROTTLED

        assert http.post("/users/iggy/unlock", headers=admin).status_code == 204
        assert raw_login(server, "iggy", "127.0.0.6") == 0  # at once, not in 10 minutes
        assert http.post("/users/nobody/unlock", headers=admin).status_code == 404
    assert "login locks of user 'iggy' lifted by user 1" in "".join(server.output)


def test_unlock_over_tcp_needs_manage_users(rill_factory):
    server = rill_factory(USER_LOCK).start()
    with Client(server.address, reconnect=False) as admin:
        admin.login_user("iggy", "iggy")
        admin.create_user("bob", "bob-secret", status=1)
        lock_root(server, "127.0.0.3", "127.0.0.4", "127.0.0.5")
        with Client(server.address, reconnect=False) as bob:
            bob.login_user("bob", "bob-secret")
            with pytest.raises(errors.Unauthorized):
                bob.unlock_user("iggy")
        assert raw_login(server, "iggy", "127.0.0.6") == THROTTLED
        admin.unlock_user("iggy")
        assert raw_login(server, "iggy", "127.0.0.6") == 0
