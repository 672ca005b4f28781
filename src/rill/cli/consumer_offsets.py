"""``rill consumer-offset get|set|list``: consumers' stored positions, and how far behind they are.

Owns: the offset verbs (``get_consumer_offset``, ``store_consumer_offset``, and ``list``:
``get_consumer_lag``), and the shape of a lag row (``lag_json``, ``LAG_COLUMNS``), which
``rill consumer-group get`` shows too. The consumer is
``--consumer ID`` (a regular consumer, default 1) or ``--group ID`` (a consumer group's
offset); ``--partition`` defaults to 1 for both (the server's "not given" would mean partition
1 for a consumer and nothing useful for a group).

``get`` prints ``partition_id``, ``current_offset`` (the partition's newest offset),
``stored_offset`` (the last message consumed, what ``set`` takes) and ``reads_next`` (the
offset it reads next: stored + 1); when nothing is stored yet it prints ``null`` with ``--json``
and a note otherwise, and exits 0: an unset offset is a state, not an error.
GET_CONSUMER_OFFSET answers ``stored_offset`` 0 both for "stored 0" and for "nothing stored"
(as Iggy 0.4.95 does, docs/wire-notes.md), so on a 0 ``get`` asks GET_CONSUMER_LAG, whose rows
say ``committed``; a server without that rill extension gets the 0 shown as is.

``list`` shows, for a topic, every consumer group in every partition, every consumer with a
stored offset, and Kafka's consumer groups (GET_CONSUMER_LAG lists them as groups with id 0
named ``kafka-group:<group id>``; shown as ``kafka group <group id>``): the offset each reads
next (``Reads next``, as the web console says; ``-``/``null`` when it consumed nothing), the
end offset (the offset the partition's next message will get) and the lag (stored messages it
has not read). JSON keeps ``committed_offset`` (the last consumed) beside ``reads_next``. A
consumer named by text is stored under a number (its xxHash32), which is what the list shows.
It needs a rill server (GET_CONSUMER_LAG is a rill extension).
"""

from __future__ import annotations

from typing import Any, Optional

import typer

import xxhash

from rill import errors
from rill.cli import params
from rill.cli.context import session, settings
from rill.cli.output import to_json
from rill.cli.params import examples, stream_argument, topic_argument
from rill.protocol.iggy.primitives import Consumer, ConsumerKind

app = typer.Typer(name="consumer-offset", help="Read or store a consumer's offset.", no_args_is_help=True)

OFFSET_COLUMNS = ("Consumer", "Partition", "Current offset", "Stored offset", "Reads next")
LAG_COLUMNS = ("Consumer", "Partition", "Reads next", "End", "Lag")


def other_protocol(row: Any) -> tuple[str, str] | None:
    """(protocol, group name) of another protocol's group in GET_CONSUMER_LAG (a group with id 0
    named as stored, ``kafka-group:<group id>``); None for Iggy's groups and consumers."""
    if row.consumer_kind != ConsumerKind.CONSUMER_GROUP or row.consumer_id != 0:
        return None
    prefix, colon, name = row.group_name.partition(":")
    return (prefix.removesuffix("-group"), name) if colon else ("other", row.group_name)


def reads_next(row: Any) -> int | None:
    """The offset a lag row's consumer reads next; None when it consumed nothing."""
    return row.committed_offset + 1 if row.committed else None


def lag_json(row: Any) -> dict[str, Any]:
    other = other_protocol(row)
    value: dict[str, Any]
    if other is not None:
        value = {"consumer_kind": f"{other[0]}_group", "group_name": other[1]}
    else:
        value = {"consumer_kind": "consumer_group" if row.consumer_kind == ConsumerKind.CONSUMER_GROUP
                 else "consumer", "consumer_id": row.consumer_id}
        if row.group_name:
            value["group_name"] = row.group_name
    value.update(partition_id=row.partition_id,
                 committed_offset=row.committed_offset if row.committed else None,
                 reads_next=reads_next(row), end_offset=row.end_offset, lag=row.lag)
    return value


def lag_row(row: Any, with_consumer: bool = True) -> tuple[Any, ...]:
    next_offset = reads_next(row)
    cells = (row.partition_id, "-" if next_offset is None else next_offset, row.end_offset, row.lag)
    if not with_consumer:
        return cells
    other = other_protocol(row)
    who = (f"{other[0]} group {other[1]}" if other else f"group {row.group_name}" if row.group_name
           else f"consumer {row.consumer_id}")
    return (who, *cells)


def _consumer(consumer: str, group: Optional[str]) -> Consumer:
    if group is not None:
        return Consumer.group(params.identifier(group))
    return Consumer.regular(params.identifier(consumer))


