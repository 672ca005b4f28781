"""Users and sessions (wire §3.2, §6.1): the root user at first start, GET/CREATE/DELETE/UPDATE
users, their permissions and passwords, login and logout.

Owns: the users (id -> User) and keeps the Permissioner in step with them. Passwords are kept
as bcrypt hashes only; hashing and checking run in a worker thread so the loop keeps serving.

Invariants:
* every change is written to the catalog *before* memory changes, so a failed write
  changes nothing; memory takes the change through ``apply_created``/``apply_updated``/
  ``apply_deleted``, the same code that applies one another node made (``core.applying``);
* anything computed across an ``await`` (a bcrypt hash) is re-checked afterwards: the user may
  have been deleted or the name taken meanwhile;
* a deleted or deactivated user has no live session: its sessions are logged out;
* a password's SCRAM credentials (``auth.scram``: salt, iterations, StoredKey, ServerKey per
  mechanism) are derived whenever it is set (root creation, create, change) and stored with its
  hash in the same write; a user stored before rill kept them gets them at its next successful
  password login (Iggy/HTTP login or SASL PLAIN), until then SCRAM fails for it;
* SCRAM logins (``begin_scram``/``finish_scram``) follow the password login's rules: throttled
  per address and username, an unknown user looks like a wrong password (a made-up salt);
* login looks the username up exactly; a wrong password and an unknown user both get 42 (the
  hash is checked even for unknown users), an inactive user 47; failed logins are throttled
  per address and per username (``auth.throttling``: 11100 before any hash is checked).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from rill import errors
from rill.protocol.permissions import Permissions
from rill.protocol.primitives import UserStatus
from rill.server.auth import scram
from rill.server.auth.permissioner import Action
from rill.server.auth.passwords import (
    hash_password,
    hash_password_async,
    verify_password,
    verify_password_async,
)
from rill.server.core.catalog import UserRow
from rill.server.core.model import Session
from rill.server.core.names import validate_name
from rill.server.core.state import CoreState
from rill.server.core.types import Ref

log = logging.getLogger(__name__)

ROOT_USER_ID = 1
DEFAULT_ROOT_PASSWORD = "iggy"  # what [root] password defaults to, and every Iggy guide uses
USERNAME_LENGTH = (3, 50)  # wire §2.8, error 43
PASSWORD_LENGTH = (3, 100)  # UTF-8 bytes, wire §2.8, error 44


@dataclass(eq=False)
class User:
    id: int
    username: str
    password_hash: str
    status: UserStatus
    permissions: Permissions | None
    created_at: int
    scram: dict[str, scram.ScramCredential] = field(default_factory=dict)  # by mechanism

    @property
    def is_active(self) -> bool:
        return self.status == UserStatus.ACTIVE


def user_from_row(row: UserRow) -> User:
    permissions = Permissions.from_bytes(row.permissions) if row.permissions else None
    return User(row.id, row.username, row.password_hash, UserStatus(row.status), permissions,
                row.created_at, scram.decode(row.scram_credentials))


def user_row(user: User) -> UserRow:
    permissions = user.permissions.to_bytes() if user.permissions is not None else None
    return UserRow(user.id, user.username, user.password_hash, int(user.status), permissions,
                   user.created_at, scram.encode(user.scram) if user.scram else None)


def check_password(password: str) -> None:
    low, high = PASSWORD_LENGTH
    if not low <= len(password.encode("utf-8")) <= high:
        raise errors.InvalidPassword(field="password")


def validate_username(username: str) -> str:
    low, high = USERNAME_LENGTH
    return validate_name(username, errors.InvalidUsername, low, high)


class UserService:
    def __init__(self, state: CoreState, live_sessions: Callable[[], Iterable[Session]],
                 on_user_deleted: Callable[[int], None]) -> None:
        self.state = state
        self.users: dict[int, User] = {}
        # every live session (to log out a deleted or deactivated user)
        self.live_sessions = live_sessions
        # called with the id of a deleted user, after the store and memory forgot it
        self.on_user_deleted = on_user_deleted
        self._next_id = ROOT_USER_ID + 1  # ids are not reused while running (wire §6.1)
        self._dummy_hash = _DUMMY_HASH

    @property
    def _cost(self) -> int:
        return self.state.config.root.password_hash_cost

    # -- loading ---------------------------------------------------------------------------

    async def load(self, create_root: bool = False) -> None:
        """Load the users; ``create_root`` (decided by ``core.reconciliation``: the first start,
        or an explicit recovery) creates the root user from the [root] settings first (the
        model takes it from the catalog's rows, as every other user)."""
        if create_root:
            await self._create_root()
        for row in self.state.store.load_users():
            self._remember(user_from_row(row))
        self._next_id = max(self.users, default=ROOT_USER_ID) + 1
        # unknown usernames are checked against a hash of the same cost (timing hides names)
        self._dummy_hash = hash_password("rill-no-such-user", cost=self._cost)

    def _remember(self, user: User) -> None:
        self.users[user.id] = user
        self.state.permissioner.set_user(user.id, user.permissions)

    async def _create_root(self) -> None:
        root = self.state.config.root
        user = User(
            id=ROOT_USER_ID,
            username=root.username,
            password_hash=hash_password(root.password, cost=self._cost),
            status=UserStatus.ACTIVE,
            permissions=Permissions.root(),
            created_at=self.state.clock(),
            scram=scram.derive_all(root.password),
        )
        await self.state.store.create_user(user_row(user))

    def root_has_default_password(self) -> bool:
        """Whether the root user can still log in with the default password (one bcrypt check;
        the start refuses non-loopback listeners then)."""
        root = self.users.get(ROOT_USER_ID)
        return root is not None and verify_password(DEFAULT_ROOT_PASSWORD, root.password_hash)

    # -- lookups ---------------------------------------------------------------------------

    def find_by_username(self, username: str) -> User | None:
        for user in self.users.values():
            if user.username == username:
                return user
        return None

    def find_user(self, identifier: Ref) -> User:
        """By id or exact username; 20 resource_not_found when there is no such user."""
        value = identifier
        user = self.users.get(value) if isinstance(value, int) else self.find_by_username(value)
        if user is None:
            raise errors.ResourceNotFound(value, field="user_id")
        return user

    def _target(self, session: Session, identifier: Ref, action: Action) -> User:
        """The user a command names: oneself needs no permission, anyone else ``action``."""
        if not session.is_authenticated:
            raise errors.Unauthenticated()
        own = self.users.get(session.user_id)
        value = identifier
        if own is not None and value == (own.id if isinstance(value, int) else own.username):
            return own
        self.state.authorize(session, action)  # before the lookup: no probing for names
        return self.find_user(identifier)

    def _ensure_name_free(self, username: str, owner: User | None = None) -> None:
        other = self.find_by_username(username)
        if other is not None and other is not owner:
            raise errors.UserAlreadyExists(field="username")

    def _ensure_current(self, user: User) -> None:
        """After an await: the user must still be the one we started with."""
        if self.users.get(user.id) is not user:
            raise errors.ResourceNotFound(user.id, field="user_id")

    def end_sessions(self, user_id: int) -> None:
        for session in list(self.live_sessions()):
            if session.user_id == user_id:
                session.user_id = 0

    # -- queries ---------------------------------------------------------------------------

    def get_user(self, session: Session, user_id: Ref) -> User:
        return self._target(session, user_id, Action.READ_USERS)

    def get_users(self, session: Session) -> list[User]:
        self.state.authorize(session, Action.READ_USERS)
        return [self.users[user_id] for user_id in sorted(self.users)]

    # -- changes ---------------------------------------------------------------------------

    async def create_user(self, session: Session, username: str, password: str, status: int,
                          permissions: Permissions | None) -> User:
        state = self.state
        state.authorize(session, Action.MANAGE_USERS)
        username = validate_username(username)
        check_password(password)
        self._ensure_name_free(username)
        password_hash = await hash_password_async(password, self._cost)
        credentials = await _derive_scram(password)
        state.authorize(session, Action.MANAGE_USERS)  # the world may have changed while hashing
        self._ensure_name_free(username)
        user = User(
            id=max(self._next_id, max(self.users, default=0) + 1),
            username=username,
            password_hash=password_hash,
            status=UserStatus(status),
            permissions=permissions,
            created_at=state.clock(),
            scram=credentials,
        )
        return self.apply_created(await state.store.create_user(user_row(user)))

    async def delete_user(self, session: Session, user_id: Ref) -> None:
        state = self.state
        state.authorize(session, Action.MANAGE_USERS)
        user = self.find_user(user_id)
        if user.id == ROOT_USER_ID:
            raise errors.CannotDeleteUser(user.id, field="user_id")
        await state.store.delete_user(user.id)  # cascades to the user's tokens
        self.apply_deleted(user)

    def unlock_user(self, session: Session, user_id: Ref) -> None:
        """Failed logins no longer lock the user out (``LoginThrottle.unlock``)."""
        self.state.authorize(session, Action.MANAGE_USERS)
        user = self.find_user(user_id)
        self.state.login_throttle.unlock(user.username)
        log.warning("login locks of user %r lifted by user %d", user.username, session.user_id)

    async def update_user(self, session: Session, user_id: Ref, username: str | None,
                          status: int | None) -> None:
        """A new name and/or status (None: unchanged)."""
        state = self.state
        state.authorize(session, Action.MANAGE_USERS)
        user = self.find_user(user_id)
        if username is None:
            username = user.username
        else:
            username = validate_username(username)
            self._ensure_name_free(username, owner=user)
        status = user.status if status is None else UserStatus(status)
        if username == user.username and status == user.status:
            return
        await state.store.update_user(user.id, username, int(status))
        self.apply_updated(user, replace(user_row(user), username=username, status=int(status)))

    async def update_permissions(self, session: Session, user_id: Ref,
                                 permissions: Permissions | None) -> None:
        state = self.state
        state.authorize(session, Action.MANAGE_USERS)
        user = self.find_user(user_id)
        if user.id == ROOT_USER_ID:
            raise errors.CannotChangePermissions(user.id, field="user_id")
        stored = permissions.to_bytes() if permissions is not None else None
        await state.store.update_permissions(user.id, stored)
        self.apply_updated(user, replace(user_row(user), permissions=stored))

    async def change_password(self, session: Session, user_id: Ref, current_password: str,
                              new_password: str) -> None:
        user = self._target(session, user_id, Action.MANAGE_USERS)
        check_password(new_password)
        if not await verify_password_async(current_password, user.password_hash):
            raise errors.InvalidCredentials(field="current_password")
        password_hash = await hash_password_async(new_password, self._cost)
        credentials = await _derive_scram(new_password)
        self._ensure_current(user)
        encoded = scram.encode(credentials)
        await self.state.store.change_password(user.id, password_hash, encoded)
        self.apply_updated(user, replace(user_row(user), password_hash=password_hash,
                                         scram_credentials=encoded))

    # -- confirmed changes (this node's, or another's: ``core.applying``) ----------------

    def apply_created(self, row: UserRow) -> User:
        """A user the catalog holds now."""
        user = user_from_row(row)
        self._remember(user)
        self._next_id = max(self._next_id, user.id + 1)
        return user

    def apply_updated(self, user: User, row: UserRow) -> None:
        """``user`` as the catalog holds it now (name, status, permissions, password hash,
        SCRAM credentials): a new name forgets the old one's login throttling, an inactive
        user is logged out everywhere."""
        before = user_row(user)
        held = user_from_row(row)
        if held.username != user.username:
            self.state.login_throttle.forget(user.username)
        user.username = held.username
        user.status = held.status
        user.password_hash = held.password_hash
        if row.scram_credentials != before.scram_credentials:  # (a SCRAM login under way
            user.scram = held.scram  # keeps its credential unless they changed)
        if row.permissions != before.permissions:
            user.permissions = held.permissions
            self.state.permissioner.set_user(user.id, held.permissions)
        if not user.is_active:
            self.end_sessions(user.id)

    def apply_deleted(self, user: User) -> None:
        """A user the catalog deleted (with its tokens)."""
        self.state.login_throttle.forget(user.username)
        del self.users[user.id]
        self.state.permissioner.remove_user(user.id)
        self.on_user_deleted(user.id)
        self.end_sessions(user.id)

    # -- sessions --------------------------------------------------------------------------

    def log_in(self, session: Session, user: User) -> int:
        """Make ``session`` belong to ``user`` (replacing any previous user); 47 if inactive.
        Returns the user's id."""
        self._ensure_current(user)
        if not user.is_active:
            raise errors.UserInactive()
        session.user_id = user.id
        return user.id

    async def login_user(self, session: Session, username: str, password: str) -> int:
        """Authenticate ``session`` by username and password; the user's id."""
        throttle = self.state.login_throttle
        throttle.check(session.address, username)  # before any bcrypt: cheap refusals
        user = self.find_by_username(username)
        password_hash = user.password_hash if user is not None else self._dummy_hash
        valid = await verify_password_async(password, password_hash)
        if user is None or not valid or self.users.get(user.id) is not user:
            throttle.failed(session.address, username)
            raise errors.InvalidCredentials()
        identity = self.log_in(session, user)
        throttle.succeeded(session.address, user.username)
        if not user.scram:  # stored before rill kept SCRAM credentials: derive them now
            await self._add_scram(user, password)
        return identity

    async def _add_scram(self, user: User, password: str) -> None:
        password_hash = user.password_hash
        credentials = await _derive_scram(password)
        if (self.users.get(user.id) is not user or user.scram
                or user.password_hash != password_hash):
            return  # deleted, or given a new password meanwhile
        encoded = scram.encode(credentials)
        await self.state.store.set_scram_credentials(user.id, encoded)
        self.apply_updated(user, replace(user_row(user), scram_credentials=encoded))

    def begin_scram(self, session: Session, mechanism: str, client_first: bytes
                    ) -> scram.ScramExchange:
        """A SCRAM exchange for ``client_first`` (``ScramError`` if malformed, 11100 if
        throttled); its ``server_first_message`` goes to the client."""
        first = scram.parse_client_first(client_first)
        self.state.login_throttle.check(session.address, first.username)
        user = self.find_by_username(first.username)
        credential = user.scram.get(mechanism) if user is not None else None
        if credential is None:
            credential = scram.fake_credential(mechanism, first.username)
        return scram.ScramExchange(mechanism, first, credential)

    def finish_scram(self, session: Session, exchange: scram.ScramExchange,
                     client_final: bytes) -> tuple[int, bytes]:
        """Check client-final: log ``session`` in; (user id, server-final message).
        A wrong proof raises ``ScramError`` and counts as a failed login."""
        throttle = self.state.login_throttle
        user = self.find_by_username(exchange.username)
        try:
            if user is None or user.scram.get(exchange.mechanism) is not exchange.credential:
                exchange.credential = scram.fake_credential(exchange.mechanism,
                                                            exchange.username)
            server_final = exchange.verify(client_final)
        except scram.ScramError:
            throttle.failed(session.address, exchange.username)
            raise
        identity = self.log_in(session, user)
        throttle.succeeded(session.address, user.username)
        return identity, server_final

    def logout_user(self, session: Session) -> None:
        session.user_id = 0


async def _derive_scram(password: str) -> dict[str, scram.ScramCredential]:
    return await asyncio.get_running_loop().run_in_executor(None, scram.derive_all, password)


_DUMMY_HASH = hash_password("rill-no-such-user", cost=4)
