"""Server CPU per request, sockets excluded: what the per-request path (framing, decoding, the
protocol's dispatch, the core, the answer) costs, without the kernel's and the client's share.

Per code variant (``--code NAME=SRC_DIR``, put first on ``PYTHONPATH`` of a process of its own;
e.g. a checkout built with ``setup.py build_ext --inplace``): start a Core in a temporary data
directory (fsync never), feed Iggy frames to a ``TcpConnection`` with a stand-in transport that
counts replies, and time SEND of 10 x 100-byte messages and POLL of 10 messages by offset; then
Kafka frames to a Kafka ``TcpConnection`` (as root), with ``--topics`` other topics in the Kafka
stream beside the one written: Produce v9 of 10 x 100-byte records and Metadata v12 of that one
topic (what a request costs among many topics); then TANK frames to a TANK ``TcpConnection``
in the same stream (so among the same topics): Produce of one bundle of 10 x 100 B and Consume
of one bundle from a fixed seq. The process CPU time per request, best of
``--repeats``. Variants run interleaved, ``--runs`` times, and the medians are printed with each
variant's ratio to the first.

    python benchmarks/request_cost.py --code new=src --code base=/tmp/rill-base/src --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r'''
import asyncio, json, shutil, struct, sys, tempfile, time, uuid
import uvloop
try:  # the Iggy codec in its package (rill.protocol.iggy)
    from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
    from rill.protocol.iggy.commands.streams import CreateStream
    from rill.protocol.iggy.commands.topics import CreateTopic
    from rill.protocol.iggy.messages import encode_messages
    from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy
except ImportError:  # a tree from before it moved there (a base to compare with)
    from rill.protocol.commands.messages import PollMessages, SendMessages
    from rill.protocol.commands.streams import CreateStream
    from rill.protocol.commands.topics import CreateTopic
    from rill.protocol.messages import encode_messages
    from rill.protocol.primitives import Consumer, Identifier, Partitioning, PollingStrategy
from rill.protocol.kafka import apis, encode_request, record_batch, request_class
from rill.protocol.primitives import CompressionAlgorithm
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.protocols.iggy.handler import IGGY
from rill.server.protocols.kafka.dispatch import KafkaSettings
from rill.server.protocols.kafka.handler import KafkaProtocol
try:
    from rill.server.storage.formats.iggy_v1 import ACCELERATED
except ImportError:  # a tree from before storage/formats/
    from rill.server.storage.records import ACCELERATED
from rill.server.transports.tcp import TcpConnection, TcpListener
try:
    from rill.client.tank import Batch, consume_request, produce_request
    from rill.protocol.tank.messages import CreateTopicRequest, encode_request as tank_frame
    from rill.server.protocols.tank.dispatch import TankSettings
    from rill.server.protocols.tank.handler import TankProtocol
except ImportError:  # a tree without the TANK listener
    TankProtocol = None

SENDS, POLLS, REPEATS, TOPICS = (int(value) for value in sys.argv[1:5])


def frame(command):
    payload = command.encode()
    return struct.pack("<II", len(payload) + 4, command.CODE) + payload


class Transport:  # counts replies; stands in for the socket
    def __init__(self):
        self.waiter = None

    def get_extra_info(self, key, default=None):
        return ("127.0.0.1", 5000) if key == "peername" else default

    def writelines(self, parts):
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def write(self, data):
        self.writelines([data])

    def pause_reading(self): pass
    def resume_reading(self): pass
    def is_closing(self): return False
    def close(self): pass
    def abort(self): pass


def kafka_frames(topics):
    """CreateTopics of ``topics`` names, Produce v9 of 10 x 100 B records to the first, and
    Metadata v12 of the first."""
    create = request_class(apis.CREATE_TOPICS)
    creations = [encode_request(apis.CREATE_TOPICS, 5, 1, create(
        topics=(create.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                      assignments=(), configs=()),),
        timeout_ms=1000, validate_only=False)) for name in topics]
    block = bytearray()
    for delta in range(10):
        record_batch.put_record(block, delta, 0, None, b"x" * 100)
    produce = request_class(apis.PRODUCE)
    data = produce.TopicProduceData(name=topics[0], partition_data=(
        produce.TopicProduceData.PartitionProduceData(
            index=0, records=record_batch.build(block, 10, 9, 0, 0)),))
    metadata = request_class(apis.METADATA)
    return creations, [
        ("kafka produce 10 x 100 B", encode_request(apis.PRODUCE, 9, 1, produce(
            transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=(data,))), SENDS),
        ("kafka metadata 1 topic", encode_request(apis.METADATA, 12, 1, metadata(
            topics=(metadata.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=topics[0]),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)), POLLS),
    ]


def connect(core, protocol):
    connection = TcpConnection(TcpListener(core, protocol, "127.0.0.1", 0, 64 << 20))
    transport = Transport()
    connection.connection_made(transport)
    connection.connection.session.user_id = 1  # root, as after a login
    return connection, transport


async def main():
    config = ServerConfig()
    scratch = tempfile.mkdtemp(prefix="rill-request-cost-")
    config.system.path = scratch + "/data"
    config.system.fsync = "never"
    core = Core(config)
    await core.start()
    iggy = connect(core, IGGY)
    loop = asyncio.get_running_loop()

    async def request(data, link=iggy):
        connection, transport = link
        transport.waiter = loop.create_future()
        position = 0
        while position < len(data):
            buffer = connection.get_buffer(-1)
            size = min(len(buffer), len(data) - position)
            buffer[:size] = data[position:position + size]
            position += size
            connection.buffer_updated(size)
        await transport.waiter

    one = Identifier(1)
    await request(frame(CreateStream(1, "s")))
    await request(frame(CreateTopic(one, 1, 1, CompressionAlgorithm.NONE, 0, 0, 1, "t")))
    send = frame(SendMessages(one, one, Partitioning.partition_id(1),
                              encode_messages([b"x" * 100] * 10)))
    poll = frame(PollMessages(Consumer.regular(1), one, one, 1, PollingStrategy.offset(0), 10,
                              False))
    for _ in range(200):
        await request(send)
    creations, kafka = kafka_frames(["t"] + [f"other-{number}" for number in range(TOPICS)])
    timed = [("send 10 x 100 B", send, SENDS, iggy), ("poll 10", poll, POLLS, iggy)]
    link = connect(core, KafkaProtocol(KafkaSettings("kafka", "127.0.0.1", 9092)))
    for data in creations:
        await request(data, link)
    for _ in range(200):
        await request(kafka[0][1], link)
    timed += [(name, data, count, link) for name, data, count in kafka]
    if TankProtocol is not None:
        tank = connect(core, TankProtocol(TankSettings("kafka", time.time()), 1))
        await request(tank_frame(CreateTopicRequest(1, "tk", 1, b"")), tank)
        produce = tank_frame(produce_request(2, [Batch("tk", 0, [b"x" * 100] * 10, None,
                                                        1_700_000_000_000)]))
        for _ in range(200):
            await request(produce, tank)
        consume = tank_frame(consume_request(3, [("tk", 0, 11)], fetch_size=1))
        timed += [("tank produce 10 x 100 B", produce, SENDS, tank),
                  ("tank consume 10", consume, POLLS, tank)]
    figures = {}
    for name, data, count, link in timed:
        best = float("inf")
        for _ in range(REPEATS):
            started = time.process_time()
            for _ in range(count):
                await request(data, link)
            best = min(best, (time.process_time() - started) / count)
        figures[name] = best * 1e6
    await core.stop()
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"figures": figures, "accelerated": ACCELERATED}))


uvloop.run(main())
'''


def measure(source: str, sends: int, polls: int, repeats: int, topics: int) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": os.path.abspath(source)}
    done = subprocess.run([sys.executable, "-c", WORKER, str(sends), str(polls), str(repeats),
                           str(topics)],
                          env=environment, capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if not answer["accelerated"]:
        print(f"note: {source} runs without the C stamper (build it there: python setup.py "
              "build_ext --inplace); its SENDs are not comparable", file=sys.stderr)
    return answer["figures"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", action="append", required=True, metavar="NAME=SRC_DIR",
                        help="a variant: its name and the src directory of its code")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per process (best)")
    parser.add_argument("--sends", type=int, default=5000, help="SENDs per round")
    parser.add_argument("--polls", type=int, default=10000, help="POLLs (Metadatas) per round")
    parser.add_argument("--topics", type=int, default=1000,
                        help="other topics in the Kafka stream")
    args = parser.parse_args()
    variants = [tuple(code.split("=", 1)) for code in args.code]
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    for run in range(1, args.runs + 1):
        for name, source in variants:
            figures = measure(source, args.sends, args.polls, args.repeats, args.topics)
            results[name].append(figures)
            print(f"run {run} {name:>10}: " + "  ".join(
                f"{label} {value:6.2f} µs" for label, value in figures.items()), flush=True)
    print(f"median of {args.runs} (server CPU per request, best of {args.repeats} rounds):")
    first = None
    for name, _ in variants:
        medians = {label: statistics.median(run[label] for run in results[name])
                   for label in results[name][0]}
        ratios = "" if first is None else "  (" + ", ".join(
            f"{medians[label] / first[label]:.2f}x" for label in medians) + f" of {variants[0][0]})"
        first = first or medians
        print(f"{name:>10}: " + "  ".join(f"{label} {value:6.2f} µs"
                                          for label, value in medians.items()) + ratios)


if __name__ == "__main__":
    main()
