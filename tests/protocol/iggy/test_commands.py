"""Commands: exact bytes (§3.10 and iggy-py frames), round-trips of every command, truncated
prefixes, trailing bytes and garbage enum bytes."""

from __future__ import annotations

import dataclasses
import itertools
import struct

import pytest

from rill.protocol.iggy import codes
from rill.protocol.buffer import DecodeError, Writer
from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.commands.messages import PollMessages, SendMessages
from rill.protocol.iggy.commands.streams import CreateStream, DeleteStream, GetStream
from rill.protocol.iggy.commands.system import GetSnapshot, Ping
from rill.protocol.iggy.commands.topics import CreateTopic, UpdateTopic
from rill.protocol.iggy.commands.transactions import StageMessages
from rill.protocol.iggy.commands.users import CreateUser, LoginUser, UpdatePermissions, UpdateUser
from rill.protocol.iggy.framing import decode_request_header, encode_response, error_response
from rill.protocol.iggy.messages import Message
from rill.protocol.permissions import Permissions
from rill.protocol.primitives import CompressionAlgorithm, SnapshotCompression, UserStatus
from rill.protocol.iggy.primitives import Consumer, Identifier, Partitioning, PollingStrategy

from .samples import COMMAND_SAMPLES, ORDERS, S1


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def _ids(value: Command) -> str:
    return f"{value.CODE}-{value.NAME}"


# ---------------------------------------------------------------- exact bytes (§3.10)

SPEC_FRAMES = [
    (Ping(), "04 00 00 00 01 00 00 00"),
    (
        LoginUser("iggy", "iggy", "0.6.63", None),
        "1c 00 00 00 26 00 00 00 04 69 67 67 79 04 69 67 67 79 06 00 00 00 30 2e 36 2e 36 33"
        " 00 00 00 00",
    ),
    (CreateStream(1, "test"), "0d 00 00 00 ca 00 00 00 01 00 00 00 04 74 65 73 74"),
    (
        CreateTopic(Identifier(1), 0, 3, CompressionAlgorithm.NONE, 0, 0, 0, "orders"),
        "2b 00 00 00 2e 01 00 00 01 04 01 00 00 00 00 00 00 00 03 00 00 00 01"
        + " 00" * 8 + " 00" * 8 + " 00 06 6f 72 64 65 72 73",
    ),
    (
        SendMessages.of(1, "orders", Partitioning.partition_id(1), [b"hello"]),
        "35 00 00 00 65 00 00 00 01 04 01 00 00 00 02 06 6f 72 64 65 72 73 02 04 01 00 00 00"
        + " 00" * 16 + " 00 00 00 00 05 00 00 00 68 65 6c 6c 6f",
    ),
    (
        PollMessages(Consumer.regular(7), Identifier(1), Identifier(1), 1, PollingStrategy.next(), 10, True),
        "29 00 00 00 64 00 00 00 01 01 04 07 00 00 00 01 04 01 00 00 00 01 04 01 00 00 00"
        " 01 00 00 00 05" + " 00" * 8 + " 0a 00 00 00 01",
    ),
]


@pytest.mark.parametrize("command, frame", SPEC_FRAMES, ids=[_ids(c) for c, _ in SPEC_FRAMES])
def test_spec_frames_exact_bytes(command: Command, frame: str) -> None:
    expected = _hex(frame)
    assert command.to_frame() == expected
    payload_length, code = decode_request_header(expected[:8])
    assert code == command.CODE and payload_length == len(expected) - 8
    assert codes.decode_command(code, expected[8:]) == command


def test_spec_response_frames() -> None:
    assert encode_response(0, struct.pack("<I", 1)) == _hex("00 00 00 00 04 00 00 00 01 00 00 00")
    assert LoginUser.decode_response(_hex("01 00 00 00")).user_id == 1
    assert error_response(40) == _hex("28 00 00 00 00 00 00 00")
    assert encode_response(40) == error_response(40)


