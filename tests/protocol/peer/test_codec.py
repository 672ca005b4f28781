"""The peer protocol's frames (``rill.protocol.peer.codec``): what one side encodes the other
decodes, split anywhere; a malformed frame is a DecodeError, never trusted."""

from __future__ import annotations

import struct

import pytest

from rill.protocol.buffer import DecodeError
from rill.protocol.framing import NEED_DATA
from rill.protocol.peer import codec
from rill.protocol.peer.codec import Message


def frames(data: bytes, step: int) -> list[Message]:
    decoder = codec.PeerFrameDecoder()
    found = []
    for start in range(0, len(data), step):
        decoder.feed(data[start:start + step])
        while (frame := decoder.next_frame()) is not NEED_DATA:
            found.append(codec.decode(frame.code, frame.payload))
    return found


def test_a_fetch_and_its_answer_travel_whole_however_the_bytes_are_cut() -> None:
    request = Message(codec.FETCH, 7, {"stream_id": 1, "fetch_offset": 42})
    answer = codec.answer(request, {"high_watermark": 40}, b"records", [b"-more"])
    data = b"".join(bytes(part) for part in codec.encode(request) + codec.encode(answer))
    for step in (1, 3, 64, len(data)):
        got = frames(data, step)
        assert [(m.kind, m.correlation, m.header) for m in got] == [
            (codec.FETCH, 7, {"stream_id": 1, "fetch_offset": 42}),
            (codec.FETCH | codec.ANSWER, 7, {"status": "ok", "high_watermark": 40})]
        assert bytes(got[1].body) == b"records-more" and got[1].is_answer


def test_a_refusal_names_the_error() -> None:
    refused = codec.refusal(Message(codec.EPOCH_END, 3, {}), "fenced_leader_epoch", "old")
    (decoded,) = frames(b"".join(bytes(p) for p in codec.encode(refused)), 5)
    assert decoded.header == {"status": "fenced_leader_epoch", "message": "old"}


@pytest.mark.parametrize("payload", [
    b"\x01\x00\x00\x00",  # shorter than the message head
    struct.pack("<II", 1, 99) + b"{}",  # a header running past the frame
    struct.pack("<II", 1, 5) + b"nope!",  # not JSON
    struct.pack("<II", 1, 2) + b"[]",  # JSON, not an object
])
def test_a_malformed_message_is_a_decode_error(payload: bytes) -> None:
    with pytest.raises(DecodeError):
        codec.decode(codec.FETCH, memoryview(payload))


def test_a_frame_above_the_limit_is_refused_before_anything_is_allocated() -> None:
    decoder = codec.PeerFrameDecoder(max_payload_size=1024)
    decoder.feed(struct.pack("<BI", codec.FETCH, 1 << 30))
    event = decoder.next_frame()
    assert getattr(event, "too_large", False)
