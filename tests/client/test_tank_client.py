"""rill's TANK client (``rill.client.tank``) at unit level: the requests it builds are the
codec's (and the reference's captured frames), its reading of answers follows §6.7, and its
connection plumbing matches answers by request id and drops the broker's pings. No server:
the listener task brings the integration tests."""

from __future__ import annotations

import asyncio

import pytest

from rill.client.tank import (
    SCRATCH_SIZE,
    UNKNOWN_TOPIC_FLAG,
    Batch,
    TankClient,
    TankProduceError,
    _TankLink,
    consume_request,
    consume_results,
    produce_request,
    produce_results,
)
from rill.protocol.tank.bundles import decode_bundle, encode_bundle, frame_bundle
from rill.protocol.tank.errors import ConsumeFlag, ProduceError
from rill.protocol.tank.framing import MAX_PAYLOAD_SIZE, PING_FRAME
from rill.protocol.tank.messages import (
    ConsumePartitionResult,
    ConsumeResponse,
    ConsumeTopicResult,
    CreateTopicResponse,
    MsgId,
    ProduceResponse,
    StatusResponse,
    decode_request,
    encode_request,
    encode_response,
)

from .feeding import feed

TS = 1_700_000_000_000


def decoded(request):
    frame = encode_request(request)
    return frame[0], decode_request(frame[0], frame[5:])