def test_iggy_py_reference_frames() -> None:
    assert Ping().to_frame() == _hex("04000000 01000000")
    assert CreateStream(1, "s1").to_frame() == _hex("0b000000 ca000000 01000000 02") + b"s1"

    # login: code 0x26, str8 user, str8 password, str32 version, u32 0 (no context)
    version = b"0.6.202"
    payload = b"\x04iggy\x04iggy" + struct.pack("<I", len(version)) + version + b"\x00" * 4
    frame = struct.pack("<II", len(payload) + 4, 0x26) + payload
    login = codes.decode_command(0x26, payload)
    assert login == LoginUser("iggy", "iggy", "0.6.202", None)
    assert login.to_frame() == frame

    # send: partitioning 02 04 <u32 1>, per message 16-byte id, headers_length, headers, payload
    message_id = bytes(range(1, 17))
    send_payload = (
        _hex("01 04 01000000") + _hex("02 02") + b"t1" + _hex("02 04 01000000")
        + message_id + _hex("00000000") + _hex("03000000") + b"abc"
    )
    send = codes.decode_command(101, send_payload)
    assert isinstance(send, SendMessages)
    assert send.stream_id == Identifier(1) and send.topic_id == Identifier("t1")
    assert send.partitioning == Partitioning.partition_id(1)
    assert bytes(send.messages) == message_id + _hex("00000000 03000000") + b"abc"
    rebuilt = SendMessages.of(1, "t1", Partitioning.partition_id(1),
                              [Message(b"abc", id=int.from_bytes(message_id, "little"))])
    assert rebuilt.encode() == send_payload


# ---------------------------------------------------------------- round trips


def test_samples_cover_every_command() -> None:
    assert {type(sample).CODE for sample in COMMAND_SAMPLES} == set(codes.COMMANDS)
    assert all(codes.COMMANDS[type(s).CODE] is type(s) for s in COMMAND_SAMPLES)


@pytest.mark.parametrize("command", COMMAND_SAMPLES, ids=_ids)
def test_round_trip(command: Command) -> None:
    payload = command.encode()
    decoded = type(command).decode(payload)
    assert decoded == command
    assert decoded.encode() == payload
    assert codes.decode_command(command.CODE, payload) == command
    assert command.to_frame()[8:] == payload


@pytest.mark.parametrize("command", COMMAND_SAMPLES, ids=_ids)
def test_command_shape(command: Command) -> None:
    cls = type(command)
    assert cls.__doc__ and str(cls.CODE) in cls.__doc__
    assert cls.NAME.islower() and " " not in cls.NAME
    for field in dataclasses.fields(command)[:1]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(command, field.name, getattr(command, field.name))


# ---------------------------------------------------------------- truncation and trailing bytes


def _region(command: SendMessages | StageMessages) -> bytes | memoryview:
    """The free-form tail: SEND's message region, STAGE's records."""
    return command.messages if isinstance(command, SendMessages) else command.records


def _send_header_length(command: SendMessages | StageMessages) -> int:
    return len(command.encode()) - len(_region(command))


def _login_boundaries(command: LoginUser) -> dict[int, LoginUser]:
    """Prefix lengths at which a LoginUser payload is still structurally complete."""
    after_password = 2 + len(command.username.encode()) + len(command.password.encode())
    after_version = after_password + 4 + len((command.version or "").encode())
    return {
        after_password: LoginUser(command.username, command.password),
        after_version: LoginUser(command.username, command.password, command.version),
    }


@pytest.mark.parametrize("command", COMMAND_SAMPLES, ids=_ids)
def test_every_truncated_prefix(command: Command) -> None:
    payload = command.encode()
    cls = type(command)
    for length in range(len(payload)):
        prefix = payload[:length]
        if isinstance(command, (SendMessages, StageMessages)) and length >= _send_header_length(command):
            decoded = cls.decode(prefix)  # the message region is free-form for the decoder
            assert bytes(_region(decoded)) == bytes(_region(command))[: length - _send_header_length(command)]
        elif isinstance(command, LoginUser) and length in _login_boundaries(command):
            assert cls.decode(prefix) == _login_boundaries(command)[length]
        else:
            with pytest.raises(DecodeError):
                cls.decode(prefix)


@pytest.mark.parametrize("command", COMMAND_SAMPLES, ids=_ids)
@pytest.mark.parametrize("extra", [b"\x00", b"\x07\x00\x00\x00"], ids=["u8", "u32"])
def test_trailing_bytes(command: Command, extra: bytes) -> None:
    """Bytes after the last field: ignored where Iggy 0.4.95 ignores them
    (TRAILING_BYTES_IGNORED, the table in test_tolerance.py), status 3 elsewhere."""
    payload = command.encode() + extra
    if isinstance(command, (SendMessages, StageMessages)):  # the message region runs to the end
        assert bytes(_region(type(command).decode(payload))) == bytes(_region(command)) + extra
    elif type(command).TRAILING_BYTES_IGNORED:
        assert type(command).decode(payload) == command
    else:
        with pytest.raises(DecodeError):
            type(command).decode(payload)


