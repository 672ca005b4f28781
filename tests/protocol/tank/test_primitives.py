"""TANK's primitives (reference §1): the varint table, the 5-byte limit, str8."""

from __future__ import annotations

import pytest

from rill.protocol.tank.errors import BadVarint, LengthMismatch, Truncated
from rill.protocol.tank.primitives import Reader, decode_varint, encode_str8, encode_varint

TABLE = [(0, "00"), (1, "01"), (127, "7f"), (128, "80 01"), (300, "ac 02"), (16_383, "ff 7f"),
         (16_384, "80 80 01"), (2_097_152, "80 80 80 01"), (268_435_456, "80 80 80 80 01"),
         (4_294_967_295, "ff ff ff ff 0f")]


@pytest.mark.parametrize(("value", "wire"), TABLE)
def test_varints_of_the_reference_table_both_ways(value, wire):
    raw = bytes.fromhex(wire)
    assert encode_varint(value) == raw
    assert decode_varint(raw + b"\xaa") == (value, len(raw))


def test_a_5_byte_varint_is_accepted_and_a_6_byte_one_refused():
    assert decode_varint(bytes.fromhex("80 80 80 80 01")) == (1 << 28, 5)
    with pytest.raises(BadVarint):
        decode_varint(bytes.fromhex("80 80 80 80 80 01"))


def test_a_5th_byte_above_0x0f_is_refused():
    assert decode_varint(bytes.fromhex("ff ff ff ff 0f"))[0] == 0xFFFF_FFFF
    with pytest.raises(BadVarint):
        decode_varint(bytes.fromhex("ff ff ff ff 1f"))


def test_a_varint_cut_by_the_end_of_input_is_truncated():
    with pytest.raises(Truncated):
        decode_varint(bytes.fromhex("80 80"))
    with pytest.raises(Truncated):
        decode_varint(bytes.fromhex("80 01"), 0, 1)  # the end bound is honoured


def test_values_outside_32_bits_cannot_be_encoded():
    with pytest.raises(ValueError):
        encode_varint(1 << 32)
    with pytest.raises(ValueError):
        encode_varint(-1)


def test_str8_round_trips_any_bytes_and_refuses_256():
    assert encode_str8("c++") == b"\x03c++"
    odd = b"\xff\x00name"
    reader = Reader(encode_str8(odd))
    name = reader.str8()
    assert encode_str8(name) == encode_str8(odd)  # byte for byte, no charset check
    with pytest.raises(ValueError):
        encode_str8("x" * 256)


def test_reader_bounds_and_leftovers():
    reader = Reader(b"\x01\x02\x03")
    assert reader.u16() == 0x0201
    with pytest.raises(Truncated):
        reader.u16()
    with pytest.raises(LengthMismatch):
        reader.finish()
    with pytest.raises(Truncated):
        Reader(b"\x05abc").str8()
