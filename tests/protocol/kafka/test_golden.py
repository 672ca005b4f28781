"""Golden frames: the v0 requests of the seed (seeds/kafka-0.8-protocol-changes.txt) built byte
by byte from its field lists with ``struct``, decoded field by field, and encoded back to the
very same bytes. Also the v0 Produce and Fetch responses of the seed, built the same way and
compared with what the codec encodes.

The seed's excerpt of ``OffsetRequest`` elides the leading ``ReplicaId int32`` (its "..."):
the 0.8 guide and Kafka's ListOffsets v0 carry it, so the frame below does too."""

from __future__ import annotations

import struct
import zlib

from rill.protocol.kafka import apis
from rill.protocol.kafka.codec import api_codec, decode_request, encode_request, encode_response
from rill.protocol.kafka.messages import FetchResponse, ProduceResponse


def string(text: str) -> bytes:  # the seed's "string": int16 length + UTF-8
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def array(items: list[bytes]) -> bytes:  # "[foo]": int32 count + items
    return struct.pack(">i", len(items)) + b"".join(items)


def request_frame(api_key: int, correlation_id: int, client_id: str, body: bytes) -> bytes:
    # RequestMessage => ApiKey ApiVersion CorrelationId ClientId RequestMessage
    message = struct.pack(">hhi", api_key, 0, correlation_id) + string(client_id) + body
    return struct.pack(">i", len(message)) + message  # MessageSize => int32


def message_v0(key: bytes | None, value: bytes, offset: int = 0) -> bytes:
    """A legacy MessageSet entry (magic 0): offset, size, crc, magic, attributes, key, value."""
    def blob(data):
        return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    body = struct.pack(">bb", 0, 0) + blob(key) + blob(value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def check(frame: bytes, api_key: int):
    request = decode_request(frame[4:], strict=True)
    assert request.api_key == api_key and request.api_version == 0
    again = encode_request(api_key, 0, request.correlation_id, request.body,
                           client_id=request.header.client_id)
    assert again == frame  # byte for byte
    return request


def test_metadata_v0():
    # MetadataRequest => [TopicName]
    frame = request_frame(3, 1, "seed", array([string("orders"), string("payments")]))
    request = check(frame, apis.METADATA)
    assert request.correlation_id == 1 and request.header.client_id == "seed"
    assert [t.name for t in request.body.topics] == ["orders", "payments"]
    empty = check(request_frame(3, 2, "seed", array([])), apis.METADATA)  # all topics
    assert empty.body.topics == ()


def test_produce_v0_with_a_message_set():
    message_set = message_v0(None, b"hello") + message_v0(b"k", b"world", offset=1)
    # ProduceRequest => RequiredAcks Timeout [TopicName [Partition MessageSetSize MessageSet]]
    body = struct.pack(">hi", 1, 1500) + array([
        string("orders") + array([struct.pack(">ii", 0, len(message_set)) + message_set,
                                  struct.pack(">ii", 3, 0)]),
    ])
    frame = request_frame(0, 7, "p", body)
    request = check(frame, apis.PRODUCE)
    assert (request.body.acks, request.body.timeout_ms) == (1, 1500)
    assert request.body.transactional_id is None  # v3+ only: left at its default
    [topic] = request.body.topic_data
    assert topic.name == "orders"
    first, second = topic.partition_data
    assert first.index == 0 and bytes(first.records) == message_set
    assert isinstance(first.records, memoryview)  # not copied, not parsed
    assert second.index == 3 and bytes(second.records) == b""


def test_fetch_v0():
    # FetchRequest => ReplicaId MaxWaitTime MinBytes [TopicName [Partition FetchOffset MaxBytes]]
    body = struct.pack(">iii", -1, 100, 1) + array([
        string("orders") + array([struct.pack(">iqi", 0, 42, 1 << 20),
                                  struct.pack(">iqi", 1, 0, 4096)]),
        string("payments") + array([]),
    ])
    request = check(request_frame(1, 9, "c", body), apis.FETCH)
    fetch = request.body
    assert (fetch.replica_id, fetch.max_wait_ms, fetch.min_bytes) == (-1, 100, 1)
    assert [t.topic for t in fetch.topics] == ["orders", "payments"]
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes)
            for p in fetch.topics[0].partitions] == [(0, 42, 1 << 20), (1, 0, 4096)]
    assert fetch.max_bytes == 0x7FFFFFFF  # v3+ only: the schema's default


def test_offsets_v0():
    # OffsetRequest => ReplicaId [TopicName [Partition Time MaxNumberOfOffsets]]
    body = struct.pack(">i", -1) + array([
        string("orders") + array([struct.pack(">iqi", 0, -1, 1), struct.pack(">iqi", 2, -2, 5)]),
    ])
    request = check(request_frame(2, 11, "o", body), apis.LIST_OFFSETS)
    [topic] = request.body.topics
    assert topic.name == "orders"
    assert [(p.partition_index, p.timestamp, p.max_num_offsets) for p in topic.partitions] == \
        [(0, -1, 1), (2, -2, 5)]


def test_produce_and_fetch_v0_responses():
    # ProduceResponse => [TopicName [Partition ErrorCode Offset]], after CorrelationId
    expected = struct.pack(">i", 7) + array([
        string("orders") + array([struct.pack(">ihq", 0, 0, 1234), struct.pack(">ihq", 3, 3, -1)])])
    P = ProduceResponse
    body = P(responses=(P.TopicProduceResponse(name="orders", partition_responses=(
        P.TopicProduceResponse.PartitionProduceResponse(index=0, error_code=0, base_offset=1234),
        P.TopicProduceResponse.PartitionProduceResponse(index=3, error_code=3, base_offset=-1),
    )),))
    frame = encode_response(apis.PRODUCE, 0, 7, body)
    assert frame == struct.pack(">i", len(expected)) + expected
    # FetchResponse => [TopicName [Partition ErrorCode HighwaterMarkOffset MessageSetSize MessageSet]]
    message_set = message_v0(None, b"hello", offset=42)
    expected = struct.pack(">i", 9) + array([
        string("orders") + array([struct.pack(">ihqi", 0, 0, 43, len(message_set)) + message_set])])
    F = FetchResponse
    body = F(responses=(F.FetchableTopicResponse(topic="orders", partitions=(
        F.FetchableTopicResponse.PartitionData(partition_index=0, error_code=0, high_watermark=43,
                                               records=message_set),)),))
    assert encode_response(apis.FETCH, 0, 9, body) == struct.pack(">i", len(expected)) + expected
    decoded = api_codec(apis.FETCH, 0).response.decode(expected[4:])
    assert bytes(decoded.responses[0].partitions[0].records) == message_set