def test_login_absent_fields_are_zero_length() -> None:
    login = LoginUser("u1", "p1", "", "")
    assert login == LoginUser("u1", "p1")
    assert login.encode() == b"\x02u1\x02p1" + b"\x00" * 8
    assert LoginUser.decode(b"\x02u1\x02p1") == login
    assert LoginUser.decode(b"\x02u1\x02p1\x00\x00\x00\x00") == login
    with pytest.raises(DecodeError):  # a partial length field is not "absent"
        LoginUser.decode(b"\x02u1\x02p1\x00\x00")


def test_unknown_code_is_decode_error() -> None:
    with pytest.raises(DecodeError):
        codes.decode_command(999, b"")
    assert DecodeError("x").code == 3


# ---------------------------------------------------------------- garbage bytes


def _patch(payload: bytes, offset: int, value: int) -> bytes:
    data = bytearray(payload)
    data[offset] = value
    return bytes(data)


def _ident_size(identifier: Identifier) -> int:
    writer = Writer()
    identifier.encode(writer)
    return len(writer.buffer)


def test_identifier_kind_9_and_bad_lengths() -> None:
    payload = DeleteStream(S1).encode()
    for bad in (_patch(payload, 0, 9), _patch(payload, 0, 0), _patch(payload, 1, 3), b"\x02\x00"):
        with pytest.raises(DecodeError):
            DeleteStream.decode(bad)
    with pytest.raises(DecodeError):  # invalid UTF-8 in a string identifier
        GetStream.decode(b"\x02\x02\xff\xfe")


def test_compression_7() -> None:
    create = CreateTopic(S1, 0, 1, CompressionAlgorithm.NONE, 0, 0, 0, "t")
    offset = _ident_size(S1) + 8
    assert create.encode()[offset] == 1
    for bad in (0, 3, 7):
        with pytest.raises(DecodeError):
            CreateTopic.decode(_patch(create.encode(), offset, bad))
    update = UpdateTopic(S1, ORDERS, CompressionAlgorithm.GZIP, 0, 0, 0, "t")
    offset = _ident_size(S1) + _ident_size(ORDERS)
    assert update.encode()[offset] == 2
    with pytest.raises(DecodeError):
        UpdateTopic.decode(_patch(update.encode(), offset, 7))


def test_user_status_3() -> None:
    payload = CreateUser("alice", "secret", UserStatus.ACTIVE).encode()
    offset = 1 + 5 + 1 + 6
    assert payload[offset] == 1
    with pytest.raises(DecodeError):
        CreateUser.decode(_patch(payload, offset, 3))
    update = UpdateUser(S1, None, UserStatus.INACTIVE).encode()
    assert update[-1] == 2
    with pytest.raises(DecodeError):
        UpdateUser.decode(_patch(update, len(update) - 1, 3))


def test_strict_flags_reject_2() -> None:
    create = CreateUser("alice", "secret").encode()
    with pytest.raises(DecodeError):
        CreateUser.decode(_patch(create, len(create) - 1, 2))
    update = UpdateUser(S1, None, None).encode()  # ident, has_username 0, has_status 0
    for offset in (len(update) - 2, len(update) - 1):
        with pytest.raises(DecodeError):
            UpdateUser.decode(_patch(update, offset, 2))
    perms = UpdatePermissions(S1, None).encode()
    with pytest.raises(DecodeError):
        UpdatePermissions.decode(_patch(perms, len(perms) - 1, 2))


def test_other_enum_bytes() -> None:
    snapshot = GetSnapshot(SnapshotCompression.STORED, ()).encode()
    for bad in (_patch(snapshot, 0, 7), _patch(snapshot, 0, 0), b"\x01\x01\x06", b"\x01\x01\x00"):
        with pytest.raises(DecodeError):
            GetSnapshot.decode(bad)
    poll = PollMessages(Consumer.regular(1), S1, S1, 0, PollingStrategy.first(), 1, False).encode()
    strategy_offset = 1 + 6 + 6 + 6 + 4
    assert poll[strategy_offset] == 3
    for offset, bad in ((0, 3), (0, 0), (strategy_offset, 6), (strategy_offset, 0)):
        with pytest.raises(DecodeError):
            PollMessages.decode(_patch(poll, offset, bad))
    send = SendMessages.of(1, 1, Partitioning.balanced(), [b"x"]).encode()
    with pytest.raises(DecodeError):
        SendMessages.decode(_patch(send, 12, 4))


