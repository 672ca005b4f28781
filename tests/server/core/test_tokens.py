"""Personal access tokens 41-44 through a real server over TCP (wire §3.3, §4.11, §6.1):
create, list, delete, log in with one; names, limits, expiry, the cleaner, and storage as
BLAKE3 only."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
import time

import pytest
from blake3 import blake3

from rill import errors
from rill.client import Client, UserStatus
from rill.protocol.permissions import GlobalPermissions, Permissions
from rill.protocol.primitives import EXPIRY_NEVER
from rill.server.auth.permissioner import Permissioner
from rill.server.config import ServerConfig
from rill.server.core.model import Session
from rill.server.core.state import CoreState
from rill.server.core.tokens import PersonalAccessTokenService
from rill.server.core.users import UserService
from rill.server.core.catalog import Catalog
from rill.server.core.memory_catalog import MemoryCatalog
from rill.server.storage.paths import DataPaths
from server_process import session

BASE_ENV = {
    "RILL_ROOT_PASSWORD_HASH_COST": "4",
    "RILL_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "none",  # tests that need it turn it on
}
HOUR_US = 3_600_000_000


@pytest.fixture
def server(rill_factory):
    return rill_factory(BASE_ENV).start()


def now_us() -> int:
    return time.time_ns() // 1000


def names(client: Client) -> list[str]:
    return [token.name for token in client.get_personal_access_tokens()]


def test_token_lifecycle(server, root):
    raw = root.create_personal_access_token("My Token")
    assert len(raw) == 68 and raw.endswith("=")
    assert len(base64.b64decode(raw, validate=True)) == 50
    assert [(t.name, t.expiry_at) for t in root.get_personal_access_tokens()] == [("my.token", 0)]
    with session(server, None) as other:
        assert other.login_with_personal_access_token(raw).user_id == 1
        assert other.get_streams() == []  # logged in as root, with root's rights
    root.delete_personal_access_token("my.token")
    assert root.get_personal_access_tokens() == []
    with session(server, None) as other:
        with pytest.raises(errors.ResourceNotFound) as raised:
            other.login_with_personal_access_token(raw)
        assert raised.value.code == 20


def test_every_token_is_new(root):
    tokens = {root.create_personal_access_token(f"token-{n}") for n in range(5)}
    assert len(tokens) == 5


def test_expiry(root):
    before = now_us()
    root.create_personal_access_token("hour", HOUR_US)
    after = now_us()
    root.create_personal_access_token("default", 0)
    root.create_personal_access_token("never", EXPIRY_NEVER)
    root.create_personal_access_token("far", EXPIRY_NEVER - 1)  # past u64: never
    listed = {t.name: t.expiry_at for t in root.get_personal_access_tokens()}
    assert before + HOUR_US <= listed["hour"] <= after + HOUR_US
    assert listed["default"] == listed["never"] == listed["far"] == 0


def test_tokens_are_listed_by_name(root):
    for name in ("zeta", "alpha", "Mid Way"):
        root.create_personal_access_token(name)
    assert names(root) == ["alpha", "mid.way", "zeta"]


def test_name_rules(root):
    root.create_personal_access_token("x" * 30)
    root.create_personal_access_token("abc")
    for bad in ("ab", "x" * 31, "bad/name", "tab\x00"):
        with pytest.raises(errors.InvalidPersonalAccessTokenName) as raised:
            root.create_personal_access_token(bad)
        assert raised.value.code == 50
    for duplicate in ("abc", "ABC"):
        with pytest.raises(errors.PersonalAccessTokenAlreadyExists) as raised:
            root.create_personal_access_token(duplicate)
        assert raised.value.code == 51
    assert names(root) == ["abc", "x" * 30]


def test_delete_rules(root):
    root.create_personal_access_token("Keep Me")
    with pytest.raises(errors.ResourceNotFound) as raised:
        root.delete_personal_access_token("unknown")
    assert raised.value.code == 20
    with pytest.raises(errors.InvalidPersonalAccessTokenName):
        root.delete_personal_access_token("no")
    assert names(root) == ["keep.me"]
    root.delete_personal_access_token("Keep Me")  # the name is normalised like at creation
    assert names(root) == []


def test_limit_per_user(rill_factory):
    server = rill_factory({**BASE_ENV, "RILL_PERSONAL_ACCESS_TOKEN_MAX_TOKENS_PER_USER": "3"})
    server.start()
    with session(server) as root:
        root.create_user("other", "other-pw")
        for n in range(3):
            root.create_personal_access_token(f"token-{n}")
        with pytest.raises(errors.PersonalAccessTokensLimitReached) as raised:
            root.create_personal_access_token("token-3")
        assert raised.value.code == 52
        assert names(root) == ["token-0", "token-1", "token-2"]
        with session(server, "other", "other-pw") as other:
            other.create_personal_access_token("token-0")  # the limit is per user
        root.delete_personal_access_token("token-1")
        root.create_personal_access_token("token-3")
        assert names(root) == ["token-0", "token-2", "token-3"]


def test_each_user_sees_and_deletes_only_its_own_tokens(server, root):
    root.create_user("alice", "alice-pw")
    root.create_user("bob", "bob-pw")
    with session(server, "alice", "alice-pw") as alice, session(server, "bob", "bob-pw") as bob:
        alice_token = alice.create_personal_access_token("build")
        bob.create_personal_access_token("build")  # same name, other user: fine
        bob.create_personal_access_token("laptop")
        assert names(alice) == ["build"]
        assert names(bob) == ["build", "laptop"]
        assert names(root) == []
        bob.delete_personal_access_token("build")
        with pytest.raises(errors.ResourceNotFound):
            bob.delete_personal_access_token("build")
        assert names(alice) == ["build"]
        with session(server, None) as client:
            assert client.login_with_personal_access_token(alice_token).user_id == 2


def test_login_failures_change_nothing(server, root):
    reader = Permissions(GlobalPermissions(read_streams=True))
    root.create_user("sleepy", "sleepy-pw", permissions=reader)
    with session(server, "sleepy", "sleepy-pw") as sleepy:
        sleepy_token = sleepy.create_personal_access_token("nap")
        expired = sleepy.create_personal_access_token("gone", 1)  # 1 µs: expired at once
    root.update_user("sleepy", status=UserStatus.INACTIVE)
    with session(server, None) as client:
        cases = [
            ("A" * 68, errors.ResourceNotFound),  # well-formed, unknown
            (expired, errors.PersonalAccessTokenExpired),  # 54, before the status check
            (sleepy_token, errors.UserInactive),  # 47
            ("", errors.InvalidPersonalAccessToken),  # 53: 1..100 bytes
            ("x" * 101, errors.InvalidPersonalAccessToken),
        ]
        for token, error in cases:
            with pytest.raises(error):
                client.login_with_personal_access_token(token)
            with pytest.raises(errors.Unauthenticated):
                client.get_streams()
        root.update_user("sleepy", status=UserStatus.ACTIVE)
        assert client.login_with_personal_access_token(sleepy_token).user_id == 2
        assert client.get_streams() == []
        with pytest.raises(errors.Unauthorized):
            client.create_stream("nope")  # the token carries the user's rights, no more
    assert server.is_running()


def test_token_login_replaces_the_session_user(server, root):
    root.create_user("plain", "plain-pw")
    with session(server, "plain", "plain-pw") as plain:
        token = plain.create_personal_access_token("mine")
    with session(server) as client:
        client.get_users()
        assert client.login_with_personal_access_token(token).user_id == 2
        with pytest.raises(errors.Unauthorized):
            client.get_users()
        assert names(client) == ["mine"]
        with pytest.raises(errors.ResourceNotFound):
            client.login_with_personal_access_token("B" * 68)
        assert client.get_user(2).username == "plain"  # a failed login keeps the session


def test_token_commands_need_a_login(server):
    with session(server, None) as client:
        for call in (
            client.get_personal_access_tokens,
            lambda: client.create_personal_access_token("token"),
            lambda: client.delete_personal_access_token("token"),
        ):
            with pytest.raises(errors.Unauthenticated):
                call()


def test_a_user_without_permissions_manages_its_own_tokens(server, root):
    root.create_user("plain", "plain-pw")
    with session(server, "plain", "plain-pw") as plain:
        plain.create_personal_access_token("one")
        assert names(plain) == ["one"]
        plain.delete_personal_access_token("one")
        assert names(plain) == []


def test_deleting_a_user_deletes_its_tokens(server, root):
    root.create_user("temp", "temp-pw")
    with session(server, "temp", "temp-pw") as temp:
        token = temp.create_personal_access_token("short.lived")
    root.delete_user("temp")
    root.create_user("temp", "temp-pw")  # a new user with the same name owns nothing
    with session(server, "temp", "temp-pw") as temp:
        assert names(temp) == []
        temp.create_personal_access_token("short.lived")  # the name is free again
    with session(server, None) as client:
        with pytest.raises(errors.ResourceNotFound):
            client.login_with_personal_access_token(token)


def test_the_cleaner_deletes_expired_tokens(rill_factory):
    env = {**BASE_ENV, "RILL_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "100 ms"}
    server = rill_factory(env).start()
    with session(server) as root:
        expired = root.create_personal_access_token("expired", 1)
        root.create_personal_access_token("forever")
        root.create_personal_access_token("later", HOUR_US)
        deadline = time.monotonic() + 30
        while "expired" in names(root):
            assert time.monotonic() < deadline, "the cleaner never ran"
            time.sleep(0.05)
        assert names(root) == ["forever", "later"]
        with session(server, None) as client:
            with pytest.raises(errors.ResourceNotFound):  # gone, not merely expired
                client.login_with_personal_access_token(expired)
    with sqlite3.connect(DataPaths(server.data_dir).metadata_db) as db:
        stored = sorted(name for (name,) in db.execute("SELECT name FROM personal_access_tokens"))
    assert stored == ["forever", "later"]


def test_only_the_blake3_hash_is_stored(server, root):
    raw = root.create_personal_access_token("hashed", HOUR_US)
    with sqlite3.connect(DataPaths(server.data_dir).metadata_db) as db:
        rows = list(db.execute("SELECT user_id, name, token_hash FROM personal_access_tokens"))
    assert rows == [(1, "hashed", blake3(raw.encode()).hexdigest())]
    contents = b"".join(path.read_bytes() for path in server.data_dir.rglob("*") if path.is_file())
    assert raw.encode() not in contents


# -- in process: a failed write to the metadata store changes nothing -----------------------


class FailingStore:
    """The catalog (the memory twin), except that the methods named in ``failing`` raise
    like a full disk."""

    def __init__(self, store: Catalog) -> None:
        self.store, self.failing = store, set()

    def __getattr__(self, name: str):
        if name in self.failing:  # the lookup of the method fails, so does the call
            raise sqlite3.OperationalError("disk I/O error")
        return getattr(self.store, name)


def test_a_failed_store_write_changes_nothing(tmp_path):
    config = ServerConfig()
    config.root.password_hash_cost = 4
    store = FailingStore(MemoryCatalog())
    state = CoreState(config, DataPaths(tmp_path), store, durability=None,
                      permissioner=Permissioner())
    users = UserService(state, lambda: (), lambda user_id: None)
    asyncio.run(users.load(create_root=True))
    tokens = PersonalAccessTokenService(state, users)
    root = Session(1, "127.0.0.1:1", "tcp", user_id=1)
    raw = asyncio.run(tokens.create_personal_access_token(root, "kept", 0))
    asyncio.run(tokens.create_personal_access_token(root, "stale", 1))
    store.failing = {"create_personal_access_token", "delete_personal_access_token",
                     "delete_personal_access_tokens"}
    with pytest.raises(sqlite3.OperationalError):
        asyncio.run(tokens.create_personal_access_token(root, "lost", 0))
    with pytest.raises(sqlite3.OperationalError):
        asyncio.run(tokens.delete_personal_access_token(root, "kept"))
    with pytest.raises(sqlite3.OperationalError):
        asyncio.run(tokens.delete_expired())
    listed = tokens.get_personal_access_tokens(root)
    assert [token.name for token in listed] == ["kept", "stale"]
    stranger = Session(2, "127.0.0.1:2", "tcp")
    assert tokens.login_with_personal_access_token(stranger, raw) == 1
    store.failing = set()
    assert asyncio.run(tokens.delete_expired()) == 1
    assert [row.name for row in store.store.load_personal_access_tokens()] == ["kept"]
    store.store.close()


def test_tokens_another_node_made_or_deleted_are_applied(tmp_path):
    """``core.applying``: a cluster catalog's ``TokenStored`` / ``TokenDeleted`` (another
    node's change) reach the token service as its own confirmation would."""
    from rill.server.core import applying
    from rill.server.core.catalog import PersonalAccessTokenRow
    from rill.server.core.consumer_groups import ConsumerGroupService, NoMembership
    from rill.server.core.tokens import TokenDeleted, TokenStored, hash_token, new_token

    config = ServerConfig()
    config.root.password_hash_cost = 4
    state = CoreState(config, DataPaths(tmp_path), MemoryCatalog(), durability=None,
                      permissioner=Permissioner())
    users = UserService(state, lambda: (), lambda user_id: None)
    asyncio.run(users.load(create_root=True))
    tokens = PersonalAccessTokenService(state, users)
    groups = ConsumerGroupService(state, NoMembership())
    raw = new_token()
    row = PersonalAccessTokenRow(1, "elsewhere", hash_token(raw), 0)
    applying.apply(state, groups, users, TokenStored(row), tokens)
    assert tokens.login_with_personal_access_token(Session(2, "127.0.0.1:2", "tcp"), raw) == 1
    assert [t.name for t in tokens.get_personal_access_tokens(
        Session(1, "127.0.0.1:1", "tcp", user_id=1))] == ["elsewhere"]
    # a token of a user this node does not hold is not applied
    applying.apply(state, groups, users, TokenStored(
        PersonalAccessTokenRow(9, "orphan", hash_token(new_token()), 0)), tokens)
    assert 9 not in tokens.by_user
    applying.apply(state, groups, users, TokenDeleted(1, "elsewhere"), tokens)
    with pytest.raises(errors.ResourceNotFound):
        tokens.login_with_personal_access_token(Session(3, "127.0.0.1:3", "tcp"), raw)
