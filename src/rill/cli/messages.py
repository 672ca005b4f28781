"""``rill message send|poll|flush``: write messages, read them back, flush a partition.

Owns: the message verbs and the poll loop (how a message is shown is ``message_view``'s).

* ``send`` sends its positional arguments as one batch, or a file (``--file PATH``, ``-`` for
  stdin) line by line in batches of ``--batch-size``: each line without its line ending is one
  payload; empty lines are skipped (the protocol forbids empty payloads). ``--header`` adds the
  same headers to every message; ``--partition`` / ``--key`` choose the partitioning (default:
  balanced). ``--key-separator SEP`` splits each line of the file at its first SEP into a key
  and a payload: the key is stored in the message's ``rill.key`` header (where the Spark
  connector keeps keys; the Iggy wire has no key field) and partitions the message like
  ``--key`` does, unless ``--partition`` is given; a line without SEP has no key.
* ``poll`` reads ``--count`` messages (default 10) starting where the strategy says (default
  ``--next``: after the consumer's stored offset, or the oldest message). Long reads are split
  into polls of ``--batch-size``; after the first poll the rest continue by offset on the same
  partition, carrying ``--auto-commit``. ``--group`` polls as a consumer group: the command
  joins it, polls, and leaves. ``--follow`` keeps polling for new messages until Ctrl-C (or
  until ``--count`` messages arrived); ``--exit-at-end`` polls until it reached the end and
  exits 0 (kcat's ``-e``). Without ``--group`` and ``--partition`` both read every partition
  of the topic, each from the strategy's starting point; at the end of every partition
  ``--follow`` waits with WAIT_FOR_MESSAGES (rill extension 1030: the server answers when a
  message arrives, no polling in a loop; a short sleep against a server without it). Both print
  each message as it comes:
  a tab-separated line starting with its partition, one JSON object per line with ``--json``,
  or ``--format``'s template. ``--output-file`` writes the payloads to a file, one per line.

JSON of a poll: ``{"partition_id", "current_offset", "count", "messages": [...]}``, each message
``{"partition_id", "offset", "timestamp" (µs), "id" (UUID), "checksum", "state", "headers":
{key: {"kind", "value"}}, "payload", "payload_encoding"}``; with ``--encoding text`` (default)
the payload is its UTF-8 text, or base64 when it is not valid UTF-8 (``"payload_encoding":
"base64"``); ``--encoding base64|hex`` encodes every payload.

A record the server refuses as corrupt (4011 ``cannot_read_message``: stored bytes that fail
their check, docs/reliability.md "No corrupt byte is served") stops an in-order read for good
unless the reader steps past it. The binary protocol's error carries only the status, so the
poll finds the offsets itself: the refused poll started at the corrupt offset (a read stops
before a bad record, and fails only when the first record it reads is bad), and polls of one
record from the offsets after it find the next readable one (or the end). Without
``--skip-corrupt`` the error line names both: ``error: offset 41 of partition 1 is corrupt;
read on from offset 42 with --partition 1 --offset 42 (4011 cannot_read_message)``. With it
every corrupt offset gets one stderr line (``skipped corrupt offset 41 of partition 1 (4011
cannot_read_message)``) and the read goes on. Only a read whose start is known can do this:
by ``--offset`` or ``--first``, and every poll after the first. A first poll by ``--next``,
``--last``, ``--timestamp`` or ``--group`` gets the server's error as it is.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, Iterator, List, Optional

import typer

from rill import errors
from rill.cli import params
from rill.cli.context import session, settings
from rill.cli.message_view import (
    ENCODINGS, FORMAT_HELP, MESSAGE_COLUMNS, MESSAGE_DROPPABLE, MessageFormat, message_json,
    message_line, message_row,
)
from rill.cli.output import Output
from rill.cli.params import examples, stream_argument, topic_argument
from rill.protocol.iggy.headers import KEY_HEADER, HeaderValue
from rill.protocol.iggy.primitives import Consumer, Partitioning, PollingKind, PollingStrategy

app = typer.Typer(name="message", help="Send, poll and flush messages.", no_args_is_help=True)

MAX_BATCH_BYTES = 4_000_000  # well under the server's 10 MB payload limit per SEND
FOLLOW_INTERVAL = 0.25  # seconds between polls that found nothing new (a server without long polls)
PARTITIONS_INTERVAL = 2.0  # seconds between looks for partitions added while following


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


def _lines(source: BinaryIO, separator: bytes | None) -> Iterator[tuple[bytes | None, bytes, int]]:
    """(key, payload, bytes consumed) per line; an empty line yields an empty payload."""
    for line in source:
        text = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
        key, found, payload = text.partition(separator) if separator else (b"", b"", text)
        yield (key or None) if found else None, payload if found else text, len(line)


def _batches(source: BinaryIO, batch_size: int, separator: bytes | None
             ) -> Iterator[tuple[list[tuple[bytes | None, bytes]], int]]:
    """Batches of (key, payload) and the bytes they consumed; empty payloads are skipped."""
    batch: list[tuple[bytes | None, bytes]] = []
    size = consumed = 0
    for key, payload, length in _lines(source, separator):
        consumed += length
        if not payload:
            continue
        batch.append((key, payload))
        size += len(payload) + len(key or b"")
        if len(batch) >= batch_size or size >= MAX_BATCH_BYTES:
            yield batch, consumed
            batch, size, consumed = [], 0, 0
    if batch or consumed:
        yield batch, consumed


def _runs(batch: list[tuple[bytes | None, bytes]], partitioning: Partitioning | None
          ) -> Iterator[tuple[Partitioning | None, list[tuple[bytes | None, bytes]]]]:
    """Consecutive messages that share a partitioning: a line's key partitions it unless the
    command chose one (``--partition``), so the file's order is kept within every partition."""
    run: list[tuple[bytes | None, bytes]] = []
    current: Partitioning | None = None
    for key, payload in batch:
        chosen = partitioning or (Partitioning.messages_key(key) if key else None)
        if run and chosen != current:
            yield current, run
            run = []
        current = chosen
        run.append((key, payload))
    if run:
        yield current, run