def test_lenient_bools_read_any_nonzero_as_false_unless_one() -> None:
    poll = PollMessages(Consumer.regular(1), S1, S1, 0, PollingStrategy.first(), 1, True).encode()
    assert PollMessages.decode(_patch(poll, len(poll) - 1, 2)).auto_commit is False


def test_permissions_blob_length_is_enforced() -> None:
    payload = UpdatePermissions(S1, Permissions.root()).encode()
    # perm_len follows ident + has_permissions; declare one byte more than the blob has
    length_offset = _ident_size(S1) + 1
    bigger = bytearray(payload)
    struct.pack_into("<I", bigger, length_offset, struct.unpack_from("<I", payload, length_offset)[0] + 1)
    with pytest.raises(DecodeError):
        UpdatePermissions.decode(bytes(bigger) + b"\x00")
    smaller = bytearray(payload)
    struct.pack_into("<I", smaller, length_offset, 10)
    with pytest.raises(DecodeError):
        UpdatePermissions.decode(bytes(smaller))


# -- the fast decoders of SEND and POLL ------------------------------------------------------


def _declared(command_class: type[Command], payload: bytes) -> Command | str:
    """What the declared layout decodes (the reference), or the DecodeError's class name."""
    try:
        return Command.decode.__func__(command_class, payload)  # type: ignore[attr-defined]
    except DecodeError:
        return "DecodeError"


def _fast(command_class: type[Command], payload: bytes) -> Command | str:
    try:
        return command_class.decode(payload)
    except DecodeError:
        return "DecodeError"


def _ident(kind: int, length: int, value: bytes) -> bytes:
    return bytes([kind, length]) + value


NUMERIC = _ident(1, 4, struct.pack("<I", 7))
BIG = _ident(1, 4, struct.pack("<I", 0xFFFF_FFFF))
NAMED = _ident(2, 3, b"abc")
IDENTS = [NUMERIC, BIG, NAMED, _ident(1, 3, b"abc"), _ident(3, 4, bytes(4)), _ident(1, 0, b"")]


@pytest.mark.parametrize("consumer_kind", [0, 1, 2, 3])
def test_the_poll_fast_path_decodes_exactly_what_the_layout_does(consumer_kind: int) -> None:
    cases = itertools.product(IDENTS, [0, 1, 3, 5, 6], [0, 1, 2], [b"", b"\x00", b"-trailing-"])
    for ident, strategy_kind, auto_commit, tail in cases:
        body = (bytes([consumer_kind]) + NUMERIC + ident + BIG + struct.pack("<I", 3)
                + bytes([strategy_kind]) + struct.pack("<Q", 2**64 - 1) + struct.pack("<I", 10)
                + bytes([auto_commit]))
        for payload in (body + tail, body[:-1], body[:-9]):
            assert _fast(PollMessages, payload) == _declared(PollMessages, payload), payload


@pytest.mark.parametrize("partitioning", [
    b"\x01\x00", b"\x02\x04" + struct.pack("<I", 2), b"\x03\x05hello", b"\x00\x00", b"\x04\x01x",
    b"\x03\xffshort", b"\x02",
])
def test_the_send_fast_path_decodes_exactly_what_the_layout_does(partitioning: bytes) -> None:
    for ident, messages in itertools.product(IDENTS, [b"", bytes(range(40))]):
        for payload in (NUMERIC + ident + partitioning + messages,
                        ident + NUMERIC + partitioning + messages):
            fast, declared = _fast(SendMessages, payload), _declared(SendMessages, payload)
            if isinstance(declared, str):
                assert fast == declared, payload
                continue
            assert isinstance(fast, SendMessages)
            assert (fast.stream_id, fast.topic_id, fast.partitioning) == (
                declared.stream_id, declared.topic_id, declared.partitioning)
            assert bytes(fast.messages) == bytes(declared.messages)
