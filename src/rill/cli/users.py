"""``rill user create|get|list|update|delete|unlock|password|permissions``: users and their
rights.

Owns: the user verbs, the permission options and the JSON shape of a user (``id``,
``username``, ``created_at`` µs, ``status``; ``get``/``create`` add ``permissions``: the
``Permissions`` value as nested objects, or ``null`` for none).

Passwords are never taken from a positional argument: ``--password`` or a hidden prompt (a
piped stdin is read line by line, so ``printf 'old\\nnew\\n' | rill user password bob`` works).

Permission options (``create`` and ``permissions``), each repeatable:

* ``--global manage_streams,read_streams`` -- global rights; ``all`` means all ten;
* ``--stream 3:read_stream,poll_messages`` -- rights on stream 3 (``3`` alone: an entry with
  no rights, to hang topic rights on);
* ``--topic 3:1:read_topic,send_messages`` -- rights on topic 1 of stream 3.

Stream and topic rights are keyed by numeric ID, as the protocol stores them.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, List, Optional

import typer

from rill.cli import params
from rill.cli.context import read_secret, session, settings
from rill.cli.output import format_time, to_json
from rill.cli.params import examples, id_argument
from rill.protocol.permissions import GlobalPermissions, Permissions, StreamPermissions, TopicPermissions
from rill.protocol.primitives import UserStatus

app = typer.Typer(name="user", help="Create, inspect, change and delete users.", no_args_is_help=True)

USER_COLUMNS = ("ID", "Username", "Created", "Status")


def user_argument() -> Any:
    return id_argument("User ID or username.")


def _status_name(status: int) -> str:
    try:
        return UserStatus(status).name.lower()
    except ValueError:
        return str(status)


def user_json(user: Any) -> dict[str, Any]:
    header = getattr(user, "user", user)
    value: dict[str, Any] = {"id": header.id, "username": header.username,
                             "created_at": header.created_at, "status": _status_name(header.status)}
    if hasattr(user, "permissions"):
        value["permissions"] = to_json(user.permissions) if user.permissions is not None else None
    return value


def user_row(user: Any) -> tuple[Any, ...]:
    header = getattr(user, "user", user)
    return (header.id, header.username, format_time(header.created_at), _status_name(header.status))


# --- permissions -----------------------------------------------------------------------------


def _flag_names(cls: type) -> list[str]:
    return [field.name for field in fields(cls) if field.type in ("bool", bool)]


def _flags(cls: type, text: str, what: str) -> dict[str, bool]:
    names = _flag_names(cls)
    chosen: dict[str, bool] = {}
    for name in filter(None, (part.strip().lower().replace("-", "_") for part in text.split(","))):
        if name == "all":
            chosen.update(dict.fromkeys(names, True))
        elif name in names:
            chosen[name] = True
        else:
            raise typer.BadParameter(f"unknown {what} permission {name!r} (one of: all, {', '.join(names)})")
    return chosen


def _numeric(text: str, what: str) -> int:
    if not text.strip().isdigit():
        raise typer.BadParameter(f"{what} must be a numeric ID, not {text!r}")
    return int(text)


def build_permissions(global_specs: List[str], stream_specs: List[str], topic_specs: List[str]) -> Permissions:
    global_flags: dict[str, bool] = {}
    for spec in global_specs:
        global_flags.update(_flags(GlobalPermissions, spec, "global"))
    streams: dict[int, StreamPermissions] = {}
    for spec in stream_specs:
        stream_text, _, rights = spec.partition(":")
        stream_id = _numeric(stream_text, "--stream's stream")
        current = streams.get(stream_id, StreamPermissions())
        streams[stream_id] = replace(current, **_flags(StreamPermissions, rights, "stream"))
    for spec in topic_specs:
        parts = spec.split(":", 2)
        if len(parts) < 2:
            raise typer.BadParameter(f"--topic {spec!r} is not STREAM_ID:TOPIC_ID:rights")
        stream_id, topic_id = _numeric(parts[0], "--topic's stream"), _numeric(parts[1], "--topic's topic")
        topic = TopicPermissions(**_flags(TopicPermissions, parts[2] if len(parts) > 2 else "", "topic"))
        current = streams.get(stream_id, StreamPermissions())
        streams[stream_id] = replace(current, topics={**(current.topics or {}), topic_id: topic})
    return Permissions(GlobalPermissions(**global_flags), streams or None)


def _rights(value: Any) -> str:
    return ", ".join(name for name in _flag_names(type(value)) if getattr(value, name)) or "-"


def show_permissions(permissions: Permissions | None) -> list[tuple[str, str]]:
    if permissions is None:
        return [("Permissions", "none")]
    rows = [("Global", _rights(permissions.global_permissions))]
    for stream_id, stream in sorted((permissions.streams or {}).items()):
        rows.append((f"Stream {stream_id}", _rights(stream)))
        for topic_id, topic in sorted((stream.topics or {}).items()):
            rows.append((f"Stream {stream_id} topic {topic_id}", _rights(topic)))
    return rows


GLOBAL_OPTION = typer.Option(None, "--global", help="Global rights, comma-separated (or all). Repeatable.")
STREAM_OPTION = typer.Option(None, "--stream", help="STREAM_ID:rights on one stream. Repeatable.")
TOPIC_OPTION = typer.Option(None, "--topic", help="STREAM_ID:TOPIC_ID:rights on one topic. Repeatable.")


def _status(value: Optional[str]) -> UserStatus | None:
    return None if value is None else params.enum_value(UserStatus, value, "status")


# --- verbs -----------------------------------------------------------------------------------


@app.command("create", epilog=examples(
    "rill user create bob",
    "rill user create alice --password s3cret --global read_streams,poll_messages",
    "rill user create ops --global all --status inactive",
))
def create_user(
    ctx: typer.Context,
    username: str = typer.Argument(..., help="Username (3..50 characters)."),
    password: Optional[str] = typer.Option(None, "--password", help="Password (prompted when left out)."),
    status: str = typer.Option("active", "--status", help="active or inactive."),
    global_: Optional[List[str]] = GLOBAL_OPTION,
    stream: Optional[List[str]] = STREAM_OPTION,
    topic: Optional[List[str]] = TOPIC_OPTION,
) -> None:
    """Create a user, optionally with permissions."""
    user_status = _status(status)
    permissions = build_permissions(global_ or [], stream or [], topic or []) if (global_ or stream or topic) else None
    if password is None:
        password = read_secret(f"Password for new user {username}", confirm=True)
    with session(ctx, user=username) as client:
        details = client.create_user(username, password, user_status, permissions)
    settings(ctx).output.done(f"user {details.id} {details.username!r} created", user_json(details))


@app.command("get", epilog=examples("rill user get bob", "rill --json user get 1"))
def get_user(ctx: typer.Context, user: str = user_argument()) -> None:
    """Show one user and its permissions."""
    from rill import errors

    with session(ctx, user=user, resource_label=f"user {user}") as client:
        details = client.get_user(user)
    if details is None:
        raise errors.ResourceNotFound(user)
    out = settings(ctx).output
    if out.json_mode:
        out.json(user_json(details))
    else:
        out.record([*zip(USER_COLUMNS, user_row(details)), *show_permissions(details.permissions)],
                   title=f"User {details.id}")


@app.command("list", epilog=examples("rill user list", "rill --json user list"))
def get_users(ctx: typer.Context) -> None:
    """List every user."""
    with session(ctx) as client:
        users = sorted(client.get_users(), key=lambda user: user.id)
    settings(ctx).output.emit([user_json(u) for u in users], USER_COLUMNS, (user_row(u) for u in users),
                              title="Users", droppable=("Created",))


@app.command("update", epilog=examples("rill user update bob --name robert", "rill user update 2 --status inactive"))
def update_user(
    ctx: typer.Context,
    user: str = user_argument(),
    name: Optional[str] = typer.Option(None, "--name", help="New username."),
    status: Optional[str] = typer.Option(None, "--status", help="active or inactive."),
) -> None:
    """Rename a user or change its status."""
    if name is None and status is None:
        raise typer.BadParameter("give --name and/or --status")
    with session(ctx, user=user, resource_label=f"user {user}") as client:
        client.update_user(user, name, _status(status))
    settings(ctx).output.done(f"user {user} updated", command="update_user", user=user)


@app.command("delete", epilog=examples("rill user delete bob"))
def delete_user(ctx: typer.Context, user: str = user_argument()) -> None:
    """Delete a user (not the root user)."""
    with session(ctx, user=user, resource_label=f"user {user}") as client:
        client.delete_user(user)
    settings(ctx).output.done(f"user {user} deleted", command="delete_user", user=user)


@app.command("unlock", epilog=examples("rill user unlock iggy"))
def unlock_user(ctx: typer.Context, user: str = user_argument()) -> None:
    """Let a user locked out by failed logins log in again now (needs manage_users)."""
    with session(ctx) as client:
        client.unlock_user(user)
    settings(ctx).output.done(f"user {user} unlocked", command="unlock_user", user=user)


@app.command("password", epilog=examples("rill user password bob", "rill user password bob --current old --new new"))
def change_password(
    ctx: typer.Context,
    user: str = user_argument(),
    current: Optional[str] = typer.Option(None, "--current", help="Current password (prompted when left out)."),
    new: Optional[str] = typer.Option(None, "--new", help="New password (prompted when left out)."),
) -> None:
    """Change a user's password."""
    if current is None:
        current = read_secret(f"Current password of {user}")
    if new is None:
        new = read_secret(f"New password of {user}", confirm=True)
    with session(ctx, user=user, resource_label=f"user {user}") as client:
        client.change_password(user, current, new)
    settings(ctx).output.done(f"password of user {user} changed", command="change_password", user=user)


@app.command("permissions", epilog=examples(
    "rill user permissions bob --global read_streams --stream 1:poll_messages,send_messages",
    "rill user permissions bob --topic 1:2:read_topic,poll_messages",
    "rill user permissions bob --clear",
))
def update_permissions(
    ctx: typer.Context,
    user: str = user_argument(),
    global_: Optional[List[str]] = GLOBAL_OPTION,
    stream: Optional[List[str]] = STREAM_OPTION,
    topic: Optional[List[str]] = TOPIC_OPTION,
    clear: bool = typer.Option(False, "--clear", help="Remove every permission."),
) -> None:
    """Replace a user's permissions with the ones given."""
    given = bool(global_ or stream or topic)
    if given == clear:
        raise typer.BadParameter("give permissions (--global/--stream/--topic) or --clear")
    permissions = None if clear else build_permissions(global_ or [], stream or [], topic or [])
    with session(ctx, user=user, resource_label=f"user {user}") as client:
        client.update_permissions(user, permissions)
    settings(ctx).output.done(f"permissions of user {user} replaced", command="update_permissions", user=user)
