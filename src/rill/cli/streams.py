"""``rill stream create|get|list|update|delete|purge``: one verb per stream command.

Owns: the stream verbs and the table/JSON shape of a stream. Each verb is named after the SDK
method it calls (``rill stream create`` -> ``create_stream``).

JSON shape of a stream: the ``Stream`` record's fields (``id``, ``name``, ``created_at`` µs,
``topics_count``, ``size_bytes``, ``messages_count``); ``get`` and ``create`` add ``topics``,
a list in the shape of ``rill topic list``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import typer

from rill import errors
from rill.cli.context import session, settings
from rill.cli.output import format_size, format_time
from rill.cli.params import examples, stream_argument
from rill.cli.topics import TOPIC_COLUMNS, TOPIC_DROPPABLE, topic_json, topic_row, with_formats

app = typer.Typer(name="stream", help="Create, inspect, change and delete streams.", no_args_is_help=True)

STREAM_COLUMNS = ("ID", "Name", "Created", "Topics", "Size", "Messages")
STREAM_DROPPABLE = ("Created",)  # at narrow widths


def stream_json(stream: Any) -> dict[str, Any]:
    """A Stream or StreamDetails as JSON (details add ``topics``)."""
    header = getattr(stream, "stream", stream)
    value: dict[str, Any] = {
        "id": header.id, "name": header.name, "created_at": header.created_at,
        "topics_count": header.topics_count, "size_bytes": header.size_bytes,
        "messages_count": header.messages_count,
    }
    if hasattr(stream, "topics"):
        value["topics"] = [topic_json(topic) for topic in stream.topics]
    return value


def stream_row(stream: Any) -> tuple[Any, ...]:
    header = getattr(stream, "stream", stream)
    return (header.id, header.name, format_time(header.created_at), header.topics_count,
            format_size(header.size_bytes), header.messages_count)


def not_found(stream: int | str) -> errors.RillError:
    """The error a get-single command's empty answer means."""
    return errors.StreamIdNotFound() if isinstance(stream, int) else errors.StreamNameNotFound()


def show_stream(ctx: typer.Context, details: Any) -> None:
    out = settings(ctx).output
    if out.json_mode:
        out.json(stream_json(details))
        return
    out.record(zip(STREAM_COLUMNS, stream_row(details)), title=f"Stream {details.id}")
    if details.topics:
        out.table(TOPIC_COLUMNS, (topic_row(topic) for topic in details.topics), title="Topics",
                  droppable=TOPIC_DROPPABLE)


@app.command("create", epilog=examples("rill stream create orders", "rill stream create orders --id 7",
                                       "rill --json stream create orders"))
def create_stream(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Stream name (the server lower-cases it, spaces become dots)."),
    stream_id: int = typer.Option(0, "--id", min=0, max=0xFFFFFFFF, help="Stream ID; 0 lets the server choose."),
) -> None:
    """Create a stream."""
    with session(ctx, stream_name=name, stream_id=stream_id or None) as client:
        details = client.create_stream(name, stream_id)
    settings(ctx).output.done(f"stream {details.id} {details.name!r} created", stream_json(details))


@app.command("get", epilog=examples("rill stream get orders", "rill --json stream get 1"))
def get_stream(ctx: typer.Context, stream: str = stream_argument()) -> None:
    """Show one stream and its topics."""
    with session(ctx, stream=stream) as client:
        details = client.get_stream(stream)
        if details is not None and details.topics:  # each topic's record format
            details = dataclasses.replace(details, topics=tuple(
                with_formats(client, stream, list(details.topics))))
    if details is None:
        raise not_found(stream)
    show_stream(ctx, details)


@app.command("list", epilog=examples("rill stream list", "rill --json stream list | jq '.[].name'"))
def get_streams(ctx: typer.Context) -> None:
    """List every stream."""
    with session(ctx) as client:
        streams = sorted(client.get_streams(), key=lambda stream: stream.id)
    settings(ctx).output.emit(
        [stream_json(stream) for stream in streams], STREAM_COLUMNS,
        (stream_row(stream) for stream in streams), title="Streams", droppable=STREAM_DROPPABLE,
    )


@app.command("update", epilog=examples("rill stream update orders sales", "rill stream update 1 sales"))
def update_stream(
    ctx: typer.Context,
    stream: str = stream_argument(),
    name: str = typer.Argument(..., help="The new name."),
) -> None:
    """Rename a stream."""
    with session(ctx, stream=stream, stream_name=name) as client:
        client.update_stream(stream, name)
    settings(ctx).output.done(f"stream {stream} renamed to {name!r}", command="update_stream",
                              stream=stream, name=name)


@app.command("delete", epilog=examples("rill stream delete orders", "rill stream delete 1"))
def delete_stream(ctx: typer.Context, stream: str = stream_argument()) -> None:
    """Delete a stream with all its topics and messages."""
    with session(ctx, stream=stream) as client:
        client.delete_stream(stream)
    settings(ctx).output.done(f"stream {stream} deleted", command="delete_stream", stream=stream)


@app.command("purge", epilog=examples("rill stream purge orders"))
def purge_stream(ctx: typer.Context, stream: str = stream_argument()) -> None:
    """Delete every message of every topic of a stream (the topics stay)."""
    with session(ctx, stream=stream) as client:
        client.purge_stream(stream)
    settings(ctx).output.done(f"stream {stream} purged", command="purge_stream", stream=stream)

