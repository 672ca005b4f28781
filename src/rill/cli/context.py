"""Where the CLI connects and as whom: global options, saved login contexts, the session.

Owns: ``Settings`` (the global options, kept on ``ctx.obj``), ``ContextStore`` (the saved
contexts file) and ``session()``, the one way a verb gets a connected, logged-in ``Client``.

Saved contexts live in one JSON file, ``$RILL_HOME/contexts.json`` (default
``$XDG_CONFIG_HOME/rill/contexts.json``, i.e. ``~/.config/rill/contexts.json``), written
atomically with mode 0600 in a 0700 directory::

    {"current": "default",
     "contexts": {"default": {"address": "127.0.0.1:8090", "transport": "tcp",
                              "username": "iggy", "token": "...", "token_name": "rill-cli-1a2b3c4d"}}}

A context holds an address, a transport and at most one credential: a personal access token
(what ``rill login`` stores by default: it creates a token on the server, and ``rill logout``
deletes it again), a bare username (``rill login --no-token``: the password is prompted at
each use), or -- only with ``rill login --save-password`` -- a plain password.

Precedence for each setting: command-line option, then environment variable (``RILL_ADDRESS``,
``RILL_USERNAME``, ``RILL_PASSWORD``, ``RILL_TOKEN``, ``RILL_CONTEXT``), then the selected
context (``--context``, else the file's current one), then the default (127.0.0.1:8090 over
tcp, not logged in). Credentials never mix sources: ``--username``/``--token`` replace the
context's credential entirely. A username without a password prompts for it on stderr with
hidden input (a non-terminal stdin is read as one line, so scripts can pipe it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from rill.cli.failures import EXIT_USAGE, fail
from rill.cli.output import Output

if TYPE_CHECKING:  # typer is imported by the verbs (and a prompt), not by the fast path
    import typer

    from rill.client import Client

DEFAULT_ADDRESS = "127.0.0.1:8090"
DEFAULT_ADDRESSES = {"tcp": DEFAULT_ADDRESS, "quic": "127.0.0.1:8080", "http": "127.0.0.1:3000"}
DEFAULT_TRANSPORT = "tcp"
DEFAULT_CONTEXT = "default"
TRANSPORTS = ("tcp", "quic", "http")
CONTEXT_FIELDS = ("address", "transport", "username", "password", "token", "token_name", "ca_file",
                  "insecure")


def rill_home() -> Path:
    """The directory of the CLI's own files."""
    home = os.environ.get("RILL_HOME")
    if home:
        return Path(home).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser() / "rill"


class ContextStore:
    """The saved contexts file; every change is written back at once."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or rill_home() / "contexts.json"
        self.current = DEFAULT_CONTEXT
        self.contexts: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.current = str(data.get("current") or DEFAULT_CONTEXT)
                self.contexts = {str(k): dict(v) for k, v in dict(data.get("contexts", {})).items()}
            except (ValueError, TypeError, AttributeError) as error:
                raise fail(f"cannot read {self.path}: {error}") from None

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.contexts.get(name, {}))

    def names(self) -> list[str]:
        names = set(self.contexts) | {DEFAULT_CONTEXT}
        return sorted(names)

    def put(self, name: str, values: dict[str, Any]) -> None:
        self.contexts[name] = {k: v for k, v in values.items() if k in CONTEXT_FIELDS and v is not None}
        self.save()

    def remove(self, name: str) -> None:
        self.contexts.pop(name, None)
        if self.current == name:
            self.current = DEFAULT_CONTEXT
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps({"current": self.current, "contexts": self.contexts}, indent=2)
        import tempfile

        handle, temporary = tempfile.mkstemp(prefix=".contexts-", dir=self.path.parent)
        try:
            os.fchmod(handle, 0o600)
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text + "\n")
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


@dataclass
class Settings:
    """The global options as given; ``resolve()`` merges them with the saved context."""

    transport: str | None = None
    address: str | None = None
    username: str | None = None
    password: str | None = None
    token: str | None = None
    context: str | None = None
    json_mode: bool = False
    quiet: bool = False
    ca_file: str | None = None  # trust this certificate (QUIC, TLS)
    insecure: bool | None = None  # do not verify the server's certificate
    # what the command line named (stream, topic, ...): fills the placeholders of error lines
    subject: dict[str, Any] = field(default_factory=dict)
    _store: ContextStore | None = None

    @property
    def output(self) -> Output:
        return Output(self.json_mode, self.quiet)

    @property
    def store(self) -> ContextStore:
        if self._store is None:
            self._store = ContextStore()
        return self._store

    @property
    def context_name(self) -> str:
        return self.context or self.store.current

    def saved(self) -> dict[str, Any]:
        """The selected context's values (empty when none is saved)."""
        name = self.context_name
        if self.context and name not in self.store.contexts and name != DEFAULT_CONTEXT:
            raise fail(f"no context named {name!r} (see 'rill context list')", EXIT_USAGE)
        return self.store.get(name)

    def resolve(self) -> dict[str, Any]:
        """address, transport and the credential to use (one of token / username+password)."""
        saved = self.saved()
        transport = (self.transport or saved.get("transport") or DEFAULT_TRANSPORT).lower()
        saved_address = saved.get("address") if (saved.get("transport") or DEFAULT_TRANSPORT) == transport else None
        resolved: dict[str, Any] = {
            "address": self.address or saved_address or DEFAULT_ADDRESSES.get(transport, DEFAULT_ADDRESS),
            "transport": transport,
            "username": None, "password": None, "token": None, "from_context": False,
            "ca_file": self.ca_file or saved.get("ca_file"),
            "insecure": bool(self.insecure if self.insecure is not None else saved.get("insecure")),
        }
        if self.token or self.username:
            resolved.update(token=self.token, username=self.username, password=self.password)
            if self.token and self.username:
                raise fail("give either --username or --token, not both", EXIT_USAGE)
        elif saved.get("token") or saved.get("username"):
            resolved.update(
                token=saved.get("token"), username=saved.get("username"),
                password=saved.get("password"), from_context=True,
            )
            if resolved["token"]:
                resolved["username"] = None
        return resolved

    def about(self, **values: Any) -> None:
        """Record what the verb works on, for error lines (``None`` values are skipped)."""
        self.subject.update({key: value for key, value in values.items() if value is not None})


