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
  the next seq; a round trip is one request and the decoding of its bundle.

Payload bytes are counted per message, MB = 10**6 bytes of payload.
"""

from __future__ import annotations

import time
from pathlib import Path

from rill.bench.peers import RillListenerPeer
from rill.bench.results import ActorResult, Recorder

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
            recorder = Recorder(f"{self.name}-producer", "producer")
            recorder.start()
            for count in self.workload.batch_sizes():
                started = clock()
                await client.produce(TOPIC, 0, payloads[:count],
                                     timestamps=time.time_ns() // 1_000_000)
                recorder.record(clock() - started, count, count * size)
        return recorder.finish()

    async def consume(self) -> ActorResult:
        from rill.client.tank import TankClient

        clock = time.perf_counter
        seq, remaining = 1, self.workload.messages
        async with TankClient("127.0.0.1", self.port) as client:
            recorder = Recorder(f"{self.name}-consumer", "consumer")
            recorder.start()
            while remaining > 0:
                started = clock()
                fetched = (await client.consume([(TOPIC, 0, seq)], fetch_size=1))[0]
                count = len(fetched.values)
                if not count:
                    done = self.workload.messages - remaining
                    raise RuntimeError(f"no message at seq {seq} ({done} of "
                                       f"{self.workload.messages} read)")
                recorder.record(clock() - started, count, sum(map(len, fetched.values)))
                remaining -= count
                seq = fetched.next_seq
        return recorder.finish()
