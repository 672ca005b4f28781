"""Replies that carry messages (transports/http/replies.py): bounded per reply and in all,
written as the client reads, and a client that reads nothing costs little and is dropped."""

from __future__ import annotations

import base64
import os
import socket
import time

import httpx
import psutil
import pytest
from http_helpers import bearer

from rill.client import Client
from rill.server.transports.http.replies import SMALL_REPLY, ReplyMemory
from server_process import RillProcess

MIB = 1024 * 1024
ESTABLISHED = 1  # tcp_info's tcpi_state
MESSAGES = "/streams/1/topics/t/messages"
FOLLOW = MESSAGES + "/follow?partition_id=1&offset=0&limit=10000"
POLL = MESSAGES + "?partition_id=1&kind=offset&value=0&count=100"


def test_replies_get_the_per_reply_size_while_memory_lasts_then_what_is_left_then_a_small_one():
    memory = ReplyMemory(limit=5 * MIB, per_reply=2 * MIB)
    first, second, third = memory.grant(), memory.grant(), memory.grant()
    assert (first.size, second.size, third.size) == (2 * MIB, 2 * MIB, 1 * MIB)
    spent = memory.grant()
    assert spent.size == SMALL_REPLY  # never refused, never waits: small
    third.hold(100)  # the read took less than granted
    assert memory.used == 4 * MIB + 100 + SMALL_REPLY
    for grant in (first, second, third, spent):
        grant.release()
        grant.release()  # once only
    assert memory.used == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """24 messages of 1 MB in partition 1 of stream 1, topic "t"."""
    server = RillProcess(tmp_path_factory.mktemp("replies") / "data",
                         env={"RILL_CONNECTIONS_MIN_REQUEST_RATE": "1 MiB"}).start()
    with Client(server.address) as admin:
        admin.login_user("iggy", "iggy")
        admin.create_stream("unread", stream_id=1)
        admin.create_topic(1, "t", partitions_count=1)
        for _ in range(3):
            admin.send_messages(1, "t", [os.urandom(1_000_000) for _ in range(8)], partitioning=1)
    yield server
    server.kill()


@pytest.fixture(scope="module")
def token(server) -> str:
    return bearer(server.http_url)["Authorization"].split()[1]


def unread(server, target: str, token: str) -> socket.socket:
    """A connection (with a small receive buffer) that asks ``GET target`` and reads nothing."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(server.http_address)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
                 .encode())
    return sock


def reset_by_the_server(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != ESTABLISHED


def test_a_poll_carries_at_most_max_poll_size_and_at_least_one_message(server, token):
    with httpx.Client(base_url=server.http_url, headers={"Authorization": f"Bearer {token}"},
                      timeout=30) as api:
        polled = api.get(POLL).json()
    # 1 MB each: a second one would pass [http] max_poll_size (1 MiB), not [system]'s 16 MiB
    assert [m["offset"] for m in polled["messages"]] == [0]
    assert len(base64.b64decode(polled["messages"][0]["payload"])) == 1_000_000


def test_twenty_unread_follow_streams_and_polls_keep_the_server_small_and_others_served(server, token):
    """Each event was a 16 MiB poll built whole as JSON before back-pressure applied: twenty
    unread follow streams and twenty unread polls grew the server by about 1.3 GiB."""
    process = psutil.Process(server.process.pid)
    with httpx.Client(base_url=server.http_url, headers={"Authorization": f"Bearer {token}"},
                      timeout=60) as api:
        assert api.get(POLL).status_code == 200  # (the first poll's own allocations)
        before = process.memory_info().rss
        socks = [unread(server, FOLLOW, token) for _ in range(20)]
        socks += [unread(server, POLL, token) for _ in range(20)]
        peak = before
        stop = time.monotonic() + 3
        while time.monotonic() < stop:  # others are served meanwhile
            assert api.get("/ping").status_code == 200
            one = api.get(MESSAGES, params={"partition_id": 1, "kind": "offset", "value": 5,
                                            "count": 1})
            assert [m["offset"] for m in one.json()["messages"]] == [5]
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.1)
        for sock in socks:
            sock.close()
    assert peak - before < 200 * MIB, (before // MIB, peak // MIB)


def test_a_follow_stream_that_reads_nothing_is_dropped(server, token):
    """Below min_request_rate (1 MiB/s here) once its event has waited 5 s: the connection is
    reset, the event's memory given back; the old stream held it for its 10 minutes."""
    sock = unread(server, FOLLOW, token)
    try:
        deadline = time.monotonic() + 40
        while not reset_by_the_server(sock):
            assert time.monotonic() < deadline, "the unread follow stream is still open"
            time.sleep(0.2)
    finally:
        sock.close()
