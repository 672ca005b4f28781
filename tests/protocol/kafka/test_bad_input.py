"""Malformed and unwelcome input: every failure is one of the codec's exception types (which
name the Kafka error code a server answers with), and no length read from the wire makes the
decoder allocate or loop for what it announces."""

from __future__ import annotations

import struct
import tracemalloc
import uuid

import pytest

from rill.protocol.kafka import apis
from rill.protocol.kafka.codec import api_codec, decode_request, encode_request, read_uvarint
from rill.protocol.kafka.errors import (
    ErrorCode,
    KafkaDecodeError,
    KafkaEncodeError,
    KafkaProtocolError,
    UnknownApiKey,
    UnsupportedVersion,
)
from rill.protocol.kafka.messages import (
    FetchRequest,
    JoinGroupRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)

P = ProduceRequest


def produce(records=b"x" * 40):
    return P(acks=1, timeout_ms=100, topic_data=(P.TopicProduceData(name="t", partition_data=(
        P.TopicProduceData.PartitionProduceData(index=0, records=records),)),))


SAMPLES = [
    (apis.PRODUCE, 9, produce()),
    (apis.PRODUCE, 3, produce()),
    (apis.METADATA, 12, MetadataRequest(topics=(MetadataRequest.MetadataRequestTopic(
        name="orders", topic_id=uuid.uuid4()),))),
    (apis.JOIN_GROUP, 7, JoinGroupRequest(group_id="g", member_id="m", protocol_type="consumer",
                                          protocols=(JoinGroupRequest.JoinGroupRequestProtocol(
                                              name="range", metadata=b"abc"),))),
    (apis.FETCH, 12, FetchRequest(topics=(FetchRequest.FetchTopic(topic="t", partitions=(
        FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=5),)),),
        cluster_id="c")),
]


@pytest.mark.parametrize(("api_key", "version", "body"), SAMPLES)
def test_every_truncation_is_a_decode_error(api_key, version, body):
    payload = encode_request(api_key, version, 1, body)[4:]
    assert decode_request(payload).body == body
    for cut in range(len(payload)):
        with pytest.raises(KafkaDecodeError):
            decode_request(payload[:cut])


def test_trailing_bytes_are_ignored_unless_strict():
    payload = encode_request(apis.PRODUCE, 9, 1, produce())[4:] + b"\x00"
    assert decode_request(payload).body == produce()
    with pytest.raises(KafkaDecodeError, match="left over"):
        decode_request(payload, strict=True)


def v0_metadata(array_count: int, tail: bytes = b"") -> bytes:
    return struct.pack(">hhih", apis.METADATA, 0, 1, 0) + struct.pack(">i", array_count) + tail


def test_negative_array_lengths():
    with pytest.raises(KafkaDecodeError, match="array length -2"):
        decode_request(v0_metadata(-2))
    with pytest.raises(KafkaDecodeError, match="array length -1"):  # not nullable in v0
        decode_request(v0_metadata(-1))
    v1 = struct.pack(">hhih", apis.METADATA, 1, 1, 0) + struct.pack(">i", -1)
    assert decode_request(v1).body.topics is None  # nullable from v1


def allocation_peak(call) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(KafkaDecodeError):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_huge_lengths_are_refused_without_allocating():
    huge_array = v0_metadata(0x7FFFFFFF, b"\x00\x01a")
    assert allocation_peak(lambda: decode_request(huge_array)) < 64 * 1024
    with pytest.raises(KafkaDecodeError, match="cannot fit"):  # refused from the count itself
        decode_request(huge_array)
    huge_string = v0_metadata(1, struct.pack(">h", 0x7FFF) + b"abc")
    assert allocation_peak(lambda: decode_request(huge_string)) < 64 * 1024
    records = struct.pack(">hhih", apis.PRODUCE, 3, 1, 0) + struct.pack(">hhi", -1, 1, 100)
    records += struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
    records += struct.pack(">ii", 0, 0x7FFFFFF0) + b"abc"  # partition 0, records of ~2 GiB
    assert allocation_peak(lambda: decode_request(records)) < 64 * 1024
    flexible = encode_request(apis.METADATA, 12, 1, MetadataRequest(topics=()))[4:]
    header = len(flexible) - 4  # the topics count, then 2 booleans and the tag count
    compact_huge = flexible[:header] + b"\xff\xff\xff\xff\x07" + flexible[header + 1:]
    assert allocation_peak(lambda: decode_request(compact_huge)) < 64 * 1024
    with pytest.raises(KafkaDecodeError, match="cannot fit"):
        decode_request(compact_huge)