def _describe(who: Consumer) -> str:
    return f"{'group' if who.is_group else 'consumer'} {who.id}"


def _is_row_of(row: Any, who: Consumer, partition: int) -> bool:
    """Whether a GET_CONSUMER_LAG row is ``who``'s in ``partition`` (a consumer named by text is
    stored under its xxHash32, a group is listed with its id and name)."""
    if row.partition_id != partition:
        return False
    value = who.id.value
    if who.is_group:
        return row.consumer_kind == ConsumerKind.CONSUMER_GROUP and (
            row.consumer_id == value if isinstance(value, int) else row.group_name == value)
    number = value if isinstance(value, int) else xxhash.xxh32_intdigest(value.encode("utf-8"))
    return row.consumer_kind == ConsumerKind.CONSUMER and row.consumer_id == number


def _never_stored(client: Any, stream: str, topic: str, who: Consumer, partition: int) -> bool:
    """True when the server says ``who`` has no committed offset in ``partition``; False when
    it has one, or when the server cannot tell (no GET_CONSUMER_LAG: not a rill server)."""
    try:
        rows = client.get_consumer_lag(stream, topic)
    except errors.RillError:
        return False
    return not any(row.committed for row in rows if _is_row_of(row, who, partition))


CONSUMER_OPTION = typer.Option("1", "--consumer", "-c", help="Consumer ID or name.")
GROUP_OPTION = typer.Option(None, "--group", "-g", help="A consumer group's offset instead.")
PARTITION_OPTION = typer.Option(1, "--partition", min=1, max=0xFFFFFFFF, help="Partition ID.")


@app.command("get", epilog=examples("rill consumer-offset get orders eu --consumer 7 --partition 2",
                                    "rill --json consumer-offset get orders eu --group workers"))
def get_consumer_offset(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    consumer: str = CONSUMER_OPTION,
    group: Optional[str] = GROUP_OPTION,
    partition: int = PARTITION_OPTION,
) -> None:
    """Show a consumer's stored offset in a partition."""
    who = _consumer(consumer, group)
    with session(ctx, stream=stream, topic=topic, partition=partition, group=group) as client:
        info = client.get_consumer_offset(stream, topic, who, partition)
        if info is None:  # the server answered nothing: find out why, as an error
            from rill.cli.topics import fetch_topic

            details = fetch_topic(client, stream, topic)  # a missing stream/topic is an error
            if partition not in {p.id for p in details.partitions}:
                raise errors.PartitionNotFound(partition, details.id, stream, field="partition_id")
            raise errors.Unauthorized()  # the topic and partition are there: not ours to read
        if info.stored_offset == 0 and _never_stored(client, stream, topic, who, partition):
            info = None
    out = settings(ctx).output
    if out.json_mode:
        out.json({**to_json(info), "reads_next": info.stored_offset + 1} if info is not None else None)
    elif info is None:
        out.text(f"no offset stored for {_describe(who)} in partition {partition}")
    else:
        out.record(zip(OFFSET_COLUMNS, (_describe(who), info.partition_id, info.current_offset,
                                        info.stored_offset, info.stored_offset + 1)))


@app.command("set", epilog=examples("rill consumer-offset set orders eu 41 --consumer 7",
                                    "rill consumer-offset set orders eu 0 --group workers --partition 3"))
def store_consumer_offset(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    offset: int = typer.Argument(..., min=0, help="The offset to store (the last one processed)."),
    consumer: str = CONSUMER_OPTION,
    group: Optional[str] = GROUP_OPTION,
    partition: int = PARTITION_OPTION,
) -> None:
    """Store a consumer's offset in a partition."""
    who = _consumer(consumer, group)
    with session(ctx, stream=stream, topic=topic, partition=partition, group=group, offset=offset) as client:
        client.store_consumer_offset(stream, topic, offset, who, partition)
    summary: dict[str, Any] = {"stream": stream, "topic": topic, "partition": partition, "offset": offset}
    settings(ctx).output.done(f"offset {offset} stored for {_describe(who)} in partition {partition}",
                              command="store_consumer_offset", **summary)


@app.command("list", epilog=examples("rill consumer-offset list orders eu",
                                     "rill --json consumer-offset list orders eu"))
def get_consumer_lag(ctx: typer.Context, stream: str = stream_argument(),
                     topic: str = topic_argument()) -> None:
    """List the offset each consumer reads next, the end offset and the lag, for every consumer
    group (Kafka's too) and every consumer with a stored offset in a topic."""
    with session(ctx, stream=stream, topic=topic) as client:
        rows = client.get_consumer_lag(stream, topic)
    settings(ctx).output.emit([lag_json(row) for row in rows], LAG_COLUMNS, (lag_row(row) for row in rows),
                              title=f"Consumer offsets of topic {topic}")
