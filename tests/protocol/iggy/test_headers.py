"""Header maps (wire §2.6): typed values, encoding, strict decoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given

from rill.errors import InvalidHeaderKey, InvalidHeaderValue
from rill.protocol.buffer import DecodeError
from rill.protocol.iggy.headers import (
    HeaderKind,
    HeaderValue,
    decode_header_map,
    encode_header_map,
    header_values_size,
)

from .strategies import header_maps


def _entry(key: bytes, kind: int, value: bytes) -> bytes:
    return struct.pack("<I", len(key)) + key + bytes([kind]) + struct.pack("<I", len(value)) + value


def test_typed_constructors_round_trip() -> None:
    assert HeaderValue.int(HeaderKind.INT32, -5).to_python() == -5
    assert HeaderValue.int(HeaderKind.INT32, -5).value == b"\xfb\xff\xff\xff"
    assert HeaderValue.int(HeaderKind.UINT64, 2**64 - 1).to_python() == 2**64 - 1
    assert HeaderValue.int(HeaderKind.INT128, -(2**127)).to_python() == -(2**127)
    assert HeaderValue.int(HeaderKind.UINT8, 255).value == b"\xff"
    assert HeaderValue.string("héllo").to_python() == "héllo"
    assert HeaderValue.bool(True).to_python() is True and HeaderValue.bool(False).value == b"\x00"
    assert HeaderValue.raw(b"\x00\x01").to_python() == b"\x00\x01"
    assert HeaderValue.float(HeaderKind.FLOAT64, 0.1).to_python() == 0.1
    assert HeaderValue.float(HeaderKind.FLOAT32, 1.5).to_python() == 1.5
    assert HeaderValue(HeaderKind.BOOL, b"\x07").to_python() is True


def test_map_layout() -> None:
    headers = {"k": HeaderValue.string("v"), "n": HeaderValue.int(HeaderKind.UINT16, 258)}
    data = encode_header_map(headers)
    assert data == _entry(b"k", 2, b"v") + _entry(b"n", 10, b"\x02\x01")
    assert decode_header_map(data) == headers
    assert header_values_size(data) == 3
    assert encode_header_map(None) == b"" and encode_header_map({}) == b""
    assert decode_header_map(b"") == {}


@pytest.mark.parametrize(
    "data",
    [
        _entry(b"", 2, b"v"),
        struct.pack("<I", 256) + b"k" * 256 + b"\x02" + struct.pack("<I", 1) + b"v",
        _entry(b"k", 0, b"v"),
        _entry(b"k", 16, b"v"),
        _entry(b"k", 2, b""),
        _entry(b"k", 2, b"v" * 256),
        _entry(b"k", 2, b"v") + _entry(b"k", 3, b"\x01"),
        _entry(b"\xff", 2, b"v"),
        _entry(b"k", 2, b"v")[:-1],
        _entry(b"k", 2, b"v") + b"\x00",
    ],
    ids=["key0", "key256", "kind0", "kind16", "value0", "value256", "duplicate", "utf8", "short", "trailing"],
)
def test_decode_rejects(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_header_map(data)


def test_encode_rejects_bad_parts() -> None:
    with pytest.raises(InvalidHeaderKey):
        encode_header_map({"": HeaderValue.string("v")})
    with pytest.raises(InvalidHeaderKey):
        encode_header_map({"k" * 256: HeaderValue.string("v")})
    with pytest.raises(InvalidHeaderValue):
        encode_header_map({"k": HeaderValue.raw(b"")})


@given(header_maps)
def test_header_map_property(headers) -> None:
    data = encode_header_map(headers)
    decoded = decode_header_map(data)
    assert decoded == headers
    assert encode_header_map(decoded) == data
    for key, value in headers.items():
        assert decoded[key].to_python() == value.to_python()
