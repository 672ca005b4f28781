"""The server's share of the one-message round trip (issue 31): produce -> a consumer tailing
with a long poll, over TANK, Kafka and Iggy, with clients that cost next to nothing.

`rill bench ... --round-trips` measures the round trip with rill's asyncio clients, which
spend 200-300 us of CPU per round trip themselves on the same two cores. Here both clients
are blocking sockets in one thread, with no event loop: each round trip writes the
consumer's long poll, then the producer's one-message request (built once), then reads the
consumer's answer (the round trip ends) and the producer's acknowledgement. Requests are
encoded by rill's codecs; answers are only split, not decoded (the consumer's answer is
checked to hold the message's payload). So the figure is what the server adds, plus two
writes and two reads.

    PYTHONPATH=src python benchmarks/round_trip_raw.py [--trips 3000] [--runs 3]

Each run starts a fresh server (fsync interval, as `rill bench`), warms up 200 round trips,
and prints per protocol the p50 and p90 of the round trip, the client's CPU and the server's
CPU per round trip; the last lines are the medians of the runs' p50s.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SRC))

from rill.bench.actors import payload as message_payload  # noqa: E402
from rill.bench.actors import send_region, send_request  # noqa: E402
from rill.bench.cpu import tree_cpu_seconds  # noqa: E402
from rill.bench.server import RillServer  # noqa: E402
from rill.client.link import BlockingLink  # noqa: E402
from rill.client.tank import Batch, consume_request, produce_request  # noqa: E402
from rill.protocol.iggy.commands.long_poll import PollMessagesWaiting  # noqa: E402
from rill.protocol.iggy.commands.messages import PollMessages  # noqa: E402
from rill.protocol.iggy.commands.streams import CreateStream  # noqa: E402
from rill.protocol.iggy.commands.topics import CreateTopic  # noqa: E402
from rill.protocol.iggy.framing import request_header  # noqa: E402
from rill.protocol.iggy.primitives import Consumer, Identifier, PollingStrategy  # noqa: E402
from rill.protocol.kafka import apis, request_class  # noqa: E402
from rill.protocol.kafka import encode_request as kafka_request  # noqa: E402
from rill.protocol.kafka.record_batch import build, put_record  # noqa: E402
from rill.protocol.primitives import CompressionAlgorithm  # noqa: E402
from rill.protocol.tank.messages import CreateTopicRequest  # noqa: E402
from rill.protocol.tank.messages import encode_request as tank_request  # noqa: E402

WARMUP = 200
WAIT_MS = 10_000
PAYLOAD = b"r" * 100
IGGY_STREAM = 77  # (the Kafka listener has stream 1)
_TANK_HEADER = struct.Struct("<BI")
_KAFKA_SIZE = struct.Struct(">i")
_IGGY_HEADER = struct.Struct("<II")  # status, length


def _read(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return bytes(data)


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


# --- the protocols: set up, then (build the long poll, read an answer) ---------------------


class Tank:
    name = "TANK (Consume, long poll)"

    def __init__(self, address: str) -> None:
        self.producer, self.consumer = _connect(address), _connect(address)
        for sock in (self.producer, self.consumer):
            self.read(sock)  # the broker's ping on accept
        self.producer.sendall(tank_request(CreateTopicRequest(1, "raw", 1, b"")))
        self.read(self.producer)
        self.produce = tank_request(produce_request(
            2, [Batch("raw", 0, [PAYLOAD], None, 1_700_000_000_000)]))
        self.seq = 1

    def long_poll(self) -> bytes:
        request = tank_request(consume_request(3, [("raw", 0, self.seq)],
                                               max_wait_ms=WAIT_MS, min_bytes=1))
        self.seq += 1
        return request

    @staticmethod
    def read(sock: socket.socket) -> bytes:
        _, size = _TANK_HEADER.unpack(_read(sock, 5))
        return _read(sock, size)


class Kafka:
    name = "Kafka (Fetch v12, long poll)"

    def __init__(self, address: str) -> None:
        self.producer, self.consumer = _connect(address), _connect(address)
        create = request_class(apis.CREATE_TOPICS)
        topic = create.CreatableTopic(name="raw", num_partitions=1, replication_factor=1,
                                      assignments=(), configs=())
        self.producer.sendall(kafka_request(apis.CREATE_TOPICS, 4, 1, create(
            topics=(topic,), timeout_ms=10_000, validate_only=False)))
        self.read(self.producer)
        block = bytearray()
        put_record(block, 0, 0, None, PAYLOAD)
        batch = build(block, 1, 0, 1_700_000_000_000, 1_700_000_000_000)
        produce = request_class(apis.PRODUCE)
        data = produce.TopicProduceData(name="raw", partition_data=(
            produce.TopicProduceData.PartitionProduceData(index=0, records=batch),))
        self.produce = kafka_request(apis.PRODUCE, 9, 2, produce(
            transactional_id=None, acks=1, timeout_ms=30_000, topic_data=(data,)))
        self.offset = 0
        self.fetch = request_class(apis.FETCH)

    def long_poll(self) -> bytes:
        fetch = self.fetch
        partition = fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=self.offset,
                                                    partition_max_bytes=4096)
        request = kafka_request(apis.FETCH, 12, 3, fetch(
            replica_id=-1, max_wait_ms=WAIT_MS, min_bytes=1, max_bytes=4096, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=(fetch.FetchTopic(topic="raw", partitions=(partition,)),),
            forgotten_topics_data=(), rack_id=""))
        self.offset += 1
        return request

    @staticmethod
    def read(sock: socket.socket) -> bytes:
        (size,) = _KAFKA_SIZE.unpack(_read(sock, 4))
        return _read(sock, size)


class Iggy:
    name = "Iggy (POLL_MESSAGES_WAITING)"

    def __init__(self, address: str) -> None:
        self.links = [BlockingLink(address), BlockingLink(address)]
        for link in self.links:
            link.connect()
            link.login_user("iggy", "iggy")
        setup = self.links[0]
        setup.execute(CreateStream(IGGY_STREAM, "raw"))
        setup.execute(CreateTopic(Identifier.of(IGGY_STREAM), 1, 1, CompressionAlgorithm.NONE,
                                  0, 0, 0, "raw"))
        self.producer, self.consumer = (link._socket for link in self.links)
        for sock in (self.producer, self.consumer):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = send_request(IGGY_STREAM, 1, send_region(1, len(PAYLOAD)))
        self.expected = message_payload(len(PAYLOAD))  # (the bench's a..z payload)
        self.produce = request_header(101, len(payload)) + payload
        self.offset = 0

    def long_poll(self) -> bytes:
        poll = PollMessages(Consumer.regular(1), Identifier.of(IGGY_STREAM), Identifier.of(1), 1,
                            PollingStrategy.offset(self.offset), 1, False)
        self.offset += 1
        return PollMessagesWaiting(poll, WAIT_MS).to_frame()

    @staticmethod
    def read(sock: socket.socket) -> bytes:
        status, size = _IGGY_HEADER.unpack(_read(sock, 8))
        if status:
            raise RuntimeError(f"Iggy answered status {status}")
        return _read(sock, size)


# --- the round trips ---------------------------------------------------------------------


def round_trips(protocol, trips: int, pid: int) -> dict[str, float]:
    producer, consumer, read = protocol.producer, protocol.consumer, protocol.read
    produce = protocol.produce
    expected = getattr(protocol, "expected", PAYLOAD)
    latencies = []
    client = server = 0.0
    for number in range(WARMUP + trips):
        if number == WARMUP:
            client, server = time.process_time(), tree_cpu_seconds(pid)
        consumer.sendall(protocol.long_poll())
        began = time.perf_counter()
        producer.sendall(produce)
        answer = read(consumer)
        ended = time.perf_counter()
        if expected not in answer:
            raise RuntimeError(f"{protocol.name}: the consumer's answer lacks the message")
        read(producer)
        if number >= WARMUP:
            latencies.append(ended - began)
    client, server = time.process_time() - client, tree_cpu_seconds(pid) - server
    latencies.sort()
    return {"p50_ms": statistics.median(latencies) * 1e3,
            "p90_ms": latencies[int(len(latencies) * 0.9)] * 1e3,
            "client_us": client / trips * 1e6, "server_us": server / trips * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trips", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    p50s: dict[str, list[float]] = {}
    env = {"PYTHONPATH": str(SRC), "RILL_TANK_USER": "iggy"}
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="rill-round-trip-raw-") as directory, \
                RillServer(directory, fsync="interval", env=env, tank=True, kafka=True) as server:
            addresses = server.addresses
            for kind, address in ((Tank, addresses["tank"]), (Kafka, addresses["kafka"]),
                                  (Iggy, addresses["tcp"])):
                protocol = kind(address)
                figures = round_trips(protocol, args.trips, server.process.pid)
                p50s.setdefault(kind.name, []).append(figures["p50_ms"])
                print(f"run {run} {kind.name:32} p50 {figures['p50_ms']:.3f} ms  "
                      f"p90 {figures['p90_ms']:.3f} ms  client CPU {figures['client_us']:.0f} us  "
                      f"server CPU {figures['server_us']:.0f} us per round trip", flush=True)
    for name, values in p50s.items():
        print(f"median of {len(values)} runs: {name:32} p50 {statistics.median(values):.3f} ms")


if __name__ == "__main__":
    main()
