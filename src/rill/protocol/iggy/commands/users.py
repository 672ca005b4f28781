"""User and session commands 31-39 (wire reference §3.2) and rill's 1050 UNLOCK_USER
(docs/extensions.md).

CREATE_USER, UPDATE_USER, UPDATE_PERMISSIONS and LOGIN_USER have optional parts and override
``encode``/``read``; the others use the generic LAYOUT walker. Every command here but GET_USERS
and LOGOUT_USER ignores bytes after its last field, as Iggy 0.4.95 does (base.py). Presence flags that the server
checks to be 0/1 (has_permissions, has_username, has_status) are read strictly: any other byte
is status 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rill.protocol.buffer import Reader, Writer
from rill.protocol.iggy.commands.base import (
    IDENT,
    STR8,
    Command,
    EmptyCommand,
    list_response,
    optional_response,
    single_response,
)
from rill.protocol.primitives import UserStatus
from rill.protocol.iggy.primitives import Identifier, decode_enum
from rill.protocol.iggy.responses.users import IdentityInfo, UserInfo, UserInfoDetails

if TYPE_CHECKING:  # imported by the commands that carry permissions (a login needs none)
    from rill.protocol.permissions import Permissions


def _read_optional_permissions(reader: Reader) -> Permissions | None:
    """u8 has_permissions (0/1); if 1: u32 perm_len + blob."""
    from rill.protocol.permissions import Permissions

    return Permissions.decode_blob(reader) if reader.strict_bool8() else None


def _write_optional_permissions(writer: Writer, permissions: Permissions | None) -> None:
    if permissions is None:
        writer.u8(0)
    else:
        writer.u8(1)
        permissions.encode_blob(writer)


def _read_status(reader: Reader) -> UserStatus:
    return decode_enum(UserStatus, reader.u8())  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class GetUser(Command):
    """31 GET_USER: ident user_id. OK: UserInfoDetails, or empty on any failure."""

    CODE = 31
    NAME = "get_user"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT,)
    user_id: Identifier

    decode_response = staticmethod(optional_response(UserInfoDetails.decode))


@dataclass(frozen=True, slots=True)
class GetUsers(EmptyCommand):
    """32 GET_USERS: empty. OK: concatenated UserInfo records."""

    CODE = 32
    NAME = "get_users"

    decode_response = staticmethod(list_response(UserInfo.decode))


@dataclass(frozen=True, slots=True)
class CreateUser(Command):
    """33 CREATE_USER: str8 username; str8 password; u8 status (1 active, 2 inactive, else
    status 3); u8 has_permissions (0/1, else status 3); if 1: u32 perm_len + permissions blob
    (§2.7). OK: UserInfoDetails of the new user. As in 0.4.95, the permissions length is read
    only when has_permissions is 1, and whatever follows the last field read is ignored (a
    client that sends has_permissions 0 and then a zero length is accepted)."""

    CODE = 33
    NAME = "create_user"
    TRAILING_BYTES_IGNORED = True
    username: str
    password: str
    status: UserStatus = UserStatus.ACTIVE
    permissions: Permissions | None = None

    def encode(self) -> bytes:
        writer = Writer().str8(self.username).str8(self.password).u8(int(self.status))
        _write_optional_permissions(writer, self.permissions)
        return writer.getvalue()

    @classmethod
    def read(cls, reader: Reader) -> CreateUser:
        username = reader.str8()
        password = reader.str8()
        status = _read_status(reader)
        permissions = _read_optional_permissions(reader)
        return cls(username, password, status, permissions)

    decode_response = staticmethod(single_response(UserInfoDetails.decode))


@dataclass(frozen=True, slots=True)
class DeleteUser(Command):
    """34 DELETE_USER: ident user_id. OK: empty (root: 48)."""

    CODE = 34
    NAME = "delete_user"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT,)
    user_id: Identifier


@dataclass(frozen=True, slots=True)
class UpdateUser(Command):
    """35 UPDATE_USER: ident user_id; u8 has_username (0/1); if 1: str8 username;
    u8 has_status (0/1); if 1: u8 status (1/2). OK: empty. None = leave unchanged."""

    CODE = 35
    NAME = "update_user"
    TRAILING_BYTES_IGNORED = True
    user_id: Identifier
    username: str | None = None
    status: UserStatus | None = None

    def encode(self) -> bytes:
        writer = Writer()
        self.user_id.encode(writer)
        if self.username is None:
            writer.u8(0)
        else:
            writer.u8(1).str8(self.username)
        if self.status is None:
            writer.u8(0)
        else:
            writer.u8(1).u8(int(self.status))
        return writer.getvalue()

    @classmethod
    def read(cls, reader: Reader) -> UpdateUser:
        user_id = Identifier.decode(reader)
        username = reader.str8() if reader.strict_bool8() else None
        status = _read_status(reader) if reader.strict_bool8() else None
        return cls(user_id, username, status)


@dataclass(frozen=True, slots=True)
class UpdatePermissions(Command):
    """36 UPDATE_PERMISSIONS: ident user_id; u8 has_permissions (0/1); if 1: u32 perm_len +
    permissions blob. OK: empty (root: 49). None = the user gets no permissions."""

    CODE = 36
    NAME = "update_permissions"
    TRAILING_BYTES_IGNORED = True
    user_id: Identifier
    permissions: Permissions | None = None

    def encode(self) -> bytes:
        writer = Writer()
        self.user_id.encode(writer)
        _write_optional_permissions(writer, self.permissions)
        return writer.getvalue()

    @classmethod
    def read(cls, reader: Reader) -> UpdatePermissions:
        user_id = Identifier.decode(reader)
        permissions = _read_optional_permissions(reader)
        return cls(user_id, permissions)


@dataclass(frozen=True, slots=True)
class ChangePassword(Command):
    """37 CHANGE_PASSWORD: ident user_id; str8 current_password; str8 new_password.
    OK: empty (wrong current password: 42)."""

    CODE = 37
    NAME = "change_password"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (IDENT, STR8, STR8)
    user_id: Identifier
    current_password: str
    new_password: str


@dataclass(frozen=True, slots=True)
class LoginUser(Command):
    """38 LOGIN_USER: str8 username; str8 password; str32 version; str32 context.
    OK: IdentityInfo (u32 user_id).

    A zero-length version/context means absent (``None``); the encoder writes a u32 0 for an
    absent value. Tolerance (wire §11): a payload that ends right after the password, or right
    after the version, decodes with the missing fields absent. A partial length field is still
    a decode error. Bytes after the context are ignored (as 0.4.95). An empty string is
    normalised to ``None``.
    """

    CODE = 38
    NAME = "login_user"
    TRAILING_BYTES_IGNORED = True
    username: str
    password: str
    version: str | None = None
    context: str | None = None

    def __post_init__(self) -> None:
        if self.version == "":
            object.__setattr__(self, "version", None)
        if self.context == "":
            object.__setattr__(self, "context", None)

    def encode(self) -> bytes:
        writer = Writer().str8(self.username).str8(self.password)
        writer.str32(self.version or "").str32(self.context or "")
        return writer.getvalue()

    @classmethod
    def read(cls, reader: Reader) -> LoginUser:
        username = reader.str8()
        password = reader.str8()
        version = reader.str32() if not reader.at_end() else None
        context = reader.str32() if not reader.at_end() else None
        return cls(username, password, version, context)

    decode_response = staticmethod(single_response(IdentityInfo.decode))


@dataclass(frozen=True, slots=True)
class LogoutUser(EmptyCommand):
    """39 LOGOUT_USER: empty. OK: empty (also when not logged in)."""

    CODE = 39
    NAME = "logout_user"


@dataclass(frozen=True, slots=True)
class UnlockUser(Command):
    """1050 UNLOCK_USER (rill extension): ident user_id. OK: empty. Lets the user log in again
    at once after failed logins locked it (``auth.throttling``); needs manage_users."""

    CODE = 1050
    NAME = "unlock_user"
    LAYOUT = (IDENT,)
    user_id: Identifier
