"""The permissions blob (wire §2.7): layout, round-trip, normalisation, bounded decoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)

from .iggy.samples import NESTED_PERMISSIONS
from .iggy.strategies import permissions


def test_root_has_all_global_flags() -> None:
    root = Permissions.root()
    assert all(getattr(root.global_permissions, name) for name in (
        "manage_servers", "read_servers", "manage_users", "read_users", "manage_streams",
        "read_streams", "manage_topics", "read_topics", "poll_messages", "send_messages",
    ))
    assert root.streams is None
    assert root.to_bytes() == b"\x01" * 10 + b"\x00"


def test_global_flag_order() -> None:
    value = Permissions(GlobalPermissions(read_servers=True, send_messages=True))
    assert value.to_bytes() == b"\x00\x01" + b"\x00" * 7 + b"\x01" + b"\x00"


def test_nested_layout() -> None:
    value = Permissions(
        GlobalPermissions(),
        {
            2: StreamPermissions(read_stream=True, topics={5: TopicPermissions(poll_messages=True)}),
            1: StreamPermissions(manage_stream=True),
        },
    )
    expected = (
        b"\x00" * 10 + b"\x01"
        + struct.pack("<I", 1) + b"\x01\x00\x00\x00\x00\x00" + b"\x00" + b"\x01"  # more streams
        + struct.pack("<I", 2) + b"\x00\x01\x00\x00\x00\x00" + b"\x01"
        + struct.pack("<I", 5) + b"\x00\x00\x01\x00" + b"\x00"  # no more topics
        + b"\x00"  # no more streams
    )
    assert value.to_bytes() == expected
    assert Permissions.from_bytes(expected) == value


def test_empty_maps_normalise_to_none() -> None:
    value = Permissions(GlobalPermissions(), {3: StreamPermissions(topics={})})
    assert value.streams[3].topics is None
    # has_topics is written as 0, never 1 followed by nothing
    assert value.to_bytes() == b"\x00" * 10 + b"\x01" + struct.pack("<I", 3) + b"\x00" * 6 + b"\x00\x00"
    assert Permissions(GlobalPermissions(), {}) == Permissions(GlobalPermissions(), None)
    assert Permissions(GlobalPermissions(), {}).to_bytes() == b"\x00" * 11


def test_hashable_and_equal_after_round_trip() -> None:
    decoded = Permissions.from_bytes(NESTED_PERMISSIONS.to_bytes())
    assert decoded == NESTED_PERMISSIONS
    assert hash(decoded) == hash(NESTED_PERMISSIONS)
    assert len({decoded, NESTED_PERMISSIONS, Permissions.root()}) == 2


def test_blob_with_length_prefix() -> None:
    writer = Writer()
    NESTED_PERMISSIONS.encode_blob(writer)
    data = writer.getvalue()
    assert struct.unpack_from("<I", data)[0] == len(data) - 4
    assert Permissions.decode_blob(Reader(data)) == NESTED_PERMISSIONS


def test_every_truncation_fails() -> None:
    data = NESTED_PERMISSIONS.to_bytes()
    for length in range(len(data)):
        with pytest.raises(DecodeError):
            Permissions.from_bytes(data[:length])
    with pytest.raises(DecodeError):
        Permissions.from_bytes(data + b"\x00")


def test_structural_bytes_must_be_0_or_1() -> None:
    with pytest.raises(DecodeError):
        Permissions.from_bytes(b"\x00" * 10 + b"\x02")
    with pytest.raises(DecodeError):  # more_streams = 2
        Permissions.from_bytes(b"\x00" * 10 + b"\x01" + b"\x01\x00\x00\x00" + b"\x00" * 6 + b"\x00\x02")


def test_duplicate_ids_are_rejected() -> None:
    entry = struct.pack("<I", 1) + b"\x00" * 6 + b"\x00"
    with pytest.raises(DecodeError):
        Permissions.from_bytes(b"\x00" * 10 + b"\x01" + entry + b"\x01" + entry + b"\x00")


def test_flag_bytes_are_lenient() -> None:
    value = Permissions.from_bytes(b"\x02" + b"\x01" + b"\x00" * 8 + b"\x00")
    assert value.global_permissions == GlobalPermissions(read_servers=True)


@given(permissions)
def test_round_trip_property(value: Permissions) -> None:
    data = value.to_bytes()
    decoded = Permissions.from_bytes(data)
    assert decoded == value
    assert hash(decoded) == hash(value)
    assert decoded.to_bytes() == data
