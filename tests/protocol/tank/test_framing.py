"""TANK frames (reference §2): ``msg_id:u8 payload_len:u32``, split from a byte stream."""

from __future__ import annotations

from rill.protocol.framing import NEED_DATA, BadLength, Frame, LargeFrame
from rill.protocol.tank.framing import (
    MAX_PAYLOAD_SIZE,
    PING_FRAME,
    TankFrameDecoder,
    frame,
    frame_header,
)


def test_frames_come_out_one_by_one_from_a_stream_fed_byte_by_byte():
    stream = PING_FRAME + frame(0x0A, b"\x01\x00\x00\x00") + frame(0x01, b"x" * 300)
    decoder = TankFrameDecoder()
    frames = []
    for index in range(len(stream)):
        decoder.feed(stream[index : index + 1])
        while (event := decoder.next_frame()) is not NEED_DATA:
            frames.append((event.code, bytes(event.payload)))
    assert frames == [(0x03, b""), (0x0A, b"\x01\x00\x00\x00"), (0x01, b"x" * 300)]
    assert decoder.buffered == 0


def test_header_layout():
    assert frame_header(0x02, 0x44) == bytes.fromhex("02 44 00 00 00")
    assert frame(0x01, b"ab") == bytes.fromhex("01 02 00 00 00 61 62")


def test_a_payload_above_256_mib_is_reported_before_anything_is_allocated():
    decoder = TankFrameDecoder()
    decoder.feed(frame_header(0x01, MAX_PAYLOAD_SIZE + 1))
    event = decoder.next_frame()
    assert type(event) is BadLength and event.too_large
    assert event.payload_size == MAX_PAYLOAD_SIZE + 1
    ok = TankFrameDecoder()
    ok.feed(frame_header(0x01, MAX_PAYLOAD_SIZE))
    assert type(ok.next_frame()) is LargeFrame  # at the limit: read into its own buffer


def test_a_large_frame_is_read_into_its_own_buffer():
    payload = bytes(range(256)) * 2000
    decoder = TankFrameDecoder(max_buffer_size=64 * 1024)
    decoder.feed(frame(0x01, payload)[:1000])
    event = decoder.next_frame()
    assert type(event) is LargeFrame and event.payload_size == len(payload)
    decoder.start_large_frame()
    decoder.feed(frame(0x01, payload)[1000:])
    event = decoder.next_frame()
    assert type(event) is Frame and event.code == 0x01 and bytes(event.payload) == payload
