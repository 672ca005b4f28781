"""User, identity and personal-access-token records (wire §4.8, §4.10, §4.11).

UserInfo (14 bytes + name): u32 id; u64 created_at (µs); u8 status (1 active, 2 inactive);
str8 username. GET_USERS answers concatenated UserInfo.
UserInfoDetails: UserInfo followed by either u8 1, u32 permissions_length, permissions blob
(§2.7), or, for a user without permissions, four zero bytes (a u32 0; readers only look at
the first byte).
IdentityInfo (LOGIN_USER, LOGIN_WITH_PERSONAL_ACCESS_TOKEN): u32 user_id.
PersonalAccessTokenInfo (GET_PERSONAL_ACCESS_TOKENS, concatenated): str8 name; u64 expiry_at
(µs absolute; 0 = never).
RawPersonalAccessToken (CREATE_PERSONAL_ACCESS_TOKEN): str8 token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rill.protocol.buffer import DecodeError, Reader, Writer
from rill.protocol.iggy.commands.base import STR8, U8, U32, U64
from rill.protocol.iggy.responses.base import Record

if TYPE_CHECKING:  # imported when a user's permissions are read (a login needs none)
    from rill.protocol.permissions import Permissions

NO_PERMISSIONS = b"\x00\x00\x00\x00"


@dataclass(frozen=True, slots=True)
class UserInfo(Record):
    LAYOUT = (U32, U64, U8, STR8)

    id: int
    created_at: int
    status: int
    username: str


@dataclass(frozen=True, slots=True)
class UserInfoDetails(Record):
    """GET_USER / CREATE_USER answer: the user header and its permissions (None = none)."""

    user: UserInfo
    permissions: Permissions | None = None

    def encode(self, writer: Writer) -> None:
        self.user.encode(writer)
        if self.permissions is None:
            writer.raw(NO_PERMISSIONS)
        else:
            writer.u8(1)
            self.permissions.encode_blob(writer)

    @classmethod
    def decode(cls, reader: Reader) -> UserInfoDetails:
        user = UserInfo.decode(reader)
        has_permissions = reader.u8()
        if has_permissions == 1:
            from rill.protocol.permissions import Permissions

            return cls(user, Permissions.decode_blob(reader))
        if has_permissions != 0:
            raise DecodeError(f"has_permissions byte {has_permissions}")
        # The server pads "no permissions" to a u32 0; accept the lone byte too.
        if reader.remaining >= 3:
            reader.raw(3)
        return cls(user, None)

    @property
    def id(self) -> int:
        return self.user.id

    @property
    def username(self) -> str:
        return self.user.username


@dataclass(frozen=True, slots=True)
class IdentityInfo(Record):
    LAYOUT = (U32,)

    user_id: int


@dataclass(frozen=True, slots=True)
class PersonalAccessTokenInfo(Record):
    LAYOUT = (STR8, U64)

    name: str
    expiry_at: int


@dataclass(frozen=True, slots=True)
class RawPersonalAccessToken(Record):
    LAYOUT = (STR8,)

    token: str
