"""``rill message send|poll|flush``: write messages, read them back, flush a partition.

Owns: the message verbs and the JSON shape of polled messages.

* ``send`` sends its positional arguments as one batch, or a file (``--file PATH``, ``-`` for
  stdin) line by line in batches of ``--batch-size``: each line without its line ending is one
  payload; empty lines are skipped (the protocol forbids empty payloads). ``--header`` adds the
  same headers to every message; ``--partition`` / ``--key`` choose the partitioning (default:
  balanced).
* ``poll`` reads ``--count`` messages (default 10) starting where the strategy says (default
  ``--next``: after the consumer's stored offset, or the oldest message). Long reads are split
  into polls of ``--batch-size``; after the first poll the rest continue by offset on the same
  partition, carrying ``--auto-commit``. ``--group`` polls as a consumer group: the command
  joins it, polls, and leaves. ``--follow`` keeps polling for new messages until Ctrl-C (or
  until ``--count`` messages arrived) and prints each message as it comes (one JSON object per
  line with ``--json``). ``--output-file`` writes the payloads to a file, one per line.

JSON of a poll: ``{"partition_id", "current_offset", "count", "messages": [...]}``, each message
``{"offset", "timestamp" (µs), "id" (UUID), "checksum", "state", "headers": {key: {"kind",
"value"}}, "payload"}``; the payload is text (``--encoding text``, undecodable bytes replaced),
``base64`` or ``hex``.
"""

from __future__ import annotations

import base64
import contextlib
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, Iterator, List, Optional

import typer

from rill.cli import params
from rill.cli.context import session, settings
from rill.cli.output import Output, format_time, message_id
from rill.cli.params import examples, stream_argument, topic_argument
from rill.protocol.primitives import Consumer, MessageState, Partitioning, PollingKind, PollingStrategy

app = typer.Typer(name="message", help="Send, poll and flush messages.", no_args_is_help=True)

MESSAGE_COLUMNS = ("Offset", "Timestamp", "ID", "Headers", "Payload")
MAX_BATCH_BYTES = 4_000_000  # well under the server's 10 MB payload limit per SEND
FOLLOW_INTERVAL = 0.25  # seconds between polls that found nothing new
ENCODINGS = ("text", "base64", "hex")


def encode_payload(payload: bytes, encoding: str) -> str:
    if encoding == "base64":
        return base64.b64encode(payload).decode("ascii")
    if encoding == "hex":
        return payload.hex()
    return payload.decode("utf-8", errors="replace")


def message_json(message: Any, encoding: str) -> dict[str, Any]:
    try:
        state: Any = MessageState(message.state).name.lower()
    except ValueError:
        state = message.state
    return {
        "offset": message.offset, "timestamp": message.timestamp, "id": message_id(message.id),
        "checksum": message.checksum, "state": state,
        "headers": {key: params.header_json(value) for key, value in message.headers.items()},
        "payload": encode_payload(message.payload, encoding),
    }


def message_row(message: Any, encoding: str) -> tuple[Any, ...]:
    return (message.offset, format_time(message.timestamp), message_id(message.id),
            params.header_text(message.headers), encode_payload(message.payload, encoding))


def _progress(out: Output, counted: bool = False, in_bytes: bool = False, show: bool = True) -> Any:
    """A rich progress bar on stderr, shown only to a human at a terminal."""
    from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn

    columns = [TextColumn("{task.description}"), BarColumn()]
    if counted:
        columns.append(MofNCompleteColumn())
    if in_bytes:
        columns.append(DownloadColumn())
    return Progress(*columns, console=out.err_console, disable=not (show and out.show_progress),
                    transient=True)


# --- send ------------------------------------------------------------------------------------