@app.command("send", epilog=examples(
    "rill message send orders eu hello world",
    "rill message send orders eu --file events.txt --batch-size 500",
    "rill message send orders eu 'order 7' --key customer-42 --header source:string:web --header n:uint32:7",
    "printf 'customer-42:order 7\\n' | rill message send orders eu --file - --key-separator :",
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
    key_separator: Optional[str] = typer.Option(
        None, "--key-separator", metavar="SEP",
        help="With --file: each line is KEY SEP PAYLOAD (split at the first SEP; \\t for a tab). "
        "The key is stored in the rill.key header and partitions the message unless --partition "
        "is given; a line without SEP has no key.",
    ),
    header: Optional[List[str]] = typer.Option(None, "--header", "-H", help="key:kind:value, repeatable."),
    batch_size: int = typer.Option(1000, "--batch-size", min=1, max=100_000,
                                   help="Messages per SEND when reading a file."),
) -> None:
    """Send messages given as arguments or read from a file, one line per message."""
    from rill.cli.fast_send import report_sent
    from rill.protocol.iggy.messages import Message

    if bool(messages) == (file is not None):
        raise typer.BadParameter("give either messages as arguments or --file, not both or neither")
    if file is not None and file != "-" and not Path(file).is_file():
        raise typer.BadParameter(f"--file {file!r} is not a readable file")
    if partition is not None and key is not None:
        raise typer.BadParameter("give either --partition or --key, not both")
    if key_separator is not None and (file is None or key is not None):
        raise typer.BadParameter("--key-separator reads keys from --file lines: give --file, not --key")
    separator = params.separator(key_separator) if key_separator is not None else None
    headers = dict(params.header(spec) for spec in header or [])
    partitioning = (Partitioning.messages_key(key) if key is not None else
                    Partitioning.partition_id(partition) if partition is not None else None)

    def build(keyed: list[tuple[bytes | None, bytes]]) -> list[Any]:
        return [Message(payload, headers={**headers, KEY_HEADER: _key_header(line_key)}
                        if line_key else headers or None)
                for line_key, payload in keyed]

    out = settings(ctx).output
    sent = 0
    with session(ctx, stream=stream, topic=topic, partition=partition) as client:
        if messages:
            client.send_messages(stream, topic, build([(None, text.encode("utf-8")) for text in messages]),
                                 partitioning)
            sent = len(messages)
        else:
            assert file is not None
            with _open_input(file) as source, _progress(out, in_bytes=True) as progress:
                total = None if file == "-" else Path(file).stat().st_size
                task = progress.add_task(f"sending {'stdin' if file == '-' else Path(file).name}", total=total)
                for batch, consumed in _batches(source, batch_size, separator):
                    for run_partitioning, run in _runs(batch, partitioning):
                        client.send_messages(stream, topic, build(run), run_partitioning)
                        sent += len(run)
                    progress.advance(task, consumed)
    target = (f"partition {partition}" if partition else f"key {key!r}" if key
              else "keyed by line" if separator else "balanced")
    report_sent(out, sent, stream, topic, target)  # the fast path's line too (fast_send)


def _key_header(key: bytes) -> HeaderValue:
    """A line's key as the ``rill.key`` header: a string when it is UTF-8, else raw bytes."""
    if not len(key) <= 255:
        raise typer.BadParameter(f"a key is at most 255 bytes (line key of {len(key)} bytes)")
    try:
        return HeaderValue.string(key.decode("utf-8"))
    except UnicodeDecodeError:
        return HeaderValue.raw(key)


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
    "rill message poll orders eu --first --follow --format '%p %o %k %s'",
    "rill message poll orders eu --first --exit-at-end --json > all.jsonl",
    "rill message poll orders eu --first --count 1000000 --output-file dump.txt",
))
def poll_messages(
    ctx: typer.Context,
    stream: str = stream_argument(),
    topic: str = topic_argument(),
    consumer: str = typer.Option("1", "--consumer", "-c", help="Consumer ID or name."),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Poll as this consumer group (joins it)."),
    partition: Optional[int] = typer.Option(
        None, "--partition", min=1, max=0xFFFFFFFF,
        help="Partition ID (default: the server's choice, 1 for a consumer; every partition with "
        "--follow or --exit-at-end).",
    ),
    offset: Optional[int] = typer.Option(None, "--offset", min=0, help="Start at this offset."),
    first: bool = typer.Option(False, "--first", help="Start at the oldest message."),
    last: bool = typer.Option(False, "--last", help="The newest COUNT messages."),
    next_: bool = typer.Option(False, "--next", help="After the stored offset (default)."),
    timestamp: Optional[str] = typer.Option(None, "--timestamp", help="From this time (µs or ISO 8601)."),
    count: Optional[int] = typer.Option(None, "--count", "-n", min=1,
                                        help="How many messages (default 10; unlimited with "
                                        "--follow or --exit-at-end)."),
    auto_commit: bool = typer.Option(False, "--auto-commit", help="Store the consumer's offset as it reads."),
    follow: bool = typer.Option(False, "--follow", help="Keep polling for new messages until Ctrl-C."),
    exit_at_end: bool = typer.Option(False, "--exit-at-end",
                                     help="Poll up to the current end, then exit 0 (kcat -e)."),
    message_format: Optional[str] = typer.Option(None, "--format", metavar="TEMPLATE", help=FORMAT_HELP),
    output_file: Optional[Path] = typer.Option(None, "--output-file", dir_okay=False,
                                               help="Write the payloads to this file, one per line."),
    encoding: str = typer.Option("text", "--encoding",
                                 help="Payloads in output: text (base64 when not UTF-8), base64 or hex."),
    batch_size: int = typer.Option(1000, "--batch-size", min=1, max=100_000, help="Messages per POLL."),
    skip_corrupt: bool = typer.Option(False, "--skip-corrupt",
                                      help="Step past records the server refuses as corrupt "
                                      "(4011), one stderr line each."),
) -> None:
    """Poll messages from a topic partition (every partition with --follow or --exit-at-end)."""
    if encoding not in ENCODINGS:
        raise typer.BadParameter(f"--encoding must be one of {', '.join(ENCODINGS)}")
    if follow and exit_at_end:
        raise typer.BadParameter("give either --follow or --exit-at-end, not both")
    out = settings(ctx).output
    if message_format is not None and (out.json_mode or output_file is not None):
        raise typer.BadParameter("--format prints text: not with --json or --output-file")
    template = MessageFormat(message_format) if message_format is not None else None
    strategy = _strategy(offset, first, last, next_, timestamp)
    group_id = params.identifier_or_none(group)
    who = Consumer.group(group_id) if group_id is not None else Consumer.regular(params.identifier(consumer))
    streaming = follow or exit_at_end
    if streaming and group_id is not None and not (auto_commit and strategy.kind == PollingKind.NEXT):
        raise typer.BadParameter("--follow or --exit-at-end with --group needs --next --auto-commit")
    wanted = count if count is not None else (None if streaming else 10)
    sink = open(output_file, "wb") if output_file is not None else None
    if skip_corrupt and group_id is not None:
        raise typer.BadParameter("--skip-corrupt reads by offset: not with --group (store the "
                                 "group's offset past the record with 'rill consumer-offset set')")
    poller = _Poller(out, encoding, sink, template, str(topic), streaming)
    poller.skip_corrupt = skip_corrupt
    try:
        with session(ctx, stream=stream, topic=topic, partition=partition, group=group_id) as client:
            if group_id is not None:
                client.join_consumer_group(stream, topic, group_id)
            try:
                if group_id is not None:
                    poller.run_group(client, stream, topic, who, strategy, wanted, auto_commit,
                                     batch_size, follow)
                else:
                    poller.run(client, stream, topic, who, partition, strategy, wanted, auto_commit,
                               batch_size, follow, every_partition=partition is None and streaming)
            finally:
                if group_id is not None:
                    with contextlib.suppress(Exception):
                        client.leave_consumer_group(stream, topic, group_id)
    finally:
        if sink is not None:
            sink.close()
    poller.report(output_file)


