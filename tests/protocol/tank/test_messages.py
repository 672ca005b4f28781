"""Every TANK request and response (reference §3, §5, §6, §8): round trips both ways, the
rules the codec keeps (0x05 answered as 0x01, client version 3's op_flags byte, §5.3's error
grouping) and every malformed form refused with its exception."""

from __future__ import annotations

import pytest

from rill.protocol.tank.bundles import encode_bundle, frame_bundle
from rill.protocol.tank.errors import (
    BadVarint,
    ConsumeFlag,
    DiscoverReason,
    LengthMismatch,
    ProduceError,
    TankDecodeError,
    Truncated,
    UnknownMessageId,
)
from rill.protocol.tank.messages import (
    CLOSES_CONNECTION,
    ClusterStatus,
    ConsumePartition,
    ConsumePartitionResult,
    ConsumePeerPartition,
    ConsumePeerRequest,
    ConsumePeerTopic,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    ConsumeTopicResult,
    CreateTopicRequest,
    DiscoverPartitionsRequest,
    DiscoverPartitionsResponse,
    DiscoverTopicsResponse,
    DiscoverTopologyResponse,
    MsgId,
    PartitionNumbers,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
    RegReplicaRequest,
    StatusResponse,
    TopicInfo,
    TopologyNode,
    decode_request,
    decode_response,
    encode_consume_one,
    encode_produce_one,
    encode_request,
    encode_request_payload,
    encode_response,
    encode_response_parts,
    produce_error_bytes,
)

BUNDLE = encode_bundle([b"v"], None, 5)


def payload_of(frame: bytes) -> bytes:
    return frame[5:]


def roundtrip_request(request):
    frame = encode_request(request)
    assert frame[0] == request.msg_id
    assert int.from_bytes(frame[1:5], "little") == len(frame) - 5
    return decode_request(frame[0], frame[5:])


def roundtrip_response(response):
    frame = encode_response(response)
    return decode_response(frame[0], frame[5:])


# --- round trips -----------------------------------------------------------------------------


def test_produce_with_several_topics_and_partitions_round_trips():
    request = ProduceRequest(7, (
        ProduceTopic("a", (ProducePartition(0, BUNDLE), ProducePartition(3, BUNDLE))),
        ProduceTopic("b", ()),
        ProduceTopic("c", (ProducePartition(1, BUNDLE),)),
    ), client_version=0, client_id="JC01", required_acks=1, ack_timeout=500)
    decoded = roundtrip_request(request)
    assert decoded.request_id == 7 and decoded.client_id == "JC01"
    assert (decoded.required_acks, decoded.ack_timeout) == (1, 500)
    assert [(t.name, [(p.partition, bytes(p.bundle), p.first_seq) for p in t.partitions])
            for t in decoded.topics] == [("a", [(0, BUNDLE, None), (3, BUNDLE, None)]),
                                         ("b", []), ("c", [(1, BUNDLE, None)])]


def test_produce_with_seqnum_carries_first_seq_outside_bundle_len():
    request = ProduceRequest(1, (ProduceTopic("t", (ProducePartition(0, BUNDLE, 77),)),),
                             with_seqnum=True)
    frame = encode_request(request)
    assert frame[0] == 0x05
    decoded = decode_request(0x05, frame[5:])
    [part] = decoded.topics[0].partitions
    assert part.first_seq == 77 and bytes(part.bundle) == BUNDLE
    # read as a plain Produce the same bytes misparse: the 8 bytes are not in bundle_len
    with pytest.raises(TankDecodeError):
        decode_request(0x01, frame[5:])


def test_consume_version_3_carries_op_flags_after_min_bytes():
    request = ConsumeRequest(9, (ConsumeTopic("t", (ConsumePartition(2, 10, 100),)),),
                             max_wait_ms=1000, min_bytes=64, client_version=3, op_flags=1)
    payload = encode_request_payload(request)
    assert payload[2 + 4 + 1 + 8 + 4] == 1  # the op_flags byte
    assert roundtrip_request(request) == request
    older = ConsumeRequest(9, request.topics, 1000, 64, client_version=2)
    assert len(encode_request_payload(older)) == len(payload) - 1
    assert roundtrip_request(older) == older
    # a version-3 request read without honouring the version would misparse
    assert decode_request(0x02, payload).topics == request.topics


