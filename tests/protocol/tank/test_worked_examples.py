"""tank-wire-reference §11, byte for byte: every worked example and captured frame, decoded
(requests by the broker's side, responses by the client's) and encoded back to the same bytes."""

from __future__ import annotations

import pytest

from rill.protocol.tank.bundles import decode_bundle, decode_chunk, encode_bundle, frame_bundle
from rill.protocol.tank.errors import ConsumeFlag, ProduceError, ReloadConfError
from rill.protocol.tank.framing import PING_FRAME, TankFrameDecoder
from rill.protocol.tank.messages import (
    ConsumePartition,
    ConsumePartitionResult,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    ConsumeTopicResult,
    CreateTopicRequest,
    CreateTopicResponse,
    DiscoverPartitionsRequest,
    DiscoverPartitionsResponse,
    DiscoverTopicsRequest,
    DiscoverTopicsResponse,
    DiscoverTopologyRequest,
    DiscoverTopologyResponse,
    MsgId,
    PartitionNumbers,
    Ping,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
    ReloadConfRequest,
    ReloadConfResponse,
    StatusRequest,
    StatusResponse,
    TopicInfo,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

TS = 1700000000000


def unhex(text: str) -> bytes:
    """Hex dumps as the reference prints them (offset columns dropped, spaces ignored)."""
    lines = []
    for line in text.strip().splitlines():
        parts = line.split()
        if len(parts[0]) == 4 and len(parts) > 1 and all(len(p) == 2 for p in parts[1:]):
            parts = parts[1:]  # "0000  01 36 ..." -> the bytes
        lines.append("".join(parts))
    return bytes.fromhex("".join(lines))


def split(frame: bytes) -> tuple[int, bytes]:
    decoder = TankFrameDecoder()
    decoder.feed(frame)
    event = decoder.next_frame()
    assert decoder.buffered == 0
    return event.code, bytes(event.payload)


# --- 11.1 / 11.2 -----------------------------------------------------------------------------

PRODUCE_11_1 = unhex("""
0000  01 36 00 00 00 02 00 2a 00 00 00 03 63 2b 2b 00
0010  00 00 00 00 01 04 77 69 72 65 01 00 00 1d 08 01
0020  00 68 e5 cf 8b 01 00 00 02 6b 31 05 68 65 6c 6c
0030  6f 03 02 6b 32 05 77 6f 72 6c 64
""")
BUNDLE_11_1 = PRODUCE_11_1[-29:]
PRODUCE_RESPONSE_11_2 = unhex("01 05 00 00 00 2a 00 00 00 00")


def test_11_1_produce_request_decodes_to_two_keyed_messages():
    msg_id, payload = split(PRODUCE_11_1)
    request = decode_request(msg_id, payload)
    assert type(request) is ProduceRequest and not request.with_seqnum
    assert (request.client_version, request.request_id, request.client_id) == (2, 42, "c++")
    assert (request.required_acks, request.ack_timeout) == (0, 0)
    [topic] = request.topics
    assert topic.name == "wire"
    [part] = topic.partitions
    assert part.partition == 0 and bytes(part.bundle) == BUNDLE_11_1
    bundle = decode_bundle(part.bundle)
    assert bundle.keys == [b"k1", b"k2"]
    assert bundle.values == [b"hello", b"world"]
    assert bundle.timestamps == [TS, TS]
    assert bundle.seqs == [1, 2] and not bundle.sparse


def test_11_1_produce_request_is_encoded_as_the_cxx_client_writes_it():
    bundle = encode_bundle([b"hello", b"world"], [b"k1", b"k2"], [TS, TS])
    assert bundle == BUNDLE_11_1
    request = ProduceRequest(42, (ProduceTopic("wire", (ProducePartition(0, bundle),)),),
                             client_id="c++")
    assert encode_request(request) == PRODUCE_11_1


def test_11_2_produce_response_both_ways():
    assert encode_response(ProduceResponse(42, bytes([ProduceError.OK]))) == PRODUCE_RESPONSE_11_2
    response = decode_response(*split(PRODUCE_RESPONSE_11_2))
    assert response == ProduceResponse(42, b"\x00")
    request = decode_request(*split(PRODUCE_11_1))
    assert response.entries(request) == [("wire", 0, ProduceError.OK)]


# --- 11.3 ------------------------------------------------------------------------------------

CONSUME_11_3 = unhex("""
0000  02 28 00 00 00 02 00 2b 00 00 00 00 00 00 00 00
0010  00 00 00 00 00 00 00 00 01 04 77 69 72 65 01 00
0020  00 01 00 00 00 00 00 00 00 00 10 00 00
""")
CONSUME_RESPONSE_11_3 = unhex("""
0000  02 44 00 00 00 22 00 00 00 2b 00 00 00 01 04 77
0010  69 72 65 01 00 00 00 01 00 00 00 00 00 00 00 02
0020  00 00 00 00 00 00 00 1e 00 00 00 1d 08 01 00 68
0030  e5 cf 8b 01 00 00 02 6b 31 05 68 65 6c 6c 6f 03
0040  02 6b 32 05 77 6f 72 6c 64
""")
CONSUME_REQUEST_11_3 = ConsumeRequest(
    43, (ConsumeTopic("wire", (ConsumePartition(0, 1, 4096),)),))
CONSUME_ANSWER_11_3 = ConsumeResponse(43, (ConsumeTopicResult("wire", (
    ConsumePartitionResult(0, ConsumeFlag.OK, base=1, hwm=2, chunk=frame_bundle(BUNDLE_11_1)),
)),))


def test_11_3_consume_request_both_ways():
    assert decode_request(*split(CONSUME_11_3)) == CONSUME_REQUEST_11_3
    assert encode_request(CONSUME_REQUEST_11_3) == CONSUME_11_3


def test_11_3_consume_response_both_ways():
    assert encode_response(CONSUME_ANSWER_11_3) == CONSUME_RESPONSE_11_3
    response = decode_response(*split(CONSUME_RESPONSE_11_3))
    [topic] = response.topics
    [part] = topic.partitions
    assert (topic.name, part.partition, part.flag, part.base, part.hwm) == ("wire", 0, 0, 1, 2)
    assert bytes(part.chunk) == frame_bundle(BUNDLE_11_1)
    chunk = decode_chunk(part.chunk, part.base)
    assert chunk.seqs == [1, 2] and chunk.values == [b"hello", b"world"]
    assert chunk.next_seq == 3 and chunk.partial_bundle_size == 0


# --- 11.4 ------------------------------------------------------------------------------------

SPARSE_11_4 = unhex("""
50
64 00 00 00 00 00 00 00
09
00 00 68 e5 cf 8b 01 00 00 02 73 31
06 02 73 32
00 03 01 68 e5 cf 8b 01 00 00 02 73 33
02 02 73 34
""")


def test_11_4_sparse_bundle_both_ways():
    bundle = decode_bundle(SPARSE_11_4)
    assert bundle.sparse
    assert bundle.seqs == [100, 101, 105, 110]
    assert bundle.values == [b"s1", b"s2", b"s3", b"s4"]
    assert bundle.timestamps == [TS, TS, TS + 1, TS + 1]
    assert bundle.keys == [None] * 4
    assert encode_bundle(bundle.values, None, bundle.timestamps, bundle.seqs) == SPARSE_11_4


def test_11_4_twenty_messages_put_the_count_after_the_flags():
    plain = encode_bundle([b"m"] * 20, None, TS)
    assert plain[:2] == bytes.fromhex("00 14")
    snappy = encode_bundle([b"m"] * 20, None, TS, codec=1)
    assert snappy[:2] == bytes.fromhex("01 14")
    # the raw Snappy block starts with the varint of the uncompressed message-set length
    assert snappy[2] == len(plain) - 2
    assert decode_bundle(snappy).values == [b"m"] * 20


# --- 11.5 captured frames --------------------------------------------------------------------

ORDERS = "066f7264657273"


def test_11_5_ping_from_the_broker():
    assert PING_FRAME == unhex("03 00000000")
    assert split(PING_FRAME) == (MsgId.PING, b"")
    assert decode_response(MsgId.PING, b"") == Ping()
    assert encode_response(Ping()) == PING_FRAME
    assert decode_request(MsgId.PING, b"") == Ping()


def test_11_5_tank_cli_consume_from_the_beginning():
    frame = unhex(f"02 2a000000 0200 01000000 00 0000000000000000 00000000 01 {ORDERS} 01 "
                  "0000 0000000000000000 00000008")
    request = ConsumeRequest(1, (ConsumeTopic("orders", (ConsumePartition(0, 0, 128 << 20),)),))
    assert decode_request(*split(frame)) == request
    assert encode_request(request) == frame


@pytest.mark.parametrize(("frame", "answer"), [
    (f"02 28000000 24000000 02000000 01 {ORDERS} 01 0000 00 0100000000000000 0200000000000000 "
     "00000000",
     ConsumeResponse(2, (ConsumeTopicResult("orders", (
         ConsumePartitionResult(0, ConsumeFlag.OK, base=1, hwm=2),)),))),
    (f"02 30000000 2c000000 01000000 01 {ORDERS} 01 0000 01 0000000000000000 0200000000000000 "
     "00000000 0100000000000000",
     ConsumeResponse(1, (ConsumeTopicResult("orders", (
         ConsumePartitionResult(0, ConsumeFlag.BOUNDARY_CHECK, base=0, hwm=2,
                                first_available=1),)),))),
    ("02 13000000 0f000000 01000000 01 066e6f73756368 01 ffff",
     ConsumeResponse(1, (ConsumeTopicResult("nosuch", unknown_count=1),))),
    (f"02 14000000 10000000 01000000 01 {ORDERS} 01 0300 ff",
     ConsumeResponse(1, (ConsumeTopicResult("orders", (
         ConsumePartitionResult(3, ConsumeFlag.UNKNOWN_PARTITION),)),))),
], ids=["eof", "boundary-check", "unknown-topic", "unknown-partition"])
def test_11_5_consume_answers_both_ways(frame, answer):
    raw = unhex(frame)
    assert encode_response(answer) == raw
    decoded = decode_response(*split(raw))
    assert decoded.request_id == answer.request_id
    assert [(t.name, t.unknown_count) for t in decoded.topics] == [
        (t.name, t.unknown_count) for t in answer.topics]
    for got, want in zip(decoded.topics, answer.topics):
        for g, w in zip(got.partitions, want.partitions, strict=True):
            assert (g.partition, g.flag, g.base, g.hwm, bytes(g.chunk), g.first_available) == (
                w.partition, w.flag, w.base, w.hwm, bytes(w.chunk), w.first_available)


def test_11_5_produce_with_seqnum_and_its_answer_with_msg_id_1():
    frame = unhex(f"05 37000000 0200 01000000 03632b2b 00 00000000 01 {ORDERS} 01 0000 14 "
                  "6400000000000000 44 6400000000000000 00 b7ad2709a2010000 01 61")
    msg_id, payload = split(frame)
    assert msg_id == MsgId.PRODUCE_WITH_SEQNUM
    request = decode_request(msg_id, payload)
    assert request.with_seqnum and request.msg_id == 0x05
    [part] = request.topics[0].partitions
    assert part.first_seq == 100 and len(part.bundle) == 0x14
    bundle = decode_bundle(part.bundle)
    assert bundle.sparse and bundle.seqs == [100] and bundle.values == [b"a"]
    assert bundle.timestamps == [0x01a209_27adb7]
    # the client side: the same bundle and frame from columns
    again = encode_bundle([b"a"], None, [0x01a20927adb7], [100])
    rebuilt = ProduceRequest(1, (ProduceTopic("orders", (ProducePartition(0, again, 100),)),),
                             with_seqnum=True, client_id="c++")
    assert encode_request(rebuilt) == frame
    answer = unhex("01 05000000 01000000 00")
    assert encode_response(ProduceResponse(1, b"\x00")) == answer
    assert split(answer)[0] == MsgId.PRODUCE  # not 0x05


def test_11_5_java_client_consume_version_0():
    frame = unhex("02 2a000000 0000 00000000 044a433031 8813000000000000 00000000 01 026a76 01 "
                  "0000 0400000000000000 e8030000")
    request = ConsumeRequest(0, (ConsumeTopic("jv", (ConsumePartition(0, 4, 1000),)),),
                             max_wait_ms=5000, min_bytes=0, client_version=0, client_id="JC01")
    assert decode_request(*split(frame)) == request
    assert encode_request(request) == frame


@pytest.mark.parametrize(("request_hex", "tank_request", "answer_hex", "answer"), [
    (f"07 0e000000 01000000 {ORDERS} 0100 00", CreateTopicRequest(1, "orders", 1),
     f"07 0c000000 01000000 {ORDERS} 00", CreateTopicResponse(1, "orders", 0)),
    (f"06 0b000000 01000000 {ORDERS}", DiscoverPartitionsRequest(1, "orders"),
     f"06 1d000000 01000000 {ORDERS} 0100 0100000000000000 0200000000000000",
     DiscoverPartitionsResponse(1, "orders", (PartitionNumbers(1, 2),))),
    ("0a 04000000 01000000", StatusRequest(1),
     "0a 1e000000 01000000 00 00 02000000 03000000 03000000 00000000 2e64046b 90010000",
     StatusResponse(1, topics=2, partitions=3, open_partitions=3, open_partitions_time_us=0,
                    startup_unix_seconds=0x6B04642E, version=400)),
    ("0b 05000000 01000000 00", DiscoverTopicsRequest(1),
     f"0b 1d000000 01000000 02000000 00 {ORDERS} 01 0100 066576656e7473 01 0200",
     DiscoverTopicsResponse(1, (TopicInfo("orders", 1), TopicInfo("events", 2)))),
    ("0c 05000000 01000000 00", DiscoverTopologyRequest(1),
     "0c 06000000 01000000 ffff", DiscoverTopologyResponse(1)),
    (f"08 0d000000 01000000 {ORDERS} 0000", ReloadConfRequest(1, "orders", 0),
     f"08 0e000000 01000000 {ORDERS} 0000 02",
     ReloadConfResponse(1, "orders", 0, ReloadConfError.NO_CONFIG)),
], ids=["create-topic", "discover-partitions", "status", "discover-topics", "discover-topology",
        "reload-conf"])
def test_11_5_admin_requests_and_answers_both_ways(request_hex, tank_request, answer_hex, answer):
    raw_request, raw_answer = unhex(request_hex), unhex(answer_hex)
    assert decode_request(*split(raw_request)) == tank_request
    assert encode_request(tank_request) == raw_request
    assert decode_response(*split(raw_answer)) == answer
    assert encode_response(answer) == raw_answer
