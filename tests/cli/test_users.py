"""``rill user ...`` against a live server. Needs the server's user commands (31-37)."""

from __future__ import annotations

import socket
import struct

from rill import errors
from rill.client import Client
from rill.protocol.iggy.commands.users import LoginUser

from .helpers import Cli, assert_error_line


def test_user_verbs(cli):
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_topic("orders", "eu")

    created = cli.run("--json", "user", "create", "bob", "--password", "secret-1", "--global", "read_streams",
                      "--stream", "1:read_stream,poll_messages", "--topic", "1:1:send_messages").json()
    assert (created["username"], created["status"]) == ("bob", "active")
    permissions = created["permissions"]
    assert permissions["global_permissions"]["read_streams"] is True
    assert permissions["global_permissions"]["manage_users"] is False
    assert permissions["streams"]["1"]["poll_messages"] is True
    assert permissions["streams"]["1"]["topics"]["1"]["send_messages"] is True

    listed = cli.run("--json", "user", "list").json()
    assert [(u["id"], u["username"]) for u in listed] == [(1, "iggy"), (created["id"], "bob")]
    table = cli.run("user", "get", "bob").stdout
    assert "read_stream, poll_messages" in table and "Stream 1 topic 1" in table

    # passwords typed at the prompts: current, then new (stdin is a pipe: one line each)
    changed = cli.run("user", "password", "bob", input="secret-1\nsecret-2\n")
    assert "secret" not in changed.stdout
    cli.run("user", "permissions", "bob", "--global", "all")
    cli.run("user", "update", "bob", "--name", "robert", "--status", "inactive")

    with cli.sdk() as client:
        details = client.get_user("robert")
        assert details.user.status == 2 and details.permissions.global_permissions.manage_servers
    cli.run("user", "update", "robert", "--status", "active")
    with Client(cli.address) as bob:
        assert bob.login_user("robert", "secret-2").user_id == created["id"]

    cli.run("user", "delete", "robert")
    with cli.sdk() as client:
        assert [user.username for user in client.get_users()] == ["iggy"]


def test_password_prompt_and_user_errors(cli):
    prompted, missing, root, duplicate, bad = cli.run_many(
        {"args": ("user", "create", "carol"), "input": "pw-Carol-987\n"},
        ("user", "get", "nobody"),
        ("user", "delete", "iggy"),
        ("user", "create", "iggy", "--password", "whatever"),
        ("user", "permissions", "iggy", "--global", "fly"),
    )
    assert "user 2 'carol' created" in prompted.stdout
    assert "pw-Carol-987" not in prompted.stdout + prompted.stderr
    with Client(cli.address) as carol:
        assert carol.login_user("carol", "pw-Carol-987").user_id == 2

    assert_error_line(missing, "user nobody was not found (20 resource_not_found)")
    assert_error_line(root, "cannot delete user with name iggy (48 cannot_delete_user)")
    assert_error_line(duplicate, "(46 user_already_exists)")
    assert bad.returncode == 2 and "fly" in bad.stderr


def root_login_from(address: str, source: str, password: str = "iggy") -> int:
    """LOGIN_USER as root from ``source`` (any 127/8 address is this machine): the status."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0)) as sock:
        sock.sendall(LoginUser("iggy", password).to_frame())
        reply = b""
        while len(reply) < 8:
            chunk = sock.recv(8 - len(reply))
            assert chunk, "closed"
            reply += chunk
        return struct.unpack("<II", reply)[0]


def test_user_unlock_lets_a_locked_user_in_at_once(rill_factory, tmp_path):
    server = rill_factory({"RILL_LOGIN_THROTTLE_MAX_FAILURES_PER_USER": "3",
                           "RILL_LOGIN_THROTTLE_LOCK_TIME": "10 min"}).start()
    cli = Cli(server.address, tmp_path / "rill-home")
    cli.run("user", "create", "bob", "--password", "bob-secret")
    for source in ("127.0.0.3", "127.0.0.4", "127.0.0.5"):  # root guessed from three addresses
        assert root_login_from(server.address, source, "wrong") == errors.InvalidCredentials.code
    assert root_login_from(server.address, "127.0.0.6") == errors.LoginThrottled.code

    refused = cli.run("user", "unlock", "iggy", login=False, ok=False,
                      RILL_USERNAME="bob", RILL_PASSWORD="bob-secret")
    assert_error_line(refused, "nauthorized")
    assert root_login_from(server.address, "127.0.0.6") == errors.LoginThrottled.code

    done = cli.run("user", "unlock", "iggy")
    assert "user iggy unlocked" in done.stdout
    assert root_login_from(server.address, "127.0.0.6") == 0

