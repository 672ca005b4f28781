"""Which requests ignore bytes after their last field, pinned per command code.

Iggy server 0.4.95 decodes a request with the command's ``from_bytes``: most check a minimum
length, read their fields by position and never look at what follows (trailing bytes are
ignored); the empty-payload commands refuse any byte and GET_CLIENT wants exactly 4 bytes.
rill follows it command by command (``TRAILING_BYTES_IGNORED``); docs/wire-notes.md gives the
0.4.95 source each choice was read from. The issue that started this (issue 12, item 6): the
official Node.js SDK of December 2024 sends DELETE_TOPIC with an extra u32, and CREATE_USER
with has_permissions 0 followed by stray bytes; 0.4.95 accepts both.
"""

from __future__ import annotations

import struct

import pytest

from rill.protocol.iggy import codes
from rill.protocol.buffer import DecodeError, Writer
from rill.protocol.iggy.commands.system import GetClient, GetSnapshot, Ping
from rill.protocol.iggy.commands.topics import DeleteTopic
from rill.protocol.iggy.commands.users import CreateUser, LoginUser, UpdatePermissions, UpdateUser
from rill.protocol.primitives import SnapshotCompression, SnapshotType, UserStatus
from rill.protocol.iggy.primitives import Identifier

# code -> True: trailing bytes ignored (0.4.95 reads by position after a minimum-length check);
# False: refused with status 3 (0.4.95 checks `is_empty()` or an exact length, or the source
# was not found and rill keeps its strictness). SEND_MESSAGES (101) is neither: its message
# region runs to the end of the payload.
IGGY_TOLERANCE: dict[int, bool] = {
    1: False, 10: False, 11: True, 20: False, 21: False, 22: False,
    31: True, 32: False, 33: True, 34: True, 35: True, 36: True, 37: True, 38: True, 39: False,
    41: False, 42: True, 43: True, 44: True,
    100: True, 102: True,
    120: True, 121: True,
    200: True, 201: False, 202: True, 203: True, 204: True, 205: True,
    300: True, 301: True, 302: True, 303: True, 304: True, 305: True,
    402: True, 403: True,
    600: True, 601: True, 602: True, 603: True, 604: True, 605: True,
}


def test_the_table_covers_every_iggy_command() -> None:
    assert set(IGGY_TOLERANCE) | {101} == set(codes.IGGY_CODES)


@pytest.mark.parametrize("code", sorted(IGGY_TOLERANCE))
def test_each_command_is_as_tolerant_as_iggy_0_4_95(code: int) -> None:
    assert codes.COMMANDS[code].TRAILING_BYTES_IGNORED is IGGY_TOLERANCE[code]


@pytest.mark.parametrize("code", sorted(codes.EXTENSION_CODES))
def test_rill_extensions_stay_strict(code: int) -> None:
    assert codes.COMMANDS[code].TRAILING_BYTES_IGNORED is False


def _delete_topic_payload() -> bytes:
    writer = Writer()
    Identifier.of(1).encode(writer)
    Identifier.of("orders").encode(writer)
    return writer.getvalue()


def test_delete_topic_with_an_extra_u32_is_accepted() -> None:
    """What the Node.js SDK sends: the two identifiers, then a u32."""
    payload = _delete_topic_payload() + struct.pack("<I", 0)
    assert codes.decode_command(303, payload) == DeleteTopic(Identifier.of(1), Identifier.of("orders"))


def test_create_user_without_permissions_then_stray_bytes_is_accepted() -> None:
    """has_permissions 0: 0.4.95 reads no permissions length and ignores the rest."""
    head = b"\x04user\x06secret\x01"
    for stray in (b"\x00\x00\x00\x00", b"\xff", b"\x01\x02\x03\x04\x05"):
        command = codes.decode_command(33, head + b"\x00" + stray)
        assert command == CreateUser("user", "secret", UserStatus.ACTIVE, None)


def test_create_user_flags_and_fields_are_still_checked() -> None:
    head = b"\x04user\x06secret\x01"
    with pytest.raises(DecodeError):  # has_permissions must be 0 or 1 (0.4.95: > 1 is 3)
        codes.decode_command(33, head + b"\x02")
    with pytest.raises(DecodeError):  # has_permissions 1 reads the length: 2 bytes are short
        codes.decode_command(33, head + b"\x01\x00\x00")
    with pytest.raises(DecodeError):  # the byte has_permissions needs is missing
        codes.decode_command(33, head)


def test_permissions_blob_then_trailing_bytes() -> None:
    full = UpdatePermissions(Identifier.of(5), None).encode()
    assert UpdatePermissions.decode(full + b"junk") == UpdatePermissions(Identifier.of(5), None)


def test_update_user_trailing_bytes_after_the_status() -> None:
    command = UpdateUser(Identifier.of(3), "renamed", UserStatus.INACTIVE)
    assert UpdateUser.decode(command.encode() + b"\x00\x01") == command


def test_login_trailing_bytes_after_the_context_are_ignored() -> None:
    login = LoginUser("iggy", "iggy", "0.6.63", "ctx")
    assert LoginUser.decode(login.encode() + b"\x00\x00") == login


def test_snapshot_types_then_trailing_bytes() -> None:
    snapshot = GetSnapshot(SnapshotCompression.STORED, (SnapshotType.PROCESS_LIST,))
    assert GetSnapshot.decode(snapshot.encode() + b"\x09") == snapshot


def test_a_field_cut_short_is_still_refused() -> None:
    """Tolerance is for bytes after the last field, never for a partial field."""
    payload = _delete_topic_payload()
    for length in range(len(payload)):
        with pytest.raises(DecodeError):
            codes.decode_command(303, payload[:length])


def test_strict_commands_refuse_trailing_bytes() -> None:
    with pytest.raises(DecodeError):  # 0.4.95: `if !bytes.is_empty()`
        codes.decode_command(Ping.CODE, b"\x00")
    with pytest.raises(DecodeError):  # 0.4.95: `if bytes.len() != 4`
        codes.decode_command(GetClient.CODE, struct.pack("<II", 1, 0))
    assert codes.decode_command(GetClient.CODE, struct.pack("<I", 1)) == GetClient(1)
