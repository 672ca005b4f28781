"""Request and response frames (wire §1)."""

from __future__ import annotations

import pytest

from rill.protocol.framing import (
    decode_request_header,
    decode_response_header,
    encode_request,
    encode_response,
    error_response,
    response_header,
)


def test_request_frame() -> None:
    frame = encode_request(202, b"\x01\x02")
    assert frame == b"\x06\x00\x00\x00\xca\x00\x00\x00\x01\x02"
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