def test_produce_request_carries_keys_timestamps_and_snappy_through_the_codec():
    values = [b"value-%d" % i * 40 for i in range(100)]
    keys = [b"k%d" % (i % 3) if i % 4 else None for i in range(100)]
    timestamps = [TS + i // 10 for i in range(100)]
    request = produce_request(5, [Batch("orders", 2, values, keys, timestamps, codec="snappy")])
    msg_id, back = decoded(request)
    assert msg_id == MsgId.PRODUCE and back.request_id == 5
    [topic] = back.topics
    [part] = topic.partitions
    assert (topic.name, part.partition, part.first_seq) == ("orders", 2, None)
    bundle = decode_bundle(part.bundle)
    assert bundle.codec == 1 and not bundle.sparse
    assert (bundle.values, bundle.keys, bundle.timestamps) == (values, keys, timestamps)


def test_produce_request_takes_now_when_no_timestamp_is_given_and_groups_topics():
    request = produce_request(1, [Batch("a", 0, [b"x"]), Batch("a", 1, [b"y"]),
                                  Batch("b", 0, [b"z"], timestamps=9)], now_ms=TS)
    _, back = decoded(request)
    assert [(t.name, [p.partition for p in t.partitions]) for t in back.topics] == [
        ("a", [0, 1]), ("b", [0])]
    assert decode_bundle(back.topics[0].partitions[0].bundle).timestamps == [TS]
    assert decode_bundle(back.topics[1].partitions[0].bundle).timestamps == [9]


def test_explicit_seqs_make_a_sparse_bundle_in_a_plain_produce():
    request = produce_request(1, [Batch("t", 0, [b"a", b"b", b"c"], timestamps=1,
                                        seqs=[10, 11, 20])])
    msg_id, back = decoded(request)
    assert msg_id == MsgId.PRODUCE
    bundle = decode_bundle(back.topics[0].partitions[0].bundle)
    assert bundle.sparse and bundle.seqs == [10, 11, 20]


def test_first_seq_is_a_produce_with_seqnum_as_tank_cli_sends_it():
    # reference §11.5: ProduceWithSeqnum, one message "a" at seq 100 (client makes it sparse)
    captured = bytes.fromhex(
        "05 37000000 0200 01000000 03632b2b 00 00000000 01 066f7264657273 01 0000 14 "
        "6400000000000000 44 6400000000000000 00 b7ad2709a2010000 01 61")
    request = produce_request(1, [Batch("orders", 0, [b"a"], timestamps=0x01A20927ADB7)],
                              first_seq=100, client_id="c++")
    assert encode_request(request) == captured
    with pytest.raises(ValueError):
        produce_request(1, [Batch("a", 0, [b"x"]), Batch("a", 1, [b"y"])], first_seq=5)


def test_produce_results_read_one_code_per_batch_and_errors_name_the_code():
    request = produce_request(1, [Batch("a", 0, [b"x"]), Batch("a", 9, [b"y"]),
                                  Batch("gone", 0, [b"z"]), Batch("gone", 1, [b"z"])])
    response = ProduceResponse(1, bytes([0, ProduceError.UNKNOWN_PARTITION, 0xFF]))
    assert produce_results(request, response) == [
        ("a", 0, 0), ("a", 9, 1), ("gone", 0, 0xFF), ("gone", 1, 0xFF)]
    assert "UNKNOWN_TOPIC" in str(TankProduceError("gone", 0, 0xFF))


def test_consume_request_is_the_reference_fetch():
    # reference §11.3: wire/0 from seq 1, fetch_size 4096, max_wait 0, min_bytes 0, id 0x2B
    captured = bytes.fromhex(
        "02 28 00 00 00 02 00 2b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 04 77 69 "
        "72 65 01 00 00 01 00 00 00 00 00 00 00 00 10 00 00")
    assert encode_request(consume_request(0x2B, [("wire", 0, 1)], fetch_size=4096)) == captured
    request = consume_request(3, [("a", 0, 5), ("a", 1, 0), ("b", 0, 7)], max_wait_ms=500,
                              min_bytes=100)
    _, back = decoded(request)
    assert (back.max_wait_ms, back.min_bytes) == (500, 100)
    assert [(t.name, [(p.partition, p.seq) for p in t.partitions]) for t in back.topics] == [
        ("a", [(0, 5), (1, 0)]), ("b", [(0, 7)])]


def chunk_of(*bundles: bytes) -> bytes:
    return b"".join(frame_bundle(b) for b in bundles)


def test_consume_results_drop_below_the_asked_seq_and_stop_above_hwm():
    request = consume_request(1, [("t", 0, 3)])
    chunk = chunk_of(encode_bundle([b"1", b"2", b"3", b"4"], None, TS),
                     encode_bundle([b"5", b"6"], [b"k", None], [TS, TS + 1]))
    response = ConsumeResponse(1, (ConsumeTopicResult("t", (
        ConsumePartitionResult(0, ConsumeFlag.OK, base=1, hwm=5, chunk=chunk),)),))
    [fetched] = consume_results(request, response)
    assert fetched.seqs == [3, 4, 5] and fetched.values == [b"3", b"4", b"5"]
    assert fetched.keys == [None, None, b"k"] and fetched.timestamps == [TS] * 3
    assert fetched.next_seq == 6 and fetched.hwm == 5


def test_consume_results_of_a_sparse_first_chunk_and_the_no_data_forms():
    request = consume_request(1, [("t", 0, 0), ("t", 1, 1), ("t", 2, 50), ("gone", 0, 1),
                                  ("t", 3, 2**64 - 1)])
    sparse = chunk_of(encode_bundle([b"a", b"b"], None, 1, [100, 105]),
                      encode_bundle([b"c"], None, 1))
    response = ConsumeResponse(1, (
        ConsumeTopicResult("t", (
            ConsumePartitionResult(0, ConsumeFlag.SPARSE_FIRST, hwm=106, chunk=sparse),
            ConsumePartitionResult(1, ConsumeFlag.OK, base=1, hwm=0),
            ConsumePartitionResult(2, ConsumeFlag.BOUNDARY_CHECK, hwm=9, first_available=4),
        )),
        ConsumeTopicResult("gone", unknown_count=1),
        ConsumeTopicResult("t", (ConsumePartitionResult(3, ConsumeFlag.OK, hwm=41),)),
    ))
    first, empty, boundary, unknown, only_new = consume_results(request, response)
    assert first.seqs == [100, 105, 106] and first.values == [b"a", b"b", b"c"]
    assert first.next_seq == 107
    assert (empty.flag, empty.seqs, empty.next_seq) == (ConsumeFlag.OK, [], 1)
    assert (boundary.flag, boundary.first_available) == (ConsumeFlag.BOUNDARY_CHECK, 4)
    assert (unknown.topic, unknown.flag) == ("gone", UNKNOWN_TOPIC_FLAG)
    assert only_new.next_seq == 42  # §6.7: hwm + 1 after asking for new messages only


# --- the connection plumbing, without a server ----------------------------------------------


class _Transport:
    """Stands in for the socket's transport: collects what the client writes; closing it
    ends the connection as a real one does (``connection_lost`` at the loop's next turn)."""

    def __init__(self, link: _TankLink) -> None:
        self.link = link
        self.data = bytearray()
        self.writes = 0
        self.closing = False

    def get_extra_info(self, name: str):
        return None

    def write(self, data: bytes) -> None:
        self.data += data
        self.writes += 1

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.link.connection_lost, None)

    abort = close