def settings(ctx: typer.Context) -> Settings:
    obj = ctx.find_object(Settings)
    if obj is None:  # a verb invoked without the callback (tests calling functions directly)
        obj = Settings()
        ctx.obj = obj
    return obj


def read_secret(prompt: str, confirm: bool = False) -> str:
    """Hidden input on a terminal; one line from a piped stdin. The prompt goes to stderr."""
    if sys.stdin.isatty():
        import typer

        return str(typer.prompt(prompt, hide_input=True, confirmation_prompt=confirm, err=True))
    sys.stderr.write(f"{prompt}: ")
    sys.stderr.flush()
    line = sys.stdin.readline()
    sys.stderr.write("\n")
    if not line:
        raise fail(f"no input for {prompt.lower()} (stdin is closed)", EXIT_USAGE)
    return line.rstrip("\r\n")


def connect(options: Settings, resolved: dict[str, Any]) -> Client:
    """A connected Client (not logged in) for the resolved address and transport."""
    from rill.client import Client
    from rill.client.transport import transport_factory

    transport = resolved["transport"]
    try:
        transport_factory(transport)
    except ValueError:
        raise fail(
            f"the {transport} transport is not available in this rill client; use tcp, quic or http",
            EXIT_USAGE,
        ) from None
    address = resolved["address"]
    options.about(address=address)
    certificates: dict[str, Any] = {}
    if resolved.get("ca_file"):
        certificates["ca_file"] = str(Path(resolved["ca_file"]).expanduser())
    if resolved.get("insecure"):
        certificates["verify_certificate"] = False
    try:
        client = Client(address, transport=transport, reconnect=False, connect_timeout=10.0,
                        **certificates)
    except ValueError as error:  # a malformed address
        raise fail(f"invalid address {address!r}: {error}", EXIT_USAGE) from None
    try:
        client.connect()
    except BaseException:
        client.close()
        raise
    return client


def log_in(options: Settings, client: Client, resolved: dict[str, Any]) -> int | None:
    """Log in with the resolved credential; returns the user id (None when there is none)."""
    from rill import errors

    if resolved["token"]:
        try:
            return client.login_with_personal_access_token(resolved["token"]).user_id
        except errors.RillError as error:
            rejected = ("resource_not_found", "personal_access_token_expired", "invalid_personal_access_token")
            if error.name not in rejected:
                raise
            if resolved["from_context"]:
                raise fail(
                    f"the saved token of context {options.context_name!r} was rejected "
                    f"({error.code} {error.name}); run 'rill login' again"
                ) from None
            raise type(error)(reason="the personal access token was rejected (unknown, deleted or expired)") from None
    if resolved["username"]:
        if resolved["password"] is None:
            resolved["password"] = read_secret(f"Password for {resolved['username']}")
        return client.login_user(resolved["username"], resolved["password"]).user_id
    return None


@contextlib.contextmanager
def session(ctx: typer.Context, login: bool = True, **subject: Any) -> Iterator[Client]:
    """``with session(ctx, stream=stream) as client:`` -- connected and logged in."""
    options = settings(ctx)
    options.about(**subject)
    resolved = options.resolve()
    client = connect(options, resolved)
    try:
        if login:
            log_in(options, client, resolved)
        yield client
    finally:
        client.close()
