"""``rill client get|list``: the connections the server has open.

Owns: the client verbs (``get_client``, ``get_clients``) and the JSON shape of a client:
``client_id``, ``user_id`` (0 = not logged in), ``transport`` (``tcp``/``quic``/``http``),
``address``, ``consumer_groups_count``; ``get`` adds ``consumer_groups`` (``stream_id``,
``topic_id``, ``group_id`` of each group joined). The listing includes this command's own
connection. ``rill me`` shows that one alone.
"""

from __future__ import annotations

from typing import Any

import typer

from rill import errors
from rill.cli.context import session, settings
from rill.cli.params import examples
from rill.protocol.iggy.primitives import Transport

app = typer.Typer(name="client", help="Inspect the clients connected to the server.", no_args_is_help=True)

CLIENT_COLUMNS = ("Client ID", "User ID", "Transport", "Address", "Consumer groups")


def _transport_name(value: int) -> str:
    try:
        return Transport(value).name.lower()
    except ValueError:
        return str(value)


def client_json(client: Any) -> dict[str, Any]:
    header = getattr(client, "client", client)
    value: dict[str, Any] = {
        "client_id": header.client_id, "user_id": header.user_id,
        "transport": _transport_name(header.transport), "address": header.address,
        "consumer_groups_count": header.consumer_groups_count,
    }
    if hasattr(client, "consumer_groups"):
        value["consumer_groups"] = [
            {"stream_id": g.stream_id, "topic_id": g.topic_id, "group_id": g.group_id}
            for g in client.consumer_groups
        ]
    return value


def client_row(client: Any) -> tuple[Any, ...]:
    header = getattr(client, "client", client)
    return (header.client_id, header.user_id or "-", _transport_name(header.transport), header.address,
            header.consumer_groups_count)


def show_client(ctx: typer.Context, details: Any, title: str) -> None:
    out = settings(ctx).output
    if out.json_mode:
        out.json(client_json(details))
        return
    rows = list(zip(CLIENT_COLUMNS, client_row(details)))
    rows += [(f"Group {g.group_id}", f"stream {g.stream_id}, topic {g.topic_id}") for g in details.consumer_groups]
    out.record(rows, title=title)


@app.command("get", epilog=examples("rill client get 2170436597", "rill --json client get 2170436597"))
def get_client(ctx: typer.Context,
               client_id: int = typer.Argument(..., min=1, max=0xFFFFFFFF, help="Client ID.")) -> None:
    """Show one connected client."""
    with session(ctx, client=client_id) as client:
        details = client.get_client(client_id)
    if details is None:
        raise errors.ClientNotFound()
    show_client(ctx, details, f"Client {client_id}")


@app.command("list", epilog=examples("rill client list", "rill --json client list"))
def get_clients(ctx: typer.Context) -> None:
    """List every connected client."""
    with session(ctx) as client:
        clients = sorted(client.get_clients(), key=lambda item: item.client_id)
    settings(ctx).output.emit([client_json(c) for c in clients], CLIENT_COLUMNS,
                              (client_row(c) for c in clients), title="Clients",
                              droppable=("Transport", "User ID"))
