"""What creating, purging and deleting many partitions, and listing many streams, costs
everyone else: the longest time a PING on another connection waits for its answer meanwhile.

Starts a rill server (TCP only, ``fsync = interval``), and on one connection sends PINGs back
to back the whole time while a second connection, in turn: creates a topic of 1,000
partitions (CREATE_TOPIC), adds 1,000 more (CREATE_PARTITIONS), sends one message to each of
the 2,000 (not timed) and purges the topic (PURGE_TOPIC), deletes 1,000 of them
(DELETE_PARTITIONS), adds 1,000 again, deletes the topic and its 2,000 partitions
(DELETE_TOPIC); then creates ``--streams`` streams (fewer when that takes more than
``--stream-seconds``; the baseline makes as many) and asks GET_STREAMS three times. Prints, per step, how long the step
took and the longest time within it that no PING was answered (the worst PING stall; the
same before anything started is the quiet reference). With ``--baseline PATH`` (the ``src``
of another checkout) the same runs against that code too, in the same run.

    python benchmarks/partition_stall.py [--streams 100000] [--stream-seconds 120]
                                         [--baseline /tmp/base/src]
"""

from __future__ import annotations

import argparse
import socket
import struct
import threading
import time

from rill.bench.server import RillServer
from rill.protocol.iggy.commands.partitions import CreatePartitions, DeletePartitions
from rill.protocol.iggy.commands.messages import SendMessages
from rill.protocol.iggy.commands.streams import CreateStream, GetStreams
from rill.protocol.iggy.commands.topics import CreateTopic, DeleteTopic, PurgeTopic
from rill.protocol.iggy.commands.users import LoginUser
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.messages import Message, encode_messages
from rill.protocol.iggy.primitives import Identifier, Partitioning

PING = struct.pack("<II", 4, 1)
LOGIN = LoginUser("iggy", "iggy").to_frame()
TIMEOUT = 300.0  # a slow server must not look like a fast one


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return bytes(data)


def reply(sock: socket.socket) -> tuple[int, int]:
    status, length = struct.unpack("<II", read_exactly(sock, 8))
    read_exactly(sock, length)
    return status, length


def call(sock: socket.socket, frame: bytes) -> int:
    sock.sendall(frame)
    status, length = reply(sock)
    if status != 0:
        raise RuntimeError(f"status {status}")
    return length


def connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=TIMEOUT)
    call(sock, LOGIN)
    return sock


class Pinger(threading.Thread):
    """PINGs back to back; ``answered`` holds the time each answer arrived."""

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.sock = connect(address)
        self.answered: list[float] = [time.monotonic()]
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            call(self.sock, PING)
            self.answered.append(time.monotonic())
            time.sleep(0.001)

    def stall(self, start: float, end: float) -> float:
        """The longest time within [start, end] during which no PING was answered (a PING
        is always waiting: they go back to back)."""
        answers = self.answered
        return max((min(later, end) - max(earlier, start)
                    for earlier, later in zip(answers, answers[1:])
                    if later > start and earlier < end), default=0.0)


def create_topic(partitions: int) -> bytes:
    return CreateTopic(Identifier(1), 1, partitions, CompressionAlgorithm.NONE, 0, 0, 0,
                       "many").to_frame()


TOPIC = Identifier(1)


def make_streams(sock: socket.socket, wanted: int, seconds: float) -> int:
    """Create streams 2.. in pipelined groups until ``wanted`` or ``seconds``; how many."""
    made = 0
    stop = time.monotonic() + seconds
    while made < wanted and time.monotonic() < stop:
        group = min(500, wanted - made)
        sock.sendall(b"".join(CreateStream(made + i + 2, f"s{made + i + 2}").to_frame()
                              for i in range(group)))
        for _ in range(group):
            status, _ = reply(sock)
            if status != 0:
                raise RuntimeError(f"create stream: status {status}")
        made += group
    return made


def measure(streams: int, stream_seconds: float, pythonpath: str | None) -> dict[str, float]:
    env = {"RILL_ROOT_PASSWORD_HASH_COST": "4"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    figures: dict[str, float] = {}
    with RillServer(env=env) as server:
        host, port = server.addresses["tcp"].rsplit(":", 1)
        address = (host, int(port))
        admin = connect(address)
        call(admin, CreateStream(1, "many").to_frame())
        pinger = Pinger(address)
        pinger.start()
        time.sleep(1.0)
        windows: dict[str, tuple[float, float]] = {"quiet": (0.0, time.monotonic())}

        def step(name: str, frame: bytes, times: int = 1) -> None:
            began = time.monotonic()
            for _ in range(times):
                call(admin, frame)
            ended = time.monotonic()
            figures[f"{name} s"] = (ended - began) / times
            windows[name] = (began, ended)

        step("create topic, 1000 partitions", create_topic(1000))
        step("create 1000 partitions", CreatePartitions(Identifier(1), TOPIC, 1000).to_frame())
        message = encode_messages([Message(b"m")])
        admin.sendall(b"".join(SendMessages(Identifier(1), TOPIC, Partitioning.partition_id(pid),
                                            message).to_frame() for pid in range(1, 2001)))
        for _ in range(2000):
            if reply(admin)[0] != 0:
                raise RuntimeError("send to a partition refused")
        step("purge topic, 2000 partitions", PurgeTopic(Identifier(1), TOPIC).to_frame())
        step("delete 1000 partitions", DeletePartitions(Identifier(1), TOPIC, 1000).to_frame())
        call(admin, CreatePartitions(Identifier(1), TOPIC, 1000).to_frame())
        step("delete topic, 2000 partitions", DeleteTopic(Identifier(1), TOPIC).to_frame())
        figures["streams"] = 1 + make_streams(admin, streams - 1, stream_seconds)
        step("GET_STREAMS", GetStreams().to_frame(), times=3)
        pinger.done.set()
        pinger.join(timeout=TIMEOUT)  # a PING still waiting at the end of a step counts too
        for name, (began, ended) in windows.items():
            figures[name] = pinger.stall(began, ended)
        admin.close()
    return figures


def report(name: str, figures: dict[str, float]) -> None:
    print(f"{name}:")
    print(f"  quiet{'':45s} longest without a PING answer {figures['quiet'] * 1000:8.1f} ms")
    for step in ("create topic, 1000 partitions", "create 1000 partitions",
                 "purge topic, 2000 partitions", "delete 1000 partitions", "delete topic, 2000 partitions", "GET_STREAMS"):
        label = f"{step} ({int(figures['streams'])} streams)" if step == "GET_STREAMS" else step
        print(f"  {label:40s} took {figures[step + ' s'] * 1000:8.1f} ms, "
              f"longest without a PING answer {figures[step] * 1000:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--stream-seconds", type=float, default=120.0,
                        help="stop creating streams after this long")
    parser.add_argument("--baseline", help="the src directory of another checkout")
    args = parser.parse_args()
    figures = measure(args.streams, args.stream_seconds, None)
    report("this tree", figures)
    if args.baseline:  # as many streams as this tree made, however long they take
        report(f"baseline {args.baseline}",
               measure(int(figures["streams"]), 10 * args.stream_seconds, args.baseline))


if __name__ == "__main__":
    main()