def _unplugged_client() -> TankClient:
    """A client whose link reads what the test feeds it and writes into a ``_Transport``
    (in a loop)."""
    client = TankClient()
    link = client._link = _TankLink(MAX_PAYLOAD_SIZE)
    link.connection_made(_Transport(link))
    return client


def _feed(client: TankClient, data: bytes, piece: int = 3) -> None:
    """``data`` arrives in pieces of ``piece`` bytes (frames split anywhere)."""
    feed(client._link, data, piece)


def _written(client: TankClient) -> bytearray:
    return client._link.transport.data


def test_answers_are_matched_by_request_id_and_pings_dropped():
    async def scenario():
        client = _unplugged_client()
        _feed(client, PING_FRAME)
        status = asyncio.ensure_future(client.status())
        created = asyncio.ensure_future(client.create_topic("orders", 2))
        await asyncio.sleep(0)
        written = bytes(_written(client))
        assert written[0] == MsgId.STATUS and written[9] == MsgId.CREATE_TOPIC
        status_id = int.from_bytes(written[5:9], "little")
        create_id = int.from_bytes(written[14:18], "little")
        # answered out of order, with a ping in between
        _feed(client, encode_response(CreateTopicResponse(create_id, "orders", 1)) + PING_FRAME
              + encode_response(StatusResponse(status_id, 3, 4)))
        assert await created == 1
        assert (await status).topics == 3
        assert client.pings_received == 2
        await client.ping()
        assert bytes(_written(client)).endswith(PING_FRAME)
        pending = asyncio.ensure_future(client.status())
        await asyncio.sleep(0)
        client._link.connection_lost(None)
        with pytest.raises(ConnectionError):
            await pending
        with pytest.raises(ConnectionError):  # and every later call, at once
            await client.status()
        await client.close()

    asyncio.run(scenario())


def test_a_produce_that_is_not_ok_raises():
    async def scenario():
        client = _unplugged_client()
        produced = asyncio.ensure_future(client.produce("t", 7, [b"x"], keys=[b"k"]))
        await asyncio.sleep(0)
        sent = decode_request(_written(client)[0], bytes(_written(client)[5:]))
        assert decode_bundle(sent.topics[0].partitions[0].bundle).keys == [b"k"]
        _feed(client, encode_response(ProduceResponse(sent.request_id, b"\x01")))
        with pytest.raises(TankProduceError) as caught:
            await produced
        assert (caught.value.topic, caught.value.partition, caught.value.code) == ("t", 7, 1)
        await client.close()

    asyncio.run(scenario())


def test_consume_raw_answers_the_undecoded_chunk():
    async def scenario():
        client = _unplugged_client()
        answer = asyncio.ensure_future(client.consume_raw([("orders", 0, 7)], fetch_size=1))
        await asyncio.sleep(0)
        request_id = 1  # the client's first request
        chunk = frame_bundle(encode_bundle([b"m7", b"m8"], timestamps=1))
        _feed(client, encode_response(ConsumeResponse(request_id, (
            ConsumeTopicResult("orders", (ConsumePartitionResult(0, 0, 7, 8, chunk),)),))))
        raw = await asyncio.wait_for(answer, 10)
        await client.close()
        return raw, chunk

    raw, chunk = asyncio.run(scenario())
    part = raw.topics[0].partitions[0]
    assert (part.base, part.hwm, bytes(part.chunk)) == (7, 8, chunk)  # as sent, undecoded


