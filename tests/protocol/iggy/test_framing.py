"""Request and response frames (wire §1), and the one decoder that splits a byte stream into
them for the server (requests) and the SDK (responses), over TCP and QUIC."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rill.protocol.framing import NEED_DATA, BadLength, Frame, LargeBuffers, LargeFrame
from rill.protocol.iggy.framing import (
    RequestFrameDecoder,
    ResponseFrameDecoder,
    decode_request_header,
    decode_response_header,
    encode_request,
    encode_response,
    error_response,
    request_header,
    response_header,
)


def test_request_frame() -> None:
    frame = encode_request(202, b"\x01\x02")
    assert frame == b"\x06\x00\x00\x00\xca\x00\x00\x00\x01\x02"
    assert request_header(202, 2) == frame[:8]
    assert decode_request_header(frame[:8]) == (2, 202)
    assert decode_request_header(encode_request(1)[:8]) == (0, 1)


def test_request_length_below_4_is_reported() -> None:
    for length in range(4):
        with pytest.raises(ValueError):
            decode_request_header(length.to_bytes(4, "little") + b"\x01\x00\x00\x00")


def test_response_frames() -> None:
    assert encode_response(0, b"abc") == b"\x00\x00\x00\x00\x03\x00\x00\x00abc"
    assert decode_response_header(encode_response(0, b"abc")[:8]) == (0, 3)
    assert error_response(1009) == b"\xf1\x03\x00\x00\x00\x00\x00\x00"
    assert response_header(0, 5) == b"\x00\x00\x00\x00\x05\x00\x00\x00"


# --- the decoder ------------------------------------------------------------------------------

SIDES = [(RequestFrameDecoder, encode_request), (ResponseFrameDecoder, encode_response)]
SMALL = dict(initial_buffer_size=16, max_buffer_size=64, large_first_chunk=24)  # every path


def drain(decoder, frames: list, start_large: bool = True):
    """Take every frame the decoder can give now; return what it answered last."""
    while True:
        event = decoder.next_frame()
        if type(event) is Frame:
            frames.append((event.code, bytes(event.payload)))
            continue
        if type(event) is LargeFrame and start_large:
            assert decoder.next_frame() == event  # answered again until started
            decoder.start_large_frame()
            continue
        return event


def fill(decoder, data: bytes, cuts: list[int], frames: list) -> None:
    """Write ``data`` through get_buffer/buffer_updated in pieces of the sizes ``cuts`` cycles
    through (each also capped by the buffer offered), draining after every piece."""
    position, index = 0, 0
    while position < len(data):
        buffer = decoder.get_buffer()
        assert len(buffer) > 0
        want = cuts[index % len(cuts)] if cuts else len(data)
        index += 1
        size = min(len(buffer), want, len(data) - position)
        buffer[:size] = data[position : position + size]
        decoder.buffer_updated(size)
        position += size
        assert drain(decoder, frames) is NEED_DATA


_frames = st.lists(
    st.tuples(st.integers(0, 2**32 - 1), st.one_of(st.binary(max_size=20), st.integers(0, 300))),
    min_size=1, max_size=10,
)


def _materialise(frames) -> list[tuple[int, bytes]]:
    return [(code, bytes([index % 251]) * body if isinstance(body, int) else body)
            for index, (code, body) in enumerate(frames)]


@settings(max_examples=150, deadline=None)
@given(frames=_frames, cuts=st.lists(st.integers(1, 400), max_size=20),
       side=st.sampled_from(SIDES), copying=st.booleans(), pooled=st.booleans())
def test_any_chunking_of_a_stream_gives_the_same_frames(frames, cuts, side, copying, pooled):
    decoder_class, encode = side
    frames = _materialise(frames)
    stream = b"".join(encode(code, payload) for code, payload in frames)
    decoder = decoder_class(10_000, **SMALL)
    if pooled:  # large frames read into the buffers of earlier ones
        decoder.large_buffers = LargeBuffers(count=2)
    got: list = []
    if copying:  # feed(): what QUIC links are handed
        position, index = 0, 0
        while position < len(stream):
            size = cuts[index % len(cuts)] if cuts else len(stream)
            index += 1
            decoder.feed(stream[position : position + size])
            position += size
            assert drain(decoder, got) is NEED_DATA
    else:  # get_buffer()/buffer_updated(): the zero-copy path of the TCP links
        fill(decoder, stream, cuts, got)
    assert got == frames
    assert decoder.buffered == 0


# the shared-buffer limits the server's TCP links use (the defaults), and the SDK's
SERVER_TCP = dict(max_buffer_size=256 * 1024)
SDK_TCP = dict(initial_buffer_size=64 * 1024, max_buffer_size=64 * 1024, large_first_chunk=2**31)
_sizes_around = st.sampled_from([64 * 1024, 256 * 1024]).flatmap(
    lambda boundary: st.integers(boundary - 20, boundary + 3000))
_frames_around = st.lists(
    st.tuples(st.sampled_from([0, 0, 0, 1009, 3]),
              st.one_of(st.binary(max_size=40), _sizes_around)),
    min_size=1, max_size=6,
)


@settings(max_examples=40, deadline=None)
@given(frames=_frames_around, cuts=st.lists(st.integers(1, 300_000), max_size=20),
       side=st.sampled_from(SIDES), limits=st.sampled_from([SERVER_TCP, SDK_TCP]))
def test_any_chunking_with_the_buffer_sizes_the_links_use(frames, cuts, side, limits):
    """Around the real boundaries: frames that just fit the shared buffer, and just do not."""
    decoder_class, encode = side
    frames = _materialise(frames)
    decoder = decoder_class(**limits)
    got: list = []
    fill(decoder, b"".join(encode(code, payload) for code, payload in frames), cuts, got)
    assert got == frames


@pytest.mark.parametrize("length", [0, 1, 2, 3])
def test_a_request_length_below_4_is_reported_once_its_4_bytes_are_in(length):
    decoder = RequestFrameDecoder()
    decoder.feed(struct.pack("<I", length)[:3])
    assert decoder.next_frame() is NEED_DATA
    decoder.feed(struct.pack("<I", length)[3:])
    assert decoder.next_frame() == BadLength(length, length - 4, too_large=False)
    decoder.feed(b"\x01\x00\x00\x00" + b"x" * 100)
    assert decoder.next_frame() == BadLength(length, length - 4, too_large=False)  # stays


def test_a_request_above_the_maximum_is_reported_unread_and_may_be_allowed_later():
    decoder = RequestFrameDecoder(max_payload_size=100)
    decoder.feed(encode_request(1) + struct.pack("<I", 105))  # a ping, then 101 bytes announced
    assert decoder.next_frame() == Frame(1, memoryview(b""))
    assert decoder.next_frame() == BadLength(105, 101, too_large=True)
    decoder.feed(struct.pack("<I", 7))
    assert decoder.next_frame() == BadLength(105, 101, too_large=True)
    assert decoder.buffered == 8  # nothing allocated for what was announced
    decoder.max_payload_size = 101  # e.g. logged in meanwhile: the same frame may go on
    assert decoder.next_frame() is NEED_DATA
    decoder.feed(b"y" * 101)
    assert decoder.next_frame() == Frame(7, memoryview(b"y" * 101))


@pytest.mark.parametrize("split", [4, 5, 8, 12])
def test_a_request_of_exactly_the_maximum_is_accepted(split):
    decoder = RequestFrameDecoder(max_payload_size=5)
    frame = encode_request(3, b"12345")
    decoder.feed(frame[:split])
    assert decoder.next_frame() is NEED_DATA
    decoder.feed(frame[split:])
    assert decoder.next_frame() == Frame(3, memoryview(b"12345"))


@pytest.mark.parametrize("decoder_class, encode", SIDES)
def test_a_frame_that_fills_the_shared_buffer_stays_in_it_one_byte_more_is_large(
        decoder_class, encode):
    decoder = decoder_class(**SMALL)  # shared buffer: 16 bytes, growing to 64
    decoder.feed(encode(1, b"s" * 56)[:20])
    assert decoder.next_frame() is NEED_DATA
    assert len(decoder.get_buffer()) == 64 - 20  # grown to its maximum, no further
    decoder.feed(encode(1, b"s" * 56)[20:])
    assert decoder.next_frame() == Frame(1, memoryview(b"s" * 56))
    decoder.feed(encode(2, b"l" * 57)[:20])
    assert decoder.next_frame() == LargeFrame(2, 57)


def test_a_response_above_the_maximum_is_reported():
    decoder = ResponseFrameDecoder(max_payload_size=100)
    decoder.feed(response_header(0, 101))
    assert decoder.next_frame() == BadLength(101, 101, too_large=True)
    decoder = ResponseFrameDecoder(max_payload_size=100)
    decoder.feed(response_header(0, 100)[:7])
    assert decoder.next_frame() is NEED_DATA


def test_a_large_frame_gets_its_own_buffer_of_exactly_its_size():
    size = 3 * 1024 * 1024 + 5
    payload = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    decoder = RequestFrameDecoder()
    decoder.feed(encode_request(101, payload)[:1000])
    assert decoder.next_frame() == LargeFrame(101, size)
    assert decoder.next_frame() == LargeFrame(101, size)  # until it is started
    decoder.start_large_frame()
    assert decoder.next_frame() is NEED_DATA
    position = 1000 - 8
    while position < size:
        buffer = decoder.get_buffer()
        assert 0 < len(buffer) <= size - position  # never past the frame's end
        count = min(len(buffer), 300_000)
        buffer[:count] = payload[position : position + count]
        position += count
        assert decoder.buffer_updated(count) is (position == size)  # worth asking next_frame()
        if position < size:
            assert decoder.next_frame() is NEED_DATA
            assert decoder.buffered == position
    frame = decoder.next_frame()
    assert frame.code == 101 and frame.payload == payload
    own = frame.payload.obj
    assert type(own) is bytearray and len(own) == size  # exactly its size, read in place
    assert decoder.next_frame() is NEED_DATA and decoder.buffered == 0


def test_a_large_frame_buffer_grows_with_what_arrives_not_with_what_is_announced():
    decoder = RequestFrameDecoder(max_payload_size=60 * 1024 * 1024)
    decoder.feed(request_header(101, 60 * 1024 * 1024) + b"x" * 4096)
    decoder.start_large_frame()
    assert len(decoder.get_buffer()) == 1024 * 1024 - 4096  # the first chunk, not 60 MiB
    decoder.feed(b"x" * (1024 * 1024 - 4096))
    assert len(decoder.get_buffer()) == 1024 * 1024  # doubled once it was full


def test_the_shared_buffer_shrinks_back_once_a_large_frame_has_its_own():
    decoder = RequestFrameDecoder(initial_buffer_size=16, max_buffer_size=64,
                                  large_first_chunk=1000)
    decoder.feed(encode_request(1, b"a" * 50)[:40])  # grows the shared buffer to 64
    assert decoder.next_frame() is NEED_DATA
    assert len(decoder.get_buffer()) == 64 - 40
    decoder.feed(encode_request(1, b"a" * 50)[40:] + encode_request(2, b"b" * 100)[:30])
    assert decoder.next_frame() == Frame(1, memoryview(b"a" * 50))
    assert decoder.next_frame() == LargeFrame(2, 100)
    decoder.start_large_frame()
    decoder.feed(b"b" * 78)
    assert decoder.next_frame() == Frame(2, memoryview(b"b" * 100))
    assert len(decoder.get_buffer()) == 16  # back to its initial size


def test_start_large_frame_without_a_large_frame_is_an_error():
    decoder = RequestFrameDecoder()
    with pytest.raises(RuntimeError):
        decoder.start_large_frame()


def test_a_small_frame_is_copied_out_of_the_shared_buffer():
    decoder = ResponseFrameDecoder()
    decoder.feed(encode_response(0, b"abc") + encode_response(5))
    first = decoder.next_frame()
    decoder.feed(encode_response(0, b"xyz"))  # reusing the shared buffer must not change it
    assert first == Frame(0, memoryview(b"abc")) and type(first.payload.obj) is bytes
    assert decoder.next_frame() == Frame(5, memoryview(b""))
    assert decoder.next_frame() == Frame(0, memoryview(b"xyz"))


def _large(decoder, code: int, payload: bytes) -> Frame:
    whole = encode_request(code, payload)
    decoder.feed(whole[:12])
    assert type(decoder.next_frame()) is LargeFrame
    decoder.start_large_frame()
    decoder.feed(whole[12:])
    frame = decoder.next_frame()
    assert type(frame) is Frame
    return frame


def test_a_large_frame_buffer_is_read_into_again_only_once_nothing_holds_it():
    decoder = RequestFrameDecoder(**SMALL)
    decoder.large_buffers = LargeBuffers(count=2)
    first = _large(decoder, 1, b"a" * 200)
    first_buffer = id(first.payload.obj)  # (the pool keeps it alive: the id stays its)
    held = first.payload[10:20]  # a slice still held: the buffer is not free
    del first
    second = _large(decoder, 2, b"b" * 150)
    assert id(second.payload.obj) != first_buffer and bytes(held) == b"a" * 10
    del held
    third = _large(decoder, 3, b"c" * 120)  # the first buffer is free: read into again
    assert id(third.payload.obj) == first_buffer
    assert bytes(third.payload) == b"c" * 120 and len(third.payload) == 120  # exactly its size
    assert bytes(second.payload) == b"b" * 150  # the held second frame is untouched


def test_a_reused_buffer_never_takes_the_bytes_of_the_next_frame():
    decoder = RequestFrameDecoder(**SMALL)
    decoder.large_buffers = LargeBuffers(count=1)
    _large(decoder, 1, b"x" * 500)  # a 500-byte buffer, free again
    stream = encode_request(7, b"y" * 100) + encode_request(8, b"z" * 3)
    decoder.feed(stream[:12])
    assert decoder.next_frame() == LargeFrame(7, 100)
    decoder.start_large_frame()
    offered = decoder.get_buffer()
    assert len(offered) == 100 - 4 and len(offered.obj) == 500  # the reused one, bounded
    frames: list = []
    fill(decoder, stream[12:], [1000], frames)
    assert frames == [(7, b"y" * 100), (8, b"z" * 3)]


def test_large_buffers_are_bounded_in_count_and_size():
    pool = LargeBuffers(count=2, max_size=1000)
    for size in (100, 200, 300, 5000):  # nothing else holds them
        pool.keep(bytearray(size))
    assert pool.take(1001) is None  # above max_size: never kept
    assert len(pool.take(250)) == 300  # the 300 replaced the free 100
    assert len(pool.take(150)) == 200  # the smallest that fits
    assert pool.take(301) is None
    held = pool.take(250)
    assert pool.take(250) is None  # held by the caller: not free
    del held
    assert len(pool.take(250)) == 300
