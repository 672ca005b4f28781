"""The short path of the common Consume (``protocols.tank.data._consume_stored``: one
partition, a seq inside what is stored), on a core in this process: it answers the requests a
tailing consumer makes, byte for byte as the general path (``_consume_planned``) answers them,
over plain, keyed, Snappy, sparse and ProduceWithSeqnum bundles and every fetch size; and it
leaves everything else (seq 0, EOF, out of bounds, a hole, an unknown topic or partition) to
the general path."""

from __future__ import annotations

import asyncio
import time

from rill.client.tank import Batch, consume_request, produce_request
from rill.protocol.tank import messages as m
from rill.protocol.tank.bundles import decode_chunk
from rill.protocol.tank.errors import ConsumeFlag
from rill.server.config import ServerConfig
from rill.server.core.core import Core
from rill.server.protocols.tank import data
from rill.server.protocols.tank.dispatch import TankSettings
from rill.server.protocols.tank.handler import TankProtocol

TS = 1_700_000_000_000
FETCH_SIZES = (1, 150, 700, 1 << 20)


def encoded(response: m.ConsumeResponse) -> bytes:
    return b"".join(bytes(part) for part in m.encode_response_parts(response))


def run_on_core(tmp_path, scenario) -> None:
    async def main() -> None:
        config = ServerConfig()
        config.system.path = str(tmp_path / "data")
        config.root.password_hash_cost = 4
        core = Core(config)
        await core.start()
        try:
            settings = TankSettings(config.tank_stream, time.time())
            protocol = TankProtocol(settings, 1)
            session = core.broker.connect("127.0.0.1:1", "tcp")
            protocol.open_session(core, session)

            async def call(request) -> None:
                reply = await protocol.handle_request(
                    core, session, request.msg_id, memoryview(m.encode_request(request)[5:]))
                assert reply.parts and not reply.close

            await call(m.CreateTopicRequest(1, "mixed", 2, b""))
            batches = [
                Batch("mixed", 0, [b"a", b"b", b"c"], timestamps=TS),
                Batch("mixed", 0, [b"v%d" % i * 20 for i in range(40)],
                      keys=[b"k%d" % i if i % 3 else None for i in range(40)],
                      timestamps=[TS + i for i in range(40)]),
                Batch("mixed", 0, [bytes([i]) * 300 for i in range(8)], timestamps=TS,
                      codec="snappy"),
                Batch("mixed", 0, [b"d"], timestamps=TS),
                Batch("mixed", 0, [b"s1", b"s2", b"s3"], seqs=[60, 61, 65], timestamps=TS),
                Batch("mixed", 0, [b"e%d" % i for i in range(5)], timestamps=TS),
            ]
            for number, batch in enumerate(batches):
                await call(produce_request(10 + number, [batch], now_ms=TS))
            await call(produce_request(20, [Batch("mixed", 0, [b"w1", b"w2"], timestamps=TS)],
                                       first_seq=80, now_ms=TS))
            await call(produce_request(21, [Batch("mixed", 0, [b"x"] * 4, timestamps=TS)],
                                       now_ms=TS))
            await scenario(core, session, settings)
        finally:
            await core.stop()

    asyncio.run(main())


def test_answers_as_the_general_path_does_byte_for_byte(tmp_path):
    async def scenario(core, session, settings):
        hwm = core.broker.reader(session, data.ref(settings, "mixed", 0)).bounds()
        last = hwm.high_watermark
        assert last == 85
        short = set()
        for seq in range(0, last + 3):
            for fetch_size in FETCH_SIZES:
                request = consume_request(7, [("mixed", 0, seq)], fetch_size=fetch_size)
                planned = data._consume_planned(core, session, settings, request)
                assert isinstance(planned, m.ConsumeResponse)
                stored = data._consume_stored(core, session, settings, request)
                answer = data.consume(core, session, settings, request)
                assert encoded(answer) == encoded(planned), (seq, fetch_size)
                if stored is not None:
                    short.add((seq, fetch_size))
                    assert encoded(stored) == encoded(planned), (seq, fetch_size)
        # one batch a read: the seq of every stored message took the short path, and none in
        # a hole (53..59 before the sparse bundle, 71..79 before ProduceWithSeqnum's 80: the
        # general path checks those against the first available)
        assert {seq for seq, fetch_size in short if fetch_size == 1} == (
            set(range(1, 86)) - set(range(53, 60)) - set(range(71, 80)))
        assert len(short) > 3 * 69

    run_on_core(tmp_path, scenario)


def test_a_tailing_consumer_reads_every_message_through_it(tmp_path):
    async def scenario(core, session, settings):
        seq, values, general = 1, [], []
        while seq <= 85:
            request = consume_request(8, [("mixed", 0, seq)], fetch_size=1)
            answer = data._consume_stored(core, session, settings, request)
            if answer is None:
                general.append(seq)
                answer = data.consume(core, session, settings, request)
            (part,) = answer.topics[0].partitions
            assert part.flag == ConsumeFlag.OK and part.hwm == 85
            chunk = decode_chunk(part.chunk, part.base)
            values += chunk.values
            seq = chunk.seqs[-1] + 1
        assert general == [53, 71]  # in a hole: the general path's
        assert values[:3] == [b"a", b"b", b"c"] and values[-6:] == [b"w1", b"w2"] + [b"x"] * 4
        assert len(values) == 3 + 40 + 8 + 1 + 3 + 5 + 2 + 4

    run_on_core(tmp_path, scenario)


def test_leaves_everything_else_to_the_general_path(tmp_path):
    async def scenario(core, session, settings):
        for wanted in ([("mixed", 0, 0)], [("mixed", 0, 86)], [("mixed", 0, 2**64 - 1)],
                       [("mixed", 0, 500)], [("mixed", 0, 55)], [("mixed", 1, 1)],
                       [("mixed", 2, 1)], [("nope", 0, 1)],
                       [("mixed", 0, 1), ("mixed", 0, 5)]):
            request = consume_request(9, wanted)
            assert data._consume_stored(core, session, settings, request) is None, wanted
            answer = data.consume(core, session, settings, request)
            assert isinstance(answer, m.ConsumeResponse)
            assert encoded(answer) == encoded(data._consume_planned(core, session, settings,
                                                                    request))

    run_on_core(tmp_path, scenario)
