"""Legacy MessageSets (magic 0/1) <-> RecordBatch v2 (``rill.protocol.kafka.message_sets``),
with golden frames built byte by byte from the seed's layouts (seeds/kafka-0.8-protocol-changes
.txt, "Message sets") and kafka-notes §3.1: the seed's Produce v0 request with two messages
converted to the exact RecordBatch v2 a broker stores, that batch down-converted into the
exact Fetch v0 response, the Offsets v0 request and response, OffsetCommit v0 and OffsetFetch
v0; then every codec's wrapper, and the refusals."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import pytest
import xxhash
from crc32c import crc32c

from rill.protocol.kafka import apis, message_sets, record_batch
from rill.protocol.kafka.codec import api_codec, decode_request, encode_request, encode_response
from rill.protocol.kafka.message_sets import (
    InvalidMessageSet,
    batches_to_message_set,
    is_message_set,
    message_set_to_batch,
    read_message_set,
)
from rill.protocol.kafka.messages import (
    FetchResponse,
    ListOffsetsResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
)

NOW = 1_700_000_000_000


def string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def array(items: list[bytes]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


def blob(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data


def message(magic: int, key: bytes | None, value: bytes | None, offset: int = 0,
            timestamp: int = -1, attributes: int = 0) -> bytes:
    """Offset i64, MessageSize i32, Crc u32 (CRC-32 of the rest), MagicByte i8, Attributes i8,
    [Timestamp i64: magic 1], Key bytes, Value bytes."""
    rest = struct.pack(">bb", magic, attributes)
    if magic == 1:
        rest += struct.pack(">q", timestamp)
    rest += blob(key) + blob(value)
    return struct.pack(">qiI", offset, 4 + len(rest), zlib.crc32(rest)) + rest


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    message = struct.pack(">hhi", api_key, version, correlation_id) + string("c") + body
    return struct.pack(">i", len(message)) + message


def check_request(frame: bytes, api_key: int, version: int):
    request = decode_request(frame[4:], strict=True)
    assert (request.api_key, request.api_version) == (api_key, version)
    assert encode_request(api_key, version, request.correlation_id, request.body,
                          client_id=request.header.client_id) == frame
    return request


def check_response(api_key: int, version: int, correlation_id: int, body, expected: bytes):
    """``expected``: the response after its size (correlation id, then the body)."""
    assert encode_response(api_key, version, correlation_id, body) == (
        struct.pack(">i", len(expected)) + expected)
    return api_codec(api_key, version).response.decode(expected[4:])


def v2_batch(base_offset: int, attributes: int, base_ts: int, max_ts: int,
             records: list[bytes]) -> bytes:
    """A RecordBatch v2 laid out field by field (kafka-notes §3.1)."""
    block = b"".join(records)
    tail = struct.pack(">hiqqqhii", attributes, len(records) - 1, base_ts, max_ts, -1, -1, -1,
                       len(records)) + block
    return struct.pack(">qiiBI", base_offset, 49 + len(block), -1, 2, crc32c(tail)) + tail


# -- the seed's frames --------------------------------------------------------------------------


def test_a_produce_v0_message_set_becomes_one_record_batch_v2():
    message_set = message(0, None, b"hello") + message(0, b"k", b"world", offset=1)
    body = struct.pack(">hi", 1, 1500) + array([
        string("orders") + array([struct.pack(">ii", 0, len(message_set)) + message_set])])
    request = check_request(request_frame(0, 0, 7, body), apis.PRODUCE, 0)
    records = request.body.topic_data[0].partition_data[0].records
    assert is_message_set(records)
    converted, log_append = message_set_to_batch(records, NOW)
    # magic 0 has no timestamp: LogAppendTime (attributes bit 3) at the broker's clock
    assert log_append
    # record: length varint, attributes, timestampDelta, offsetDelta, key (-1: null), value,
    # headerCount; zig-zag varints: 0 -> 00, 1 -> 02, -1 -> 01, 5 -> 0a
    first = b"\x16" + b"\x00" + b"\x00" + b"\x00" + b"\x01" + b"\x0a" + b"hello" + b"\x00"
    second = b"\x18" + b"\x00" + b"\x00" + b"\x02" + b"\x02k" + b"\x0a" + b"world" + b"\x00"
    assert converted == v2_batch(0, 0x08, NOW, NOW, [first, second])


def test_magic_1_keeps_its_create_times():
    message_set = message(1, b"a", b"x", timestamp=NOW + 5) + message(1, None, None, offset=1,
                                                                      timestamp=NOW + 3)
    converted, log_append = message_set_to_batch(message_set, 0)
    assert not log_append
    first = b"\x10" + b"\x00" + b"\x00" + b"\x00" + b"\x02a" + b"\x02x" + b"\x00"
    second = b"\x0c" + b"\x00" + b"\x03" + b"\x02" + b"\x01" + b"\x01" + b"\x00"  # -2 ms, nulls
    assert converted == v2_batch(0, 0, NOW + 5, NOW + 5, [first, second])


def test_a_stored_batch_down_converted_into_the_fetch_v0_response():
    stored = v2_batch(42, 0, NOW, NOW + 1, [
        b"\x16" + b"\x00" + b"\x00" + b"\x00" + b"\x01" + b"\x0a" + b"hello" + b"\x00",
        # one header ("h" -> "v"): a MessageSet has no place for it, it is dropped
        b"\x20" + b"\x00" + b"\x02" + b"\x02" + b"\x02k" + b"\x0a" + b"world"
        + b"\x02" + b"\x02h" + b"\x02v"])
    expected_set = message(0, None, b"hello", offset=42) + message(0, b"k", b"world", offset=43)
    assert batches_to_message_set(stored, 0, 42, 1 << 20) == expected_set
    # FetchResponse v0 => [TopicName [Partition ErrorCode HighwaterMarkOffset MessageSetSize
    # MessageSet]]
    expected = struct.pack(">i", 9) + array([string("orders") + array([
        struct.pack(">ihqi", 0, 0, 44, len(expected_set)) + expected_set])])
    F = FetchResponse
    body = F(responses=(F.FetchableTopicResponse(topic="orders", partitions=(
        F.FetchableTopicResponse.PartitionData(partition_index=0, error_code=0, high_watermark=44,
                                               records=batches_to_message_set(stored, 0, 42,
                                                                              1 << 20)),)),))
    check_response(apis.FETCH, 0, 9, body, expected)
    # magic 1 (Fetch v2-3): each record's own time; from offset 43 only the second
    assert batches_to_message_set(stored, 1, 43, 1 << 20) == message(
        1, b"k", b"world", offset=43, timestamp=NOW + 1)


def test_a_log_append_time_batch_down_converts_with_its_append_time():
    stored, _ = message_set_to_batch(message(0, None, b"a") + message(0, None, b"b", offset=1), NOW)
    stored = struct.pack(">q", 7) + stored[8:]  # the log's base offset (outside the CRC)
    assert batches_to_message_set(stored, 1, 0, 1 << 20) == (
        message(1, None, b"a", offset=7, timestamp=NOW, attributes=0x08)
        + message(1, None, b"b", offset=8, timestamp=NOW, attributes=0x08))
    assert batches_to_message_set(stored, 0, 0, 1 << 20) == (
        message(0, None, b"a", offset=7) + message(0, None, b"b", offset=8))


def test_max_bytes_takes_whole_messages_and_at_least_one_when_asked():
    stored, _ = message_set_to_batch(b"".join(message(1, None, b"%d" % i * 50, offset=i,
                                                      timestamp=NOW) for i in range(3)), 0)
    one = len(message(0, None, b"0" * 50))
    assert len(batches_to_message_set(stored, 0, 0, 2 * one + 5)) == 2 * one
    assert batches_to_message_set(stored, 0, 0, one - 1) == b""
    assert batches_to_message_set(stored, 0, 0, one - 1, at_least_one=True) == message(
        0, None, b"0" * 50)


def test_offsets_v0_request_and_response():
    # OffsetRequest => ReplicaId [TopicName [Partition Time MaxNumberOfOffsets]]
    body = struct.pack(">i", -1) + array([string("orders") + array([
        struct.pack(">iqi", 0, -1, 2)])])
    request = check_request(request_frame(2, 0, 11, body), apis.LIST_OFFSETS, 0)
    entry = request.body.topics[0].partitions[0]
    assert (entry.timestamp, entry.max_num_offsets) == (-1, 2)
    # OffsetResponse => [TopicName [PartitionOffsets]]; PartitionOffsets => Partition ErrorCode
    # [Offset]
    expected = struct.pack(">i", 11) + array([string("orders") + array([
        struct.pack(">ih", 0, 0) + array([struct.pack(">q", 4), struct.pack(">q", 0)])])])
    L = ListOffsetsResponse
    body = L(topics=(L.ListOffsetsTopicResponse(name="orders", partitions=(
        L.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
            partition_index=0, error_code=0, old_style_offsets=(4, 0)),)),))
    decoded = check_response(apis.LIST_OFFSETS, 0, 11, body, expected)
    assert decoded.topics[0].partitions[0].old_style_offsets == (4, 0)


def test_offset_commit_v0_and_offset_fetch_v0():
    # OffsetCommitRequest v0 => ConsumerGroup [TopicName [Partition Offset Metadata]]
    body = string("group") + array([string("orders") + array([
        struct.pack(">iq", 0, 17) + string("meta"), struct.pack(">iq", 1, 3) + string(None)])])
    request = check_request(request_frame(8, 0, 5, body), apis.OFFSET_COMMIT, 0)
    assert request.body.group_id == "group"
    assert [(p.partition_index, p.committed_offset, p.committed_metadata)
            for p in request.body.topics[0].partitions] == [(0, 17, "meta"), (1, 3, None)]
    # v1 adds GenerationId, ConsumerId and a per-partition Timestamp
    body = string("group") + struct.pack(">i", 4) + string("member") + array([
        string("orders") + array([struct.pack(">iqq", 0, 17, NOW) + string("")])])
    v1 = check_request(request_frame(8, 1, 6, body), apis.OFFSET_COMMIT, 1)
    assert (v1.body.generation_id_or_member_epoch, v1.body.member_id) == (4, "member")
    assert v1.body.topics[0].partitions[0].commit_timestamp == NOW
    # OffsetCommitResponse v0 => [TopicName [Partition ErrorCode]]
    expected = struct.pack(">i", 5) + array([string("orders") + array([struct.pack(">ih", 0, 0)])])
    C = OffsetCommitResponse
    check_response(apis.OFFSET_COMMIT, 0, 5, C(topics=(C.OffsetCommitResponseTopic(
        name="orders", partitions=(C.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
            partition_index=0, error_code=0),)),)), expected)
    # OffsetFetchRequest v0 => ConsumerGroup [TopicName [Partition]]
    body = string("group") + array([string("orders") + array([struct.pack(">i", 0)])])
    fetch = check_request(request_frame(9, 0, 8, body), apis.OFFSET_FETCH, 0)
    assert fetch.body.topics[0].partition_indexes == (0,)
    # OffsetFetchResponse v0 => [TopicName [Partition Offset Metadata ErrorCode]]
    expected = struct.pack(">i", 8) + array([string("orders") + array([
        struct.pack(">iq", 0, 17) + string("") + struct.pack(">h", 0)])])
    O = OffsetFetchResponse
    check_response(apis.OFFSET_FETCH, 0, 8, O(topics=(O.OffsetFetchResponseTopic(
        name="orders", partitions=(O.OffsetFetchResponseTopic.OffsetFetchResponsePartition(
            partition_index=0, committed_offset=17, metadata="", error_code=0),)),)), expected)


# -- wrappers: every codec -------------------------------------------------------------------

INNER = [(b"k0", b"v0"), (None, b"v1" * 40), (b"k2", None)]


def _xerial(data: bytes) -> bytes:
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for at in range(0, len(data), 32):
        block = bytes(cramjam.snappy.compress_raw(data[at:at + 32]))
        out += struct.pack(">i", len(block)) + block
    return out


def _old_kafka_lz4(data: bytes) -> bytes:
    frame = bytearray(cramjam.lz4.compress(data))
    end = 6 + (8 if frame[4] & 0x08 else 0) + (4 if frame[4] & 0x01 else 0)
    frame[end] = (xxhash.xxh32_intdigest(bytes(frame[:end])) >> 8) & 0xFF  # over the magic too
    return bytes(frame)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec, compress", [
    (1, gzip.compress),
    (2, _xerial),
    (2, lambda data: bytes(cramjam.snappy.compress_raw(data))),
    (3, None),
], ids=["gzip", "snappy-xerial", "snappy-raw", "lz4"])
def test_a_compressed_wrapper_gives_its_inner_messages(magic, codec, compress):
    inner = b"".join(message(magic, key, value, offset=i, timestamp=NOW + i)
                     for i, (key, value) in enumerate(INNER))
    if compress is None:
        compress = _old_kafka_lz4 if magic == 0 else (lambda d: bytes(cramjam.lz4.compress(d)))
    wrapper = message(magic, None, compress(inner), offset=2, timestamp=NOW + 2, attributes=codec)
    found = read_message_set(wrapper)
    assert [(m.key, m.value) for m in found] == INNER
    assert [m.timestamp for m in found] == ([None] * 3 if magic == 0 else
                                            [NOW, NOW + 1, NOW + 2])
    converted, log_append = message_set_to_batch(wrapper, NOW + 9)
    assert log_append == (magic == 0)
    assert batches_to_message_set(converted, 0, 0, 1 << 20) == b"".join(
        message(0, key, value, offset=i) for i, (key, value) in enumerate(INNER))


def test_old_kafka_lz4_needs_its_header_checksum_recomputed():
    inner = message(0, None, b"x")
    frame = _old_kafka_lz4(inner)
    with pytest.raises(Exception):
        cramjam.lz4.decompress(frame)  # a standard reader refuses the 0.8 header checksum
    assert record_batch.decompress(3, frame, legacy_lz4=True) == inner


def test_stored_batches_of_every_codec_down_convert():
    records = [b"\x10" + b"\x00" + b"\x00" + b"\x00" + b"\x02a" + b"\x02x" + b"\x00"]
    block = records[0]
    for codec, packed in [(1, gzip.compress(block)),
                          (2, _xerial(block)),
                          (3, bytes(cramjam.lz4.compress(block))),
                          (4, bytes(cramjam.zstd.compress(block)))]:
        tail = struct.pack(">hiqqqhii", codec, 0, NOW, NOW, -1, -1, -1, 1) + packed
        stored = struct.pack(">qiiBI", 3, 49 + len(packed), 0, 2, crc32c(tail)) + tail
        assert batches_to_message_set(stored, 1, 0, 1 << 20) == message(
            1, b"a", b"x", offset=3, timestamp=NOW), codec


# -- refusals: CORRUPT_MESSAGE, nothing converted ------------------------------------------------


def _flip(data: bytes, at: int) -> bytes:
    changed = bytearray(data)
    changed[at] ^= 0x01
    return bytes(changed)


def _magic_2_message() -> bytes:
    rest = b"\x02\x00" + blob(b"k") + blob(b"v")  # a right CRC over a magic that is not 0/1
    return struct.pack(">qiI", 0, 4 + len(rest), zlib.crc32(rest)) + rest


@pytest.mark.parametrize("bad", [
    _flip(message(0, b"k", b"v"), -1),  # the value: CRC mismatch
    _flip(message(1, b"k", b"v", timestamp=1), 20),  # the timestamp: CRC mismatch
    message(0, b"k", b"v")[:-1],  # truncated
    message(0, b"k", b"v") + b"\x00" * 5,  # a partial message after it
    message(0, None, b"not gzip", attributes=1),
    message(0, None, b"", attributes=5),  # no such codec
    message(0, None, gzip.compress(message(0, None, gzip.compress(message(0, None, b"x"), mtime=0),
                                           attributes=1), mtime=0), attributes=1),  # nested wrappers
    message(0, None, gzip.compress(_flip(message(0, None, b"x"), -1), mtime=0), attributes=1),
    message(1, None, gzip.compress(b"", mtime=0), attributes=1),  # a wrapper of nothing
    _magic_2_message(),
])
def test_a_bad_message_set_is_refused(bad):
    with pytest.raises(InvalidMessageSet):
        message_set_to_batch(bad, NOW)


@pytest.mark.parametrize("codec, compress", [
    (1, gzip.compress),
    (2, _xerial),
    (2, lambda data: bytes(cramjam.snappy.compress_raw(data))),
    (3, lambda data: bytes(cramjam.lz4.compress(data))),
], ids=["gzip", "snappy-xerial", "snappy-raw", "lz4"])
def test_a_wrapper_inflating_past_the_limit_is_too_large(monkeypatch, codec, compress):
    monkeypatch.setattr(message_sets, "MAX_INFLATED", 1 << 20)
    inner = message(1, None, b"\x00" * (1 << 20), timestamp=NOW)  # 1 MiB and 34 bytes
    wrapper = message(1, None, compress(inner), timestamp=NOW, attributes=codec)
    with pytest.raises(message_sets.MessageSetTooLarge):
        message_set_to_batch(wrapper, NOW)
    # two wrappers count together
    half = message(1, None, b"\x00" * (1 << 19), timestamp=NOW)
    twice = b"".join(message(1, None, compress(half), offset=i, timestamp=NOW, attributes=codec)
                     for i in range(2))
    with pytest.raises(message_sets.MessageSetTooLarge):
        message_set_to_batch(twice, NOW)
    monkeypatch.setattr(message_sets, "MAX_INFLATED", 2 << 20)
    assert len(read_message_set(twice)) == 2
