"""Exact payload bytes of every command layout, hand-built from the wire reference tables
(§3.1-§3.9) with distinct values per field, so a swapped or mis-sized field fails even where
a round-trip would not notice."""

from __future__ import annotations

import struct

import pytest

from rill.protocol.iggy.commands.base import Command
from rill.protocol.iggy.commands.groups import (
    CreateConsumerGroup,
    DeleteConsumerGroup,
    GetConsumerGroup,
    GetConsumerGroups,
    JoinConsumerGroup,
    LeaveConsumerGroup,
)
from rill.protocol.iggy.commands.messages import FlushUnsavedBuffer
from rill.protocol.iggy.commands.offsets import GetConsumerOffset, StoreConsumerOffset
from rill.protocol.iggy.commands.partitions import CreatePartitions, DeletePartitions
from rill.protocol.iggy.commands.streams import UpdateStream
from rill.protocol.iggy.commands.system import GetClient, GetSnapshot
from rill.protocol.iggy.commands.tokens import (
    CreatePersonalAccessToken,
    DeletePersonalAccessToken,
    LoginWithPersonalAccessToken,
)
from rill.protocol.iggy.commands.topics import CreateTopic, DeleteTopic, GetTopic, PurgeTopic, UpdateTopic
from rill.protocol.iggy.commands.users import (
    ChangePassword,
    CreateUser,
    DeleteUser,
    GetUser,
    LoginUser,
    UpdatePermissions,
    UpdateUser,
)
from rill.protocol.permissions import Permissions
from rill.protocol.primitives import (
    CompressionAlgorithm,
    SnapshotCompression,
    SnapshotType,
    UserStatus,
)
from rill.protocol.iggy.primitives import Consumer, Identifier

u32 = struct.Struct("<I").pack
u64 = struct.Struct("<Q").pack
S = b"\x01\x04" + u32(1)  # numeric ident 1
T = b"\x02\x01t"  # string ident "t"
G = b"\x01\x04" + u32(9)  # numeric ident 9
SI, TI, GI = Identifier(1), Identifier("t"), Identifier(9)
ROOT_BLOB = b"\x01" * 10 + b"\x00"

LAYOUTS = [
    (GetClient(0x01020304), u32(0x01020304)),
    (GetSnapshot(SnapshotCompression.XZ, (SnapshotType.PROCESS_LIST, SnapshotType.SERVER_LOGS)), b"\x06\x02\x02\x05"),
    (GetSnapshot(), b"\x02\x04\x01\x02\x03\x05"),
    (GetUser(Identifier("bob")), b"\x02\x03bob"),
    (DeleteUser(Identifier(2)), b"\x01\x04" + u32(2)),
    (CreateUser("bob", "pw", UserStatus.INACTIVE), b"\x03bob\x02pw\x02\x00"),
    (CreateUser("bob", "pw", UserStatus.ACTIVE, Permissions.root()),
     b"\x03bob\x02pw\x01\x01" + u32(11) + ROOT_BLOB),
    (UpdateUser(SI, "al", UserStatus.INACTIVE), S + b"\x01\x02al\x01\x02"),
    (UpdateUser(SI, None, UserStatus.ACTIVE), S + b"\x00\x01\x01"),
    (UpdateUser(SI, "al", None), S + b"\x01\x02al\x00"),
    (UpdatePermissions(SI, Permissions.root()), S + b"\x01" + u32(11) + ROOT_BLOB),
    (UpdatePermissions(SI, None), S + b"\x00"),
    (ChangePassword(SI, "old", "newer"), S + b"\x03old\x05newer"),
    (LoginUser("u", "p", "v1", "c"), b"\x01u\x01p" + u32(2) + b"v1" + u32(1) + b"c"),
    (CreatePersonalAccessToken("pat", 0x0102), b"\x03pat" + u64(0x0102)),
    (DeletePersonalAccessToken("pat"), b"\x03pat"),
    (LoginWithPersonalAccessToken("tok"), b"\x03tok"),
    (FlushUnsavedBuffer(SI, TI, 3, True), S + T + u32(3) + b"\x01"),
    (GetConsumerOffset(Consumer.group(9), SI, TI, 4), b"\x02" + G + S + T + u32(4)),
    (StoreConsumerOffset(Consumer.regular(9), SI, TI, 4, 0x0A0B), b"\x01" + G + S + T + u32(4) + u64(0x0A0B)),
    (UpdateStream(SI, "n"), S + b"\x01n"),
    (GetTopic(SI, TI), S + T),
    (CreateTopic(SI, 2, 3, CompressionAlgorithm.GZIP, 4, 5, 6, "tp"),
     S + u32(2) + u32(3) + b"\x02" + u64(4) + u64(5) + b"\x06" + b"\x02tp"),
    (DeleteTopic(SI, TI), S + T),
    (UpdateTopic(SI, TI, CompressionAlgorithm.NONE, 7, 8, 9, "tq"),
     S + T + b"\x01" + u64(7) + u64(8) + b"\x09" + b"\x02tq"),
    (PurgeTopic(SI, TI), S + T),
    (CreatePartitions(SI, TI, 5), S + T + u32(5)),
    (DeletePartitions(SI, TI, 6), S + T + u32(6)),
    (GetConsumerGroup(SI, TI, GI), S + T + G),
    (GetConsumerGroups(SI, TI), S + T),
    (CreateConsumerGroup(SI, TI, 7, "cg"), S + T + u32(7) + b"\x02cg"),
    (DeleteConsumerGroup(SI, TI, GI), S + T + G),
    (JoinConsumerGroup(SI, TI, GI), S + T + G),
    (LeaveConsumerGroup(SI, TI, GI), S + T + G),
]


@pytest.mark.parametrize("command, payload", LAYOUTS, ids=lambda v: getattr(v, "NAME", ""))
def test_exact_payload(command: Command, payload: bytes) -> None:
    assert command.encode() == payload
    assert type(command).decode(payload) == command
