"""``rill topic create|get|list|update|delete|purge``: one verb per topic command.

Owns: the topic verbs and the table/JSON shape of topics and partitions.

JSON shape of a topic: the ``Topic`` record's fields, with ``message_expiry`` in µs (``null`` =
never expires), ``max_topic_size`` in bytes (``null`` = unlimited), ``compression_algorithm``
as a name and ``record_format`` (``iggy`` or ``kafka``: how it stores records; ``null`` from a
server that cannot tell, an Iggy server); ``get`` and ``create`` add ``partitions``
(``Partition`` records: ``id``, ``created_at``, ``segments_count``, ``current_offset``,
``size_bytes``, ``messages_count``).

``create --format kafka|iggy`` chooses the record format (rill's CREATE_TOPIC_WITH_FORMAT;
left out: plain CREATE_TOPIC, the server's default, iggy); the binary topic records do not
carry it, so ``get`` / ``list`` ask GET_TOPIC_RECORD_FORMATS (``with_formats``).

``update`` changes only what is given: it reads the topic first and sends its current values
for every option left out (the wire command always carries all of them).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import typer

from rill import errors
from rill.cli import params
from rill.cli.context import session, settings
from rill.cli.output import format_duration, format_size, format_time, sentinel, to_json
from rill.cli.params import examples, stream_argument, topic_argument
from rill.protocol.iggy.commands.topics import record_format_stored
from rill.protocol.primitives import CompressionAlgorithm

app = typer.Typer(name="topic", help="Create, inspect, change and delete topics.", no_args_is_help=True)

TOPIC_COLUMNS = ("ID", "Name", "Created", "Partitions", "Format", "Expiry", "Compression",
                 "Max size", "Replication", "Size", "Messages")
TOPIC_DROPPABLE = ("Created", "Compression", "Replication", "Max size", "Expiry",
                   "Format")  # at narrow widths
PARTITION_COLUMNS = ("ID", "Created", "Segments", "Current offset", "Size", "Messages")
PARTITION_DROPPABLE = ("Created", "Segments")


def topic_json(topic: Any) -> dict[str, Any]:
    header = getattr(topic, "topic", topic)
    value: dict[str, Any] = {
        "id": header.id, "name": header.name, "created_at": header.created_at,
        "partitions_count": header.partitions_count,
        "message_expiry": sentinel(header.message_expiry),
        "compression_algorithm": _compression_name(header.compression_algorithm),
        "max_topic_size": sentinel(header.max_topic_size),
        "replication_factor": header.replication_factor, "size_bytes": header.size_bytes,
        "messages_count": header.messages_count, "record_format": header.record_format,
    }
    if hasattr(topic, "partitions"):
        value["partitions"] = [to_json(partition) for partition in topic.partitions]
    return value


def topic_row(topic: Any) -> tuple[Any, ...]:
    header = getattr(topic, "topic", topic)
    return (header.id, header.name, format_time(header.created_at), header.partitions_count,
            header.record_format or "-",
            format_duration(header.message_expiry), _compression_name(header.compression_algorithm),
            format_size(header.max_topic_size), header.replication_factor,
            format_size(header.size_bytes), header.messages_count)


def partition_row(partition: Any) -> tuple[Any, ...]:
    return (partition.id, format_time(partition.created_at), partition.segments_count,
            partition.current_offset, format_size(partition.size_bytes), partition.messages_count)


def _compression_name(value: int) -> str:
    try:
        return CompressionAlgorithm(value).name.lower()
    except ValueError:
        return str(value)


def with_formats(client: Any, stream: int | str, topics: list[Any]) -> list[Any]:
    """``topics`` (Topic or TopicDetails) with ``record_format`` filled in from
    GET_TOPIC_RECORD_FORMATS; left None when the server cannot tell (an Iggy server)."""
    try:
        formats = {found.topic_id: found.record_format
                   for found in client.get_topic_record_formats(stream)}
    except (errors.InvalidCommand, errors.FeatureUnavailable):
        return topics
    out = []
    for topic in topics:
        if hasattr(topic, "topic"):  # TopicDetails
            header = dataclasses.replace(topic.topic, record_format=formats.get(topic.id))
            out.append(dataclasses.replace(topic, topic=header))
        else:
            out.append(dataclasses.replace(topic, record_format=formats.get(topic.id)))
    return out


def record_format_option(value: str | None) -> str | None:
    """``--format``'s value (None: not given); another name than the choices is one error
    line (``errors.InvalidFormat``) before anything is sent."""
    if value is None:
        return None
    record_format_stored(value.strip().lower())
    return value.strip().lower()


def missing_topic(client: Any, stream: int | str, topic: int | str) -> errors.RillError:
    """What an empty GET_TOPIC answer meant: the stream or the topic does not exist."""
    if client.get_stream(stream) is None:
        return errors.StreamIdNotFound() if isinstance(stream, int) else errors.StreamNameNotFound()
    return errors.TopicIdNotFound() if isinstance(topic, int) else errors.TopicNameNotFound()


def fetch_topic(client: Any, stream: int | str, topic: int | str) -> Any:
    """TopicDetails, or raise the not-found error for the stream or the topic."""
    details = client.get_topic(stream, topic)
    if details is None:
        raise missing_topic(client, stream, topic)
    return details


def show_topic(ctx: typer.Context, details: Any) -> None:
    out = settings(ctx).output
    if out.json_mode:
        out.json(topic_json(details))
        return
    out.record(zip(TOPIC_COLUMNS, topic_row(details)), title=f"Topic {details.id}")
    if details.partitions:
        out.table(PARTITION_COLUMNS, (partition_row(p) for p in details.partitions), title="Partitions",
                  droppable=PARTITION_DROPPABLE)


def _compression(value: str | None) -> CompressionAlgorithm | None:
    return None if value is None else params.enum_value(CompressionAlgorithm, value, "compression")


def _optional(parser: Any) -> Any:
    return lambda value: None if value is None else parser(value)


COMPRESSION_HELP = "Compression algorithm: none or gzip (metadata only)."
EXPIRY_HELP = "Message expiry: e.g. 1h, 7d, 90s, never, default (the server's)."
SIZE_HELP = "Max topic size: e.g. 10GB, 512MiB, unlimited, default (the server's)."


@app.command("create", epilog=examples(
    "rill topic create orders eu --partitions 3",
    "rill topic create orders audit --message-expiry 7d --max-size unlimited --compression gzip",
))
def create_topic(
    ctx: typer.Context,
    stream: str = stream_argument(),
    name: str = typer.Argument(..., help="Topic name."),
    partitions: int = typer.Option(1, "--partitions", min=0, max=1000, help="Number of partitions."),
    compression: str = typer.Option("none", "--compression", help=COMPRESSION_HELP),
    message_expiry: str = typer.Option("default", "--message-expiry", "-e", help=EXPIRY_HELP),
    max_size: str = typer.Option("default", "--max-size", "-s", help=SIZE_HELP),
    replication_factor: int = typer.Option(
        0, "--replication-factor", min=0, max=255,
        help="How many nodes of a cluster keep a copy of each partition (0: the server's "
             "default, [cluster] default_replication_factor; 1 on a standalone server)."),
    topic_id: int = typer.Option(0, "--id", min=0, max=0xFFFFFFFF, help="Topic ID; 0 lets the server choose."),
    record_format: Optional[str] = typer.Option(
        None, "--format", help="How the topic stores records: iggy (the default) or kafka "
        "(Kafka's RecordBatch v2, as Kafka and TANK clients create topics)."),
) -> None:
    """Create a topic in a stream."""
    algorithm = _compression(compression)
    expiry, size_limit = params.duration(message_expiry), params.size(max_size)
    record_format = record_format_option(record_format)
    with session(ctx, stream=stream, topic_name=name, topic_id=topic_id or None) as client:
        details = client.create_topic(
            stream, name, partitions, algorithm, expiry, size_limit, replication_factor, topic_id,
            record_format,
        )
        details = with_formats(client, stream, [details])[0]
    settings(ctx).output.done(
        f"topic {details.id} {details.name!r} created in stream {stream} "
        f"with {details.topic.partitions_count} partition(s)",
        topic_json(details),
    )


@app.command("get", epilog=examples("rill topic get orders eu", "rill --json topic get 1 1"))
def get_topic(ctx: typer.Context, stream: str = stream_argument(), topic: str = topic_argument()) -> None:
    """Show one topic and its partitions."""
    with session(ctx, stream=stream, topic=topic) as client:
        details = with_formats(client, stream, [fetch_topic(client, stream, topic)])[0]
    show_topic(ctx, details)


@app.command("list", epilog=examples("rill topic list orders", "rill --json topic list 1"))
def get_topics(ctx: typer.Context, stream: str = stream_argument()) -> None:
    """List the topics of a stream."""
    with session(ctx, stream=stream) as client:
        topics = with_formats(client, stream,
                              sorted(client.get_topics(stream), key=lambda topic: topic.id))
    settings(ctx).output.emit(
        [topic_json(topic) for topic in topics], TOPIC_COLUMNS,
        (topic_row(topic) for topic in topics), title=f"Topics of stream {stream}",
        droppable=TOPIC_DROPPABLE,
    )


@app.command("update", epilog=examples(
    "rill topic update orders eu --name europe",
    "rill topic update orders eu --message-expiry 1d --max-size 20GB",
))
def update_topic(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    name: Optional[str] = typer.Option(None, "--name", help="New name (default: unchanged)."),
    compression: Optional[str] = typer.Option(None, "--compression", help=COMPRESSION_HELP),
    message_expiry: Optional[str] = typer.Option(None, "--message-expiry", "-e", help=EXPIRY_HELP),
    max_size: Optional[str] = typer.Option(None, "--max-size", "-s", help=SIZE_HELP),
    replication_factor: Optional[int] = typer.Option(None, "--replication-factor", min=0, max=255,
                                                     help="Replication factor."),
) -> None:
    """Change a topic's name or settings; options left out keep their current value."""
    algorithm = _compression(compression)
    expiry = _optional(params.duration)(message_expiry)
    size_limit = _optional(params.size)(max_size)
    with session(ctx, stream=stream, topic=topic, topic_name=name) as client:
        current = fetch_topic(client, stream, topic).topic
        client.update_topic(
            stream, topic,
            name if name is not None else current.name,
            algorithm if algorithm is not None else current.compression_algorithm,
            expiry if expiry is not None else current.message_expiry,
            size_limit if size_limit is not None else current.max_topic_size,
            replication_factor if replication_factor is not None else current.replication_factor,
        )
    settings(ctx).output.done(f"topic {topic} of stream {stream} updated", command="update_topic",
                              stream=stream, topic=topic)


@app.command("delete", epilog=examples("rill topic delete orders eu"))
def delete_topic(ctx: typer.Context, stream: str = stream_argument(), topic: str = topic_argument()) -> None:
    """Delete a topic with its partitions and messages."""
    with session(ctx, stream=stream, topic=topic) as client:
        client.delete_topic(stream, topic)
    settings(ctx).output.done(f"topic {topic} of stream {stream} deleted", command="delete_topic",
                              stream=stream, topic=topic)


@app.command("purge", epilog=examples("rill topic purge orders eu"))
def purge_topic(ctx: typer.Context, stream: str = stream_argument(), topic: str = topic_argument()) -> None:
    """Delete every message of a topic (partitions stay)."""
    with session(ctx, stream=stream, topic=topic) as client:
        client.purge_topic(stream, topic)
    settings(ctx).output.done(f"topic {topic} of stream {stream} purged", command="purge_topic",
                              stream=stream, topic=topic)
