"""Kafka's int32-size framing, split without I/O by the shared FrameDecoder machinery."""

from __future__ import annotations

import random
import struct

from rill.protocol.framing import NEED_DATA, BadLength, Frame, LargeFrame
from rill.protocol.kafka import apis
from rill.protocol.kafka.codec import decode_request, encode_request, encode_response
from rill.protocol.kafka.framing import (
    KafkaRequestFrameDecoder,
    KafkaResponseFrameDecoder,
    frame,
)
from rill.protocol.kafka.messages import HeartbeatResponse, MetadataRequest, ProduceRequest


def frames_of(decoder) -> list:
    out = []
    while True:
        event = decoder.next_frame()
        if event is NEED_DATA:
            return out
        assert isinstance(event, Frame), event
        out.append((event.code, bytes(event.payload)))


def test_requests_in_any_chunking():
    wire = [encode_request(apis.METADATA, v, i, MetadataRequest(topics=None if v else ()))
            for i, v in enumerate([0, 4, 9, 12])]
    wire.append(encode_request(apis.PRODUCE, 9, 9, ProduceRequest(acks=-1)))
    stream = b"".join(wire)
    rng = random.Random(5)
    for _ in range(30):
        decoder = KafkaRequestFrameDecoder(initial_buffer_size=8, max_buffer_size=64)
        got, at = [], 0
        while at < len(stream):
            step = rng.randint(1, 17)
            decoder.feed(stream[at : at + step])
            at += step
            got += frames_of(decoder)
        assert got == [(struct.unpack(">h", w[4:6])[0], w[4:]) for w in wire]
        assert [decode_request(payload).correlation_id for _, payload in got] == [0, 1, 2, 3, 9]
        assert decoder.buffered == 0


def test_zero_copy_filling():
    wire = encode_request(apis.METADATA, 12, 3, MetadataRequest())
    decoder = KafkaRequestFrameDecoder()
    target = decoder.get_buffer()
    target[: len(wire)] = wire
    decoder.buffer_updated(len(wire))
    assert frames_of(decoder) == [(apis.METADATA, wire[4:])]


def test_sizes_that_cannot_be_honoured_are_reported_without_allocating():
    decoder = KafkaRequestFrameDecoder(max_payload_size=1000, initial_buffer_size=16)
    decoder.feed(struct.pack(">i", 0x7FFFFFFF))
    bad = decoder.next_frame()
    assert bad == BadLength(0x7FFFFFFF, 0x7FFFFFFF, too_large=True)
    assert decoder.next_frame() == bad  # stays put
    assert len(decoder._buffer) == 16
    for size in (-1, -0x80000000, 0, 7):  # negative, or below api key + version + correlation id
        decoder = KafkaRequestFrameDecoder()
        decoder.feed(struct.pack(">i", size))
        assert decoder.next_frame() == BadLength(size, size, too_large=False)
    decoder = KafkaRequestFrameDecoder(max_payload_size=1000)
    decoder.feed(struct.pack(">i", 1000) + b"\x00")  # at the limit: waits for the rest
    assert decoder.next_frame() is NEED_DATA


def test_a_large_frame_gets_its_own_buffer():
    records = bytes(range(256)) * 1024  # 256 KiB
    body = ProduceRequest(acks=1, timeout_ms=1, topic_data=(ProduceRequest.TopicProduceData(
        name="t", partition_data=(ProduceRequest.TopicProduceData.PartitionProduceData(
            index=0, records=records),)),))
    wire = encode_request(apis.PRODUCE, 9, 1, body)
    decoder = KafkaRequestFrameDecoder(max_buffer_size=4096, large_first_chunk=4096)
    decoder.feed(wire[:100])
    event = decoder.next_frame()
    assert event == LargeFrame(apis.PRODUCE, len(wire) - 4)  # the API key, to decide on
    decoder.start_large_frame()
    for at in range(100, len(wire), 5000):
        decoder.feed(wire[at : at + 5000])
    [(code, payload)] = frames_of(decoder)
    assert code == apis.PRODUCE and payload == wire[4:]
    assert bytes(decode_request(payload).body.topic_data[0].partition_data[0].records) == records


def test_responses():
    wire = encode_response(apis.HEARTBEAT, 4, 5, HeartbeatResponse()) * 2
    decoder = KafkaResponseFrameDecoder()
    decoder.feed(wire)
    assert [code for code, _ in frames_of(decoder)] == [5, 5]  # the correlation id
    decoder = KafkaResponseFrameDecoder()
    decoder.feed(struct.pack(">i", 3))
    assert decoder.next_frame() == BadLength(3, 3, too_large=False)
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
