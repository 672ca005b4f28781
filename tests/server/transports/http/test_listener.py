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
