"""Pipelined Produce requests served together (``protocols.tank.data.produce_all``, what the
connection loop hands the TANK protocol when Produce requests wait one behind the other): on a
core in this process, a run of requests for one partition is one append, each request is
answered on its own, and what they carry is stored in their order; requests of other shapes
or partitions are produced alone, in their place. Over a socket: a burst of pipelined
Produce requests is answered request by request and read back in order."""

from __future__ import annotations

import asyncio
import uuid

from rill.client.tank import Batch, TankClient, produce_request, produce_results
from rill.protocol.tank import messages as m
from rill.protocol.tank.bundles import decode_chunk
from rill.protocol.tank.errors import ProduceError
from rill.server.core.core import Core
from rill.server.protocols.tank import data
from rill.server.protocols.tank.dispatch import TankSettings
from in_process_core import run_with_tank
from server_process import RillProcess

TS = 1_700_000_000_000
TANK_ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
            "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}


def request(request_id: int, topic: str, partition: int, values: list[bytes], **options
            ) -> m.ProduceRequest:
    return produce_request(request_id, [Batch(topic, partition, values, None, TS)],
                           now_ms=TS, **options)


def broken(request_id: int, topic: str, partition: int) -> m.ProduceRequest:
    """A request whose bundle header reads but whose messages do not (cut short)."""
    whole = request(request_id, topic, partition, [b"lost-1", b"lost-2", b"lost-3"])
    part = whole.topics[0].partitions[0]
    cut = m.ProducePartition(part.partition, bytes(part.bundle)[:-4])
    return m.ProduceRequest(request_id, (m.ProduceTopic(topic, (cut,)),))


def codes(requests: list[m.ProduceRequest], responses: list) -> list[int]:
    """The codes of the answers (``produce_all``'s come encoded, or as responses), in order,
    each answering its request's id."""
    responses = [m.decode_response(one[0], one[5:]) if type(one) is bytes else one
                 for one in responses]
    assert [r.request_id for r in responses] == [r.request_id for r in requests]
    return [code for request, response in zip(requests, responses)
            for _topic, _partition, code in produce_results(request, response)]


def run_on_core(tmp_path, scenario) -> None:
    """``scenario(core, session, settings, appends)`` with topics "orders" and "other" of two
    partitions; ``appends``: the region of every append the broker made since."""
    async def prepared(core, session, settings, call) -> None:
        for name in ("orders", "other"):
            assert (await call(m.CreateTopicRequest(1, name, 2, b""))).parts
        appends: list[bytes] = []
        append = core.broker.append

        def counted(session_, where, region, *args, **kwargs):
            appends.append(bytes(region))
            return append(session_, where, region, *args, **kwargs)

        core.broker.append = counted  # (a spy: every append still happens)
        await scenario(core, session, settings, appends)

    run_with_tank(tmp_path, prepared)


def test_a_run_for_one_partition_is_one_append_and_every_request_is_answered(tmp_path):
    async def scenario(core, session, settings, appends) -> None:
        run = [request(n, "orders", 0, [b"a%d-%d" % (n, i) for i in range(3)])
               for n in range(1, 6)]
        responses = await data.produce_all(core, session, settings, run)
        assert codes(run, responses) == [ProduceError.OK] * 5
        assert len(appends) == 1  # five bundles, one write
        values = await read_values(core, settings, "orders", 0)
        assert values == [b"a%d-%d" % (n, i) for n in range(1, 6) for i in range(3)]

    run_on_core(tmp_path, scenario)


def test_other_shapes_and_partitions_are_produced_alone_in_their_place(tmp_path):
    """A run ends where the partition, the topic or the shape changes (two partitions in one
    request, explicit numbers): those are produced alone, and the order of every partition's
    records is the order of the requests."""
    async def scenario(core, session, settings, appends) -> None:
        both = produce_request(4, [Batch("orders", 0, [b"p0-both"], None, TS),
                                   Batch("orders", 1, [b"p1-both"], None, TS)], now_ms=TS)
        numbered = produce_request(7, [Batch("orders", 0, [b"p0-numbered"], None, TS)],
                                   first_seq=100, now_ms=TS)
        run = [request(1, "orders", 0, [b"p0-1"]), request(2, "orders", 0, [b"p0-2"]),
               request(3, "orders", 1, [b"p1-3"]), both, request(5, "other", 0, [b"o-5"]),
               request(6, "other", 0, [b"o-6"]), numbered, request(8, "orders", 0, [b"p0-8"])]
        responses = await data.produce_all(core, session, settings, run)
        assert codes(run, responses) == [ProduceError.OK] * 9
        assert len(appends) == 7  # 1-2 together, 3, 4 (two), 5-6 together, 7, 8
        assert await read_values(core, settings, "orders", 0) == [
            b"p0-1", b"p0-2", b"p0-both", b"p0-numbered", b"p0-8"]
        assert await read_values(core, settings, "orders", 1) == [b"p1-3", b"p1-both"]
        assert await read_values(core, settings, "other", 0) == [b"o-5", b"o-6"]

    run_on_core(tmp_path, scenario)


