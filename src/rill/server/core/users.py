"""Users and sessions: the root user at first start, login and logout (wire §3.2, §6.1).

Passwords are kept as bcrypt hashes only. Login looks the username up exactly; a wrong
password and an unknown user both get 42, an inactive user 47.
"""

from __future__ import annotations

from dataclasses import dataclass

from rill import errors
from rill.protocol.commands.users import LoginUser, LogoutUser
from rill.protocol.permissions import Permissions
from rill.protocol.primitives import UserStatus
from rill.protocol.responses.users import IdentityInfo
from rill.server.auth.passwords import hash_password, verify_password_async
from rill.server.core.model import Session
from rill.server.core.state import CoreState
from rill.server.storage.metadata import UserRow

ROOT_USER_ID = 1


@dataclass(eq=False)
class User:
    id: int
    username: str
    password_hash: str
    status: UserStatus
    permissions: Permissions | None
    created_at: int


def user_from_row(row: UserRow) -> User:
    permissions = Permissions.from_bytes(row.permissions) if row.permissions else None
    return User(row.id, row.username, row.password_hash, UserStatus(row.status), permissions,
                row.created_at)


class UserService:
    def __init__(self, state: CoreState) -> None:
        self.state = state
        self.users: dict[int, User] = {}

    def load(self) -> None:
        for row in self.state.store.load_users():
            self._remember(user_from_row(row))
        if not self.users:
            self._create_root()

    def _remember(self, user: User) -> None:
        self.users[user.id] = user
        self.state.permissioner.set_user(user.id, user.permissions)

    def _create_root(self) -> None:
        root = self.state.config.root
        user = User(
            id=ROOT_USER_ID,
            username=root.username,
            password_hash=hash_password(root.password),
            status=UserStatus.ACTIVE,
            permissions=Permissions.root(),
            created_at=self.state.clock(),
        )
        self.state.store.create_user(
            UserRow(user.id, user.username, user.password_hash, int(user.status),
                    user.permissions.to_bytes(), user.created_at)
        )
        self._remember(user)

    def find_by_username(self, username: str) -> User | None:
        for user in self.users.values():
            if user.username == username:
                return user
        return None

    async def login_user(self, session: Session, command: LoginUser) -> IdentityInfo:
        user = self.find_by_username(command.username)
        password_hash = user.password_hash if user is not None else _DUMMY_HASH
        # the hash is checked even for unknown users so timing does not reveal usernames
        valid = await verify_password_async(command.password, password_hash)
        if user is None or not valid:
            raise errors.InvalidCredentials()
        if user.status != UserStatus.ACTIVE:
            raise errors.UserInactive()
        session.user_id = user.id
        return IdentityInfo(user.id)

    def logout_user(self, session: Session, command: LogoutUser) -> None:
        session.user_id = 0


_DUMMY_HASH = hash_password("rill-no-such-user", cost=4)
