"""The short path of the common Consume (``protocols.tank.data._consume_stored``: one
partition, a seq inside what is stored), on a core in this process: it answers the requests a
tailing consumer makes, byte for byte as the general path (``_consume_planned``) answers them,
over plain, keyed, Snappy, sparse and ProduceWithSeqnum bundles and every fetch size; and it
leaves everything else (seq 0, EOF, out of bounds, a hole, an unknown topic or partition) to
the general path. Pipelined Consumes served together (``consume_all``) are answered each as
alone, the partitions looked up once a run; over a socket, a burst of them with a long poll
among them is answered in order, the long poll when data comes."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from rill.client.tank import Batch, TankClient, consume_request, produce_request
from rill.protocol.tank import messages as m
from rill.protocol.tank.bundles import decode_chunk
from rill.protocol.tank.errors import ConsumeFlag
from rill.server.protocols.tank import data
from rill.server.protocols.tank.handler import TankProtocol
from in_process_core import run_with_tank
from server_process import RillProcess

TS = 1_700_000_000_000
FETCH_SIZES = (1, 150, 700, 1 << 20)


def encoded(answer) -> bytes:
    """A Consume answer's frame: ``_consume_stored``'s is encoded already."""
    parts = answer if type(answer) is list else m.encode_response_parts(answer)
    return b"".join(bytes(part) for part in parts)


def partition_of(answer) -> m.ConsumePartitionResult:
    """The one partition of an answer, as a client decodes it."""
    frame = encoded(answer)
    (part,) = m.decode_response(frame[0], frame[5:]).topics[0].partitions
    return part


def run_on_core(tmp_path, scenario, segment_size: int | None = None) -> None:
    """``scenario(core, session, settings)`` with topic "mixed" of two partitions, partition 0
    holding plain, keyed, Snappy, sparse and ProduceWithSeqnum bundles (seqs 1..85, holes
    53..59, 62..64 and 71..79)."""
    async def prepared(core, session, settings, call) -> None:
        async def done(request) -> None:
            reply = await call(request)
            assert reply.parts and not reply.close

        await done(m.CreateTopicRequest(1, "mixed", 2, b""))
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
            await done(produce_request(10 + number, [batch], now_ms=TS))
        await done(produce_request(20, [Batch("mixed", 0, [b"w1", b"w2"], timestamps=TS)],
                                   first_seq=80, now_ms=TS))
        await done(produce_request(21, [Batch("mixed", 0, [b"x"] * 4, timestamps=TS)],
                                   now_ms=TS))
        await scenario(core, session, settings)

    def configure(config) -> None:
        if segment_size is not None:
            config.system.segment.size = segment_size

    run_with_tank(tmp_path, prepared, configure)


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
                stored = data._consume_stored(core, session, settings, request, data._Run([]))
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
            answer = data._consume_stored(core, session, settings, request, data._Run([]))
            if answer is None:
                general.append(seq)
                answer = data.consume(core, session, settings, request)
            part = partition_of(answer)
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
            stored = data._consume_stored(core, session, settings, request, data._Run([]))
            assert stored is None, wanted
            answer = data.consume(core, session, settings, request)
            assert isinstance(answer, m.ConsumeResponse)
            assert encoded(answer) == encoded(data._consume_planned(core, session, settings,
                                                                    request))

    run_on_core(tmp_path, scenario)


def test_a_run_is_answered_each_as_alone_with_one_lookup_a_partition(tmp_path):
    """``consume_all``: a run mixing the short path, the general one (EOF, a hole, seq 0, an
    unknown topic, two partitions) and a long poll answers each request as ``consume`` does
    alone; the partition is looked up once for the run; a new run sees what was appended
    since the last one."""
    async def scenario(core, session, settings):
        wanted = [[("mixed", 0, 1)], [("mixed", 0, 4)], [("mixed", 0, 55)], [("nope", 0, 1)],
                  [("mixed", 0, 0)], [("mixed", 0, 44)], [("mixed", 0, 1), ("mixed", 1, 1)],
                  [("mixed", 0, 86)], [("mixed", 0, 82)]]
        run = [consume_request(30 + n, one, fetch_size=200) for n, one in enumerate(wanted)]
        alone = [data.consume(core, session, settings, one) for one in run]
        lookups = []
        opened = data._open_stored

        def counted(*args):
            lookups.append(args[3:5])
            return opened(*args)

        data._open_stored = counted
        try:
            together = data.consume_all(core, session, settings, run)
        finally:
            data._open_stored = opened
        assert [encoded(one) for one in together] == [encoded(one) for one in alone]
        assert lookups == [("mixed", 0), ("nope", 0)]
        # answers past RUN_ANSWER_BYTES: the first of them only, the connection hands the
        # rest over again
        kept = data.RUN_ANSWER_BYTES
        data.RUN_ANSWER_BYTES = len(encoded(alone[0])) + len(encoded(alone[1])) - 100
        try:
            first = data.consume_all(core, session, settings, run)
        finally:
            data.RUN_ANSWER_BYTES = kept
        assert [encoded(one) for one in first] == [encoded(one) for one in alone[:2]]
        # at EOF with a wait: an awaitable in its place, answered once data comes
        waiting = consume_request(50, [("mixed", 0, 86)], max_wait_ms=5000)
        later = data.consume_all(core, session, settings, [run[0], waiting, run[1]])
        assert type(later[0]) is list and type(later[2]) is list  # answered, encoded
        task = asyncio.ensure_future(later[1])
        await asyncio.sleep(0.05)
        assert not task.done()
        protocol = TankProtocol(settings, 1)
        reply = await protocol.handle_request(core, session, m.MsgId.PRODUCE, memoryview(
            m.encode_request(produce_request(51, [Batch("mixed", 0, [b"new"], timestamps=TS)],
                                             now_ms=TS))[5:]))
        assert reply.parts
        (part,) = (await asyncio.wait_for(task, 5)).topics[0].partitions
        assert decode_chunk(part.chunk, part.base).values == [b"new"]
        # a new run reads what came since
        (answer,) = data.consume_all(core, session, settings,
                                     [consume_request(52, [("mixed", 0, 86)])])
        part = partition_of(answer)
        assert part.hwm == 86 and decode_chunk(part.chunk, part.base).values == [b"new"]

    run_on_core(tmp_path, scenario)


def test_a_long_poll_at_the_end_is_answered_as_the_general_path_answers_it(tmp_path):
    """At the partition's end with a wait, the short path waits on the partition it opened
    (``_tail``): woken by a produce, timed out with too few bytes, and with the data there
    before the wait starts, its answer is the general path's, byte for byte; without a wait
    it leaves the answer (the first available) to the general path."""
    async def scenario(core, session, settings):
        protocol = TankProtocol(settings, 1)

        async def produce(number: int, values: list[bytes]) -> None:
            reply = await protocol.handle_request(core, session, m.MsgId.PRODUCE, memoryview(
                m.encode_request(produce_request(number, [Batch("mixed", 0, values,
                                                                timestamps=TS)],
                                                 now_ms=TS))[5:]))
            assert reply.parts

        last = 85
        immediate = consume_request(60, [("mixed", 0, last + 1)])
        assert data._consume_stored(core, session, settings, immediate, data._Run([])) is None
        for number, (values, min_bytes, wait_ms) in enumerate([
                ([b"woken-1", b"woken-2"], 1, 5000),  # woken by the produce
                ([b"few"], 10_000, 300),  # timed out: fewer bytes than min_bytes came
                ([b"no"], 1, 5000)]):  # produced before the waits begin
            request = consume_request(61 + number, [("mixed", 0, last + 1)],
                                      max_wait_ms=wait_ms, min_bytes=min_bytes)
            tail = data._consume_stored(core, session, settings, request, data._Run([]))
            assert asyncio.iscoroutine(tail)
            planned = data._consume_planned(core, session, settings, request)
            assert not isinstance(planned, m.ConsumeResponse)
            if number == 2:
                await produce(70 + number, values)
            waits = asyncio.gather(tail, planned)
            await asyncio.sleep(0.05)
            if number < 2:
                await produce(70 + number, values)
            short, general = await asyncio.wait_for(waits, 5)
            assert encoded(short) == encoded(general)
            part = partition_of(short)
            if number == 1:
                assert part.base == 0 and not bytes(part.chunk)  # the timed-out form
            else:
                assert decode_chunk(part.chunk, part.base).values == values
            last += len(values)

    run_on_core(tmp_path, scenario)


@pytest.mark.parametrize("seed", range(6))
def test_a_run_reading_ahead_answers_each_request_as_alone(tmp_path, seed):
    """The batches a run reads ahead for the requests behind its first (``_Opened.read``)
    answer each request with the bytes a read of its own gives: batches of many sizes across
    small segments, fetch sizes that cut inside and past what was read ahead, seqs in and out
    of order, repeated, in holes and past the end."""
    rng = random.Random(seed)

    async def scenario(core, session, settings):
        protocol = TankProtocol(settings, 1)
        for number in range(40):
            size = rng.choice([1, 2, 5, 30, 100])
            batch = Batch("mixed", 1, [rng.randbytes(rng.choice([10, 200, 900]))
                                       for _ in range(size)], timestamps=TS + number)
            reply = await protocol.handle_request(core, session, m.MsgId.PRODUCE, memoryview(
                m.encode_request(produce_request(100 + number, [batch], now_ms=TS))[5:]))
            assert reply.parts
        last = core.broker.reader(session, data.ref(settings, "mixed", 1)).bounds()
        last = last.high_watermark
        for _round in range(8):
            start = rng.randint(1, last)
            seqs = sorted(rng.randint(start, last) for _ in range(rng.randint(2, 40)))
            if rng.random() < 0.3:
                seqs.reverse()
            seqs += rng.sample([1, last, last + 1, 0], 2)
            run = [consume_request(n, [("mixed", 1, seq)],
                                   fetch_size=rng.choice([1, 300, 5_000, 60_000]))
                   for n, seq in enumerate(seqs)]
            alone = [data.consume(core, session, settings, one) for one in run]
            together = data.consume_all(core, session, settings, run)
            assert [encoded(one) for one in together] == [encoded(one) for one in alone]

    run_on_core(tmp_path, scenario, segment_size=64 * 1024)


def value(n: int, i: int) -> bytes:
    return b"m%02d-%d" % (n, i) + bytes([n]) * 30_000


def test_a_burst_of_pipelined_consumes_is_answered_in_order_and_a_long_poll_later(tmp_path):
    """Over a socket: a bundle after another is asked for by sixty Consume requests written at
    once, a long poll at the end of the partition among them: each is answered with its own
    id and bundle in the order sent (5 MB of answers: more than one run holds,
    ``data.RUN_ANSWER_BYTES``), the long poll once a produce on another connection brings
    data, after the requests behind it."""
    assert 60 * 90_000 > data.RUN_ANSWER_BYTES
    process = RillProcess(tmp_path / "data", env={
        "RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
        "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}).start()

    async def scenario():
        async with TankClient(*process.tank_address) as client, \
                TankClient(*process.tank_address) as producer:
            name = "burst-" + uuid.uuid4().hex[:8]
            assert await client.create_topic(name, 1) == 0
            for n in range(60):  # 60 bundles of 90 KB: answers past one run's RUN_ANSWER_BYTES
                await producer.produce(name, 0, [value(n, i) for i in range(3)],
                                       timestamps=TS)
            requests = [consume_request(100 + n, [(name, 0, 1 + 3 * n)], fetch_size=1)
                        for n in range(60)]
            requests.insert(30, consume_request(99, [(name, 0, 181)], max_wait_ms=10_000))
            order: list[int] = []
            futures = client.pipeline(requests)
            for one, future in zip(requests, futures):
                future.add_done_callback(lambda _f, rid=one.request_id: order.append(rid))
            answered = await asyncio.wait_for(asyncio.gather(*futures[:30], *futures[31:]), 30)
            assert not futures[30].done()
            await producer.produce(name, 0, [b"late"], timestamps=TS)
            late = await asyncio.wait_for(futures[30], 10)
            return answered, late, order

    try:
        answered, late, order = asyncio.run(scenario())
    finally:
        process.kill()
    assert order == [100 + n for n in range(60)] + [99]
    for n, response in enumerate(answered):
        (part,) = response.topics[0].partitions
        assert part.flag == ConsumeFlag.OK and part.base == 1 + 3 * n
        assert decode_chunk(part.chunk, part.base).values == [value(n, i) for i in range(3)]
    (part,) = late.topics[0].partitions
    assert decode_chunk(part.chunk, part.base).values == [b"late"]
