"""The HTTP listener: a connection that does not complete a request head in time is closed."""

from __future__ import annotations

import socket
import time

import pytest

from rill import __version__

from server_process import RillProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = RillProcess(tmp_path_factory.mktemp("http-listener") / "data",
                         env={"RILL_CONNECTIONS_UNAUTHENTICATED_TIMEOUT": "1 s"}).start()
    yield server
    server.kill()


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Send ``trickle`` a byte at a time every 0.2 s; True once the server has closed."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.2)
    sent = 0
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            pass
        except ConnectionResetError:
            return True
        if sent < len(trickle):
            try:
                sock.sendall(trickle[sent:sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                return True
            sent += 1
    return False


def test_a_silent_connection_is_closed(server) -> None:
    with socket.create_connection(server.http_address) as sock:
        assert closed_within(sock, 15)


def test_a_request_head_trickled_in_byte_by_byte_is_closed(server) -> None:
    head = b"GET /ping HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 500
    with socket.create_connection(server.http_address) as sock:
        assert closed_within(sock, 15, trickle=head)


def test_requests_in_time_on_one_connection_are_served(server) -> None:
    with socket.create_connection(server.http_address) as sock:
        for _ in range(3):
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.settimeout(10)
            reply = b""
            while not reply.endswith(b"pong"):
                chunk = sock.recv(4096)
                assert chunk, "closed while requests came in time"
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200")
            time.sleep(0.5)  # within the 1 s timeout


def test_beyond_max_connections_requests_get_503(tmp_path):
    server = RillProcess(tmp_path / "data", env={"RILL_CONNECTIONS_MAX_CONNECTIONS": "2"}).start()
    try:
        held = [socket.create_connection(server.http_address) for _ in range(2)]
        time.sleep(0.3)
        with socket.create_connection(server.http_address, timeout=10) as extra:
            extra.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            assert extra.recv(4096).startswith(b"HTTP/1.1 503")
        for sock in held:
            sock.close()
        time.sleep(0.3)
        with socket.create_connection(server.http_address, timeout=10) as fine:
            fine.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            assert fine.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        server.kill()


def test_health_and_ready_need_no_login(server) -> None:
    import httpx

    with httpx.Client(base_url=server.http_url, timeout=10) as anonymous:
        health = anonymous.get("/health")
        assert (health.status_code, health.json()) == (200, {"status": "ok", "version": __version__})
        assert anonymous.get("/ping").headers["x-rill-version"] == __version__
        ready = anonymous.get("/ready")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


def test_an_unknown_path_is_404_with_or_without_a_token_and_a_known_one_401(server) -> None:
    import httpx
    from http_helpers import bearer

    with httpx.Client(base_url=server.http_url, timeout=10) as anonymous:
        assert anonymous.get("/no/such/path").status_code == 404
        assert anonymous.get("/streams").status_code == 401  # known, needs a login
        assert anonymous.post("/streamz", json={}).status_code == 404
    with httpx.Client(base_url=server.http_url, headers=bearer(server.http_url),
                      timeout=10) as api:
        assert api.get("/no/such/path").status_code == 404
        assert api.get("/streams").status_code == 200


# -- request bodies in time, connections per address ----------------------------------------------

LOGIN_HEAD = (b"POST /users/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 200\r\n\r\n")


def all_closed_within(socks: list[socket.socket], seconds: float) -> bool:
    """Trickle one more body byte on each of ``socks`` every 0.2 s; True once the server has
    closed every one."""
    deadline = time.monotonic() + seconds
    open_ = list(socks)
    for sock in open_:
        sock.setblocking(False)
    while open_ and time.monotonic() < deadline:
        for sock in list(open_):
            try:
                if sock.recv(4096) == b"":
                    open_.remove(sock)
                    continue
            except BlockingIOError:
                pass
            except ConnectionResetError:
                open_.remove(sock)
                continue
            try:
                sock.send(b" ")
            except (BrokenPipeError, ConnectionResetError):
                open_.remove(sock)
        time.sleep(0.2)
    return not open_


def ping(address: tuple[str, int], source: str | None = None) -> bytes:
    """The status line of GET /ping on a new connection (b"" when closed unanswered)."""
    with socket.create_connection(address, timeout=10,
                                  source_address=(source, 0) if source else None) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            return sock.recv(4096).split(b"\r\n")[0]
        except ConnectionResetError:
            return b""


@pytest.mark.parametrize("env", [
    {},  # min_request_rate (64 KiB/s), judged 5 s after the head
    {"RILL_CONNECTIONS_MIN_REQUEST_RATE": "0", "RILL_CONNECTIONS_REQUEST_TIMEOUT": "3 s"},
], ids=["min_request_rate", "request_timeout"])
def test_login_bodies_trickled_in_are_closed_and_the_api_serves_again(tmp_path, env):
    """Bodies of POST /users/login trickled a byte at a time hold every connection the listener
    allows (others get 503) only until they are closed for being too slow."""
    server = RillProcess(tmp_path / "data", env={"RILL_CONNECTIONS_MAX_CONNECTIONS": "6", **env}).start()
    try:
        tricklers = [socket.create_connection(server.http_address) for _ in range(6)]
        for sock in tricklers:
            sock.sendall(LOGIN_HEAD + b'{"username')
        time.sleep(0.3)
        assert ping(server.http_address) == b"HTTP/1.1 503 Service Unavailable"
        assert all_closed_within(tricklers, 20)
        deadline = time.monotonic() + 10
        while ping(server.http_address) != b"HTTP/1.1 200 OK":  # once the server saw them go
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        server.kill()


def test_a_body_sent_in_time_is_served(server) -> None:
    body = b'{"username": "iggy", "password": "iggy"}'
    with socket.create_connection(server.http_address, timeout=10) as sock:
        sock.sendall(LOGIN_HEAD.replace(b"200", str(len(body)).encode()))
        time.sleep(1.5)  # a pause before the body, shorter than the 5 s grace
        sock.sendall(body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")


def test_beyond_max_connections_per_address_that_address_is_refused_and_others_are_not(tmp_path):
    server = RillProcess(tmp_path / "data",
                         env={"RILL_CONNECTIONS_MAX_CONNECTIONS_PER_ADDRESS": "2"}).start()
    try:
        held = [socket.create_connection(server.http_address, source_address=("127.0.0.2", 0))
                for _ in range(2)]
        time.sleep(0.3)
        assert ping(server.http_address, "127.0.0.2") == b""  # closed at accept, unanswered
        assert ping(server.http_address, "127.0.0.3") == b"HTTP/1.1 200 OK"
        held[0].close()
        deadline = time.monotonic() + 10
        while ping(server.http_address, "127.0.0.2") != b"HTTP/1.1 200 OK":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        held[1].close()
    finally:
        server.kill()
