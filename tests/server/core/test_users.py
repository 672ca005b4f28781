"""Users 31-39 through a real server over TCP (wire §3.2, §6.1): create, read, update, delete,
permissions, passwords, login rules, and what bad input answers (it changes nothing)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from rill import errors
from rill.client import AsyncClient, Client, UserStatus
from rill.protocol.permissions import GlobalPermissions, Permissions, StreamPermissions
from rill.server.auth.passwords import verify_password
from rill.server.auth.permissioner import Action, Permissioner
from rill.server.config import ServerConfig
from rill.server.core.model import Session
from rill.server.core.state import CoreState
from rill.server.core.users import UserService
from rill.server.core.catalog import Catalog
from rill.server.core.memory_catalog import MemoryCatalog
from rill.server.storage.paths import DataPaths
from server_process import session

FAST_HASHES = {"RILL_ROOT_PASSWORD_HASH_COST": "4"}


@pytest.fixture
def server(rill_factory):
    return rill_factory(FAST_HASHES).start()


def readers() -> Permissions:
    return Permissions(GlobalPermissions(read_users=True))


def listing(client: Client) -> list[tuple[int, str, int]]:
    return [(u.id, u.username, u.status) for u in client.get_users()]


def test_user_lifecycle(root):
    permissions = Permissions(GlobalPermissions(read_streams=True),
                              {7: StreamPermissions(send_messages=True)})
    created = root.create_user("New User", "secret-1", UserStatus.ACTIVE, permissions)
    assert (created.id, created.username) == (2, "new.user")  # normalised (wire §2.8)
    assert (created.user.status, created.permissions) == (UserStatus.ACTIVE, permissions)
    assert created.user.created_at > 0
    assert root.get_user(2) == created
    assert root.get_user("new.user") == created
    assert root.get_user("New User") is None  # lookups by name are exact
    assert listing(root) == [(1, "iggy", 1), (2, "new.user", 1)]

    root.update_user(2, username="Renamed", status=UserStatus.INACTIVE)
    renamed = root.get_user(2)
    assert (renamed.username, renamed.user.status) == ("renamed", UserStatus.INACTIVE)
    root.update_user(2, status=UserStatus.ACTIVE)  # the name is left alone
    assert root.get_user(2).username == "renamed"
    root.update_permissions(2, None)
    assert root.get_user(2).permissions is None
    root.update_permissions("renamed", permissions)
    assert root.get_user(2).permissions == permissions

    root.delete_user("renamed")
    assert root.get_user(2) is None  # get-single: empty OK when not found
    assert listing(root) == [(1, "iggy", 1)]


def test_user_ids_are_max_plus_one_and_not_reused_while_running(root):
    assert root.create_user("alpha", "password").id == 2
    assert root.create_user("beta", "password").id == 3
    root.delete_user(3)
    assert root.create_user("gamma", "password").id == 4
    root.delete_user(2)
    assert root.create_user("delta", "password").id == 5


def test_create_user_rejects_bad_input_and_changes_nothing(server, root):
    root.create_user("taken", "password")
    before = listing(root)
    bad = [
        ("ab", "password", errors.InvalidUsername),  # shorter than 3
        ("x" * 51, "password", errors.InvalidUsername),  # longer than 50
        ("bad/name", "password", errors.InvalidUsername),  # charset
        ("fine", "pw", errors.InvalidPassword),  # shorter than 3
        ("fine", "p" * 101, errors.InvalidPassword),  # longer than 100 bytes
        ("fine", "é" * 51, errors.InvalidPassword),  # 102 UTF-8 bytes
        ("taken", "password", errors.UserAlreadyExists),
        ("TAKEN", "password", errors.UserAlreadyExists),  # normalised before the check
    ]
    for username, password, error in bad:
        with pytest.raises(error):
            root.create_user(username, password)
    assert listing(root) == before
    # the limits themselves are fine
    assert root.create_user("abc", "é" * 50).username == "abc"  # 100 bytes
    assert root.create_user("y" * 50, "pwd").username == "y" * 50
    assert server.is_running()


def test_passwords_longer_than_bcrypt_reads_work(server, root):
    long = "é" * 50  # 100 UTF-8 bytes, past bcrypt's 72
    root.create_user("long", long)
    with session(server, "long", long) as client:
        client.change_password("long", long, "p" * 100)
    with session(server, None) as client:
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("long", long)
        assert client.login_user("long", "p" * 100).user_id == 2
    assert server.is_running()


def test_root_cannot_be_deleted_nor_lose_permissions(root):
    me = root.get_user(1)
    assert (me.username, me.permissions) == ("iggy", Permissions.root())
    assert root.get_user("iggy") == me
    with pytest.raises(errors.CannotDeleteUser):  # 48
        root.delete_user(1)
    with pytest.raises(errors.CannotChangePermissions):  # 49
        root.update_permissions("iggy", None)
    assert root.get_user(1) == me


def test_unknown_users_answer_resource_not_found(root):
    for call in (
        lambda: root.delete_user(42),
        lambda: root.update_user("nobody", status=UserStatus.INACTIVE),
        lambda: root.update_permissions(42, None),
        lambda: root.change_password("nobody", "password", "password2"),
    ):
        with pytest.raises(errors.ResourceNotFound) as raised:
            call()
        assert raised.value.code == 20
    assert root.get_user(42) is None


def test_update_user_rules(root):
    root.create_user("first", "password")
    root.create_user("second", "password")
    with pytest.raises(errors.UserAlreadyExists):
        root.update_user("second", username="First")
    with pytest.raises(errors.InvalidUsername):
        root.update_user("second", username="no")
    root.update_user("second", username="second")  # its own name is not a duplicate
    assert [u.username for u in root.get_users()] == ["iggy", "first", "second"]


def test_login_rules(server, root):
    root.create_user("Alice", "alice-pw")
    root.create_user("sleepy", "sleepy-pw", status=UserStatus.INACTIVE)
    with session(server, None) as client:
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("nobody", "alice-pw")
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("alice", "wrong")
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("Alice", "alice-pw")  # login looks the name up exactly
        with pytest.raises(errors.UserInactive) as raised:
            client.login_user("sleepy", "sleepy-pw")
        assert raised.value.code == 47
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("sleepy", "wrong")  # the password is checked first
        with pytest.raises(errors.Unauthenticated):
            client.get_users()  # none of that logged anybody in
        assert client.login_user("alice", "alice-pw").user_id == 2
        root.update_user("sleepy", status=UserStatus.ACTIVE)
        assert client.login_user("sleepy", "sleepy-pw").user_id == 3


def test_a_second_login_replaces_the_user(server, root):
    root.create_user("plain", "plain-pw")
    with session(server) as client:
        client.get_users()  # root may
        assert client.login_user("plain", "plain-pw").user_id == 2
        with pytest.raises(errors.Unauthorized):
            client.get_users()
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("iggy", "wrong")
        assert client.get_user(2).username == "plain"  # a failed login keeps the session
        with pytest.raises(errors.Unauthorized):
            client.get_users()
        client.logout_user()
        with pytest.raises(errors.Unauthenticated):
            client.get_users()


def test_what_a_user_without_permissions_may_do(server, root):
    root.create_user("plain", "plain-pw")
    with session(server, "plain", "plain-pw") as plain:
        assert plain.get_user(2).username == "plain"  # oneself, by id
        assert plain.get_user("plain").id == 2  # and by name
        assert plain.get_user(1) is None  # others: empty OK
        assert plain.get_user("nobody") is None
        with pytest.raises(errors.Unauthorized):
            plain.get_users()
        with pytest.raises(errors.Unauthorized):
            plain.create_user("other", "password")
        with pytest.raises(errors.Unauthorized):
            plain.update_user(2, username="plainer")  # not even oneself
        with pytest.raises(errors.Unauthorized):
            plain.update_permissions(2, Permissions.root())
        with pytest.raises(errors.Unauthorized):
            plain.delete_user(2)
        with pytest.raises(errors.Unauthorized):
            plain.change_password(1, "iggy", "hacked")
        with pytest.raises(errors.Unauthorized):
            plain.delete_user(99)  # permission first: no probing for users
        # its own password, always
        with pytest.raises(errors.InvalidCredentials):
            plain.change_password(2, "wrong", "plain-pw-2")
        with pytest.raises(errors.InvalidPassword):
            plain.change_password(2, "plain-pw", "no")
        plain.change_password("plain", "plain-pw", "plain-pw-2")
    assert root.get_user(2).permissions is None
    with session(server, None) as client:
        with pytest.raises(errors.InvalidCredentials):
            client.login_user("plain", "plain-pw")
        client.login_user("plain", "plain-pw-2")
        with pytest.raises(errors.Unauthorized):
            client.change_password(1, "iggy", "iggy")


def test_read_and_manage_users(server, root):
    root.create_user("reader", "reader-pw", permissions=readers())
    managers = Permissions(GlobalPermissions(manage_users=True))
    root.create_user("manager", "manager-pw", permissions=managers)
    root.create_user("victim", "victim-pw")
    with session(server, "reader", "reader-pw") as reader:
        assert reader.get_user(1).username == "iggy"
        assert [u.id for u in reader.get_users()] == [1, 2, 3, 4]
        with pytest.raises(errors.Unauthorized):
            reader.update_user("victim", status=UserStatus.INACTIVE)
    with session(server, "manager", "manager-pw") as manager:
        assert manager.get_user(1).username == "iggy"
        manager.change_password("victim", "victim-pw", "victim-pw-2")  # needs the current one
        with pytest.raises(errors.InvalidCredentials):
            manager.change_password("victim", "victim-pw", "victim-pw-3")
        created = manager.create_user("helper", "helper-pw", permissions=readers())
        manager.update_permissions(created.id, None)
        manager.update_user("helper", username="aide")
        manager.delete_user("aide")
        with pytest.raises(errors.CannotDeleteUser):
            manager.delete_user(1)
    with session(server, "victim", "victim-pw-2"):
        pass


def test_permission_changes_apply_to_live_sessions(server, root):
    root.create_user("late", "late-pw")
    with session(server, "late", "late-pw") as late:
        with pytest.raises(errors.Unauthorized):
            late.get_streams()
        root.update_permissions("late", Permissions(GlobalPermissions(read_streams=True)))
        assert late.get_streams() == []
        root.update_permissions("late", None)
        with pytest.raises(errors.Unauthorized):
            late.get_streams()


def test_deleting_or_deactivating_a_user_logs_its_sessions_out(server, root):
    root.create_user("doomed", "doomed-pw", permissions=readers())
    root.create_user("paused", "paused-pw", permissions=readers())
    with session(server, "doomed", "doomed-pw") as doomed, \
            session(server, "paused", "paused-pw") as paused:
        assert len(doomed.get_users()) == 3
        root.delete_user("doomed")
        with pytest.raises(errors.Unauthenticated):
            doomed.get_users()
        doomed.ping()  # the connection itself stays up
        with pytest.raises(errors.InvalidCredentials):
            doomed.login_user("doomed", "doomed-pw")
        root.update_user("paused", status=UserStatus.INACTIVE)
        with pytest.raises(errors.Unauthenticated):
            paused.get_users()
        with pytest.raises(errors.UserInactive):
            paused.login_user("paused", "paused-pw")
    assert root.get_users()[-1].username == "paused"  # root's own session is untouched


def test_unauthenticated_user_commands(server, root):
    root.create_user("someone", "someone-pw")
    with session(server, None) as client:
        assert client.get_user(1) is None  # get-single: empty OK
        for call in (
            client.get_users,
            lambda: client.create_user("intruder", "password"),
            lambda: client.delete_user(2),
            lambda: client.update_user(2, username="x" * 5),
            lambda: client.update_permissions(2, Permissions.root()),
            lambda: client.change_password(2, "someone-pw", "password"),
        ):
            with pytest.raises(errors.Unauthenticated):
                call()
        client.logout_user()  # OK even when not logged in
    assert listing(root) == [(1, "iggy", 1), (2, "someone", 1)]
    assert root.get_user(2).permissions is None


def test_concurrent_creates_of_one_name_make_one_user(server):
    async def scenario() -> list[object]:
        clients = [AsyncClient(server.address, reconnect=False) for _ in range(4)]
        try:
            for client in clients:
                await client.connect()
                await client.login_user("iggy", "iggy")
            return await asyncio.gather(
                *(client.create_user("twin", f"password-{n}") for n, client in enumerate(clients)),
                return_exceptions=True,
            )
        finally:
            for client in clients:
                await client.close()

    results = asyncio.run(scenario())
    created = [r for r in results if not isinstance(r, BaseException)]
    assert len(created) == 1
    assert all(isinstance(r, errors.UserAlreadyExists) for r in results if r not in created)
    with session(server) as root:
        assert [u.username for u in root.get_users()] == ["iggy", "twin"]


def test_passwords_are_stored_as_bcrypt_hashes_only(server, root):
    root.create_user("hashed", "plain-text-password")
    root.change_password(1, "iggy", "another-plain-password")
    with sqlite3.connect(DataPaths(server.data_dir).metadata_db) as db:
        rows = dict(db.execute("SELECT username, password_hash FROM users"))
    assert set(rows) == {"iggy", "hashed"}
    assert all(value.startswith("$2b$04$") for value in rows.values())  # configured cost
    contents = b"".join(path.read_bytes() for path in server.data_dir.rglob("*") if path.is_file())
    assert b"plain-text-password" not in contents
    assert b"another-plain-password" not in contents


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
    root = Session(1, "127.0.0.1:1", "tcp", user_id=1)
    other = Session(2, "127.0.0.1:2", "tcp")
    users = UserService(state, lambda: [root, other], lambda user_id: None)
    asyncio.run(users.load(create_root=True))

    async def scenario() -> None:
        await users.create_user(root, "kept", "kept-pw", UserStatus.ACTIVE, readers())
        await users.login_user(other, "kept", "kept-pw")
        store.failing = {"create_user", "update_user", "update_permissions", "change_password",
                         "delete_user"}
        with pytest.raises(sqlite3.OperationalError):
            await users.create_user(root, "lost", "lost-pw", UserStatus.ACTIVE, None)
        with pytest.raises(sqlite3.OperationalError):
            await users.change_password(root, 2, "kept-pw", "pw2")
        for change in (lambda: users.update_user(root, 2, "renamed", UserStatus.INACTIVE),
                       lambda: users.update_permissions(root, 2, None),
                       lambda: users.delete_user(root, 2)):
            with pytest.raises(sqlite3.OperationalError):
                await change()

    asyncio.run(scenario())
    assert sorted(users.users) == [1, 2]
    kept = users.users[2]
    assert (kept.username, kept.status, kept.permissions) == ("kept", UserStatus.ACTIVE, readers())
    assert state.permissioner.is_allowed(2, Action.READ_USERS)
    assert not state.permissioner.is_allowed(3, Action.READ_USERS)
    assert other.user_id == 2  # still logged in
    assert [row.username for row in store.store.load_users()] == ["iggy", "kept"]
    assert verify_password("kept-pw", kept.password_hash)
    store.store.close()
