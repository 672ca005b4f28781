"""What slow senders cost everyone else: the worst wait of a PING and of a 1 MB send on one
connection while other logged-in connections announce 60 MiB frames and trickle them in.

Starts a rill server (TCP only, ``[connections] request_memory`` 256 MiB), logs in
``--tricklers`` connections that each announce a 60 MiB SEND_MESSAGES and send 1 KiB a second
of it, and meanwhile, on one more connection, sends PINGs and 1 MB sends back to back for
``--seconds``. Prints the median and worst wait of each, the same measured before the
tricklers start (the baseline of the same run) and the ratios, and when the server closed the
tricklers (``min_request_rate``). With ``--baseline PATH`` (the ``src`` of another checkout)
the same runs against that code too.

    python benchmarks/slow_senders.py [--tricklers 6] [--seconds 10] [--baseline /tmp/base/src]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import threading
import time

from connections import read_exactly  # (benchmarks/connections.py: run from this folder's scripts)
from rill.bench.server import RillServer
from rill.client import Client
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.users import LoginUser
from rill.protocol.iggy.primitives import Partitioning

PING = struct.pack("<II", 4, 1)
LOGIN = LoginUser("iggy", "iggy").to_frame()
MIB = 1024 * 1024


def call(sock: socket.socket, frame: bytes) -> int:
    sock.sendall(frame)
    status, length = struct.unpack("<II", read_exactly(sock, 8))
    read_exactly(sock, length)
    return status


def connect(address: tuple[str, int], timeout: float) -> socket.socket:
    sock = socket.create_connection(address, timeout=timeout)
    assert call(sock, LOGIN) == 0
    return sock


def waits(sock: socket.socket, seconds: float, send: bytes) -> tuple[list[float], list[float]]:
    """PING and 1 MB send round trips, alternating, for ``seconds``."""
    pings: list[float] = []
    sends: list[float] = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        began = time.monotonic()
        assert call(sock, PING) == 0
        pings.append(time.monotonic() - began)
        began = time.monotonic()
        assert call(sock, send) == 0
        sends.append(time.monotonic() - began)
    return pings, sends


def trickle(sock: socket.socket, closed: list[float], started: float) -> None:
    sock.sendall(struct.pack("<II", 60 * MIB + 4, 101) + b"\0" * 1024)
    try:
        while True:
            time.sleep(1)
            sock.sendall(b"\0" * 1024)
    except OSError:
        closed.append(time.monotonic() - started)


def measure(tricklers: int, seconds: float, pythonpath: str | None) -> dict[str, float]:
    env = {"RILL_CONNECTIONS_REQUEST_MEMORY": "256 MiB", "RILL_ROOT_PASSWORD_HASH_COST": "4"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with RillServer(env=env) as server:
        host, port = server.addresses["tcp"].rsplit(":", 1)
        address = (host, int(port))
        # a slow server must not look like a fast one: a wait is bounded only by this timeout
        with Client(server.addresses["tcp"]) as admin:
            admin.login_user("iggy", "iggy")
            admin.create_stream("slow", stream_id=1)
            admin.create_topic(1, "t", partitions_count=1)
        sock = connect(address, timeout=120)
        send = SendMessages.of(1, 1, Partitioning.partition_id(1), [os.urandom(1_000_000)]).to_frame()
        quiet_pings, quiet_sends = waits(sock, seconds / 2, send)
        closed: list[float] = []
        started = time.monotonic()
        slow = [connect(address, timeout=120) for _ in range(tricklers)]
        threads = [threading.Thread(target=trickle, args=(s, closed, started), daemon=True)
                   for s in slow]
        for thread in threads:
            thread.start()
        pings, sends = waits(sock, seconds, send)
        for thread in threads:
            thread.join(timeout=90)
        for s in slow:
            s.close()
        sock.close()
    return {
        "ping_median_ms": statistics.median(pings) * 1000, "ping_worst_ms": max(pings) * 1000,
        "send_median_ms": statistics.median(sends) * 1000, "send_worst_ms": max(sends) * 1000,
        "quiet_ping_worst_ms": max(quiet_pings) * 1000,
        "quiet_send_worst_ms": max(quiet_sends) * 1000,
        "tricklers_closed_after_s": max(closed) if len(closed) == tricklers else float("nan"),
    }


def report(name: str, figures: dict[str, float]) -> None:
    print(f"{name}:")
    print(f"  PING   median {figures['ping_median_ms']:8.1f} ms, worst {figures['ping_worst_ms']:8.1f} ms"
          f" (quiet worst {figures['quiet_ping_worst_ms']:.1f} ms: x"
          f"{figures['ping_worst_ms'] / figures['quiet_ping_worst_ms']:.1f})")
    print(f"  1 MB   median {figures['send_median_ms']:8.1f} ms, worst {figures['send_worst_ms']:8.1f} ms"
          f" (quiet worst {figures['quiet_send_worst_ms']:.1f} ms: x"
          f"{figures['send_worst_ms'] / figures['quiet_send_worst_ms']:.1f})")
    print(f"  tricklers closed after {figures['tricklers_closed_after_s']:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tricklers", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--baseline", help="the src directory of another checkout")
    args = parser.parse_args()
    report("this tree", measure(args.tricklers, args.seconds, None))
    if args.baseline:
        report(f"baseline {args.baseline}", measure(args.tricklers, args.seconds, args.baseline))


if __name__ == "__main__":
    main()