def test_discover_partitions_with_an_explicit_list():
    request = DiscoverPartitionsRequest(3, "t", (0, 2, 5))
    assert roundtrip_request(request) == request
    with pytest.raises(LengthMismatch):
        decode_request(0x06, payload_of(encode_request(request)) + b"\x01")


def test_create_topic_with_config_text():
    request = CreateTopicRequest(4, "orders", 3, b"log.segment.bytes = 1mb\n" * 20)
    assert roundtrip_request(request) == request


def test_cluster_only_requests_decode_so_that_the_broker_can_close():
    assert CLOSES_CONNECTION == {MsgId.REG_REPLICA, MsgId.CONSUME_PEER}
    assert roundtrip_request(RegReplicaRequest(12)) == RegReplicaRequest(12)
    peer = ConsumePeerRequest(1, 500, 0, (ConsumePeerTopic("t", (
        ConsumePeerPartition(0, 5, 4096),)),))
    assert roundtrip_request(peer) == peer


def test_consume_response_with_every_partition_form_round_trips():
    chunk = frame_bundle(BUNDLE) + frame_bundle(BUNDLE)
    sparse_chunk = frame_bundle(encode_bundle([b"s"], None, 1, [40]))
    response = ConsumeResponse(5, (
        ConsumeTopicResult("t", (
            ConsumePartitionResult(0, ConsumeFlag.OK, base=3, hwm=9, chunk=chunk),
            ConsumePartitionResult(1, ConsumeFlag.SPARSE_FIRST, hwm=40, chunk=sparse_chunk),
            ConsumePartitionResult(2, ConsumeFlag.BOUNDARY_CHECK, hwm=2, first_available=1),
            ConsumePartitionResult(3, ConsumeFlag.UNKNOWN_PARTITION),
            ConsumePartitionResult(4, ConsumeFlag.SYSTEM),
            ConsumePartitionResult(5, ConsumeFlag.NO_LEADER),
            ConsumePartitionResult(6, ConsumeFlag.OTHER_LEADER, endpoint=("10.0.0.7", 11011)),
            ConsumePartitionResult(7, ConsumeFlag.OK, base=0, hwm=9),
        )),
        ConsumeTopicResult("gone", unknown_count=2),
    ))
    decoded = roundtrip_response(response)
    assert decoded.request_id == 5
    assert decoded.topics[1] == ConsumeTopicResult("gone", (), 2)
    got = [(p.partition, p.flag, p.base, p.hwm, bytes(p.chunk), p.first_available, p.endpoint)
           for p in decoded.topics[0].partitions]
    want = [(p.partition, p.flag, p.base, p.hwm, bytes(p.chunk), p.first_available, p.endpoint)
            for p in response.topics[0].partitions]
    assert got == want
    # the chunks follow all headers, unchanged and not copied by encode_response_parts
    parts = encode_response_parts(response)
    assert parts[-2] is chunk and parts[-1] is sparse_chunk
    assert b"".join(parts) == encode_response(response)


def test_a_consume_flag_clients_do_not_know_is_never_encoded():
    with pytest.raises(ValueError):
        encode_response(ConsumeResponse(1, (ConsumeTopicResult("t", (
            ConsumePartitionResult(0, 0x02),)),)))


def test_discover_partitions_response_with_reasons():
    none = 0xFFFF_FFFF_FFFF_FFFF
    response = DiscoverPartitionsResponse(1, "t", (
        PartitionNumbers(1, 5), PartitionNumbers(none, none, DiscoverReason.SYSTEM),
        PartitionNumbers(none, none, DiscoverReason.OTHER_LEADER, ("1.2.3.4", 9))))
    assert roundtrip_response(response) == response
    unknown = DiscoverPartitionsResponse(1, "nosuch", ())
    assert payload_of(encode_response(unknown)) == bytes.fromhex("01000000 06") + b"nosuch" + \
        b"\x00\x00"
    assert roundtrip_response(unknown) == unknown


def test_status_cluster_and_older_short_forms():
    full = StatusResponse(1, 2, 3, 4, 5, 6, 400,
                          cluster=ClusterStatus(1, "c", 3))
    assert roundtrip_response(full) == full
    short = StatusResponse(1, 2, 3, None, None, None, None)
    assert len(payload_of(encode_response(short))) == 4 + 1 + 1 + 4 + 4
    assert roundtrip_response(short) == short
    no_version = StatusResponse(1, 2, 3, 4, 5, 6, None)
    assert roundtrip_response(no_version) == no_version


