"""Identifier, Consumer, Partitioning, PollingStrategy (wire §2.1-§2.4)."""

from __future__ import annotations

import pytest
from hypothesis import given

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.primitives import CompressionAlgorithm
from rill.protocol.iggy.primitives import (
    Consumer,
    ConsumerKind,
    Identifier,
    Partitioning,
    PollingStrategy,
    decode_enum,
)

from .strategies import consumers, identifiers, partitionings, polling_strategies


def _bytes(value) -> bytes:
    writer = Writer()
    value.encode(writer)
    return writer.getvalue()


def _round_trip(value) -> None:
    data = _bytes(value)
    reader = Reader(data)
    assert type(value).decode(reader) == value
    reader.expect_end()
    for length in range(len(data)):
        with pytest.raises(DecodeError):
            type(value).decode(Reader(data[:length]))


def test_identifier_layouts() -> None:
    assert _bytes(Identifier(1)) == b"\x01\x04\x01\x00\x00\x00"
    assert _bytes(Identifier("orders")) == b"\x02\x06orders"
    assert Identifier.of(3) == Identifier(3) and Identifier.of(Identifier("a")) == Identifier("a")


@pytest.mark.parametrize("value", [-1, 1 << 32, "", "x" * 256, True, 1.5, b"ab"])
def test_identifier_rejects_bad_values(value) -> None:
    with pytest.raises(ValueError):
        Identifier(value)


@pytest.mark.parametrize(
    "data",
    [b"\x09\x04\x01\x00\x00\x00", b"\x00\x04\x01\x00\x00\x00", b"\x01\x03\x01\x00\x00",
     b"\x01\x00", b"\x02\x00", b"\x02\x02\xff\xff"],
)
def test_identifier_rejects_bad_bytes(data: bytes) -> None:
    with pytest.raises(DecodeError):
        Identifier.decode(Reader(data))


def test_consumer_layouts() -> None:
    assert _bytes(Consumer.regular(7)) == b"\x01\x01\x04\x07\x00\x00\x00"
    assert _bytes(Consumer.group("g")) == b"\x02\x02\x01g"
    assert Consumer.group(1).is_group and Consumer.regular(1).kind == ConsumerKind.CONSUMER
    for kind in (0, 3):
        with pytest.raises(DecodeError):
            Consumer.decode(Reader(bytes([kind]) + b"\x01\x04\x07\x00\x00\x00"))


def test_partitioning_layouts() -> None:
    assert _bytes(Partitioning.balanced()) == b"\x01\x00"
    assert _bytes(Partitioning.partition_id(1)) == b"\x02\x04\x01\x00\x00\x00"
    assert _bytes(Partitioning.messages_key("k1")) == b"\x03\x02k1"
    assert _bytes(Partitioning.messages_key(1)) == b"\x03\x08\x01" + b"\x00" * 7
    with pytest.raises(DecodeError):
        Partitioning.decode(Reader(b"\x04\x00"))


def test_polling_strategy_layouts() -> None:
    assert _bytes(PollingStrategy.offset(5)) == b"\x01\x05" + b"\x00" * 7
    assert _bytes(PollingStrategy.next()) == b"\x05" + b"\x00" * 8
    for kind in (0, 6):
        with pytest.raises(DecodeError):
            PollingStrategy.decode(Reader(bytes([kind]) + b"\x00" * 8))


def test_decode_enum() -> None:
    assert decode_enum(CompressionAlgorithm, 2) is CompressionAlgorithm.GZIP
    with pytest.raises(DecodeError):
        decode_enum(CompressionAlgorithm, 7)


@given(identifiers)
def test_identifier_property(value: Identifier) -> None:
    _round_trip(value)


@given(consumers)
def test_consumer_property(value: Consumer) -> None:
    _round_trip(value)


@given(partitionings)
def test_partitioning_property(value: Partitioning) -> None:
    _round_trip(value)


@given(polling_strategies)
def test_polling_strategy_property(value: PollingStrategy) -> None:
    _round_trip(value)
