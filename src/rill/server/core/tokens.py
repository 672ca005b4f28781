"""Personal access tokens (wire §3.3, §4.11, §6.1): create, list, delete, log in with one, and
the background cleaner of expired tokens.

Owns: the tokens of every user, indexed by hash and by (user, name). A raw token is 50 random
bytes in standard Base64 (68 characters); it is returned once, at creation, and only its
BLAKE3 hex digest is ever kept, in memory and in the metadata store.

Invariants:
* the store is written before memory changes (a failed write changes nothing);
* token names are normalised (wire §2.8) and unique per user; a user has at most
  ``personal_access_token.max_tokens_per_user`` tokens (expired ones count until cleaned);
* ``expiry_at`` is an absolute µs timestamp, 0 = never; a token is expired when
  ``expiry_at <= now``;
* a deleted user's tokens disappear with it (the store cascades; ``_forget_user`` keeps
  memory in step).

In a cluster the catalog makes a token on every node (etcd holds its hash, never the raw
token): another node's creation or deletion reaches this node as ``TokenStored`` /
``TokenDeleted`` (``core.applying``), applied by ``apply_stored`` / ``apply_deleted``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
from dataclasses import dataclass

from blake3 import blake3

from rill import errors
from rill.protocol.primitives import EXPIRY_NEVER, EXPIRY_SERVER_DEFAULT
from rill.server.auth.permissioner import Action
from rill.server.config import NEVER
from rill.server.core.catalog import PersonalAccessTokenRow
from rill.server.core.model import Session
from rill.server.core.names import normalize_name, validate_name
from rill.server.core.state import CoreState
from rill.server.core.users import UserService

log = logging.getLogger(__name__)

TOKEN_BYTES = 50  # 68 Base64 characters
NAME_LENGTH = (3, 30)  # wire §2.8, error 50
TOKEN_LENGTH = (1, 100)  # a presented token, wire §2.8, error 53
NEVER_EXPIRES = 0


@dataclass(frozen=True, slots=True)
class TokenStored:
    """A token another node created (the catalog's change, delivered by ``Catalog.follow``)."""

    row: PersonalAccessTokenRow


@dataclass(frozen=True, slots=True)
class TokenDeleted:
    """A token another node deleted (or expired and cleaned)."""

    user_id: int
    name: str


@dataclass(eq=False)
class PersonalAccessToken:
    user_id: int
    name: str
    token_hash: str
    expiry_at: int  # µs; 0 = never

    def is_expired(self, now: int) -> bool:
        return self.expiry_at != NEVER_EXPIRES and self.expiry_at <= now


def hash_token(token: str) -> str:
    return blake3(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return base64.b64encode(secrets.token_bytes(TOKEN_BYTES)).decode("ascii")


def expiry_at(now: int, expiry: int) -> int:
    """The absolute expiry of a token created ``now`` with the request's µs duration."""
    if expiry in (EXPIRY_SERVER_DEFAULT, EXPIRY_NEVER):
        return NEVER_EXPIRES
    moment = now + expiry
    return NEVER_EXPIRES if moment >= EXPIRY_NEVER else moment  # beyond u64: never


def validate_token_name(name: str) -> str:
    low, high = NAME_LENGTH
    return validate_name(name, errors.InvalidPersonalAccessTokenName, low, high)


class PersonalAccessTokenService:
    def __init__(self, state: CoreState, users: UserService) -> None:
        self.state = state
        self.users = users
        self.by_hash: dict[str, PersonalAccessToken] = {}
        self.by_user: dict[int, dict[str, PersonalAccessToken]] = {}

    # -- memory ----------------------------------------------------------------------------

    def load(self) -> None:
        for row in self.state.store.load_personal_access_tokens():
            self._remember(PersonalAccessToken(row.user_id, row.name, row.token_hash,
                                               row.expiry_at))

    def _remember(self, token: PersonalAccessToken) -> None:
        self.by_hash[token.token_hash] = token
        self.by_user.setdefault(token.user_id, {})[token.name] = token

    def _forget(self, token: PersonalAccessToken) -> None:
        self.by_hash.pop(token.token_hash, None)
        own = self.by_user.get(token.user_id)
        if own is not None:
            own.pop(token.name, None)
            if not own:
                del self.by_user[token.user_id]

    def forget_user(self, user_id: int) -> None:
        """A deleted user's tokens (the store cascaded their rows)."""
        for token in list(self.by_user.get(user_id, {}).values()):
            self._forget(token)

    # -- commands --------------------------------------------------------------------------

    def get_personal_access_tokens(self, session: Session) -> list[PersonalAccessToken]:
        self.state.authorize(session, Action.LOGGED_IN)  # own tokens: login only
        own = self.by_user.get(session.user_id, {})
        return [own[name] for name in sorted(own)]

    async def create_personal_access_token(self, session: Session, name: str,
                                           expiry: int) -> str:
        """A new token of the session's user, ``expiry`` µs from now (wire sentinels for the
        server default and never); the raw token, which is never stored."""
        state = self.state
        state.authorize(session, Action.LOGGED_IN)
        name = validate_token_name(name)
        user_id = session.user_id
        own = self.by_user.get(user_id, {})
        limit = state.config.personal_access_token.max_tokens_per_user
        if len(own) >= limit:
            raise errors.PersonalAccessTokensLimitReached(user_id, limit)
        if name in own:
            raise errors.PersonalAccessTokenAlreadyExists(name, user_id, field="name")
        raw = new_token()
        token = PersonalAccessToken(user_id, name, hash_token(raw),
                                    expiry_at(state.clock(), expiry))
        row = await state.store.create_personal_access_token(
            PersonalAccessTokenRow(token.user_id, token.name, token.token_hash, token.expiry_at)
        )
        self._remember(PersonalAccessToken(row.user_id, row.name, row.token_hash, row.expiry_at))
        return raw

    async def delete_personal_access_token(self, session: Session, name: str) -> None:
        state = self.state
        state.authorize(session, Action.LOGGED_IN)
        validate_token_name(name)
        # stored names are normalised, and normalising is idempotent: exact names still match
        token = self.by_user.get(session.user_id, {}).get(normalize_name(name))
        if token is None:
            raise errors.ResourceNotFound(name, field="name")
        await state.store.delete_personal_access_token(token.user_id, token.name)
        self._forget(token)

    def login_with_personal_access_token(self, session: Session, raw_token: str) -> int:
        """Authenticate ``session`` by a personal access token; the user's id."""
        throttle = self.state.login_throttle
        throttle.check(session.address)  # guessing tokens is throttled per address
        try:
            low, high = TOKEN_LENGTH
            if not low <= len(raw_token.encode("utf-8")) <= high:
                raise errors.InvalidPersonalAccessToken(field="token")
            token = self.by_hash.get(hash_token(raw_token))
            if token is None:
                raise errors.ResourceNotFound("personal access token", field="token")
            if token.is_expired(self.state.clock()):
                raise errors.PersonalAccessTokenExpired(token.name, token.user_id)
            user = self.users.users.get(token.user_id)
            if user is None:  # cannot happen while the cascade holds; never log in as nobody
                raise errors.ResourceNotFound(token.user_id, field="token")
        except errors.RillError:
            throttle.failed(session.address)
            raise
        identity = self.users.log_in(session, user)
        throttle.succeeded(session.address, user.username, token=True)
        return identity

    # -- confirmed changes of other nodes (``core.applying``) ------------------------------

    def apply_stored(self, row: PersonalAccessTokenRow) -> None:
        held = self.by_user.get(row.user_id, {}).get(row.name)
        if held is not None:
            self._forget(held)
        self._remember(PersonalAccessToken(row.user_id, row.name, row.token_hash, row.expiry_at))

    def apply_deleted(self, user_id: int, name: str) -> None:
        held = self.by_user.get(user_id, {}).get(name)
        if held is not None:
            self._forget(held)

    # -- the cleaner -----------------------------------------------------------------------

    async def delete_expired(self) -> int:
        """Delete every expired token (store first, then memory); returns how many."""
        now = self.state.clock()
        expired = [token for token in self.by_hash.values() if token.is_expired(now)]
        if expired:
            await self.state.store.delete_personal_access_tokens([t.token_hash for t in expired])
            for token in expired:
                self._forget(token)
        return len(expired)

    async def run_cleaner(self) -> None:
        """Every ``personal_access_token.cleaner_interval``; "none" (or 0) disables it."""
        interval = self.state.config.personal_access_token.cleaner_interval
        if not 0 < interval < NEVER:
            return
        while True:
            await asyncio.sleep(interval)
            try:
                deleted = await self.delete_expired()
            except Exception:  # a failed write changed nothing; try again next round
                log.exception("deleting expired personal access tokens failed")
                continue
            if deleted:
                log.info("deleted %d expired personal access token(s)", deleted)
