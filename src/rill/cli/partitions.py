"""``rill partition create|delete``: add partitions to a topic or remove the last ones.

Owns: the two partition verbs (``create_partitions``, ``delete_partitions``). Partitions have
no name: create appends ``COUNT`` partitions after the highest id, delete removes the ``COUNT``
highest-numbered ones with their messages; ``rill topic get`` lists them.
"""

from __future__ import annotations

import typer

from rill.cli.context import session, settings
from rill.cli.params import examples, stream_argument, topic_argument

app = typer.Typer(name="partition", help="Add partitions to a topic or remove its last ones.",
                  no_args_is_help=True)

COUNT_HELP = "How many partitions (1..1000)."


@app.command("create", epilog=examples("rill partition create orders eu", "rill partition create orders eu 3"))
def create_partitions(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    count: int = typer.Argument(1, min=1, max=1000, help=COUNT_HELP),
) -> None:
    """Append partitions to a topic."""
    with session(ctx, stream=stream, topic=topic) as client:
        client.create_partitions(stream, topic, count)
    settings(ctx).output.done(
        f"{count} partition(s) added to topic {topic} of stream {stream}",
        command="create_partitions", stream=stream, topic=topic, partitions_count=count,
    )


@app.command("delete", epilog=examples("rill partition delete orders eu", "rill partition delete orders eu 2"))
def delete_partitions(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    count: int = typer.Argument(1, min=1, max=1000, help=COUNT_HELP),
) -> None:
    """Remove the highest-numbered partitions of a topic, with their messages."""
    with session(ctx, stream=stream, topic=topic) as client:
        client.delete_partitions(stream, topic, count)
    settings(ctx).output.done(
        f"{count} partition(s) removed from topic {topic} of stream {stream}",
        command="delete_partitions", stream=stream, topic=topic, partitions_count=count,
    )
