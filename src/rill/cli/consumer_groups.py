"""``rill consumer-group create|get|list|delete|join|leave``: the consumer groups of a topic.

Owns: the consumer-group verbs and the JSON shape of a group: ``id``, ``name``,
``partitions_count``, ``members_count``; ``get``/``create``/``join`` add ``members``, each
``{"id": <client id>, "partitions": [...]}``; ``get`` also shows, per partition, the offset the
group reads next, the end offset and the lag (``partitions``, as ``rill consumer-offset list``;
absent from an Iggy server, which has no GET_CONSUMER_LAG) and their sum (``lag``); ``list``
adds each group's ``protocol`` and total ``lag``.

Kafka's consumer groups of the topic are listed and shown too (``protocol`` ``kafka``, no id):
their positions and lag come from GET_CONSUMER_LAG, the same core rows the web console reads;
their live members are not in any Iggy command, so ``members_count`` is ``null`` (the console,
``GET .../consumers``, shows them). ``get NAME`` shows a Kafka group when no Iggy group has
that name.

Membership belongs to a connection, and each ``rill`` command opens its own: ``join`` shows the
group as seen right after joining (with this command's client among the members and its
assigned partitions), and the membership ends when the command exits. ``leave`` sends
LEAVE_CONSUMER_GROUP for this command's own connection, so it only matters to a server that
keeps memberships beyond a connection. To consume as a group use ``rill message poll --group``,
which joins, polls and leaves on one connection.
"""

from __future__ import annotations

from typing import Any

import typer

from rill import errors
from rill.cli.consumer_offsets import LAG_COLUMNS, lag_json, lag_row, other_protocol
from rill.cli.context import session, settings
from rill.cli.params import examples, id_argument, stream_argument, topic_argument
from rill.cli.topics import fetch_topic
from rill.protocol.iggy.primitives import ConsumerKind

app = typer.Typer(name="consumer-group", help="Create, inspect and delete consumer groups.",
                  no_args_is_help=True)

GROUP_COLUMNS = ("ID", "Name", "Partitions", "Members")
LIST_COLUMNS = (*GROUP_COLUMNS, "Protocol", "Lag")
MEMBER_COLUMNS = ("Member (client ID)", "Partitions")


def group_argument() -> Any:
    return id_argument("Consumer group ID or name.")


def group_json(group: Any) -> dict[str, Any]:
    header = getattr(group, "group", group)
    value: dict[str, Any] = {"id": header.id, "name": header.name,
                             "partitions_count": header.partitions_count,
                             "members_count": header.members_count}
    if hasattr(group, "members"):
        value["members"] = [{"id": m.id, "partitions": list(m.partitions)} for m in group.members]
    return value


def group_row(group: Any) -> tuple[Any, ...]:
    header = getattr(group, "group", group)
    return (header.id, header.name, header.partitions_count, header.members_count)


def show_group(ctx: typer.Context, details: Any, lag: list[Any] | None = None) -> None:
    out = settings(ctx).output
    if out.json_mode:
        value = group_json(details)
        if lag is not None:
            value["partitions"] = [{key: item for key, item in lag_json(row).items()
                                    if key not in ("consumer_kind", "consumer_id", "group_name")}
                                   for row in lag]
            value["lag"] = sum(row.lag for row in lag)
        out.json(value)
        return
    out.record(zip(GROUP_COLUMNS, group_row(details)), title=f"Consumer group {details.id}")
    if details.members:
        out.table(MEMBER_COLUMNS, ((m.id, ", ".join(map(str, m.partitions)) or "-") for m in details.members),
                  title="Members")
    if lag is not None:
        out.table(LAG_COLUMNS[1:], (lag_row(row, with_consumer=False) for row in lag),
                  title=f"Lag by partition (total {sum(row.lag for row in lag)})")


def topic_lag(client: Any, stream: Any, topic: Any) -> list[Any] | None:
    """GET_CONSUMER_LAG's rows of the topic; None from a server without it (Iggy)."""
    try:
        return client.get_consumer_lag(stream, topic)
    except (errors.InvalidCommand, errors.FeatureUnavailable):
        return None


def group_lag(client: Any, stream: Any, topic: Any, group_id: int) -> list[Any] | None:
    """The group's rows of GET_CONSUMER_LAG; None from a server without it (Iggy)."""
    rows = topic_lag(client, stream, topic)
    if rows is None:
        return None
    return [row for row in rows if row.consumer_kind == ConsumerKind.CONSUMER_GROUP
            and row.consumer_id == group_id and other_protocol(row) is None]


def other_groups(rows: list[Any] | None) -> dict[tuple[str, str], list[Any]]:
    """Other protocols' groups (Kafka's) in lag rows: (protocol, name) -> their rows."""
    found: dict[tuple[str, str], list[Any]] = {}
    for row in rows or ():
        other = other_protocol(row)
        if other is not None:
            found.setdefault(other, []).append(row)
    return found


def show_other_group(ctx: typer.Context, protocol: str, name: str, lag: list[Any]) -> None:
    """Another protocol's group: what its lag rows say (its members are not Iggy's to list)."""
    out = settings(ctx).output
    total = sum(row.lag for row in lag)
    if out.json_mode:
        out.json({"id": None, "name": name, "protocol": protocol, "partitions_count": len(lag),
                  "members_count": None, "partitions": [
                      {key: item for key, item in lag_json(row).items()
                       if key not in ("consumer_kind", "group_name")} for row in lag],
                  "lag": total})
        return
    out.record(zip((*GROUP_COLUMNS, "Protocol"), (None, name, len(lag), None, protocol)),
               title=f"Consumer group {name} ({protocol})")
    out.table(LAG_COLUMNS[1:], (lag_row(row, with_consumer=False) for row in lag),
              title=f"Lag by partition (total {total})")