def test_a_bundle_of_the_run_that_does_not_read_is_refused_alone(tmp_path):
    async def scenario(core, session, settings, appends) -> None:
        run = [request(1, "orders", 0, [b"first"]), broken(2, "orders", 0),
               request(3, "orders", 0, [b"third"])]
        responses = await data.produce_all(core, session, settings, run)
        assert codes(run, responses) == [ProduceError.OK, ProduceError.SYSTEM, ProduceError.OK]
        assert len(appends) == 1
        assert await read_values(core, settings, "orders", 0) == [b"first", b"third"]

    run_on_core(tmp_path, scenario)


def test_a_refused_write_of_a_run_refuses_every_request_of_it_and_writes_nothing(tmp_path):
    """The topic is full: the run's one append is refused, every request of it answers 0x02,
    and none of their records is stored; an unknown topic answers each of them 0xff."""
    async def scenario(core, session, settings, appends) -> None:
        await data.produce(core, session, settings, request(1, "orders", 0, [b"kept"]))
        topic = core.state.streams.named(settings.stream).topics.named("orders")
        topic.max_topic_size = 1  # (already past its maximum: nothing more fits)
        topic.room = None
        run = [request(n, "orders", 0, [b"x%d" % n]) for n in range(2, 5)]
        responses = await data.produce_all(core, session, settings, run)
        assert codes(run, responses) == [ProduceError.SYSTEM] * 3
        assert len(appends) == 2 and await read_values(core, settings, "orders", 0) == [b"kept"]
        unknown = [request(n, "nowhere", 0, [b"y"]) for n in range(4, 6)]
        responses = await data.produce_all(core, session, settings, unknown)
        assert codes(unknown, responses) == [ProduceError.UNKNOWN_TOPIC] * 2

    run_on_core(tmp_path, scenario)


async def read_values(core: Core, settings: TankSettings, topic: str, partition: int
                      ) -> list[bytes]:
    """The values stored in the partition, in offset order (read through TANK's Consume)."""
    session = core.broker.connect("127.0.0.1:9", "tcp")
    core.broker.authenticate_as(session, 1)
    consume = m.ConsumeRequest(
        99, (m.ConsumeTopic(topic, (m.ConsumePartition(partition, 1, 1 << 24),)),),
        max_wait_ms=0, min_bytes=0)
    response = data.consume(core, session, settings, consume)
    if type(response) is list:  # the common answer comes encoded: as a client reads it
        frame = b"".join(bytes(part) for part in response)
        response = m.decode_response(frame[0], frame[5:])
    result = response.topics[0].partitions[0]
    return list(decode_chunk(result.chunk, result.base).values) if result.chunk else []


def test_a_burst_of_pipelined_produces_is_answered_request_by_request(tmp_path):
    """Over a socket: forty Produce requests written at once, to two partitions in turn in
    runs, with one bundle that does not read among them: each answered with its own id and
    code, the records read back in the order sent."""
    process = RillProcess(tmp_path / "data", env=TANK_ENV).start()

    async def scenario():
        async with TankClient(*process.tank_address) as client:
            name = "burst-" + uuid.uuid4().hex[:8]
            assert await client.create_topic(name, 2) == 0
            requests = []
            for n in range(1, 41):
                partition = (n // 10) % 2
                requests.append(broken(n, name, partition) if n == 15
                                else request(n, name, partition, [b"m%02d" % n]))
            futures = client.pipeline(requests)
            responses = await asyncio.wait_for(asyncio.gather(*futures), 30)
            fetched = [(await client.consume([(name, partition, 1)]))[0]
                       for partition in (0, 1)]
            return requests, responses, fetched

    try:
        requests, responses, fetched = asyncio.run(scenario())
    finally:
        process.kill()
    assert codes(requests, responses) == [
        ProduceError.SYSTEM if n == 15 else ProduceError.OK for n in range(1, 41)]
    for partition in (0, 1):
        assert fetched[partition].values == [
            b"m%02d" % n for n in range(1, 41) if (n // 10) % 2 == partition and n != 15]
