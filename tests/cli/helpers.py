"""Helpers for the CLI tests: the INSTALLED ``rill`` command run as a subprocess.

``cli`` wraps one live server (the ``rill_server`` fixture) and a private ``RILL_HOME``; its
``run(*args)`` starts ``rill`` with the server's address, logged in as the root user through
``RILL_TOKEN`` (a personal access token: a password login costs a bcrypt check per command;
``RILL_USERNAME``/``RILL_PASSWORD`` when the server cannot make tokens) unless ``login=False``,
and returns the finished process.
``sdk()`` opens an in-process SDK client for set-up and checks (much cheaper than a subprocess).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rill.client import Client
from rill.errors import RillError


def installed_rill() -> str:
    """The console script installed next to this interpreter (else the first on PATH)."""
    beside = Path(sys.executable).with_name("rill")
    if beside.exists():
        return str(beside)
    found = shutil.which("rill")
    assert found, "the rill console script is not installed"
    return found


RILL = installed_rill()


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.returncode == 0, self.stderr
        return json.loads(self.stdout)

    @property
    def error_lines(self) -> list[str]:
        """stderr lines other than password/username prompts."""
        prompts = ("Password", "Username", "Current password", "New password")
        return [line for line in self.stderr.splitlines() if line.strip() and not line.startswith(prompts)]


@dataclass
class Cli:
    address: str
    home: Path
    token: str | None = None  # root's personal access token ("" = the server has none)

    def env(self, login: bool = True, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("RILL_")}
        env.update(RILL_HOME=str(self.home), RILL_ADDRESS=self.address, NO_COLOR="1", TERM="dumb")
        if login and self.root_token():
            env.update(RILL_TOKEN=self.token)
        elif login:  # a server without token commands: the (slower) password login
            env.update(RILL_USERNAME="iggy", RILL_PASSWORD="iggy")
        env.update(extra)
        return env

    def run(self, *args: str, input: str | None = None, login: bool = True, ok: bool | None = True,
            **env: str) -> Result:
        """Run ``rill *args``; ``ok=True`` asserts success, ``False`` failure, ``None`` nothing."""
        done = subprocess.run(
            [RILL, *args], input=input if input is not None else "", capture_output=True, text=True,
            env=self.env(login, **env), timeout=60,
        )
        result = Result(done.returncode, done.stdout, done.stderr)
        if ok is True:
            assert result.returncode == 0, f"rill {' '.join(args)} failed:\n{result.stderr}"
        elif ok is False:
            assert result.returncode != 0, f"rill {' '.join(args)} succeeded:\n{result.stdout}"
        return result

    def run_many(self, *commands: tuple[str, ...] | dict[str, Any], ok: bool | None = None) -> list[Result]:
        """Independent commands side by side (error cases), results in order. A command is a
        tuple of arguments, or a dict ``{"args": (...), **run_options}``."""
        if any(not isinstance(c, dict) or c.get("login", True) for c in commands):
            self.root_token()  # once, before the threads

        def one(command: tuple[str, ...] | dict[str, Any]) -> Result:
            if isinstance(command, dict):
                options = dict(command)
                return self.run(*options.pop("args"), ok=ok, **options)
            return self.run(*command, ok=ok)

        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(one, commands))

    def root_token(self) -> str:
        """A personal access token of the root user (one password login per test)."""
        if self.token is None:
            with Client(self.address) as client:
                client.login_user("iggy", "iggy")
                try:
                    self.token = client.create_personal_access_token("cli-tests")
                except RillError:
                    self.token = ""
        return self.token

    def sdk(self) -> Client:
        """An SDK client logged in as root (use as a context manager)."""
        client = Client(self.address)
        client.connect()
        if self.root_token():
            client.login_with_personal_access_token(self.token)
        else:
            client.login_user("iggy", "iggy")
        return client


def assert_error_line(result: Result, text: str, exit_code: int = 1) -> None:
    """Exactly one stderr line ``error: ...`` containing ``text``, and the exit code."""
    assert result.returncode == exit_code, (result.returncode, result.stderr)
    assert len(result.error_lines) == 1, result.stderr
    line = result.error_lines[0]
    assert line.startswith("error: "), line
    assert text in line, line
