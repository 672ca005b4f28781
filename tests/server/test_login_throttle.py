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
from rill.protocol.commands.users import LoginUser

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