def fetch_group(client: Any, stream: Any, topic: Any, group: Any) -> Any:
    """ConsumerGroupDetails, or the not-found error for the stream, topic or group."""
    details = client.get_consumer_group(stream, topic, group)
    if details is None:
        fetch_topic(client, stream, topic)  # raises when the stream or topic is missing
        raise (errors.ConsumerGroupIdNotFound() if isinstance(group, int)
               else errors.ConsumerGroupNameNotFound())
    return details


@app.command("create", epilog=examples("rill consumer-group create orders eu workers",
                                       "rill consumer-group create orders eu workers --id 5"))
def create_consumer_group(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    name: str = typer.Argument(..., help="Group name."),
    group_id: int = typer.Option(0, "--id", min=0, max=0xFFFFFFFF, help="Group ID; 0 lets the server choose."),
) -> None:
    """Create a consumer group on a topic."""
    with session(ctx, stream=stream, topic=topic, group_name=name, group_id=group_id or None) as client:
        details = client.create_consumer_group(stream, topic, name, group_id)
    settings(ctx).output.done(f"consumer group {details.id} {details.name!r} created on topic {topic}",
                              group_json(details))


@app.command("get", epilog=examples("rill consumer-group get orders eu workers",
                                    "rill consumer-group get orders eu kafka-consumers"))
def get_consumer_group(ctx: typer.Context, stream: str = stream_argument(), topic: str = topic_argument(),
                       group: str = group_argument()) -> None:
    """Show one consumer group (Iggy's, else Kafka's of that name), its members, and per
    partition the offset it reads next, the end offset and the lag."""
    with session(ctx, stream=stream, topic=topic, group=group) as client:
        try:
            details = fetch_group(client, stream, topic, group)
        except (errors.ConsumerGroupIdNotFound, errors.ConsumerGroupNameNotFound):
            others = {key: rows for key, rows in other_groups(topic_lag(client, stream, topic)).items()
                      if key[1] == str(group)}
            if not others:
                raise
            (protocol, name), rows = next(iter(others.items()))
            show_other_group(ctx, protocol, name, rows)
            return
        lag = group_lag(client, stream, topic, details.id)
    show_group(ctx, details, lag)


@app.command("list", epilog=examples("rill consumer-group list orders eu"))
def get_consumer_groups(ctx: typer.Context, stream: str = stream_argument(),
                        topic: str = topic_argument()) -> None:
    """List the consumer groups of a topic, Kafka's too, with their total lag."""
    with session(ctx, stream=stream, topic=topic) as client:
        groups = sorted(client.get_consumer_groups(stream, topic), key=lambda group: group.id)
        rows = topic_lag(client, stream, topic)
    lags: dict[int, int] = {}
    for row in rows or ():
        if row.consumer_kind == ConsumerKind.CONSUMER_GROUP and other_protocol(row) is None:
            lags[row.consumer_id] = lags.get(row.consumer_id, 0) + row.lag
    listed = [{**group_json(g), "protocol": "iggy", "lag": lags.get(g.id)} for g in groups]
    listed += [{"id": None, "name": name, "partitions_count": len(lag), "members_count": None,
                "protocol": protocol, "lag": sum(row.lag for row in lag)}
               for (protocol, name), lag in other_groups(rows).items()]
    columns = ("id", "name", "partitions_count", "members_count", "protocol", "lag")
    settings(ctx).output.emit(listed, LIST_COLUMNS, ([item[key] for key in columns] for item in listed),
                              title=f"Consumer groups of topic {topic}", droppable=("Protocol",))


@app.command("delete", epilog=examples("rill consumer-group delete orders eu workers"))
def delete_consumer_group(ctx: typer.Context, stream: str = stream_argument(), topic: str = topic_argument(),
                          group: str = group_argument()) -> None:
    """Delete a consumer group and its stored offsets."""
    with session(ctx, stream=stream, topic=topic, group=group) as client:
        client.delete_consumer_group(stream, topic, group)
    settings(ctx).output.done(f"consumer group {group} deleted", command="delete_consumer_group",
                              stream=stream, topic=topic, group=group)


@app.command("join", epilog=examples("rill consumer-group join orders eu workers"))
def join_consumer_group(ctx: typer.Context, stream: str = stream_argument(), topic: str = topic_argument(),
                        group: str = group_argument()) -> None:
    """Join a group and show the assignment (the membership ends with this command)."""
    with session(ctx, stream=stream, topic=topic, group=group) as client:
        client.join_consumer_group(stream, topic, group)
        details = fetch_group(client, stream, topic, group)
    show_group(ctx, details)


@app.command("leave", epilog=examples("rill consumer-group leave orders eu workers"))
def leave_consumer_group(ctx: typer.Context, stream: str = stream_argument(), topic: str = topic_argument(),
                         group: str = group_argument()) -> None:
    """Leave a consumer group (as this command's own connection)."""
    with session(ctx, stream=stream, topic=topic, group=group) as client:
        client.leave_consumer_group(stream, topic, group)
    settings(ctx).output.done(f"left consumer group {group}", command="leave_consumer_group",
                              stream=stream, topic=topic, group=group)