def test_a_large_answer_split_anywhere_arrives_whole_and_answers_kept_stay_intact():
    """An answer above the reused read buffer is read into its own; an answer handed out
    keeps its bytes while later answers pass through the same buffer."""
    async def scenario():
        client = _unplugged_client()
        small = asyncio.ensure_future(client.consume_raw([("t", 0, 1)], fetch_size=1))
        large = asyncio.ensure_future(client.consume_raw([("t", 0, 2)], fetch_size=1))
        after = asyncio.ensure_future(client.status())
        await asyncio.sleep(0)
        small_chunk = frame_bundle(encode_bundle([b"s" * 10], timestamps=1))
        large_chunk = frame_bundle(encode_bundle([bytes([n % 251]) * 1000 for n in range(300)],
                                                 timestamps=1))
        assert len(large_chunk) > SCRATCH_SIZE
        _feed(client, encode_response(ConsumeResponse(1, (
            ConsumeTopicResult("t", (ConsumePartitionResult(0, 0, 1, 1, small_chunk),)),))))
        _feed(client, encode_response(ConsumeResponse(2, (
            ConsumeTopicResult("t", (ConsumePartitionResult(0, 0, 2, 301, large_chunk),)),))),
              piece=7777)
        _feed(client, encode_response(StatusResponse(3, 5, 6)))
        # more than the read buffer of answers nobody waits for (dropped) runs through it
        _feed(client, encode_response(StatusResponse(99, 1, 1)) * 10_000, piece=4096)
        _feed(client, b"\xee" * 200)  # (garbage after: fails the link, not what was answered)
        results = [await small, await large, await after]
        await client.close()
        return results, small_chunk, large_chunk

    (small, large, after), small_chunk, large_chunk = asyncio.run(scenario())
    assert bytes(small.topics[0].partitions[0].chunk) == small_chunk
    assert bytes(large.topics[0].partitions[0].chunk) == large_chunk
    assert after.topics == 5


@pytest.mark.parametrize("answer, words", [
    (b"\x01\xff\xff\xff\x7f", "above the limit"),  # a 2 GiB Produce answer announced
    (b"\x01\x01\x00\x00\x00\x00", "unreadable TANK response"),  # a Produce answer cut short
])
def test_an_answer_that_cannot_be_read_fails_every_call_and_closes_the_link(answer, words):
    async def scenario():
        client = _unplugged_client()
        waiting = asyncio.ensure_future(client.status())
        await asyncio.sleep(0)
        _feed(client, answer)
        with pytest.raises(ConnectionError, match=words):
            await waiting
        with pytest.raises(ConnectionError, match=words):  # and every later call, at once
            await client.status()
        closed = client._link.transport.closing
        await client.close()
        return closed

    assert asyncio.run(scenario())


def test_pipelined_requests_go_out_in_one_write_and_are_answered_in_any_order():
    async def scenario():
        client = _unplugged_client()
        requests = [consume_request(10 + n, [("t", 0, n + 1)], fetch_size=1) for n in range(3)]
        futures = client.pipeline(requests)
        assert client._link.transport.writes == 1
        writes = bytes(_written(client))
        _feed(client, b"".join(encode_response(ConsumeResponse(10 + n, (
            ConsumeTopicResult("t", (ConsumePartitionResult(0, 0, n + 1, 9),)),)))
            for n in (2, 0, 1)))
        answers = [await future for future in futures]
        await client.close()
        return requests, writes, answers

    requests, writes, answers = asyncio.run(scenario())
    assert writes == b"".join(encode_request(one) for one in requests)
    assert [answer.request_id for answer in answers] == [10, 11, 12]
    assert [answer.topics[0].partitions[0].base for answer in answers] == [1, 2, 3]


def test_a_call_waits_while_the_transport_is_paused_and_fails_when_the_link_drops():
    async def scenario():
        client = _unplugged_client()
        link = client._link
        link.pause_writing()
        status = asyncio.ensure_future(client.status())
        await asyncio.sleep(0.01)
        _feed(client, encode_response(StatusResponse(1, 2, 3)))
        await asyncio.sleep(0.01)
        held = not status.done()  # answered, but its writer waits for the buffer to drain
        link.resume_writing()
        answered = (await asyncio.wait_for(status, 1)).topics
        link.pause_writing()
        lost = asyncio.ensure_future(client.status())
        await asyncio.sleep(0.01)
        link.connection_lost(None)
        with pytest.raises(ConnectionError, match="dropped"):
            await asyncio.wait_for(lost, 1)
        return held, answered

    assert asyncio.run(scenario()) == (True, 2)


def test_an_answer_announced_large_is_not_allocated_before_it_arrives():
    """A broker that announces 200 MB gets a buffer of what it sent (1 MiB to start), not
    200 MB at once."""
    async def scenario():
        client = _unplugged_client()
        _feed(client, bytes([MsgId.CONSUME]) + (200 << 20).to_bytes(4, "little") + b"x" * 100_000,
              piece=65536)
        held = len(client._link._decoder._large)
        await client.close()
        return held

    assert asyncio.run(scenario()) <= 1 << 20
