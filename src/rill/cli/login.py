"""``rill login``, ``rill logout``, ``rill context list|use|delete``: saved login contexts.

Owns: the verbs that write the contexts file (its format and location are described in
``rill.cli.context``). The context acted on is ``--context NAME`` or else the current one.

``rill login`` checks the credentials by logging in, then saves into the context the address,
the transport and one credential:

* by default a new personal access token (named ``rill-cli-<8 hex>``, lifetime ``--expiry``,
  default never) -- the password itself is not stored;
* with ``--token`` given: that token;
* with ``--no-token``: the username alone (the password is prompted at each command);
* with ``--save-password``: username and password in plain text (the file is 0600, still: only
  for throw-away setups).

The logged-in context becomes the current one. ``rill logout`` deletes the token ``login``
created on the server (best effort: a server that cannot be reached only earns a warning) and
removes the credential from the context, keeping its address and transport.
"""

from __future__ import annotations

import secrets
import sys
from typing import Any

import typer

from rill.cli.context import DEFAULT_ADDRESS, DEFAULT_CONTEXT, DEFAULT_TRANSPORT, connect, log_in, settings
from rill.cli.failures import EXIT_USAGE, fail
from rill.cli.params import duration, examples

context_app = typer.Typer(name="context", help="List and choose saved login contexts.", no_args_is_help=True)

CONTEXT_COLUMNS = ("Current", "Name", "Address", "Transport", "Username", "Credential")


def _credential(values: dict[str, Any]) -> str:
    if values.get("token"):
        return "token"
    if values.get("password"):
        return "password"
    return "username (prompted password)" if values.get("username") else "none"


def _read_username() -> str:
    if sys.stdin.isatty():
        return str(typer.prompt("Username", err=True))
    sys.stderr.write("Username: ")
    line = sys.stdin.readline().strip()
    sys.stderr.write("\n")
    if not line:
        raise fail("no username given (use --username)", EXIT_USAGE)
    return line


def login(
    ctx: typer.Context,
    save_password: bool = typer.Option(False, "--save-password",
                                       help="Store the password itself (plain text, file mode 0600)."),
    no_token: bool = typer.Option(False, "--no-token", help="Store only the username; prompt for the password later."),
    expiry: str = typer.Option("never", "--expiry", help="Lifetime of the created token: e.g. 8h, 30d, never."),
) -> None:
    """Log in and save the connection and a credential as a context."""
    options = settings(ctx)
    if save_password and no_token:
        raise typer.BadParameter("--save-password and --no-token exclude each other")
    if options.token and options.username:
        raise typer.BadParameter("give either --username or --token, not both")
    lifetime = duration(expiry)
    name = options.context_name
    store = options.store
    saved = store.get(name)
    username = options.username
    if not options.token and not username:
        username = _read_username()
    resolved: dict[str, Any] = {
        "address": options.address or saved.get("address") or DEFAULT_ADDRESS,
        "transport": (options.transport or saved.get("transport") or DEFAULT_TRANSPORT).lower(),
        "username": None if options.token else username,
        "password": None if options.token else options.password,
        "token": options.token, "from_context": False,
        "ca_file": options.ca_file or saved.get("ca_file"),
        "insecure": bool(options.insecure if options.insecure is not None else saved.get("insecure")),
    }
    client = connect(options, resolved)
    try:
        user_id = log_in(options, client, resolved)
        values: dict[str, Any] = {"address": resolved["address"], "transport": resolved["transport"],
                                  "ca_file": resolved["ca_file"],
                                  "insecure": True if resolved["insecure"] else None}
        if options.token:
            values["token"] = options.token
        elif save_password:
            values.update(username=username, password=resolved["password"])
        elif no_token:
            values["username"] = username
        else:
            token_name = f"rill-cli-{secrets.token_hex(4)}"
            options.about(token_name=token_name)
            token = client.create_personal_access_token(token_name, lifetime)
            values.update(username=username, token=token, token_name=token_name)
    finally:
        client.close()
    store.current = name
    store.put(name, values)
    credential = _credential(values)
    who = f"user {user_id}" + (f" ({username})" if username and not options.token else "")
    extra = f" ({values['token_name']})" if values.get("token_name") else ""
    options.output.done(
        f"logged in as {who} at {resolved['address']}; context {name!r} saved with {credential}{extra}",
        command="login", context=name, address=resolved["address"], user_id=user_id, credential=credential,
    )