def test_varints_longer_than_five_bytes_are_refused():
    with pytest.raises(KafkaDecodeError, match="longer than 5"):
        read_uvarint(memoryview(b"\xff\xff\xff\xff\xff\x01"), 0)
    assert read_uvarint(memoryview(b"\xff\xff\xff\xff\x0f"), 0) == (0xFFFFFFFF, 5)


def test_bad_utf8_and_bad_tags():
    bad = v0_metadata(1, struct.pack(">h", 2) + b"\xff\xfe")
    with pytest.raises(KafkaDecodeError):
        decode_request(bad)
    fetch = FetchRequest(cluster_id="abc")
    payload = encode_request(apis.FETCH, 12, 1, fetch)[4:]
    tagged = payload.rindex(b"\x01\x00\x04\x04abc")  # 1 tag: tag 0, size 4, compact "abc"
    wrong_size = payload[:tagged] + b"\x01\x00\x05\x04abcd"
    with pytest.raises(KafkaDecodeError, match="left over"):
        decode_request(wrong_size)


def test_unknown_api_key():
    payload = struct.pack(">hhih", 60, 0, 42, -1)  # DescribeCluster: not in rill's table
    with pytest.raises(UnknownApiKey) as caught:
        decode_request(payload)
    assert (caught.value.api_key, caught.value.correlation_id) == (60, 42)
    with pytest.raises(UnknownApiKey):
        decode_request(struct.pack(">hhih", 1000, 0, 42, -1))


@pytest.mark.parametrize(("api_key", "version"), [
    (apis.FETCH, 13),  # topic ids: capped
    (apis.PRODUCE, 10),
    (apis.JOIN_GROUP, 8),  # above the table
    (apis.CREATE_TOPICS, -1),  # below it (every API is served from 0)
    (apis.OFFSET_COMMIT, 9),
    (apis.API_VERSIONS, 5),
    (apis.API_VERSIONS, -1),
])
def test_versions_outside_the_table(api_key, version):
    payload = struct.pack(">hhih", api_key, version, 77, -1) + b"\x00" * 8
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(payload)
    error = caught.value
    assert (error.api_key, error.api_version, error.correlation_id) == (api_key, version, 77)
    assert error.supported == apis.SUPPORTED[api_key]
    assert error.error_code == ErrorCode.UNSUPPORTED_VERSION == 35
    assert isinstance(error, KafkaProtocolError)


def test_frames_shorter_than_the_header():
    for size in range(8):
        with pytest.raises(KafkaDecodeError):
            decode_request(b"\x00\x12\x00\x03\x00\x00\x00\x01"[:size])


def test_encode_refuses_what_the_version_cannot_carry():
    with pytest.raises(KafkaEncodeError, match="non-nullable"):
        api_codec(apis.METADATA, 0).request.encode(MetadataRequest(topics=None))
    with pytest.raises(KafkaEncodeError):
        api_codec(apis.PRODUCE, 9).request.encode(P(acks=1 << 20))  # int16
    with pytest.raises(KafkaEncodeError, match="max_num_offsets|MaxNumOffsets"):
        api_codec(apis.LIST_OFFSETS, 1).request.encode(ListOffsetsRequest(topics=(
            ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=(
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(max_num_offsets=5),)),)))
    # an ignorable field the version lacks is dropped, as Kafka does
    rack = api_codec(apis.FETCH, 4).request.encode(FetchRequest(rack_id="rack-a"))
    assert rack == api_codec(apis.FETCH, 4).request.encode(FetchRequest())
