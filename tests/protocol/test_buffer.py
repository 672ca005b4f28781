"""Reader / Writer (wire §2 encodings): values, bounds, UTF-8, strict flags."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rill.errors import InvalidCommand
from rill.protocol.buffer import DecodeError, Reader, Writer


def test_little_endian_layouts() -> None:
    writer = Writer().u8(1).u32(0x01020304).u64(5).u128(1 << 64).f32(1.5)
    assert writer.getvalue() == (
        b"\x01" + b"\x04\x03\x02\x01" + b"\x05" + b"\x00" * 7 + b"\x00" * 8 + b"\x01" + b"\x00" * 7
        + b"\x00\x00\xc0\x3f"
    )
    reader = Reader(writer.getvalue())
    assert (reader.u8(), reader.u32(), reader.u64(), reader.u128(), reader.f32()) == (1, 0x01020304, 5, 1 << 64, 1.5)
    reader.expect_end()


def test_strings() -> None:
    data = Writer().str8("héllo").str32("").bytes8(b"\x00\xff").bytes32(b"xyz").getvalue()
    assert data[:1] == b"\x06"
    reader = Reader(data)
    assert reader.str8() == "héllo" and reader.str32() == "" and reader.bytes8() == b"\x00\xff"
    assert reader.bytes32() == b"xyz"
    assert reader.at_end()


def test_short_reads_raise_decode_error() -> None:
    for read in (Reader.u8, Reader.u32, Reader.u64, Reader.u128, Reader.f32, Reader.str8, Reader.str32):
        with pytest.raises(DecodeError):
            read(Reader(b""))
    with pytest.raises(DecodeError):
        Reader(b"\x05abc").str8()
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff").str32()
    with pytest.raises(DecodeError):
        Reader(b"abc").raw(-1)


def test_invalid_utf8_is_decode_error() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\x02\xc3\x28").str8()


def test_bounded_reader() -> None:
    reader = Reader(b"\x01\x02\x03\x04", start=1, end=3)
    assert reader.remaining == 2 and reader.u8() == 2
    with pytest.raises(DecodeError):
        reader.u32()
    assert reader.u8() == 3
    reader.expect_end()


def test_trailing_bytes() -> None:
    reader = Reader(b"\x01\x02")
    reader.u8()
    with pytest.raises(DecodeError):
        reader.expect_end()


def test_bools() -> None:
    assert [Reader(bytes([b])).bool8() for b in (0, 1, 2, 255)] == [False, True, False, False]
    assert Reader(b"\x01").strict_bool8() is True
    assert Reader(b"\x00").strict_bool8() is False
    with pytest.raises(DecodeError):
        Reader(b"\x02").strict_bool8()


def test_views_do_not_copy_and_rest() -> None:
    data = bytearray(b"abcdef")
    reader = Reader(data)
    reader.u8()
    view = reader.view(2)
    assert bytes(view) == b"bc"
    assert bytes(reader.rest()) == b"def" and reader.at_end()


def test_decode_error_is_status_3() -> None:
    error = DecodeError("boom")
    assert isinstance(error, InvalidCommand) and error.code == 3 and error.detail == "boom"


def test_writer_rejects_long_str8() -> None:
    with pytest.raises(ValueError):
        Writer().str8("x" * 256)
    Writer().str8("x" * 255)


@given(st.integers(0, 255), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**128 - 1), st.text(max_size=50))
def test_round_trip_property(a: int, b: int, c: int, d: int, text: str) -> None:
    data = Writer().u8(a).u32(b).u64(c).u128(d).str32(text).getvalue()
    reader = Reader(data)
    assert (reader.u8(), reader.u32(), reader.u64(), reader.u128(), reader.str32()) == (a, b, c, d, text)
    reader.expect_end()