def logout(ctx: typer.Context) -> None:
    """Forget the credential of a context (and delete the token login created)."""
    options = settings(ctx)
    name = options.context_name
    store = options.store
    saved = store.get(name)
    out = options.output
    deleted = None
    if saved.get("token") and saved.get("token_name"):
        resolved = {"address": saved.get("address") or DEFAULT_ADDRESS,
                    "transport": saved.get("transport") or DEFAULT_TRANSPORT,
                    "token": saved["token"], "username": None, "password": None, "from_context": True}
        from rill import errors

        try:
            client = connect(options, resolved)
            try:
                log_in(options, client, resolved)
                client.delete_personal_access_token(saved["token_name"])
                deleted = saved["token_name"]
            finally:
                client.close()
        except (errors.RillError, typer.Exit) as error:
            reason = f"{error.code} {error.name}" if isinstance(error, errors.RillError) else "see above"
            out.note(f"warning: could not delete token {saved['token_name']} on the server ({reason}); "
                     f"delete it later with 'rill pat delete {saved['token_name']}'")
    kept = {key: saved[key] for key in ("address", "transport") if saved.get(key)}
    if name in store.contexts:
        store.put(name, kept)
    out.done(f"logged out of context {name!r}" + (f"; token {deleted} deleted" if deleted else ""),
             command="logout", context=name, deleted_token=deleted)


@context_app.command("list", epilog=examples("rill context list", "rill --json context list"))
def list_contexts(ctx: typer.Context) -> None:
    """List saved contexts (secrets are never shown)."""
    store = settings(ctx).store
    rows = []
    for name in store.names():
        values = store.get(name)
        rows.append({"name": name, "current": name == store.current,
                     "address": values.get("address"), "transport": values.get("transport"),
                     "username": values.get("username"), "credential": _credential(values)})
    settings(ctx).output.emit(
        rows, CONTEXT_COLUMNS,
        (("*" if r["current"] else "", r["name"], r["address"] or "127.0.0.1:8090 (default)",
          r["transport"] or DEFAULT_TRANSPORT, r["username"], r["credential"]) for r in rows),
        title=f"Contexts ({store.path})", droppable=("Transport", "Username"),
    )


@context_app.command("use", epilog=examples("rill context use production", "rill context use default"))
def use_context(ctx: typer.Context, name: str = typer.Argument(..., help="Context name.")) -> None:
    """Make a saved context the current one."""
    store = settings(ctx).store
    if name not in store.contexts and name != DEFAULT_CONTEXT:
        raise fail(f"no context named {name!r} (see 'rill context list')")
    store.current = name
    store.save()
    settings(ctx).output.done(f"now using context {name!r}", command="use_context", context=name)


@context_app.command("delete", epilog=examples("rill context delete staging"))
def delete_context(ctx: typer.Context, name: str = typer.Argument(..., help="Context name.")) -> None:
    """Forget a saved context (run 'rill logout' first to delete its token on the server)."""
    store = settings(ctx).store
    if name not in store.contexts:
        raise fail(f"no context named {name!r} (see 'rill context list')")
    store.remove(name)
    settings(ctx).output.done(f"context {name!r} deleted", command="delete_context", context=name)


def register(app: typer.Typer) -> None:
    """Add login, logout and the context group to the root app."""
    app.command("login", epilog=examples(
        "rill --address 10.0.0.5:8090 -u admin login",
        "rill --context prod --address prod:8090 -u admin login --expiry 30d",
        "rill -t TOKEN login",
        "rill -u iggy login --save-password",
    ))(login)
    app.command("logout", epilog=examples("rill logout", "rill --context prod logout"))(logout)
    app.add_typer(context_app, name="context")
