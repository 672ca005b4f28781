"""What an idle connection costs the server: RSS per connection, and how many it holds.

Starts a rill server (TCP only) in a temporary directory, opens ``--connections`` idle TCP
connections (half of them logged in, half not; the unauthenticated timeout is switched off for
the measurement), and prints the server's RSS before and after and the RSS per connection. With
``--baseline PATH`` (the ``src`` directory of another checkout, e.g. ``git archive`` of main)
the same is measured for that code right after, and the ratio printed. The soft descriptor
limit of this process is raised to its hard limit (the server raises its own).

    python benchmarks/connections.py [--connections 10000] [--baseline /tmp/rill-base/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import struct
import time

import psutil

from rill.bench.server import RillServer
from rill.protocol.iggy.commands.users import LoginUser

LOGIN = LoginUser("iggy", "iggy").to_frame()


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return data


def measure(count: int, pythonpath: str | None) -> tuple[int, int, int]:
    """(RSS before, RSS with ``count`` idle connections, connections still open at the end)."""
    env = {"RILL_CONNECTIONS_UNAUTHENTICATED_TIMEOUT": "none", "RILL_ROOT_PASSWORD_HASH_COST": "4",
           "RILL_CONNECTIONS_MAX_CONNECTIONS": str(count + 16)}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with RillServer(env=env) as server:
        host, port = server.addresses["tcp"].rsplit(":", 1)
        process = psutil.Process(server.process.pid)
        time.sleep(0.5)
        before = process.memory_info().rss
        sockets = []
        try:
            for number in range(count):
                sock = socket.create_connection((host, int(port)), timeout=30)
                if number % 2:
                    sock.sendall(LOGIN)
                    status, length = struct.unpack("<II", read_exactly(sock, 8))
                    read_exactly(sock, length)
                    assert status == 0, status
                sockets.append(sock)
            time.sleep(1.0)
            after = process.memory_info().rss
            open_count = sum(1 for sock in sockets if _is_open(sock))
        finally:
            for sock in sockets:
                sock.close()
    return before, after, open_count


def _is_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--baseline", help="src directory of the code to compare against")
    arguments = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runs = [("this code", None)] + ([("baseline", arguments.baseline)] if arguments.baseline else [])
    per_connection = {}
    for label, pythonpath in runs:
        before, after, still_open = measure(arguments.connections, pythonpath)
        per_connection[label] = (after - before) / arguments.connections
        print(f"{label:>10}: {arguments.connections} connections ({still_open} open at the end), "
              f"RSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB, "
              f"{per_connection[label] / 1024:.1f} KiB per connection")
    if arguments.baseline:
        ratio = per_connection["baseline"] / per_connection["this code"]
        print(f"baseline / this code: {ratio:.1f}x the memory per connection")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
