"""Credentials: the password prompt, ``rill login``/``logout`` and saved contexts."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import time

from rill.protocol.permissions import GlobalPermissions, Permissions

from .helpers import RILL, assert_error_line

PASSWORD = "pw-Carol-987"


def make_reader(cli) -> None:
    with cli.sdk() as client:
        client.create_stream("orders")
        client.create_user("carol", PASSWORD, permissions=Permissions(GlobalPermissions(read_streams=True)))


def _prompted_from_a_pipe(cli) -> None:
    result, wrong = cli.run_many(
        {"args": ("-u", "carol", "--json", "stream", "list"), "input": PASSWORD + "\n", "login": False},
        {"args": ("-u", "carol", "stream", "list"), "input": "not-it\n", "login": False},
    )
    assert [s["name"] for s in result.json()] == ["orders"]
    assert "Password for carol" in result.stderr
    assert PASSWORD not in result.stdout and PASSWORD not in result.stderr
    assert_error_line(wrong, "(42 invalid_credentials)")


def _read_until(fd: int, marker: bytes, deadline: float) -> bytes:
    seen = b""
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk
    return seen


def _drain(fd: int) -> bytes:
    seen = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            return seen
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the other side of the pty is closed
            return seen
        if not chunk:
            return seen
        seen += chunk


def test_missing_password_is_prompted_with_hidden_input(cli):
    make_reader(cli)
    _prompted_from_a_pipe(cli)

    # on a terminal: the prompt turns echo off, and the password shows nowhere
    terminal, stdin = pty.openpty()
    process = subprocess.Popen(
        [RILL, "-u", "carol", "--json", "stream", "list"], stdin=stdin, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=cli.env(login=False), start_new_session=True,  # no controlling tty
    )
    os.close(stdin)
    try:
        # the space after the colon is written once echo is off
        prompt = _read_until(process.stderr.fileno(), b"Password for carol: ", time.monotonic() + 30)
        assert b"Password for carol: " in prompt, prompt
        os.write(terminal, PASSWORD.encode() + b"\n")
        out, err = process.communicate(timeout=30)
        shown = _drain(terminal)
    finally:
        process.kill()
        os.close(terminal)
    assert process.returncode == 0, err
    assert [s["name"] for s in json.loads(out)] == ["orders"]
    assert PASSWORD.encode() not in shown + out + err + prompt


def test_login_saves_a_token_context_and_logout_removes_it(cli):
    login = cli.run("-u", "iggy", "login", input="iggy\n", login=False)
    assert "context 'default' saved with token" in login.stdout

    saved = cli.home / "contexts.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    context = json.loads(saved.read_text())["contexts"]["default"]
    assert context["address"] == cli.address and context["username"] == "iggy"
    assert "password" not in context and context["token_name"].startswith("rill-cli-")
    with cli.sdk() as client:
        assert context["token_name"] in [t.name for t in client.get_personal_access_tokens()]

    # a command without any credentials uses the saved context (even the address)
    assert cli.run("--json", "stream", "list", login=False, RILL_ADDRESS="").json() == []
    listed = cli.run("--json", "context", "list", login=False).json()
    assert listed == [{"name": "default", "current": True, "address": cli.address, "transport": "tcp",
                       "username": "iggy", "credential": "token"}]

    logout = cli.run("logout", login=False)
    assert f"token {context['token_name']} deleted" in logout.stdout
    with cli.sdk() as client:
        assert context["token_name"] not in [t.name for t in client.get_personal_access_tokens()]
    assert "token" not in json.loads(saved.read_text())["contexts"]["default"]
    assert_error_line(cli.run("stream", "list", login=False, ok=False), "(40 unauthenticated)")


def test_save_password_and_switch_contexts(cli):
    cli.run("--context", "lab", "-u", "iggy", "-p", "iggy", "login", "--save-password", login=False)
    data = json.loads((cli.home / "contexts.json").read_text())
    assert data["current"] == "lab" and data["contexts"]["lab"]["password"] == "iggy"

    cli.run("context", "use", "default", login=False)
    assert_error_line(cli.run("stream", "list", login=False, ok=False), "(40 unauthenticated)")
    assert cli.run("--context", "lab", "--json", "stream", "list", login=False).json() == []

    unknown = cli.run("--context", "nope", "stream", "list", login=False, ok=False)
    assert_error_line(unknown, "no context named 'nope'", exit_code=2)