def _lines(source: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """(payload, bytes consumed) per line; empty lines yield an empty payload."""
    for line in source:
        yield line.rstrip(b"\r\n") if line.endswith(b"\n") else line, len(line)


def _batches(source: BinaryIO, batch_size: int) -> Iterator[tuple[list[bytes], int]]:
    batch: list[bytes] = []
    size = consumed = 0
    for payload, length in _lines(source):
        consumed += length
        if not payload:
            continue
        batch.append(payload)
        size += len(payload)
        if len(batch) >= batch_size or size >= MAX_BATCH_BYTES:
            yield batch, consumed
            batch, size, consumed = [], 0, 0
    if batch or consumed:
        yield batch, consumed


@app.command("send", epilog=examples(
    "rill message send orders eu hello world",
    "rill message send orders eu --file events.txt --batch-size 500",
    "rill message send orders eu 'order 7' --key customer-42 --header source:string:web --header n:uint32:7",
))
def send_messages(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    messages: Optional[List[str]] = typer.Argument(None, help="Payloads, one message each.", show_default=False),
    file: Optional[str] = typer.Option(None, "--file", "-f", help="Send this file line by line ('-' = stdin)."),
    partition: Optional[int] = typer.Option(None, "--partition", min=1, max=0xFFFFFFFF,
                                            help="Send to this partition ID."),
    key: Optional[str] = typer.Option(None, "--key", "-k", help="Partition by this message key."),
    header: Optional[List[str]] = typer.Option(None, "--header", "-H", help="key:kind:value, repeatable."),
    batch_size: int = typer.Option(1000, "--batch-size", min=1, max=100_000,
                                   help="Messages per SEND when reading a file."),
) -> None:
    """Send messages given as arguments or read from a file, one line per message."""
    from rill.protocol.messages import Message

    if bool(messages) == (file is not None):
        raise typer.BadParameter("give either messages as arguments or --file, not both or neither")
    if file is not None and file != "-" and not Path(file).is_file():
        raise typer.BadParameter(f"--file {file!r} is not a readable file")
    if partition is not None and key is not None:
        raise typer.BadParameter("give either --partition or --key, not both")
    headers = dict(params.header(spec) for spec in header or []) or None
    partitioning = (Partitioning.messages_key(key) if key is not None else
                    Partitioning.partition_id(partition) if partition is not None else None)

    def build(payloads: list[bytes]) -> list[Any]:
        return [Message(payload, headers=headers) for payload in payloads]

    out = settings(ctx).output
    sent = 0
    with session(ctx, stream=stream, topic=topic, partition=partition) as client:
        if messages:
            client.send_messages(stream, topic, build([text.encode("utf-8") for text in messages]),
                                 partitioning)
            sent = len(messages)
        else:
            assert file is not None
            with _open_input(file) as source, _progress(out, in_bytes=True) as progress:
                total = None if file == "-" else Path(file).stat().st_size
                task = progress.add_task(f"sending {'stdin' if file == '-' else Path(file).name}", total=total)
                for payloads, consumed in _batches(source, batch_size):
                    if payloads:
                        client.send_messages(stream, topic, build(payloads), partitioning)
                        sent += len(payloads)
                    progress.advance(task, consumed)
    target = f"partition {partition}" if partition else f"key {key!r}" if key else "balanced"
    out.done(f"sent {sent} message(s) to topic {topic} of stream {stream} ({target})",
             command="send_messages", stream=stream, topic=topic, messages_count=sent)


@contextlib.contextmanager
def _open_input(file: str) -> Iterator[BinaryIO]:
    if file == "-":
        yield sys.stdin.buffer
    else:
        with open(file, "rb") as source:
            yield source


# --- poll ------------------------------------------------------------------------------------


def _strategy(offset: Optional[int], first: bool, last: bool, next_: bool,
              timestamp: Optional[str]) -> PollingStrategy:
    chosen = [name for name, given in (("--offset", offset is not None), ("--first", first),
                                       ("--last", last), ("--next", next_),
                                       ("--timestamp", timestamp is not None)) if given]
    if len(chosen) > 1:
        raise typer.BadParameter(f"choose one of {', '.join(chosen)}")
    if offset is not None:
        return PollingStrategy.offset(offset)
    if timestamp is not None:
        return PollingStrategy.timestamp(params.timestamp(timestamp))
    if first:
        return PollingStrategy.first()
    if last:
        return PollingStrategy.last()
    return PollingStrategy.next()


@app.command("poll", epilog=examples(
    "rill message poll orders eu --first --count 100",
    "rill message poll orders eu --consumer reporting --next --auto-commit",
    "rill --json message poll orders eu --offset 42 --count 1 | jq -r '.messages[0].payload'",
    "rill message poll orders eu --group workers --follow --auto-commit",
    "rill message poll orders eu --first --count 1000000 --output-file dump.txt",
))
def poll_messages(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    consumer: str = typer.Option("1", "--consumer", "-c", help="Consumer ID or name."),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Poll as this consumer group (joins it)."),
    partition: Optional[int] = typer.Option(None, "--partition", min=1, max=0xFFFFFFFF,
                                            help="Partition ID (default: the server's choice, 1 for a consumer)."),
    offset: Optional[int] = typer.Option(None, "--offset", min=0, help="Start at this offset."),
    first: bool = typer.Option(False, "--first", help="Start at the oldest message."),
    last: bool = typer.Option(False, "--last", help="The newest COUNT messages."),
    next_: bool = typer.Option(False, "--next", help="After the stored offset (default)."),
    timestamp: Optional[str] = typer.Option(None, "--timestamp", help="From this time (µs or ISO 8601)."),
    count: Optional[int] = typer.Option(None, "--count", "-n", min=1,
                                        help="How many messages (default 10; unlimited with --follow)."),
    auto_commit: bool = typer.Option(False, "--auto-commit", help="Store the consumer's offset as it reads."),
    follow: bool = typer.Option(False, "--follow", help="Keep polling for new messages until Ctrl-C."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", dir_okay=False,
                                               help="Write the payloads to this file, one per line."),
    encoding: str = typer.Option("text", "--encoding", help="Payload format in output: text, base64 or hex."),
    batch_size: int = typer.Option(1000, "--batch-size", min=1, max=100_000, help="Messages per POLL."),
) -> None:
    """Poll messages from a topic partition."""
    if encoding not in ENCODINGS:
        raise typer.BadParameter(f"--encoding must be one of {', '.join(ENCODINGS)}")
    strategy = _strategy(offset, first, last, next_, timestamp)
    group_id = params.identifier_or_none(group)
    who = Consumer.group(group_id) if group_id is not None else Consumer.regular(params.identifier(consumer))
    if follow and group_id is not None and not (auto_commit and strategy.kind == PollingKind.NEXT):
        raise typer.BadParameter("--follow with --group needs --next --auto-commit")
    wanted = count if count is not None else (None if follow else 10)
    out = settings(ctx).output
    sink = open(output_file, "wb") if output_file is not None else None
    poller = _Poller(out, encoding, sink, follow)
    try:
        with session(ctx, stream=stream, topic=topic, partition=partition, group=group_id) as client:
            if group_id is not None:
                client.join_consumer_group(stream, topic, group_id)
            try:
                poller.run(client, stream, topic, who, partition, strategy, wanted, auto_commit, batch_size)
            finally:
                if group_id is not None:
                    with contextlib.suppress(Exception):
                        client.leave_consumer_group(stream, topic, group_id)
    finally:
        if sink is not None:
            sink.close()
    poller.report(output_file)


class _Poller:
    """Runs the poll loop and prints (or writes) what arrives."""

    def __init__(self, out: Output, encoding: str, sink: BinaryIO | None, follow: bool) -> None:
        self.out, self.encoding, self.sink, self.follow = out, encoding, sink, follow
        self.messages: list[Any] = []
        self.received = 0
        self.partition_id = 0
        self.current_offset = 0

    def run(self, client: Any, stream: Any, topic: Any, who: Consumer, partition: int | None,
            strategy: PollingStrategy, wanted: int | None, auto_commit: bool, batch_size: int) -> None:
        long_poll = wanted is None or wanted > batch_size  # several polls: worth a progress bar
        with _progress(self.out, counted=wanted is not None, show=long_poll and not self.follow) as progress:
            task = progress.add_task("polling", total=wanted)
            try:
                while wanted is None or self.received < wanted:
                    size = batch_size if wanted is None else min(batch_size, wanted - self.received)
                    batch = client.poll_messages(stream, topic, who, partition, strategy, size, auto_commit)
                    if not self.received:
                        self.partition_id = batch.partition_id
                    self.current_offset = batch.current_offset
                    polled = batch.messages
                    self._take(polled)
                    progress.update(task, completed=self.received)
                    if wanted is not None and self.received >= wanted:
                        break
                    if who.is_group:
                        # a group's partition may change between polls: continue only where
                        # the server keeps the position (--next --auto-commit)
                        if polled and not (auto_commit and strategy.kind == PollingKind.NEXT):
                            break
                        done = not polled
                    elif polled:
                        partition = batch.partition_id
                        done = strategy.kind == PollingKind.LAST or polled[-1].offset >= batch.current_offset
                        strategy = PollingStrategy.offset(polled[-1].offset + 1)
                    else:
                        done = True
                    if done:
                        if not self.follow:
                            break
                        time.sleep(FOLLOW_INTERVAL)
            except KeyboardInterrupt:
                if not self.follow:
                    raise

    def _take(self, polled: list[Any]) -> None:
        self.received += len(polled)
        if self.sink is not None:
            for message in polled:
                self.sink.write(message.payload)
                self.sink.write(b"\n")
            self.sink.flush()
        elif self.follow:
            for message in polled:
                if self.out.json_mode:
                    self.out.json(message_json(message, self.encoding), compact=True)
                else:
                    offset, stamp, _, headers, payload = message_row(message, self.encoding)
                    self.out.text(f"{offset}\t{stamp}\t{headers}\t{payload}" if headers
                                  else f"{offset}\t{stamp}\t{payload}")
        else:
            self.messages.extend(polled)

    def report(self, output_file: Path | None) -> None:
        out = self.out
        if self.follow and output_file is None:
            return
        summary = {"partition_id": self.partition_id, "current_offset": self.current_offset,
                   "count": self.received}
        if output_file is not None:
            out.done(f"polled {self.received} message(s) from partition {self.partition_id} "
                     f"to {output_file}", {**summary, "output_file": str(output_file)})
            return
        if out.json_mode:
            out.json({**summary, "messages": [message_json(m, self.encoding) for m in self.messages]})
            return
        out.table(MESSAGE_COLUMNS, (message_row(m, self.encoding) for m in self.messages),
                  title=f"Partition {self.partition_id}: {self.received} message(s), "
                        f"current offset {self.current_offset}")


# --- flush -----------------------------------------------------------------------------------


@app.command("flush", epilog=examples("rill message flush orders eu 1", "rill message flush orders eu 1 --fsync"))
def flush_unsaved_buffer(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    partition: int = typer.Argument(..., min=1, max=0xFFFFFFFF, help="Partition ID."),
    fsync: bool = typer.Option(False, "--fsync", help="Also fsync the partition's files."),
) -> None:
    """Write a partition's buffered messages to disk."""
    with session(ctx, stream=stream, topic=topic, partition=partition) as client:
        client.flush_unsaved_buffer(stream, topic, partition, fsync)
    settings(ctx).output.done(f"partition {partition} of topic {topic} flushed",
                              command="flush_unsaved_buffer", stream=stream, topic=topic,
                              partition=partition)

