"""The TANK-protocol target: rill's TANK listener, driven by rill's own TANK client.

Owns: the client side of the workload over TANK (``RillTankPeer``, ``rill-tank`` in the report):
rill started by the bench (``RillServer(tank=True)``) with the workload's fsync policy, its
TANK listener on 127.0.0.1, port 0, and ``rill.client.tank.TankClient`` (the bundle loops in C,
``rill.protocol.tank._bundles``) on one connection:

* publish: one topic of one partition (CreateTopic), then per batch one Produce request carrying
  one uncompressed bundle of ``batch`` messages (the bundle built per batch, as a client does);
  a round trip is the request until its answer, one request in flight (as rill's ``send``);
* consume: Consume requests from seq 1 with ``fetch_size`` 1, which the broker answers with
  exactly one whole bundle (one stored batch: ``batch`` messages); the next request asks for
  the next seq; a round trip is one request and the reading of its bundle headers
  (``TankClient.consume_raw``: messages counted from each bundle's header, never decoded one
  by one), as rill's Iggy consumer counts a POLL reply and ``rill-kafka-wire`` a Fetch's
  batch headers: clients of the same cost, so that the listeners are what is compared.

* round trip (``rill.bench.round_trip``): Produce of a one-message bundle on one connection; on
  another, Consume from the tail (the next seq, learnt with ``SEQ_ONLY_NEW``) with ``max_wait_ms``
  and ``min_bytes`` 1, the broker's long poll.

Payload bytes are counted per message (consume: messages × the workload's message size),
MB = 10**6 bytes of payload.
"""

from __future__ import annotations

import time
from pathlib import Path

from rill.bench.peers import RillListenerPeer
from rill.bench.results import ActorResult

TOPIC = "rill-bench"


class RillTankPeer(RillListenerPeer):
    name = "rill-tank"
    client = "rill.client.tank.TankClient"

    listener = "tank"

    def start(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.start_rill(workdir)

    async def publish(self) -> ActorResult:
        from rill.client.tank import TankClient

        payloads = self.workload.payloads()
        size = self.workload.message_size
        clock = time.perf_counter
        async with TankClient("127.0.0.1", self.port) as client:
            code = await client.create_topic(TOPIC, 1)
            if code not in (0, 1):
                raise RuntimeError(f"CreateTopic {TOPIC} answered {code}")
            recorder = self.recorder("producer")
            recorder.start()
            for count in self.workload.batch_sizes():
                started = clock()
                await client.produce(TOPIC, 0, payloads[:count],
                                     timestamps=time.time_ns() // 1_000_000)
                recorder.record(clock() - started, count, count * size)
        return recorder.finish()

    async def round_trip(self) -> ActorResult:
        from rill.bench.round_trip import WAIT_MS, run_round_trips
        from rill.client.tank import TankClient
        from rill.protocol.tank.messages import SEQ_ONLY_NEW

        payload = self.workload.payloads()[:1]
        async with TankClient("127.0.0.1", self.port) as producer, \
                TankClient("127.0.0.1", self.port) as tail:
            code = await producer.create_topic(TOPIC, 1)
            if code not in (0, 1):
                raise RuntimeError(f"CreateTopic {TOPIC} answered {code}")
            (end,) = await tail.consume([(TOPIC, 0, SEQ_ONLY_NEW)])
            cursor = end.next_seq

            async def produce() -> None:
                await producer.produce(TOPIC, 0, payload, timestamps=time.time_ns() // 1_000_000)

            async def receive() -> None:
                nonlocal cursor
                while True:
                    (part,) = await tail.consume([(TOPIC, 0, cursor)], max_wait_ms=WAIT_MS, min_bytes=1)
                    if part.values:
                        cursor = part.next_seq
                        return

            return await run_round_trips(produce, receive, self.workload.round_trips,
                                         self.recorder("producer"), self.workload.message_size)

    async def consume(self) -> ActorResult:
        from rill.client.tank import TankClient
        from rill.protocol.tank.bundles import decode_header, split_chunk

        clock = time.perf_counter
        seq, remaining, size = 1, self.workload.messages, self.workload.message_size
        async with TankClient("127.0.0.1", self.port) as client:
            recorder = self.recorder("consumer")
            recorder.start()
            while remaining > 0:
                started = clock()
                answer = await client.consume_raw([(TOPIC, 0, seq)], fetch_size=1)
                part = answer.topics[0].partitions[0]
                count, next_seq = 0, part.base
                for bundle in split_chunk(part.chunk)[0]:
                    head = decode_header(bundle)
                    count += head.count
                    next_seq = head.last_seq + 1 if head.sparse else next_seq + head.count
                if not count:
                    done = self.workload.messages - remaining
                    raise RuntimeError(f"no message at seq {seq} (flag {part.flag}; {done} of "
                                       f"{self.workload.messages} read)")
                recorder.record(clock() - started, count, count * size)
                remaining -= count
                seq = next_seq
        return recorder.finish()