class _Poller:
    """Runs a poll loop and prints (or writes) what arrives: at once when streaming or given
    a template, else as one table or JSON document at the end (``report``)."""

    def __init__(self, out: Output, encoding: str, sink: BinaryIO | None,
                 template: MessageFormat | None, topic_label: str, streaming: bool) -> None:
        self.out, self.encoding, self.sink, self.template = out, encoding, sink, template
        self.topic_label = topic_label
        self.print_each = streaming or template is not None
        self.messages: list[tuple[int, Any]] = []  # (partition ID, message) kept for report()
        self.received = 0
        self.partition_id = 0  # the first partition read (the one, unless reading every partition)
        self.current_offset = 0
        self.partitions_read: set[int] = set()
        self.can_wait = True  # the server has WAIT_FOR_MESSAGES (a rill server)
        self.skip_corrupt = False  # step past records refused as corrupt (4011)

    def run(self, client: Any, stream: Any, topic: Any, who: Consumer, partition: int | None,
            strategy: PollingStrategy, wanted: int | None, auto_commit: bool, batch_size: int,
            follow: bool, every_partition: bool) -> None:
        """A consumer's poll: the partition (None: the server's choice) or every partition of
        the topic, each from ``strategy`` and then on by offset, in turns, until every one is at
        its end (then stop, or with ``follow`` wait, looking for new partitions now and then)
        or ``wanted`` messages came. A partition added while following is read from its start."""

        def partition_ids() -> list[int]:
            return sorted(item.id for item in client.get_topic(stream, topic).partitions)

        cursors = [[item, strategy] for item in (partition_ids() if every_partition else [partition])]
        next_look = time.monotonic() + PARTITIONS_INTERVAL
        with self._progress(wanted, batch_size) as (progress, task):
            try:
                while (cursors or follow) and (wanted is None or self.received < wanted):
                    ended = 0
                    for cursor in cursors:
                        if wanted is not None and self.received >= wanted:
                            break
                        size = batch_size if wanted is None else min(batch_size, wanted - self.received)
                        batch = self._poll(client, stream, topic, who, cursor, size, auto_commit)
                        polled = batch.messages
                        self._take(batch.partition_id, batch.current_offset, polled)
                        progress.update(task, completed=self.received)
                        if polled:
                            ended += cursor[1].kind == PollingKind.LAST or polled[-1].offset >= batch.current_offset
                            cursor[:] = [batch.partition_id, PollingStrategy.offset(polled[-1].offset + 1)]
                        else:
                            ended += 1
                            if cursor[1].kind in (PollingKind.FIRST, PollingKind.LAST):
                                cursor[:] = [batch.partition_id, PollingStrategy.offset(0)]  # empty
                                # partition: whatever comes is from offset 0 on
                    else:
                        if ended == len(cursors):
                            if not follow:
                                break
                            if every_partition and time.monotonic() >= next_look:
                                known = {cursor[0] for cursor in cursors}
                                added = [[item, PollingStrategy.first()] for item in partition_ids()
                                         if item not in known]
                                next_look = time.monotonic() + PARTITIONS_INTERVAL
                                if added:
                                    cursors += added
                                    continue  # read the new partitions before waiting
                            self._wait(client, stream, topic, cursors)
            except KeyboardInterrupt:
                if not follow:
                    raise

    def _poll(self, client: Any, stream: Any, topic: Any, who: Consumer, cursor: list[Any],
              size: int, auto_commit: bool) -> Any:
        """One poll of ``cursor`` ([partition, strategy]); a corrupt record at its start is
        named with the next readable offset, or skipped (``--skip-corrupt``: the cursor moves
        there and the poll is made again)."""
        while True:
            try:
                return client.poll_messages(stream, topic, who, cursor[0], cursor[1], size,
                                            auto_commit)
            except errors.CannotReadMessage:
                strategy = cursor[1]
                if strategy.kind not in (PollingKind.OFFSET, PollingKind.FIRST):
                    raise  # where the read started is the server's secret
                bad = strategy.value if strategy.kind == PollingKind.OFFSET else 0
                readable = self._readable_after(client, stream, topic, who, cursor[0], bad)
                where = "" if cursor[0] is None else f" of partition {cursor[0]}"
                if not self.skip_corrupt:
                    option = "" if cursor[0] is None else f"--partition {cursor[0]} "
                    raise errors.CannotReadMessage(
                        reason=f"offset {bad}{where} is corrupt; read on from offset {readable} "
                        f"with {option}--offset {readable} (or --skip-corrupt)") from None
                for offset in range(bad, readable):
                    sys.stderr.write(f"skipped corrupt offset {offset}{where} "
                                     f"({errors.CannotReadMessage.code} cannot_read_message)\n")
                sys.stderr.flush()
                cursor[1] = PollingStrategy.offset(readable)

    @staticmethod
    def _readable_after(client: Any, stream: Any, topic: Any, who: Consumer,
                        partition: int | None, bad: int) -> int:
        """The first offset after ``bad`` a poll is answered from (a record, or the end)."""
        offset = bad + 1
        while True:
            try:
                client.poll_messages(stream, topic, who, partition, PollingStrategy.offset(offset),
                                     1, False)
                return offset
            except errors.CannotReadMessage:
                offset += 1

    def _wait(self, client: Any, stream: Any, topic: Any, cursors: list[list[Any]]) -> None:
        """Until a followed partition has a message past its cursor (WAIT_FOR_MESSAGES, woken
        by the append) or it is time to look for new partitions. A cursor that is not an offset
        (``--next``, ``--timestamp``) waits from the partition's end as it is now; it stays what
        it is, so a message that came in between is read by the next poll, at most a wait later.
        A server without the rill extension (Iggy): a short sleep instead."""
        if self.can_wait:
            try:
                positions = [(cursor[0], cursor[1].value if cursor[1].kind == PollingKind.OFFSET
                              else client.poll_messages_columnar(stream, topic, cursor[0], 0, 0).next_offset)
                             for cursor in cursors]
                client.wait_for_messages(stream, topic, positions, int(PARTITIONS_INTERVAL * 1000))
                return
            except (errors.InvalidCommand, errors.FeatureUnavailable):
                self.can_wait = False
        time.sleep(FOLLOW_INTERVAL)

    def run_group(self, client: Any, stream: Any, topic: Any, who: Consumer, strategy: PollingStrategy,
                  wanted: int | None, auto_commit: bool, batch_size: int, follow: bool) -> None:
        """A consumer group's poll: the server picks the partition of every poll."""
        with self._progress(wanted, batch_size) as (progress, task):
            try:
                while wanted is None or self.received < wanted:
                    size = batch_size if wanted is None else min(batch_size, wanted - self.received)
                    batch = client.poll_messages(stream, topic, who, None, strategy, size, auto_commit)
                    polled = batch.messages
                    self._take(batch.partition_id, batch.current_offset, polled)
                    progress.update(task, completed=self.received)
                    # a group's partition may change between polls: continue only where the
                    # server keeps the position (--next --auto-commit)
                    if polled and not (auto_commit and strategy.kind == PollingKind.NEXT):
                        break
                    if not polled:
                        if not follow:
                            break
                        time.sleep(FOLLOW_INTERVAL)
            except KeyboardInterrupt:
                if not follow:
                    raise

    @contextlib.contextmanager
    def _progress(self, wanted: int | None, batch_size: int) -> Iterator[tuple[Any, Any]]:
        long_poll = wanted is None or wanted > batch_size  # several polls: worth a progress bar
        with _progress(self.out, counted=wanted is not None, show=long_poll and not self.print_each) as progress:
            yield progress, progress.add_task("polling", total=wanted)

    def _take(self, partition_id: int, current_offset: int, polled: list[Any]) -> None:
        if not self.received:
            self.partition_id = partition_id
        self.current_offset = current_offset
        self.received += len(polled)
        self.partitions_read.update([partition_id] if polled else [])
        if self.sink is not None:
            for message in polled:
                self.sink.write(message.payload)
                self.sink.write(b"\n")
            self.sink.flush()
        elif self.print_each:
            for message in polled:
                self._print(partition_id, message)
        else:
            self.messages.extend((partition_id, message) for message in polled)

    def _print(self, partition_id: int, message: Any) -> None:
        if self.template is not None:
            self.out.write(self.template.render(message, partition_id, self.topic_label, self.encoding))
        elif self.out.json_mode:
            self.out.json(message_json(message, partition_id, self.encoding), compact=True)
        else:
            self.out.text(message_line(message, partition_id, self.encoding))

    def report(self, output_file: Path | None) -> None:
        out = self.out
        if self.print_each and output_file is None:
            return
        summary = {"partition_id": self.partition_id, "current_offset": self.current_offset,
                   "count": self.received}
        if output_file is not None:
            source = (f"{len(self.partitions_read)} partitions" if len(self.partitions_read) > 1
                      else f"partition {self.partition_id}")
            out.done(f"polled {self.received} message(s) from {source} to {output_file}",
                     {**summary, "output_file": str(output_file)})
            return
        if out.json_mode:
            out.json({**summary, "messages": [message_json(message, partition_id, self.encoding)
                                              for partition_id, message in self.messages]})
            return
        out.table(MESSAGE_COLUMNS, (message_row(message, self.encoding) for _, message in self.messages),
                  title=f"Partition {self.partition_id}: {self.received} message(s), "
                        f"current offset {self.current_offset}", droppable=MESSAGE_DROPPABLE)


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