def test_cluster_forms_of_topics_and_topology():
    topics = DiscoverTopicsResponse(1, (TopicInfo("a", 2, True, 3),), cluster_aware=True)
    assert roundtrip_response(topics) == topics
    topology = DiscoverTopologyResponse(1, "c", (
        TopologyNode(1, 0b011, 4, ("127.0.0.1", 11011)), TopologyNode(2, 0b100, 0)))
    assert roundtrip_response(topology) == topology


# --- §5.3: produce error bytes -----------------------------------------------------------------


def test_produce_error_bytes_group_topics_as_the_broker_does():
    # measured: sem/0 ok, sem/7, nope/0, nope/1, sem/1 ok -> 00 01 ff 00
    request = ProduceRequest(1, (
        ProduceTopic("sem", (ProducePartition(0, BUNDLE), ProducePartition(7, BUNDLE))),
        ProduceTopic("nope", (ProducePartition(0, BUNDLE), ProducePartition(1, BUNDLE))),
        ProduceTopic("empty", ()),
        ProduceTopic("sem", (ProducePartition(1, BUNDLE),)),
    ))
    codes = [ProduceError.OK, ProduceError.UNKNOWN_PARTITION, ProduceError.UNKNOWN_TOPIC,
             ProduceError.UNKNOWN_TOPIC, ProduceError.OK]
    errors = produce_error_bytes(request, codes)
    assert errors == bytes.fromhex("00 01 ff 00")
    response = ProduceResponse(1, errors)
    assert response.entries(request) == [
        ("sem", 0, 0), ("sem", 7, 1), ("nope", 0, 0xFF), ("nope", 1, 0xFF), ("sem", 1, 0)]


def test_consecutive_entries_of_one_topic_form_one_group():
    request = ProduceRequest(1, (ProduceTopic("x", (ProducePartition(0, BUNDLE),)),
                                 ProduceTopic("x", (ProducePartition(1, BUNDLE),))))
    assert produce_error_bytes(request, [0xFE, 0xFE]) == b"\xfe"
    assert ProduceResponse(1, b"\xfe").entries(request) == [("x", 0, 0xFE), ("x", 1, 0xFE)]


def test_produce_error_bytes_need_one_code_per_entry():
    request = ProduceRequest(1, (ProduceTopic("x", (ProducePartition(0, BUNDLE),)),))
    with pytest.raises(ValueError):
        produce_error_bytes(request, [])
    with pytest.raises(ValueError):
        produce_error_bytes(request, [0, 0])


def test_a_produce_answer_shorter_or_longer_than_the_request_is_refused():
    request = ProduceRequest(1, (ProduceTopic("x", (ProducePartition(0, BUNDLE),
                                                    ProducePartition(1, BUNDLE))),))
    with pytest.raises(Truncated):
        ProduceResponse(1, b"\x00").entries(request)
    with pytest.raises(LengthMismatch):
        ProduceResponse(1, b"\x00\x00\x00").entries(request)


# --- malformed input ---------------------------------------------------------------------------


def test_unknown_msg_ids_are_refused_both_ways():
    for msg_id in (0x00, 0x0D, 0xFF):
        with pytest.raises(UnknownMessageId) as caught:
            decode_request(msg_id, b"")
        assert caught.value.msg_id == msg_id
    with pytest.raises(UnknownMessageId):
        decode_response(MsgId.PRODUCE_WITH_SEQNUM, b"\x01\x00\x00\x00")  # answered as 0x01
    with pytest.raises(UnknownMessageId):
        decode_response(MsgId.REG_REPLICA, b"")


ALL_REQUESTS = [
    ProduceRequest(1, (ProduceTopic("t", (ProducePartition(0, BUNDLE),)),)),
    ProduceRequest(1, (ProduceTopic("t", (ProducePartition(0, BUNDLE, 3),)),), with_seqnum=True),
    ConsumeRequest(1, (ConsumeTopic("t", (ConsumePartition(0, 1, 10),)),), client_version=3),
    CreateTopicRequest(1, "t", 1, b"a=b"),
    DiscoverPartitionsRequest(1, "t"),
]


@pytest.mark.parametrize("request_", ALL_REQUESTS, ids=lambda r: type(r).__name__)
def test_every_truncation_of_a_request_is_refused(request_):
    frame = encode_request(request_)
    msg_id, payload = frame[0], frame[5:]
    for cut in range(len(payload)):
        with pytest.raises(TankDecodeError):
            decode_request(msg_id, payload[:cut])
    extra = b"\x00" if msg_id == MsgId.DISCOVER_PARTITIONS else b"\x00\x00\x00"  # not a u16
    with pytest.raises(LengthMismatch):
        decode_request(msg_id, payload + extra)


