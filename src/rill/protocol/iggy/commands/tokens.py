"""Personal access token commands 41-44 (wire reference §3.3)."""

from __future__ import annotations

from dataclasses import dataclass

from rill.protocol.iggy.commands.base import (
    STR8,
    U64,
    Command,
    EmptyCommand,
    list_response,
    single_response,
)
from rill.protocol.iggy.responses.users import (
    IdentityInfo,
    PersonalAccessTokenInfo,
    RawPersonalAccessToken,
)


@dataclass(frozen=True, slots=True)
class GetPersonalAccessTokens(EmptyCommand):
    """41 GET_PERSONAL_ACCESS_TOKENS: empty. OK: the caller's tokens, concatenated
    PersonalAccessTokenInfo records (str8 name; u64 expiry_at)."""

    CODE = 41
    NAME = "get_personal_access_tokens"

    decode_response = staticmethod(list_response(PersonalAccessTokenInfo.decode))


def _read_raw_token(payload: memoryview | bytes) -> str:
    return single_response(RawPersonalAccessToken.decode)(payload).token


@dataclass(frozen=True, slots=True)
class CreatePersonalAccessToken(Command):
    """42 CREATE_PERSONAL_ACCESS_TOKEN: str8 name; u64 expiry (µs duration; 0 = server default,
    u64::MAX = never). OK: the raw token, str8 (the only time it is ever sent)."""

    CODE = 42
    NAME = "create_personal_access_token"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (STR8, U64)
    name: str
    expiry: int = 0

    decode_response = staticmethod(_read_raw_token)


@dataclass(frozen=True, slots=True)
class DeletePersonalAccessToken(Command):
    """43 DELETE_PERSONAL_ACCESS_TOKEN: str8 name. OK: empty (unknown name: 20)."""

    CODE = 43
    NAME = "delete_personal_access_token"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (STR8,)
    name: str


@dataclass(frozen=True, slots=True)
class LoginWithPersonalAccessToken(Command):
    """44 LOGIN_WITH_PERSONAL_ACCESS_TOKEN: str8 token. OK: IdentityInfo (u32 user_id)."""

    CODE = 44
    NAME = "login_with_personal_access_token"
    TRAILING_BYTES_IGNORED = True
    LAYOUT = (STR8,)
    token: str

    decode_response = staticmethod(single_response(IdentityInfo.decode))
