"""What HTTP clients that read nothing cost the server: its memory (RSS) under follow streams
and polls whose replies nobody reads, and the wait of other clients meanwhile.

Starts a rill server (TCP and HTTP), stores ``--messages`` messages of 1 MB in one partition
(over TCP), then opens ``--followers`` follow streams (``GET .../messages/follow?offset=0``)
and then ``--pollers`` polls of up to 100 messages (``GET .../messages``), each on its own
connection with a small receive buffer, and reads none of their replies. Prints the server's
RSS before, its peak under the followers, its peak under followers and polls, the worst
``GET /ping`` and small poll of another client meanwhile, and how many of the unread follow
streams the server closed (``min_request_rate``) within 40 s. With ``--baseline PATH`` (the ``src`` of
another checkout) the same run against that code too.

    python benchmarks/http_unread_replies.py [--followers 20] [--pollers 20] [--baseline /tmp/base/src]
"""

from __future__ import annotations

import argparse
import os
import socket
import time

import httpx
import psutil

from rill.bench.server import RillServer
from rill.client import Client

MIB = 1024 * 1024
ESTABLISHED = 1  # tcp_info's tcpi_state
RECEIVE_BUFFER = 16 * 1024  # the unread clients' socket buffer: the server holds the rest


def unread(address: tuple[str, int], target: str, token: str) -> socket.socket:
    """A connection that sends ``GET target`` and never reads the reply."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.connect(address)
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
                 .encode())
    return sock


def dropped(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (its TCP state is no longer ESTABLISHED: what
    the server sent is still unread)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != ESTABLISHED


def watch(process: psutil.Process, http: httpx.Client, seconds: float, worst: dict[str, float],
          poll: str) -> int:
    """The peak RSS over ``seconds`` while another client pings and polls; notes its worst waits."""
    peak = process.memory_info().rss
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        began = time.monotonic()
        assert http.get("/ping").status_code == 200
        worst["ping"] = max(worst["ping"], time.monotonic() - began)
        began = time.monotonic()
        assert http.get(poll, params={"kind": "offset", "value": 0, "count": 1}).status_code == 200
        worst["poll"] = max(worst["poll"], time.monotonic() - began)
        peak = max(peak, process.memory_info().rss)
        time.sleep(0.1)
    return peak


def measure(followers: int, pollers: int, messages: int, seconds: float,
            pythonpath: str | None) -> dict[str, float]:
    env = {"RILL_ROOT_PASSWORD_HASH_COST": "4"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with RillServer(transports=("tcp", "http"), env=env) as server:
        with Client(server.addresses["tcp"]) as admin:
            admin.login_user("iggy", "iggy")
            admin.create_stream("unread", stream_id=1)
            admin.create_topic(1, "t", partitions_count=1)
            for _ in range(0, messages, 8):
                admin.send_messages(1, "t", [os.urandom(1_000_000) for _ in range(8)],
                                    partitioning=1)
        host, port = server.addresses["http"].rsplit(":", 1)
        address = (host, int(port))
        base = f"http://{host}:{port}"
        login = httpx.post(f"{base}/users/login", json={"username": "iggy", "password": "iggy"})
        token = login.json()["access_token"]["token"]
        process = psutil.Process(server.process.pid)
        messages_path = "/streams/1/topics/t/messages"
        worst = {"ping": 0.0, "poll": 0.0}
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                          timeout=120) as http:
            watch(process, http, 1, worst, messages_path)  # warm: the first requests' allocations
            worst = {"ping": 0.0, "poll": 0.0}
            before = process.memory_info().rss
            opened = time.monotonic()
            socks = [unread(address, f"{messages_path}/follow?partition_id=1&offset=0&limit=10000",
                            token) for _ in range(followers)]
            follow_peak = watch(process, http, seconds, worst, messages_path)
            socks += [unread(address, f"{messages_path}?partition_id=1&kind=offset&value=0&count=100",
                             token) for _ in range(pollers)]
            all_peak = max(follow_peak, watch(process, http, seconds, worst, messages_path))
            deadline = time.monotonic() + 40  # until the server closes the unread follow streams
            while time.monotonic() < deadline and not all(map(dropped, socks[:followers])):
                time.sleep(0.5)
            closed = sum(map(dropped, socks[:followers]))
            closed_after = time.monotonic() - opened
            for sock in socks:
                sock.close()
    return {"before_mib": before / MIB, "follow_peak_mib": follow_peak / MIB,
            "all_peak_mib": all_peak / MIB, "ping_worst_ms": worst["ping"] * 1000,
            "poll_worst_ms": worst["poll"] * 1000, "closed": closed,
            "closed_after_s": closed_after}


def report(name: str, figures: dict[str, float], followers: int, pollers: int) -> None:
    print(f"{name}:")
    print(f"  server RSS before {figures['before_mib']:7.0f} MiB")
    print(f"  with {followers} unread follow streams {figures['follow_peak_mib']:7.0f} MiB (peak)")
    print(f"  ... and {pollers} unread polls     {figures['all_peak_mib']:7.0f} MiB (peak)")
    print(f"  another client meanwhile: GET /ping worst {figures['ping_worst_ms']:.0f} ms, "
          f"a 1-message poll worst {figures['poll_worst_ms']:.0f} ms")
    print(f"  unread follow streams closed by the server: {figures['closed']} of {followers},"
          f" {figures['closed_after_s']:.0f} s after they opened")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=20)
    parser.add_argument("--pollers", type=int, default=20)
    parser.add_argument("--messages", type=int, default=40, help="1 MB messages stored first")
    parser.add_argument("--seconds", type=float, default=4.0, help="to watch each phase")
    parser.add_argument("--baseline", help="the src directory of another checkout")
    args = parser.parse_args()
    runs = [("this tree", None)] + ([(f"baseline {args.baseline}", args.baseline)]
                                    if args.baseline else [])
    for name, path in runs:
        figures = measure(args.followers, args.pollers, args.messages, args.seconds, path)
        report(name, figures, args.followers, args.pollers)


if __name__ == "__main__":
    main()