def test_a_bundle_len_past_the_payload_is_refused():
    payload = payload_of(encode_request(ALL_REQUESTS[0]))
    at = payload.index(bytes([len(BUNDLE)]) + BUNDLE)
    longer = payload[:at] + bytes([len(BUNDLE) + 1]) + payload[at + 1 :]
    with pytest.raises(LengthMismatch):
        decode_request(0x01, longer)


def test_a_bad_varint_in_a_request_is_refused():
    payload = payload_of(encode_request(ALL_REQUESTS[0]))
    at = payload.index(bytes([len(BUNDLE)]) + BUNDLE)
    broken = payload[:at] + b"\x80\x80\x80\x80\x80\x01" + payload[at + 1 :]
    with pytest.raises(BadVarint):
        decode_request(0x01, broken)


def test_a_consume_response_whose_lengths_disagree_is_refused():
    chunk = frame_bundle(BUNDLE)
    frame = encode_response(ConsumeResponse(1, (ConsumeTopicResult("t", (
        ConsumePartitionResult(0, ConsumeFlag.OK, base=1, hwm=1, chunk=chunk),)),)))
    payload = frame[5:]
    with pytest.raises(LengthMismatch):
        decode_response(0x02, payload[:-1])  # chunk_len past the payload
    with pytest.raises(LengthMismatch):
        decode_response(0x02, payload + b"\x00")  # bytes after the last chunk
    header_len = int.from_bytes(payload[:4], "little")
    with pytest.raises(LengthMismatch):
        decode_response(0x02, (header_len + 1).to_bytes(4, "little") + payload[4:])
    with pytest.raises(LengthMismatch):
        decode_response(0x02, (10_000).to_bytes(4, "little") + payload[4:])


@pytest.mark.parametrize("name", ["t", "", "topic-é" * 30, "x" * 255])
def test_the_one_partition_consume_answer_is_the_response_encoded(name):
    """``encode_consume_one`` (the tailing consumer's answer, with no response object) gives
    the bytes of the ConsumeResponse it stands for, and a client decodes them back."""
    chunk = frame_bundle(encode_bundle([b"a", b"bc"], timestamps=7))
    for request_id, partition, base, hwm, data in [
            (0, 0, 1, 2, chunk), (2**32 - 1, 65534, 2**63, 2**63 + 9, chunk),
            (7, 3, 0, 0, b""), (9, 1, 41, 90, memoryview(chunk * 3))]:
        if len(name.encode()) > 255:
            with pytest.raises(ValueError):
                encode_consume_one(request_id, name, partition, base, hwm, data)
            continue
        response = ConsumeResponse(request_id, (ConsumeTopicResult(name, (
            ConsumePartitionResult(partition, ConsumeFlag.OK, base, hwm, data),)),))
        one = b"".join(bytes(part) for part in encode_consume_one(request_id, name, partition,
                                                                  base, hwm, data))
        assert one == b"".join(bytes(part) for part in encode_response_parts(response))
        decoded = decode_response(one[0], one[5:])
        assert decoded.request_id == request_id
        (part,) = decoded.topics[0].partitions
        assert (decoded.topics[0].name, part.partition, part.base, part.hwm,
                bytes(part.chunk)) == (name, partition, base, hwm, bytes(data))


def test_the_one_partition_produce_answer_is_the_response_encoded():
    """``encode_produce_one`` (a pipelined run's answer, with no response object) gives the
    bytes of the ProduceResponse it stands for, for every code but 0xfc (which needs the
    leader's endpoint: refused)."""
    request = ProduceRequest(9, (ProduceTopic("t", (ProducePartition(3, b""),)),))
    for request_id in (0, 9, 2**32 - 1):
        for code in (0x00, 0x01, 0x02, 0x03, 0x04, 0x0A, 0xFD, 0xFE, 0xFF):
            response = ProduceResponse(request_id, produce_error_bytes(request, [code]))
            assert encode_produce_one(request_id, code) == encode_response(response)
            decoded = decode_response(MsgId.PRODUCE, encode_produce_one(request_id, code)[5:])
            assert (decoded.request_id, bytes(decoded.errors)) == (request_id, bytes([code]))
    with pytest.raises(ValueError):
        encode_produce_one(1, 0xFC)
