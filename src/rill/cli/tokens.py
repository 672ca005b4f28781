"""``rill pat create|list|delete``: the caller's personal access tokens.

Owns: the token verbs (``create_personal_access_token``, ``get_personal_access_tokens``,
``delete_personal_access_token``). ``create`` prints the raw token on stdout -- the only time
the server ever returns it -- so ``TOKEN=$(rill pat create ci)`` captures it; with ``--json`` it
prints ``{"name", "token", "expiry"}`` (expiry in µs, ``null`` = never). ``list`` shows names
and expiry times (``expiry_at`` µs since the epoch, ``null`` = never), never the secrets. Use a
token with ``rill --token TOKEN ...``, or save it with ``rill login --token TOKEN``.
"""

from __future__ import annotations

import typer

from rill.cli import params
from rill.cli.context import session, settings
from rill.cli.output import format_time
from rill.cli.params import examples

app = typer.Typer(name="pat", help="Create, list and delete personal access tokens.", no_args_is_help=True)

TOKEN_COLUMNS = ("Name", "Expires")


@app.command("create", epilog=examples("rill pat create ci-bot", "rill pat create deploy --expiry 30d",
                                       "TOKEN=$(rill -q pat create ci-bot) && rill --token \"$TOKEN\" stream list"))
def create_personal_access_token(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Token name (3..30 characters)."),
    expiry: str = typer.Option("never", "--expiry",
                               help="Lifetime: e.g. 15m, 12h, 30d, never, default (the server's)."),
) -> None:
    """Create a token for the current user and print it."""
    lifetime = params.duration(expiry)
    with session(ctx, token_name=name) as client:
        token = client.create_personal_access_token(name, lifetime)
    out = settings(ctx).output
    if out.json_mode:
        out.json({"name": name, "token": token, "expiry": None if lifetime == params.U64_MAX else lifetime})
        return
    out.text(token)
    out.note(f"personal access token {name!r} created; store it now, it cannot be shown again")


@app.command("list", epilog=examples("rill pat list", "rill --json pat list"))
def get_personal_access_tokens(ctx: typer.Context) -> None:
    """List the current user's tokens (names and expiry)."""
    with session(ctx) as client:
        tokens = sorted(client.get_personal_access_tokens(), key=lambda token: token.name)
    settings(ctx).output.emit(
        [{"name": t.name, "expiry_at": t.expiry_at or None} for t in tokens], TOKEN_COLUMNS,
        ((t.name, format_time(t.expiry_at) if t.expiry_at else "never") for t in tokens),
        title="Personal access tokens",
    )


@app.command("delete", epilog=examples("rill pat delete ci-bot"))
def delete_personal_access_token(ctx: typer.Context, name: str = typer.Argument(..., help="Token name.")) -> None:
    """Delete one of the current user's tokens."""
    with session(ctx, token_name=name, resource_label=f"personal access token {name}") as client:
        client.delete_personal_access_token(name)
    settings(ctx).output.done(f"personal access token {name!r} deleted",
                              command="delete_personal_access_token", name=name)
