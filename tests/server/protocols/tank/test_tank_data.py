"""Produce and Consume on a real server through rill's own TANK client (``TankClient``): keyed,
Snappy-compressed, sparse and ProduceWithSeqnum bundles; sequence numbers; whole bundles and
fetch_size; long polls (woken by a produce on another connection, by min_bytes, timed out);
data intact across a restart."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from rill.client.tank import Batch, TankClient, TankProduceError, consume_request
from rill.protocol.tank import messages as m
from rill.protocol.tank.bundles import (
    CODEC_SNAPPY,
    FLAG_SPARSE,
    decode_chunk,
    encode_bundle,
    split_chunk,
)
from rill.protocol.tank.errors import ConsumeFlag, ProduceError
from server_process import RillProcess, session

TANK_ENV = {"RILL_TANK_ENABLED": "true", "RILL_TANK_ADDRESS": "127.0.0.1:0",
            "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"}
TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = RillProcess(tmp_path_factory.mktemp("tank-data") / "data", env=TANK_ENV).start()
    yield process
    process.kill()


def run(coroutine):
    return asyncio.run(coroutine)


async def topic(client: TankClient, partitions: int = 1) -> str:
    name = "t-" + uuid.uuid4().hex[:10]
    assert await client.create_topic(name, partitions) == 0
    return name


async def raw_consume(client: TankClient, wanted, **options) -> m.ConsumeResponse:
    """The Consume answer as the codec reads it (headers, bases and chunks untouched)."""
    request = consume_request(next(client._ids), wanted, **options)
    return await client._call(request)


def test_keyed_snappy_sparse_and_seqnum_bundles_round_trip(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            await client.produce(name, 0, [b"v1", b"v2", b"v3"], keys=[b"k1", None, b""],
                                 timestamps=[TS, TS, TS + 5])
            big = [bytes([i]) * 300 for i in range(20)]  # > 1 KiB: real clients compress
            await client.produce(name, 0, big, keys=[b"key-%d" % i for i in range(20)],
                                 timestamps=TS + 10, codec="snappy")
            await client.produce(name, 0, [b"s1", b"s2", b"s3"], seqs=[24, 25, 26],
                                 timestamps=[TS + 20, TS + 21, TS + 22])
            await client.produce(name, 0, [b"w1", b"w2"], first_seq=27, timestamps=TS + 30)
            fetched = (await client.consume([(name, 0, 1)]))[0]
            return fetched, big

    fetched, big = run(scenario())
    assert fetched.flag == ConsumeFlag.OK and fetched.hwm == 28
    assert fetched.seqs == list(range(1, 29))
    assert fetched.values == [b"v1", b"v2", b"v3", *big, b"s1", b"s2", b"s3", b"w1", b"w2"]
    assert fetched.keys == [b"k1", None, b"", *[b"key-%d" % i for i in range(20)],
                            None, None, None, None, None]
    assert fetched.timestamps == ([TS, TS, TS + 5] + [TS + 10] * 20
                                  + [TS + 20, TS + 21, TS + 22, TS + 30, TS + 30])


def test_explicit_numbers_must_move_forward_and_holes_are_kept(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            await client.produce(name, 0, [b"a", b"b"])
            codes = []
            for kwargs in ({"seqs": [2, 3]}, {"first_seq": 1}, {"first_seq": 2}):
                with pytest.raises(TankProduceError) as refused:  # at or below the hwm
                    await client.produce(name, 0, [b"x", b"y"], **kwargs)
                codes.append(refused.value.code)
            await client.produce(name, 0, [b"c", b"d"], seqs=[3, 4])  # continues
            await client.produce(name, 0, [b"e", b"f", b"g"], seqs=[7, 8, 12])  # holes
            await client.produce(name, 0, [b"h", b"i"], first_seq=20)  # a jump (0x05)
            await client.produce(name, 0, [b"j"])  # implicit: after the last explicit one
            with pytest.raises(TankProduceError) as too_far:  # beyond a Kafka offset delta
                await client.produce(name, 0, [b"z"], first_seq=23 + 2**31)
            codes.append(too_far.value.code)
            numbers = (await client.discover_partitions(name)).partitions[0]
            everything = (await client.consume([(name, 0, 1)]))[0]
            from_a_hole = (await client.consume([(name, 0, 10)]))[0]
            return codes, numbers, everything, from_a_hole

    codes, numbers, everything, from_a_hole = run(scenario())
    assert codes == [ProduceError.INVALID_SEQ_NUM] * 3 + [ProduceError.SYSTEM]
    assert (numbers.first_available, numbers.hwm) == (1, 22)
    assert everything.seqs == [1, 2, 3, 4, 7, 8, 12, 20, 21, 22]
    assert everything.values == [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", b"j"]
    # a seq inside a hole reads from the bundle holding it: whole bundles, numbers kept
    assert from_a_hole.seqs[-4:] == [12, 20, 21, 22] and 10 not in from_a_hole.seqs


def test_explicit_numbers_survive_a_restart_and_read_back_through_kafka(tmp_path):
    from kafka import KafkaConsumer, TopicPartition

    env = {**TANK_ENV, "RILL_KAFKA_ENABLED": "true", "RILL_KAFKA_ADDRESS": "127.0.0.1:0",
           "RILL_KAFKA_ANONYMOUS_USER": "iggy"}
    process = RillProcess(tmp_path / "data", env=env).start()
    try:
        async def produce():
            async with TankClient(*process.tank_address) as client:
                name = await topic(client)
                await client.produce(name, 0, [b"p", b"q", b"r"], seqs=[100, 101, 105],
                                     timestamps=TS)
                return name
        name = run(produce())
        process.restart()

        async def consume():
            async with TankClient(*process.tank_address) as client:
                return (await client.consume([(name, 0, 0)]))[0]
        after = run(consume())
        consumer = KafkaConsumer(bootstrap_servers="%s:%d" % process.kafka_address,
                                 enable_auto_commit=False, consumer_timeout_ms=5000)
        try:
            part = TopicPartition(name, 0)
            consumer.assign([part])
            consumer.seek_to_beginning(part)
            read = [(record.offset, record.value) for record in consumer]
        finally:
            consumer.close()
    finally:
        process.kill()
    assert after.seqs == [100, 101, 105] and after.values == [b"p", b"q", b"r"]
    assert read == [(99, b"p"), (100, b"q"), (104, b"r")]  # seq = offset + 1, holes kept


def test_several_partitions_and_several_bundles_of_one_partition_in_one_request(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client, 3)
            codes = await client.produce_batches([
                Batch(name, 2, [b"a"], timestamps=TS), Batch(name, 2, [b"b", b"c"], timestamps=TS),
                Batch(name, 0, [b"z"], timestamps=TS)])
            fetched = await client.consume([(name, 0, 0), (name, 1, 0), (name, 2, 0)])
            return codes, fetched

    codes, fetched = run(scenario())
    assert [code for _, _, code in codes] == [0, 0, 0]
    assert [(f.partition, f.values, f.seqs) for f in fetched] == [
        (0, [b"z"], [1]), (1, [], []), (2, [b"a", b"b", b"c"], [1, 2, 3])]


def test_whole_bundles_from_the_one_holding_seq_and_fetch_size(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            for index in range(4):  # bundles of 3 messages: seqs 1-3, 4-6, 7-9, 10-12
                await client.produce(name, 0, [b"m%d-%d" % (index, i) * 20 for i in range(3)],
                                     timestamps=TS)
            small = await raw_consume(client, [(name, 0, 5)], fetch_size=1)
            larger = await raw_consume(client, [(name, 0, 5)], fetch_size=700)
            drained = await raw_consume(client, [(name, 0, 5)], fetch_size=1 << 20)
            fetched = (await client.consume([(name, 0, 5)], fetch_size=1))[0]
            return small, larger, drained, fetched

    small, larger, drained, fetched = run(scenario())
    part = small.topics[0].partitions[0]
    bundles, partial = split_chunk(part.chunk)
    # at least one whole bundle, the one holding seq 5, so it starts below it (seq 4)
    assert (part.flag, part.base, part.hwm, len(bundles), partial) == (0, 4, 12, 1, 0)
    assert len(split_chunk(larger.topics[0].partitions[0].chunk)[0]) == 2
    assert len(split_chunk(drained.topics[0].partitions[0].chunk)[0]) == 3
    assert decode_chunk(drained.topics[0].partitions[0].chunk, 4).seqs == list(range(4, 13))
    assert fetched.seqs == [5, 6] and fetched.next_seq == 7  # the client drops seq 4


def test_seq_zero_means_the_first_and_all_ones_only_new_messages(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            empty = await raw_consume(client, [(name, 0, 0)])
            await client.produce(name, 0, [b"a", b"b"], timestamps=TS)
            first = await client.consume([(name, 0, 0)])
            only_new = await raw_consume(client, [(name, 0, m.SEQ_ONLY_NEW)])
            return empty, first[0], only_new

    empty, first, only_new = run(scenario())
    part = empty.topics[0].partitions[0]
    assert (part.flag, part.base, part.hwm, bytes(part.chunk)) == (0, 0, 0, b"")
    assert first.seqs == [1, 2] and first.values == [b"a", b"b"]
    part = only_new.topics[0].partitions[0]
    assert (part.flag, part.base, part.hwm, bytes(part.chunk)) == (0, 1, 2, b"")


# -- long polls ------------------------------------------------------------------------------


def test_a_long_poll_is_woken_by_a_produce_on_another_connection(server):
    async def scenario():
        async with TankClient(*server.tank_address) as reader, \
                TankClient(*server.tank_address) as writer:
            name = await topic(writer, 2)
            await writer.produce(name, 0, [b"old"], timestamps=TS)
            waiting = asyncio.ensure_future(raw_consume(
                reader, [(name, 0, 2), (name, 1, 1)], max_wait_ms=120_000, fetch_size=1))
            await asyncio.sleep(0.3)  # ordering only: the consume is there first
            assert not waiting.done()
            await writer.produce(name, 1, [b"new" * 100, b"two"], timestamps=TS + 1)
            return await waiting

    answer = run(scenario())
    first, second = answer.topics[0].partitions
    # the partition without data: base 0 in the woken form; the other: everything since the
    # wait began, although fetch_size was 1
    assert (first.flag, first.base, first.hwm, bytes(first.chunk)) == (0, 0, 1, b"")
    assert (second.flag, second.base, second.hwm) == (0, 1, 2)
    assert decode_chunk(second.chunk, second.base).values == [b"new" * 100, b"two"]


def test_a_long_poll_waits_for_min_bytes(server):
    async def scenario():
        async with TankClient(*server.tank_address) as reader, \
                TankClient(*server.tank_address) as writer:
            name = await topic(writer)
            waiting = asyncio.ensure_future(raw_consume(
                reader, [(name, 0, 1)], max_wait_ms=120_000, min_bytes=120))
            await asyncio.sleep(0.3)
            await writer.produce(name, 0, [b"first"], timestamps=TS)  # 74 bytes stored
            await asyncio.sleep(0.3)
            early = waiting.done()
            await writer.produce(name, 0, [b"second"], timestamps=TS)
            return early, await waiting

    early, answer = run(scenario())
    assert not early
    part = answer.topics[0].partitions[0]
    assert (part.flag, part.base, part.hwm) == (0, 1, 2)
    chunk = decode_chunk(part.chunk, part.base)
    assert chunk.values == [b"first", b"second"] and chunk.seqs == [1, 2]


def test_a_timed_out_long_poll_answers_base_0_and_an_immediate_one_the_first(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            await client.produce(name, 0, [b"a", b"b", b"c"], timestamps=TS)
            timed_out = await raw_consume(client, [(name, 0, 4)], max_wait_ms=400)
            immediate = await raw_consume(client, [(name, 0, 4)], max_wait_ms=0)
            # one partition with an answer now: nobody waits, the EOF one in the immediate form
            mixed = await raw_consume(client, [(name, 0, 4), (name, 0, 2)], max_wait_ms=120_000)
            return timed_out, immediate, mixed

    timed_out, immediate, mixed = run(scenario())
    part = timed_out.topics[0].partitions[0]
    assert (part.flag, part.base, part.hwm, bytes(part.chunk)) == (0, 0, 3, b"")
    part = immediate.topics[0].partitions[0]
    assert (part.flag, part.base, part.hwm, bytes(part.chunk)) == (0, 1, 3, b"")
    eof, data = mixed.topics[0].partitions
    assert (eof.flag, eof.base, eof.hwm, bytes(eof.chunk)) == (0, 1, 3, b"")
    assert decode_chunk(data.chunk, data.base).values == [b"a", b"b", b"c"]


# -- restart ---------------------------------------------------------------------------------


def test_data_is_intact_after_a_restart(tmp_path):
    process = RillProcess(tmp_path / "data", env=TANK_ENV).start()
    try:
        async def write():
            async with TankClient(*process.tank_address) as client:
                assert await client.create_topic("kept", 2) == 0
                await client.produce("kept", 1, [b"x" * 2000] * 30, keys=[b"k"] * 30,
                                     timestamps=TS, codec="snappy")
                await client.produce("kept", 1, [b"y"], timestamps=TS + 1)

        run(write())
        assert process.stop() == 0
        process = RillProcess(tmp_path / "data", env=TANK_ENV).start()

        async def read():
            async with TankClient(*process.tank_address) as client:
                topics = await client.discover_topics()
                fetched = (await client.consume([("kept", 1, 0)]))[0]
                await client.produce("kept", 1, [b"z"], timestamps=TS + 2)
                numbers = await client.discover_partitions("kept")
                return topics, fetched, numbers

        topics, fetched, numbers = run(read())
    finally:
        process.kill()
    assert [(t.name, t.partitions) for t in topics.topics] == [("kept", 2)]
    assert fetched.values == [b"x" * 2000] * 30 + [b"y"] and fetched.seqs == list(range(1, 32))
    assert fetched.keys == [b"k"] * 30 + [None] and fetched.timestamps[-1] == TS + 1
    assert (numbers.partitions[1].first_available, numbers.partitions[1].hwm) == (1, 32)


def test_a_long_poll_that_times_out_below_min_bytes_answers_the_empty_form(server):
    async def scenario():
        async with TankClient(*server.tank_address) as reader, \
                TankClient(*server.tank_address) as writer:
            name = await topic(writer)
            waiting = asyncio.ensure_future(raw_consume(
                reader, [(name, 0, 1)], max_wait_ms=1500, min_bytes=100_000))
            await asyncio.sleep(0.3)  # ordering only: the consume waits first
            await writer.produce(name, 0, [b"small"], timestamps=TS)
            return await waiting

    part = run(scenario()).topics[0].partitions[0]
    # TANK's timed-out form: base 0, nothing, though one message (below min_bytes) arrived
    assert (part.flag, part.base, part.hwm, bytes(part.chunk)) == (0, 0, 1, b"")


def test_requests_behind_a_long_poll_on_the_same_connection_are_answered_first(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            waiting = asyncio.ensure_future(raw_consume(client, [(name, 0, 1)],
                                                        max_wait_ms=120_000))
            await asyncio.sleep(0.3)  # ordering only: the consume is sent first
            # the produce behind it is served at once, and its append wakes the consume
            await client.produce(name, 0, [b"same link"], timestamps=TS)
            produced_first = not waiting.done()
            return produced_first, await waiting

    produced_first, answer = run(scenario())
    assert produced_first
    part = answer.topics[0].partitions[0]
    assert (part.flag, part.base, part.hwm) == (0, 1, 1)
    assert decode_chunk(part.chunk, part.base).values == [b"same link"]


def test_a_disconnect_cancels_a_long_poll(server):
    async def scenario():
        async with TankClient(*server.tank_address) as other:
            name = await topic(other)
            client = TankClient(*server.tank_address)
            await client.connect()
            waiting = asyncio.ensure_future(raw_consume(client, [(name, 0, 1)],
                                                        max_wait_ms=120_000))
            await asyncio.sleep(0.3)
            await client.close()
            with pytest.raises(ConnectionError):
                await waiting
            # the server goes on: the other connection produces and reads
            await other.produce(name, 0, [b"after"], timestamps=TS)
            return (await other.consume([(name, 0, 1)]))[0]

    assert run(scenario()).values == [b"after"]


def test_a_loop_of_refused_produces_on_one_connection_logs_one_line(tmp_path):
    """Issue 27 item 5: a client retrying a refused produce (an empty message into an
    Iggy-format topic: no Iggy payload holds it) gets 0x02 every time, and the log has one
    line for it."""
    process = RillProcess(tmp_path / "data", env={**TANK_ENV, "RILL_LOGGING_LEVEL": "info"})
    process.start()
    try:
        async def scenario():
            async with TankClient(*process.tank_address) as client:
                name = await topic(client)  # the TANK stream exists
                with session(process) as iggy:
                    iggy.create_topic("kafka", name + "-iggy", partitions_count=1)
                codes = []
                for _ in range(25):
                    with pytest.raises(TankProduceError) as refused:
                        await client.produce(name + "-iggy", 0, [b""])
                    codes.append(refused.value.code)
                await client.produce(name + "-iggy", 0, [b"fine"])  # answered after them all
                return codes

        assert run(scenario()) == [ProduceError.SYSTEM] * 25
    finally:
        process.stop()
    lines = [line for line in process.output if "TANK produce to" in line]
    assert len(lines) == 1 and "null or empty value" in lines[0], lines


# -- first available -------------------------------------------------------------------------


@pytest.mark.parametrize("large", [False, True], ids=["small-batch", "large-batch"])
def test_first_available_is_the_first_stored_number_when_explicit_numbers_came_first(
        server, large):
    """Seqs 100.. produced into an empty partition: TANK's first available is 100 (not 1) in
    DiscoverPartitions, the boundary-check fault and the EOF answer. A large first batch is
    read from its head only (a file region)."""
    value = b"v" * (70_000 if large else 1)

    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            await client.produce(name, 0, [value, value, value], seqs=[100, 101, 105],
                                 timestamps=TS)
            await client.produce(name, 0, [b"next"], timestamps=TS)  # seq 106
            listed = await client.discover_partitions(name)
            explicit = await client.discover_partitions(name, [0])
            faults = [await raw_consume(client, [(name, 0, seq)]) for seq in (1, 50, 99, 200)]
            eof = await raw_consume(client, [(name, 0, 107)])
            everything = (await client.consume([(name, 0, 0)], fetch_size=1 << 20))[0]
            in_a_hole = (await client.consume([(name, 0, 103)], fetch_size=1 << 20))[0]
            return listed, explicit, faults, eof, everything, in_a_hole

    listed, explicit, faults, eof, everything, in_a_hole = run(scenario())
    for numbers in (listed, explicit):
        assert [(p.first_available, p.hwm) for p in numbers.partitions] == [(100, 106)]
    for fault in faults:
        part = fault.topics[0].partitions[0]
        assert (part.flag, part.first_available, bytes(part.chunk)) == (
            ConsumeFlag.BOUNDARY_CHECK, 100, b"")
    part = eof.topics[0].partitions[0]
    assert (part.flag, part.base, part.hwm, bytes(part.chunk)) == (0, 100, 106, b"")
    assert everything.seqs == [100, 101, 105, 106]
    assert in_a_hole.seqs == [105, 106]  # a hole after the first: the next stored number


# -- compression kept (issue 31 item 3) -------------------------------------------------------

EVENTS = [b'{"user": %d, "page": "/products/%d", "action": "view", "ok": true}' % (i, i % 7)
          for i in range(200)]  # compressible, as real events are
EVENT_KEYS = [b"user-%d" % (i % 13) for i in range(200)]


def stored_sizes(server, name: str) -> list[int]:
    """Each partition's stored bytes, as an Iggy client's GET_TOPIC reports them."""
    with session(server) as iggy:
        return [p.size_bytes for p in iggy.get_topic("kafka", name).partitions]


def chunk_of(response: m.ConsumeResponse) -> bytes:
    return bytes(response.topics[0].partitions[0].chunk)


def codecs(chunk: bytes) -> list[int]:
    """The compression codec of each bundle of a chunk (flags bits 0-1)."""
    bundles, partial = split_chunk(chunk)
    assert bundles and not partial
    return [bundle[0] & 3 for bundle in bundles]


def test_a_snappy_bundle_is_stored_and_served_compressed(server):
    """The same messages produced plain into partition 0 and as one Snappy bundle into
    partition 1: partition 1 keeps a fraction of the bytes on disk and its consumer gets a
    Snappy bundle of about the produced size (TANK serves what was produced), with the same
    messages, keys and timestamps; the plain one stays plain."""
    produced = encode_bundle(EVENTS, EVENT_KEYS, TS, codec=CODEC_SNAPPY)

    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client, 2)
            await client.produce(name, 0, EVENTS, keys=EVENT_KEYS, timestamps=TS)
            await client.produce(name, 1, EVENTS, keys=EVENT_KEYS, timestamps=TS,
                                 codec="snappy")
            raw = [await raw_consume(client, [(name, p, 1)]) for p in (0, 1)]
            fetched = [(await client.consume([(name, p, 1)]))[0] for p in (0, 1)]
            return name, raw, fetched

    name, raw, fetched = run(scenario())
    plain, packed = chunk_of(raw[0]), chunk_of(raw[1])
    assert codecs(plain) == [0] and codecs(packed) == [1]
    assert len(packed) <= len(produced) * 1.25 and len(packed) * 3 < len(plain)
    plain_stored, packed_stored = stored_sizes(server, name)
    assert packed_stored * 2 < plain_stored
    for got in fetched:
        assert (got.seqs, got.values, got.keys, got.timestamps) == (
            list(range(1, 201)), EVENTS, EVENT_KEYS, [TS] * 200)


def test_a_snappy_bundle_that_does_not_shrink_is_stored_and_served_plain(server):
    noise = [os.urandom(100) for _ in range(50)]

    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            await client.produce(name, 0, noise, timestamps=TS, codec="snappy")
            return await raw_consume(client, [(name, 0, 1)])

    answer = run(scenario())
    assert codecs(chunk_of(answer)) == [0]
    assert decode_chunk(chunk_of(answer), 1).values == noise


def test_a_sparse_snappy_bundle_with_holes_is_served_sparse_and_compressed(server):
    async def scenario():
        async with TankClient(*server.tank_address) as client:
            name = await topic(client)
            await client.produce(name, 0, EVENTS[:3], seqs=[5, 9, 10], timestamps=TS,
                                 codec="snappy")
            await client.produce(name, 0, EVENTS[3:], timestamps=TS + 1, codec="snappy")
            return (await raw_consume(client, [(name, 0, 0)]),
                    (await client.consume([(name, 0, 0)]))[0])

    answer, fetched = run(scenario())
    bundles, _partial = split_chunk(chunk_of(answer))
    assert [bundle[0] & 3 for bundle in bundles] == [1, 1]
    assert bundles[0][0] & FLAG_SPARSE
    assert fetched.seqs == [5, 9, 10, *range(11, 208)]
    assert fetched.values == EVENTS
